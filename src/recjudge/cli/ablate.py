"""``recjudge ablate EXPERIMENT.toml``: one row per judge variant against the reference labels."""

from __future__ import annotations

import argparse

from ..api.settings import AblateSettings
from .options import add_settings, progress, settings_from


def register(sub) -> None:
    p = sub.add_parser(
        "ablate", help="run a grid of judge variants (fields, profile size, K, prompt, repeats), "
                       "optionally as N independent experiments",
        description="Judge K sampled reference items per user with every variant of an experiment file "
                    "and report pairwise agreement, Cohen's κ, Krippendorff's α and system-ranking τ / "
                    "weighted τ against the complete reference qrels, one row per variant. With "
                    "--experiments N (or experiments = N in the file) the whole experiment runs N times, "
                    "each with its own sample of judged items and of history items, and every metric is "
                    "the mean with a 95% interval across the N experiments. The judge's `repeats` is "
                    "another thing: it asks the same prompt R times within one experiment.")
    add_settings(p, AblateSettings, run_ablate)


def run_ablate(args: argparse.Namespace) -> int:
    from ..api import ablate_with
    from ..experiments.ablate import notes

    result = ablate_with(settings_from(args, AblateSettings), progress=progress(args))
    print(result.format())
    if not result.dry_run:
        print("\n" + "\n".join(notes(result.experiment)))
        print(f"\nresults: {result.experiment.out / 'ablation.md'} (also .csv, .json)")
    return 0
