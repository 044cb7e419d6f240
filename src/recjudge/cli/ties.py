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
scores 0.

--sampled-candidates N audits the sampled-candidate protocol instead (the tie paper's setting):
--qrels holds each user's one held-out positive, and each user's list is that positive plus N
negatives sampled (seeded by --seed and the user) from a catalogue, written relevant-first. Each
RUN scores the candidates (items it does not rank tie below its lowest score); without runs
every candidate scores 0. The catalogue is --catalogue (one item id per line), the items of
--collection, or every item the runs and the qrels name. Under input order the relevant item
wins every tie."""


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
    p.add_argument("runs", nargs="*", metavar="RUN", help="run files (.run/.txt/.trec, optionally .gz) or folders")
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
    p.add_argument("--sampled-candidates", type=_args.int_range(1, _args.MAX_COUNT), metavar="N",
                   help="audit the sampled-candidate protocol: per user the held-out positive of --qrels "
                        "plus N sampled negatives, relevant first")
    cat = p.add_mutually_exclusive_group()
    cat.add_argument("--catalogue", metavar="FILE",
                     help="with --sampled-candidates: the items negatives are drawn from, one id per line "
                          "(default: every item the runs and the qrels name)")
    cat.add_argument("--collection", metavar="NAME_OR_PATH",
                     help="with --sampled-candidates: draw negatives from this collection's items")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON (atomically)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .._io import check_outputs, write_json
    from ..data.trec import iter_run_files, read_qrels, read_run, run_name
    from ..errors import InputError
    from ..evaluation.ties import audit_ties

    cutoffs = _cutoffs(args.k)
    sampled = args.sampled_candidates is not None
    if args.measures is not None and args.qrels is None:
        raise ConfigError("--measures needs --qrels (measures need relevance labels)")
    if sampled and args.qrels is None:
        raise ConfigError("--sampled-candidates needs --qrels: each user's held-out positive")
    if not sampled and (args.catalogue or args.collection):
        raise ConfigError("--catalogue and --collection go with --sampled-candidates N")
    if not args.runs and not sampled:
        raise ConfigError("no runs given; pass run files or a folder of runs")
    qrels = read_qrels(args.qrels) if args.qrels else None
    files = iter_run_files(args.runs)  # checks every path before the long work starts
    check_outputs({"--json": args.json}, [*files, args.qrels, args.catalogue])
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

    protocol = None
    runs = lazily()
    if sampled:
        runs, qrels, protocol = _sampled(args, qrels, [read_run(f) for f in files])
        print(protocol["description"])
    audit = audit_ties(runs, qrels, measures=args.measures, cutoffs=cutoffs,
                       seeds=args.seeds, permutations=args.permutations, seed=args.seed,
                       mc_samples=args.mc_samples)
    print(audit.format())
    if args.json:
        data = audit.as_dict()
        if protocol is not None:
            data["sampled_candidates"] = protocol
        write_json(args.json, data)
    return 0


def _sampled(args: argparse.Namespace, qrels, runs: list) -> tuple[list, object, dict]:
    """The sampled-candidate runs (one per RUN, or one constant scorer), their qrels and a record of the protocol."""
    from .._io import read_text
    from ..errors import InputError
    from ..systems.sampled import constant_scorer, held_out_from_qrels, run_scorer, sampled_candidate_run

    held = held_out_from_qrels(qrels)
    if args.catalogue:
        src, text = read_text(args.catalogue, "catalogue")
        catalogue = list(dict.fromkeys(line.strip() for line in text.splitlines() if line.strip()))
        if not catalogue:
            raise InputError(src, "the catalogue is empty", "write one item id per line")
        where = f"{len(catalogue)} items of {src}"
    elif args.collection:
        from ..data.collections import load_collection

        catalogue = [str(i) for i in load_collection(args.collection).items.index]
        where = f"{len(catalogue)} items of collection {args.collection}"
    else:
        catalogue = sorted({*held.item, *(d for r in runs for d in r.frame.docid.unique())})
        where = f"{len(catalogue)} items named by the runs and the qrels"
    scorers = {r.name: run_scorer(r) for r in runs} or {"constant": constant_scorer}
    out, sampled_qrels = [], None
    for name, scorer in scorers.items():
        sc = sampled_candidate_run(held, catalogue, scorer, n_negatives=args.sampled_candidates, seed=args.seed,
                                   name=name)
        out.append(sc.run)
        sampled_qrels = sc.qrels
    n = args.sampled_candidates
    description = (f"Sampled-candidate protocol: per user 1 held-out positive of {qrels.name!r} + {n} negatives "
                   f"sampled (seed {args.seed}) from {where}, written relevant-first; "
                   + (f"scored by runs {', '.join(scorers)} (items a run does not rank tie below its lowest score)"
                      if runs else "every candidate scores 0 (one tie)") + "\n")
    record = {"negatives": n, "seed": args.seed, "users": int(len(held)), "catalogue": where,
              "scorers": list(scorers), "description": description.strip()}
    return out, sampled_qrels, record
