"""``recjudge ablate EXPERIMENT.toml``: one row per judge variant against the reference labels."""

from __future__ import annotations

import argparse

from ..api.config import AblateConfig


def register(sub) -> None:
    p = sub.add_parser(
        "ablate", help="run a grid of judge variants (fields, profile size, K, prompt, repeats)",
        description="Judge K sampled reference items per user with every variant of an experiment file "
                    "and report pairwise agreement (95%% CIs), Cohen's κ, Krippendorff's α and "
                    "system-ranking τ / weighted τ against the reference, one row per variant.")
    AblateConfig.add_arguments(p)
    p.set_defaults(func=run_ablate)


def run_ablate(args: argparse.Namespace) -> int:
    import sys

    from ..api import ablate

    result = ablate(AblateConfig.from_args(args), progress=lambda m: print(m, file=sys.stderr, flush=True))
    print(result.format())
    if not result.dry_run:
        print(f"\nresults: {result.experiment.out / 'ablation.md'} (also .csv, .json)")
    return 0
