"""``recjudge fill``: calibrate LLM labels to the human scale and fill the gaps of human qrels."""

from __future__ import annotations

import argparse

from ..api.settings import FillSettings
from .options import add_settings, settings_from


def register(sub) -> None:
    p = sub.add_parser(
        "fill", help="fill unjudged top-k items of human qrels with calibrated LLM labels",
        description="Calibrate LLM grades to the human scale (mean human label per LLM grade over the "
                    "pairs both judge, rounded half up), fill the unjudged items in the runs' top-k, and "
                    "compare Human-only, LLM-fills-gaps and Full-LLM system rankings on every measure of "
                    "--measures (default Compat(p=0.95) and nDCG@k), with Judged@k for each.")
    add_settings(p, FillSettings, run_fill)


def run_fill(args: argparse.Namespace) -> int:
    from ..api import fill_with

    s = settings_from(args, FillSettings)
    print(fill_with(s).format())
    if s.json:
        print(f"\nJSON: {s.json}")
    return 0
