"""``recjudge demo``: the end-to-end pipeline on the embedded MovieLens-100K, offline by default."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._args import count, positive, seed


def register(sub) -> None:
    p = sub.add_parser(
        "demo", help="run the whole pipeline on MovieLens-100K (offline unless an LLM endpoint is set)",
        description="Global time split → train the quick grid → runs → historical qrels → judge a pool "
                    "(offline overlap judge, or the LLM when OPENAI_API_KEY or --base-url is set) → fill "
                    "gaps → compare → tie audit → report with figures and an evaluation card.")
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="report folder (default out/demo)")
    p.add_argument("--runs-dir", type=Path, help="where runs go (default runs/<collection>)")
    p.add_argument("--qrels-dir", type=Path, default=Path("qrels"))
    p.add_argument("--grid", default="quick", help="system grid (default quick)")
    p.add_argument("--systems", nargs="+", help="train only these systems")
    p.add_argument("--epochs", type=positive, help="override the epochs of neural systems")
    p.add_argument("--max-users", type=positive, help="sample this many users (seeded) before splitting")
    p.add_argument("--depth", type=positive, default=10, help="judge the union of every run's top-D (default 10)")
    p.add_argument("--per-user", type=positive, default=20,
                   help="also judge K historical items per user, for calibration and agreement (default 20)")
    p.add_argument("--judge", choices=("auto", "overlap", "popularity", "openai"), default="auto")
    p.add_argument("--model", default="gpt-4o-mini")
    p.add_argument("--base-url")
    p.add_argument("--fields", default="title+genres")
    p.add_argument("--profile-size", type=positive, default=50)
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--bootstrap", type=count, default=1000, help="resamples for the CIs (0: none; default 1000)")
    p.add_argument("--reduced", action="store_true",
                   help="a small, fast setting for checks: 4 systems, 1 epoch, 200 users")
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from ..experiments.demo import DemoSettings
    from ..experiments.demo import run_demo as demo

    settings = DemoSettings(
        out=args.out, runs_dir=args.runs_dir, qrels_dir=args.qrels_dir, grid=args.grid,
        systems=tuple(args.systems) if args.systems else None, epochs=args.epochs, max_users=args.max_users,
        depth=args.depth, per_user=args.per_user, judge=args.judge, model=args.model, base_url=args.base_url,
        fields=args.fields, profile_size=args.profile_size, seed=args.seed, bootstrap=args.bootstrap,
        reduced=args.reduced)
    result = demo(settings, progress=lambda m: print(m, flush=True))
    print(f"\nReport: {result.report}  (also {result.report.with_suffix('.html')})")
    return 0
