"""``recjudge demo``: the end-to-end pipeline on the embedded MovieLens-100K, offline by default."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

from ..experiments.demo import DEMO_JUDGES, DemoSettings
from ._args import count, positive, seed

# the defaults are DemoSettings'; this table holds only how each setting is spelt on the command line
_D = DemoSettings()
_FLAGS: dict[str, dict] = {
    "out": dict(type=Path, help=f"report folder (default: {_D.out})"),
    "runs_dir": dict(type=Path, help="where runs go (default: runs/<collection>)"),
    "qrels_dir": dict(type=Path, help=f"where the qrels go (default: {_D.qrels_dir})"),
    "grid": dict(help=f"system grid (default: {_D.grid})"),
    "systems": dict(nargs="+", help="train only these systems of the grid (default: all of them)"),
    "epochs": dict(type=positive, help="override the epochs of neural systems (default: each system's own)"),
    "max_users": dict(type=positive, help="sample this many users (seeded) before splitting (default: all)"),
    "depth": dict(type=positive, help=f"judge the union of every run's top-D (default: {_D.depth})"),
    "per_user": dict(type=positive, help=f"also judge K historical items per user, for calibration and "
                                         f"agreement (default: {_D.per_user})"),
    "judge": dict(choices=DEMO_JUDGES, help="overlap and popularity are offline non-LLM baselines; openai calls an "
                                            "LLM (OPENAI_API_KEY, or --base-url) and costs money (default: openai "
                                            "when --base-url is given, else overlap; an API key alone never "
                                            "selects it)"),
    "model": dict(help=f"the LLM judge's model (default: {_D.model})"),
    "base_url": dict(help="an OpenAI-compatible endpoint for the LLM judge (default: none: the offline judge)"),
    "fields": dict(help=f"item fields the judge sees, joined by + (default: {_D.fields})"),
    "profile_size": dict(type=positive, help=f"rated history items shown per user (default: {_D.profile_size})"),
    "seed": dict(type=seed, help=f"seed of every random step: users, pairs, profiles, ties, bootstrap "
                                 f"(default: {_D.seed})"),
    "bootstrap": dict(type=count, help=f"resamples for the CIs (0: none; default: {_D.bootstrap})"),
    "reduced": dict(action="store_true", help="a small, fast setting for checks: 4 systems, 1 epoch, 200 users"),
}


def register(sub) -> None:
    p = sub.add_parser(
        "demo", help="run the whole pipeline on MovieLens-100K (offline unless an LLM is asked for)",
        description="Global time split → train the quick grid → runs → historical qrels → judge a pool "
                    "(the offline overlap judge, or an LLM when asked for with --judge openai or --base-url) → "
                    "fill gaps (when the judge can be calibrated) → compare → tie audit → report with figures "
                    "and an evaluation card.")
    defaults = {f.name: f.default for f in fields(DemoSettings)}
    for name, spec in _FLAGS.items():
        extra = {} if spec.get("action") else {"default": defaults[name]}
        p.add_argument("--" + name.replace("_", "-"), **spec, **extra)
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from ..experiments.demo import run_demo as demo

    values = {name: getattr(args, name) for name in _FLAGS}
    values["systems"] = tuple(values["systems"]) if values["systems"] else None
    result = demo(DemoSettings(**values), progress=lambda m: print(m, flush=True))
    print(f"\nReport: {result.report}  (also {result.report.with_suffix('.html')})")
    return 0
