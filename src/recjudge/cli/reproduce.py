"""``recjudge reproduce STUDY``: a published study's tables and figures from its data, beside its numbers."""

from __future__ import annotations

import argparse

from .options import add_settings, progress, settings_from


def register(sub) -> None:
    from ..experiments.reproduce import ReproduceSettings

    p = sub.add_parser(
        "reproduce", help="every table and figure of a published study, beside its numbers",
        description="Run Penha et al. 2025 on an ML-32M-ext release folder: train the protocol's systems (or "
                    "take --runs), judge through one resumable cache (a prompt two tables share is asked "
                    "once), and write report.md, report.html, figures and reproduce.json with each cell beside "
                    "the published value, the difference and whether it falls inside the paper's interval, "
                    "every setting that differs from the paper and where the paper contradicts itself. "
                    "--dry-run prices the plan (calls, tokens, USD, wall time) without a call.")
    add_settings(p, ReproduceSettings, run_reproduce_cli)


def run_reproduce_cli(args: argparse.Namespace) -> int:
    from ..experiments.reproduce import ReproduceSettings, run_reproduce

    settings = settings_from(args, ReproduceSettings)
    result = run_reproduce(settings, progress=progress(args))
    if settings.dry_run:
        print(result.plan_text)
        return 0
    print(f"report: {result.paths.get('md')}\nHTML: {result.paths.get('html')}\nJSON: {result.paths.get('json')}")
    if not result.complete:
        # a budget stop is a requested outcome, not a failure: the report says what is missing
        print(f"incomplete ({result.stopped or 'see the report'}): run the same command again to resume")
    return 0
