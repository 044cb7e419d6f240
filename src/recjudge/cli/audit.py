"""``recjudge audit``: the LLM judge's own biases — popularity, position in multi-item calls,
self-consistency, prompt injection."""

from __future__ import annotations

import argparse
import sys

from ..api.judge_settings import (
    AuditConsistencySettings,
    AuditInjectionSettings,
    AuditPopularitySettings,
    AuditPositionSettings,
    AuditScanSettings,
    audit_judge_settings,
)
from .options import add_settings, settings_from

_ABOUT = ("LLM errors that correlate with system characteristics (overrating popular items, favouring "
          "the first candidate of a call, obeying instructions in item metadata) can distort system "
          "rankings in ways a global tau does not reveal. Each audit reports one such bias.")


def register(sub) -> None:
    p = sub.add_parser("audit", help="audit the LLM judge's biases: popularity, position, consistency, "
                                     "prompt injection", description=_ABOUT)
    kinds = p.add_subparsers(dest="audit", metavar="AUDIT")
    kinds.required = True
    for name, model, helptext, func in (
            ("popularity", AuditPopularitySettings, "residual of calibrated LLM labels against human labels by "
                                                    "item-popularity decile (needs human qrels)", run_popularity),
            ("consistency", AuditConsistencySettings, "kappa / alpha between repeated experiments", run_consistency),
            ("injection-scan", AuditScanSettings, "items whose metadata reads like an instruction to the judge",
             run_scan),
            ("position", AuditPositionSettings, "the same multi-item calls in a seeded shuffled order, and one item "
                                                "per call: label flip rate and agreement", run_position),
            ("injection", AuditInjectionSettings, "label inflation on a copy of the collection whose items carry an "
                                                  "instruction", run_injection)):
        add_settings(kinds.add_parser(name, help=helptext), model, func)


def _load(args):
    from ..data.collections import load_collection, read_collection_config

    options = read_collection_config(args.collection_config) if args.collection_config else {}
    collection = load_collection(args.collection, **options)
    history = None
    if args.split != "none":
        from ..data.splits import make_split
        history = make_split(collection, args.split).history()
    return collection, history


def _check(args, inputs) -> None:
    from .._io import check_outputs

    check_outputs({"--json": args.json}, inputs=[i for i in inputs if i])


def _write(args, obj) -> None:
    from .._io import write_json

    if args.json:
        write_json(args.json, args.stamp(obj))
        print(f"json: {args.json}")


def run_popularity(args: argparse.Namespace) -> int:
    args = settings_from(args, AuditPopularitySettings)
    from ..data.trec import read_qrels
    from ..judging.bias import item_popularity, popularity_bias

    from ..evaluation.measures import parse_measures
    from ..judging.bias import popularity_rank_effect

    _check(args, [args.llm, args.human, args.collection_config, *(args.runs or [])])
    if args.runs:
        parse_measures(args.measure)
    llm, human = read_qrels(args.llm), read_qrels(args.human)
    collection, history = _load(args)
    popularity = item_popularity(collection.interactions if history is None else history)
    res = popularity_bias(llm, human, popularity, bins=args.bins)
    print(res.format())
    out = {"audit": "popularity", "pairs": res.pairs, "spearman": res.spearman,
           "calibration": {str(k): v for k, v in res.mapping.items()},
           "bins": res.deciles.to_dict(orient="records")}
    if args.runs:
        from ..data.trec import read_runs

        effect = popularity_rank_effect(res, llm, popularity, read_runs(args.runs), args.measure)
        print(f"\nsystems ranked on {effect.attrs['measure']} with and without the popularity bias "
              "(shift > 0: the bias lifted the system)")
        print(effect.round(4).to_string())
        out["systems"] = effect.reset_index().rename(columns={"run": "system", "index": "system"}).to_dict(
            orient="records")
        out["measure"] = effect.attrs["measure"]
    _write(args, out)
    return 0


def run_consistency(args: argparse.Namespace) -> int:
    args = settings_from(args, AuditConsistencySettings)
    from ..data.trec import read_qrels
    from ..judging.bias import self_consistency

    _check(args, args.qrels)
    res = self_consistency([read_qrels(q) for q in args.qrels])
    print(res.format())
    _write(args, {"audit": "consistency", "pairs": res.pairs, "alpha_interval": res.alpha,
                  "kappa_linear": [{"a": a, "b": b, "kappa": k} for (a, b), k in res.kappa.items()]})
    return 0


def run_scan(args: argparse.Namespace) -> int:
    args = settings_from(args, AuditScanSettings)
    from ..judging.bias import scan_injections

    _check(args, [args.collection_config])
    collection, _ = _load(args)
    flagged = scan_injections(collection)
    for r in flagged.itertuples():
        print(f"{r.item}\t{r.field}\t{r.text}")
    print(f"{len(flagged):,} item field(s) read like instructions to the judge", file=sys.stderr)
    _write(args, {"audit": "injection-scan", "flagged": flagged.to_dict(orient="records")})
    return 0


def _llm_setup(args):
    from ..data.trec import read_runs
    from ..errors import ConfigError
    from ..judging import select_pairs
    from ..judging.client import quiet_http_loggers

    quiet_http_loggers()
    config = audit_judge_settings(args)
    from .._io import check_outputs

    check_outputs({"--json": args.json, "--cache": args.cache},
                  inputs=[i for i in (*args.runs, args.collection_config) if i])
    collection, history = _load(args)
    pairs = select_pairs(read_runs(args.runs), depth=None if args.per_user else args.depth,
                         per_user=args.per_user, seed=args.seed)
    if not pairs:
        raise ConfigError(f"the runs {', '.join(args.runs)} select no pair to judge")
    return config, collection, history, pairs


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def run_position(args: argparse.Namespace) -> int:
    args = settings_from(args, AuditPositionSettings)
    from ..judging.bias import position_bias

    config, collection, history, pairs = _llm_setup(args)
    res = position_bias(pairs, collection, config, seed=args.seed, cache_path=args.cache, history=history,
                        progress=_stderr)
    print(res.format())
    _write(args, {"audit": "position", "items_per_call": res.items_per_call, "pairs": res.pairs,
                  "flip_rate": res.flip_rate, "mean_abs_change": res.mean_abs_change,
                  "exact_vs_single": {"in_order": res.exact_vs_single[0], "shuffled": res.exact_vs_single[1]},
                  "mean_label_by_position": list(res.mean_label_by_position), "seed": args.seed})
    return 0


def run_injection(args: argparse.Namespace) -> int:
    args = settings_from(args, AuditInjectionSettings)
    from ..judging.bias import INJECTION, injection_inflation

    config, collection, history, pairs = _llm_setup(args)
    res = injection_inflation(pairs, collection, config, fraction=args.fraction, seed=args.seed, field=args.field,
                              cache_path=args.cache, history=history, progress=_stderr)
    print(res.format())
    _write(args, {"audit": "injection", "instruction": INJECTION, "items": list(res.items), "pairs": res.pairs,
                  "inflation": res.inflation, "share_raised": res.share_raised,
                  "others_change": res.others_change, "seed": args.seed})
    return 0
