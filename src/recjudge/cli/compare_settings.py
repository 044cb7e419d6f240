"""``recjudge compare-settings``: the same systems ranked under two settings (runs + qrels each)."""

from __future__ import annotations

from ..api.settings import SettingsComparisonSettings
from .options import add_settings, settings_from


def register(sub) -> None:
    p = sub.add_parser(
        "compare-settings", help="rank the same systems in two settings (e.g. historical vs Cranfield) and "
                                 "correlate the rankings",
        description="Score the runs of setting A with its qrels and the runs of setting B with theirs (e.g. "
                    "runs trained on a historical split under historical qrels, and Cranfield runs under "
                    "human qrels), match systems by run name and report Kendall's τ-b with its p-value, "
                    "weighted τ, τ_AP and each system's rank shift (Penha et al. 2025, Figure 2).")
    add_settings(p, SettingsComparisonSettings, run)


def run(args) -> int:
    from ..api import compare_settings_with

    s = settings_from(args, SettingsComparisonSettings)
    print(compare_settings_with(s).format())
    if s.json:
        print(f"\nJSON: {s.json}")
    return 0
