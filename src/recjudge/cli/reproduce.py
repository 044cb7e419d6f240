"""``recjudge reproduce STUDY``: a published study's tables and figures from its data, beside its numbers."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import _args


def _csv(kind):
    def parse(text: str):
        try:
            values = tuple(kind(v.strip()) for v in text.split(",") if v.strip())
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise argparse.ArgumentTypeError(f"a comma-separated list is expected ({exc})") from None
        if not values:
            raise argparse.ArgumentTypeError("give at least one value")
        return values

    parse.__name__ = "a comma-separated list"
    return parse


def register(sub) -> None:
    from ..experiments.reproduce import K_VALUES, PROFILE_SIZES, TARGETS

    p = sub.add_parser(
        "reproduce", help="every table and figure of a published study, beside its numbers",
        description="Run Penha et al. 2025 on an ML-32M-ext release folder: train the protocol's systems (or "
                    "take --runs), judge through one resumable cache (a prompt two tables share is asked "
                    "once), and write report.md, report.html, figures and reproduce.json with each cell beside "
                    "the published value, the difference and whether it falls inside the paper's interval, "
                    "every setting that differs from the paper and where the paper contradicts itself. "
                    "--dry-run prices the plan (calls, tokens, USD, wall time) without a call.")
    p.add_argument("study", choices=("penha2025",), help="the study to reproduce")
    p.add_argument("--collection", required=True, metavar="PATH", help="the ML-32M-ext release folder")
    p.add_argument("--collection-config", metavar="TOML",
                   help="loader options, e.g. [movie_columns] when database-movies.csv names its columns otherwise "
                        "(default: the release's own names)")
    p.add_argument("--out", required=True, metavar="DIR", help="report, figures, JSON, runs and the judge cache")
    p.add_argument("--model", help="judge model (default: the protocol's, gpt-5-2025-08-07)")
    p.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint, key from OPENAI_API_KEY "
                                                     "(default: the OpenAI API)")
    p.add_argument("--prompt", metavar="TEMPLATE",
                   help="the baseline prompt: the paper's Figure 1 text as a template file (prompts/README.md); "
                        "default: the protocol's, recjudge's wording of its design")
    p.add_argument("--defined-scale-prompt", default="defined-scale", metavar="TEMPLATE",
                   help="the defined-scale variant of Tables 8 and 9 (a name or a template file; default: "
                        "recjudge's defined-scale)")
    p.add_argument("--dry-run", action="store_true", help="print the plan per job group; no call, nothing written (default: off)")
    p.add_argument("--only", type=_csv(str), default=TARGETS, metavar="LIST",
                   help=f"targets to compute, among {','.join(TARGETS)} (default: all)")
    p.add_argument("--max-cost", type=_args.float_range(0, 1e9, what="USD"), metavar="USD",
                   help="stop cleanly before the judge's estimated spend exceeds USD; rerun to resume "
                        "(default: no limit)")
    p.add_argument("--prices", metavar="JSON", help="price table overriding or adding models, USD per Mtok "
                                                   "(default: the shipped table)")
    p.add_argument("--concurrency", type=_args.int_range(1, 4096), default=8, metavar="C",
                   help="judge requests in flight (default: 8)")
    p.add_argument("--context-tokens", type=_args.positive, metavar="N",
                   help="the most prompt tokens the model accepts (default: the price table's limit); a longer "
                        "prompt is never cut or sent, its user reported")
    p.add_argument("--call-seconds", type=_args.float_range(0, 86400, lo_open=True, what="seconds"), default=30.0,
                   metavar="S", help="assumed seconds per call for the plan's wall time (default: 30)")
    g = p.add_argument_group("systems")
    g.add_argument("--runs", metavar="DIR", help="Cranfield runs already trained (default: the protocol's grid "
                                                 "is trained)")
    g.add_argument("--historical-runs", metavar="DIR", help="runs trained on a historical split, for Table 1 and "
                                                           "Figure 2 (default: trained here)")
    g.add_argument("--historical-qrels", metavar="QRELS",
                   help="that split's held-out interactions, every one relevant with label 1 (default: made "
                        "from the split)")
    g.add_argument("--groups", metavar="FILE", help="'system group' lines (pooled / non-pooled) for Table 1; "
                                                    "default: the groups the grid file gave the runs")
    g.add_argument("--grid", help="grid name or file, e.g. the paper's 52 configurations (default: the protocol's)")
    g.add_argument("--systems", help="comma-separated system names of the grid (default: all of them)")
    g.add_argument("--epochs", type=_args.int_range(1, 10_000), metavar="N", help="override epochs, for quick checks (default: each system's own)")
    g.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    g.add_argument("--sample-users", type=_args.positive, metavar="N", help="default: the protocol's 10000")
    g.add_argument("--min-interactions", type=_args.positive, metavar="N", help="default: the protocol's 20")
    g.add_argument("--historical-split", default="user_ratio", help="split of the historical setting, 80/20 (default: user_ratio)")
    e = p.add_argument_group("experiments (reduced settings for quick checks; the report lists each)")
    e.add_argument("--experiments", type=_args.int_range(1, 100), metavar="N", help="default: the protocol's 3")
    e.add_argument("--per-user", type=_args.positive, metavar="K",
                   help="items per participant of Tables 3 and 8, Figures 3 and 4 (default: the protocol's 50)")
    e.add_argument("--k-values", type=_csv(_args.positive), default=K_VALUES, metavar="LIST",
                   help="Table 4's K values (default: 10,50,100,200)")
    e.add_argument("--depth", type=_args.positive, default=100, metavar="D", help="pool depth of Table 5 (default: 100)")
    e.add_argument("--field-sets", type=_csv(str), metavar="LIST",
                   help="Table 3's rows (default: the paper's 11 that the collection can show)")
    e.add_argument("--profile-sizes", type=_csv(_args.positive), default=PROFILE_SIZES, metavar="LIST",
                   help="Figure 3's history sizes (default: 10,50,100,500,1000)")
    e.add_argument("--profile-size", type=_args.positive, metavar="N", help="default: the protocol's 1000")
    e.add_argument("--fields", help="the judge's base field set (default: the protocol's 'all')")
    e.add_argument("--seed", type=_args.seed, default=0,
                   help="seed of experiment 1 (experiment e uses seed + e - 1): samples, history, ties "
                        "(default: 0)")
    e.add_argument("--permutations", type=_args.positive, default=10_000, metavar="N",
                   help="sign flips per significance test (default: 10000)")
    e.add_argument("--bootstrap", type=_args.count, default=1000, metavar="N",
                   help="resamples of the agreement CIs (0: none; default: 1000)")
    p.set_defaults(func=run_reproduce_cli)


def run_reproduce_cli(args: argparse.Namespace) -> int:
    import dataclasses
    import sys

    from ..experiments.reproduce import ReproduceSettings, run_reproduce

    # every option's dest is the settings field of the same name (alpha has no flag: its default stays)
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(ReproduceSettings) if hasattr(args, f.name)}
    for name in ("collection", "collection_config", "out", "runs", "historical_runs", "historical_qrels", "groups"):
        if values[name] is not None:
            values[name] = Path(values[name])
    values.update(only=tuple(args.only), k_values=tuple(args.k_values), profile_sizes=tuple(args.profile_sizes))
    settings = ReproduceSettings(**values)
    result = run_reproduce(settings, progress=lambda m: print(m, file=sys.stderr, flush=True))
    if args.dry_run:
        print(result.plan_text)
        return 0
    print(f"report: {result.paths.get('md')}\nHTML: {result.paths.get('html')}\nJSON: {result.paths.get('json')}")
    if not result.complete:
        # a budget stop is a requested outcome, not a failure: the report says what is missing
        print(f"incomplete ({result.stopped or 'see the report'}): run the same command again to resume")
    return 0
