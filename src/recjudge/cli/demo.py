"""``recjudge demo``: the end-to-end pipeline on the embedded MovieLens-100K, offline by default."""

from __future__ import annotations

import argparse
import sys

from ..experiments.demo import DemoSettings
from .options import add_settings, progress, settings_from


def register(sub) -> None:
    p = sub.add_parser(
        "demo", help="run the whole pipeline on MovieLens-100K (offline unless an LLM is asked for)",
        description="Global time split → train the quick grid → runs → historical qrels → judge a pool "
                    "(the offline overlap judge, or an LLM when asked for with --judge openai or --base-url) → "
                    "fill gaps (refused, with the reason, when the judge cannot be calibrated) → compare → tie audit "
                    "(the systems' rankings before tie-breaking, and sampled candidates) → report with figures and "
                    "an evaluation card. Progress goes to stdout (--quiet: only where the report is).")
    add_settings(p, DemoSettings, run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from ..experiments.demo import run_demo as demo

    result = demo(settings_from(args, DemoSettings), progress=progress(args, sys.stdout))
    print(f"Report: {result.report}  (also {result.report.with_suffix('.html')})")
    return 0
