"""``recjudge compare-settings``: the same systems ranked under two settings (runs + qrels each)."""

from __future__ import annotations


def register(sub) -> None:
    from ..api.config import CompareSettingsConfig

    p = sub.add_parser(
        "compare-settings", help="rank the same systems in two settings (e.g. historical vs Cranfield) and "
                                 "correlate the rankings",
        description="Score the runs of setting A with its qrels and the runs of setting B with theirs (e.g. "
                    "runs trained on a historical split under historical qrels, and Cranfield runs under "
                    "human qrels), match systems by run name and report Kendall's τ-b with its p-value, "
                    "weighted τ, τ_AP and each system's rank shift (Penha et al. 2025, Figure 2).")
    CompareSettingsConfig.add_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..api import compare_settings
    from ..api.config import CompareSettingsConfig

    config = CompareSettingsConfig.from_args(args)
    result = compare_settings(config)
    print(result.format())
    if config.json:
        print(f"\nJSON: {config.json}")
    return 0
