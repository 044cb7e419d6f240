"""``recjudge train``: train a grid of recommender systems and write tie-free TREC runs."""

from __future__ import annotations

import argparse
import json
import sys

from ..api.settings import TrainSettings
from .options import add_settings, progress, settings_from


def register(subparsers) -> None:
    from ..data.collections import COLLECTIONS
    from ..systems import GRIDS, SYSTEMS

    p = subparsers.add_parser(
        "train",
        help="train recommender systems (RecBole) and write top-k runs",
        description="Train a grid of systems on a collection's training split and write "
                    "<out>/<system>.run (tie-free, history masked). Trained systems are cached by a hash "
                    "of (collection, split, configuration); re-running skips them. Needs the 'train' extra "
                    "except for Pop and Random.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="collections: " + ", ".join(n for n, l in COLLECTIONS.items() if not l.needs_path)
               + " or a path (" + ", ".join(n for n, l in COLLECTIONS.items() if l.needs_path) + " layouts)\n"
               + "grids: " + "; ".join(f"{g} ({len(s)} systems)" for g, s in GRIDS.items())
               + "\nsystems: " + ", ".join(SYSTEMS),
    )
    add_settings(p, TrainSettings, run)


def run(args) -> int:
    from ..api import train_with

    s = settings_from(args, TrainSettings)
    result = train_with(s, verbose=getattr(args, "verbose", False),
                   progress=progress(args))
    print(json.dumps(result.to_json(), indent=2) if s.json else result.format())
    failed = [r.system for r in result.results if not r.ok]
    if failed:
        print(f"recjudge train: {len(failed)} system(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
