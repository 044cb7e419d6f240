"""``recjudge estimate``: prediction-powered estimates under human labels; options from its settings."""

from __future__ import annotations

import argparse

from ..estimation.settings import EstimateSettings
from .options import add_settings, settings_from


def register(sub) -> None:
    p = sub.add_parser(
        "estimate", help="each system's mean under human labels from a few human-judged users and LLM labels",
        description="Prediction-powered inference (PPI++): each system's mean under human labels, with an "
                    "interval, from human labels on n users and LLM labels on all N; beside it the human-only "
                    "estimate, the LLM-only value and the human users the LLM labels are worth; simultaneous "
                    "pairwise intervals, rank sets and the systems that can be the best; with --target-width "
                    "or --separate, the human users to buy.")
    add_settings(p, EstimateSettings, run)


def run(args: argparse.Namespace) -> int:
    from ..api import estimate_with

    s = settings_from(args, EstimateSettings)
    print(estimate_with(s).format())
    if s.json:
        print(f"\nJSON: {s.json}")
    return 0
