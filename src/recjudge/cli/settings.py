"""``recjudge compare-settings``: the same systems ranked under two settings (runs + qrels each)."""

from __future__ import annotations

from . import _args


def register(sub) -> None:
    from ..data.trec import TIE_POLICIES
    from ..evaluation.measures import DEFAULT_MEASURES

    p = sub.add_parser(
        "compare-settings", help="rank the same systems in two settings (e.g. historical vs Cranfield) and "
                                 "correlate the rankings",
        description="Score the runs of setting A with its qrels and the runs of setting B with theirs (e.g. "
                    "runs trained on a historical split under historical qrels, and Cranfield runs under "
                    "human qrels), match systems by run name and report Kendall's τ-b with its p-value, "
                    "weighted τ, τ_AP and each system's rank shift (Penha et al. 2025, Figure 2).")
    p.add_argument("--runs-a", nargs="+", required=True, metavar="DIR_OR_FILE")
    p.add_argument("--qrels-a", required=True, metavar="QRELS")
    p.add_argument("--runs-b", nargs="+", required=True, metavar="DIR_OR_FILE")
    p.add_argument("--qrels-b", required=True, metavar="QRELS")
    p.add_argument("--measures", default=",".join(DEFAULT_MEASURES))
    p.add_argument("--tie-policy", choices=TIE_POLICIES, default="hash")
    p.add_argument("--seed", type=_args.seed, default=0)
    p.add_argument("--json", metavar="PATH")
    p.set_defaults(func=run)


def run(args) -> int:
    from .._io import check_outputs, write_json
    from ..api.settings import compare_settings
    from ..evaluation.measures import parse_measures

    check_outputs({"--json": args.json}, [*args.runs_a, args.qrels_a, *args.runs_b, args.qrels_b])
    parse_measures(args.measures)
    result = compare_settings(args.runs_a, args.qrels_a, args.runs_b, args.qrels_b, args.measures,
                              args.tie_policy, args.seed)
    print(result.format())
    if args.json:
        write_json(args.json, result.to_json())
        print(f"\nJSON: {args.json}")
    return 0
