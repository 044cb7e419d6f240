"""``recjudge ties``: tie prevalence, every measure under every tie treatment, permutation test."""

from __future__ import annotations

import argparse
import logging

from ..errors import ConfigError
from . import _args

log = logging.getLogger("recjudge.evaluation.ties")

DESCRIPTION = """\
Audit tie handling in runs. Prints, per run, how many users have exactly equal scores (overall,
reaching / crossing / inside the top k, on a relevant item) and, with --qrels, each measure under
input-order tie-breaking (a stable sort: the run file's line order), the disclosed hash policy,
the mean and sd over many hash seeds, and the exact expectation under a uniformly random order
within tie blocks (Monte Carlo with a CI for measures without a closed form, e.g. Compat, Bpref).
The permutation test shuffles each user's rows and reports the largest change of each measure:
0 for a row-order-invariant evaluator. Means are over the qrels' users; a user the run lacks
scores 0."""


def _cutoffs(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"--k expects comma-separated positive integers such as 10,100, not {text!r}") from None
    if not ks or any(not 1 <= k <= _args.MAX_COUNT for k in ks):
        raise ConfigError(f"--k expects comma-separated positive integers such as 10,100, not {text!r}")
    return ks


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ties", help="audit tie handling: prevalence, metrics per tie treatment, permutation test",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="RUN", help="run files (.run/.txt/.trec, optionally .gz) or folders")
    p.add_argument("--qrels", metavar="QRELS", help="relevance labels; without them only prevalence is shown")
    p.add_argument("--measures", metavar="LIST",
                   help='comma-separated ir-measures names, Hit@k = Success@k '
                        '(default with --qrels: "Hit@10,nDCG@10,nDCG@100")')
    p.add_argument("--k", default="10,100", metavar="LIST", help="cutoffs for prevalence (default 10,100)")
    p.add_argument("--seeds", type=_args.int_range(2, 100_000), default=100, help="hash seeds for mean and sd (default 100)")
    p.add_argument("--permutations", type=_args.int_range(0, 100_000), default=20,
                   help="shuffles of each user's rows in the permutation test (default 20)")
    p.add_argument("--mc-samples", type=_args.int_range(2, 100_000), default=100,
                   help="random tie orders for measures without a closed form (default 100)")
    p.add_argument("--seed", type=_args.seed, default=0,
                   help="seed of the hash policy (hash seeds run from it) and of every shuffle (default 0)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON (atomically)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .._io import check_outputs, write_json
    from ..data.trec import iter_run_files, read_qrels, read_run, run_name
    from ..errors import InputError
    from ..evaluation.ties import audit_ties

    cutoffs = _cutoffs(args.k)
    if args.measures is not None and args.qrels is None:
        raise ConfigError("--measures needs --qrels (measures need relevance labels)")
    qrels = read_qrels(args.qrels) if args.qrels else None
    files = iter_run_files(args.runs)  # checks every path before the long work starts
    check_outputs({"--json": args.json}, [*files, args.qrels])
    names: dict[str, object] = {}
    for f in files:
        name = run_name(f)
        if name in names:
            raise InputError(str(f), f"run name {name!r} is also used by {names[name]}",
                             "rename one of the files: a run's name is its file name")
        names[name] = f

    def lazily():  # one run in memory at a time
        for i, f in enumerate(files, start=1):
            log.info("auditing %s (%d/%d)", f, i, len(files))
            yield read_run(f)

    audit = audit_ties(lazily(), qrels, measures=args.measures, cutoffs=cutoffs,
                       seeds=args.seeds, permutations=args.permutations, seed=args.seed,
                       mc_samples=args.mc_samples)
    print(audit.format())
    if args.json:
        write_json(args.json, audit.as_dict())
    return 0
