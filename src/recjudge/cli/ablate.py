"""``recjudge ablate EXPERIMENT.toml``: one row per judge variant against the reference labels."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser(
        "ablate", help="run a grid of judge variants (fields, profile size, K, prompt, repeats)",
        description="Judge K sampled reference items per user with every variant of an experiment file "
                    "and report pairwise agreement (95%% CIs), Cohen's κ, Krippendorff's α and "
                    "system-ranking τ / weighted τ against the reference, one row per variant.")
    p.add_argument("experiment", metavar="EXPERIMENT.toml")
    p.add_argument("--dry-run", action="store_true",
                   help="count calls and estimated input tokens per variant; call nothing")
    p.set_defaults(func=run_ablate)


def run_ablate(args: argparse.Namespace) -> int:
    import sys

    from ..experiments.ablate import format_rows, load_experiment, run_experiment

    exp = load_experiment(args.experiment)
    rows = run_experiment(exp, dry_run=args.dry_run, progress=lambda m: print(m, file=sys.stderr, flush=True))
    table = format_rows(rows)
    if args.dry_run:
        table = table[["variant", "K", "judged", "calls", "est. tokens"]].rename(columns={"judged": "pairs"})
        print("dry run: nothing was called")
    print(table.to_string(index=False))
    if not args.dry_run:
        print(f"\nresults: {exp.out / 'ablation.md'} (also .csv, .json)")
    return 0
