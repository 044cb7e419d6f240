"""``recjudge compare``, ``recjudge agreement`` and ``recjudge evaluate``."""

from __future__ import annotations

import argparse

from ..measures import DEFAULT_MEASURES as _MEASURES
from ..trec import TIE_POLICIES

DEFAULT_MEASURES = ",".join(_MEASURES)


def _add_tie_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tie-policy", choices=TIE_POLICIES, default="hash",
                   help="order of equal scores before any measure runs (default: hash of seed+user+item)")
    p.add_argument("--seed", type=int, default=0, help="seed for the hash tie policy and the bootstrap")


def register(sub) -> None:
    p = sub.add_parser("compare", help="compare system rankings under a reference and candidate qrels",
                       description="Rank systems under the reference labels and under each candidate "
                                   "label set; report Kendall's τ-b (bootstrap CI), weighted τ, τ_AP and "
                                   "rank displacement per measure.")
    p.add_argument("--runs", nargs="+", required=True, metavar="DIR_OR_FILE", help="run files or folders")
    p.add_argument("--reference", required=True, metavar="QRELS", help="reference labels (e.g. human)")
    p.add_argument("--candidate", action="append", required=True, metavar="QRELS",
                   help="candidate labels (e.g. LLM); repeat for several")
    p.add_argument("--measures", default=DEFAULT_MEASURES, help=f"ir-measures strings (default: {DEFAULT_MEASURES})")
    p.add_argument("--queries", choices=("own", "shared"), default="own",
                   help="own: each label set over the users it judges; shared: only users judged by both")
    _add_tie_args(p)
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of users for τ CIs")
    p.add_argument("--json", metavar="PATH", help="write the result as JSON")
    p.add_argument("--report", metavar="DIR", help="write report.md with plots into DIR")
    p.set_defaults(func=run_compare)

    p = sub.add_parser("agreement", help="item-level agreement of candidate labels with reference labels",
                       description="Pairwise agree/tie/disagree (with bootstrap CIs), Cohen's κ and "
                                   "Krippendorff's α over the pairs the reference judges.")
    p.add_argument("--reference", required=True, metavar="QRELS")
    p.add_argument("--candidate", nargs="+", required=True, metavar="QRELS")
    p.add_argument("--missing", choices=("zero", "drop"), default="zero",
                   help="a pair the candidate lacks: label 0 (zero) or left out (drop)")
    p.add_argument("--clip", metavar="LO..HI", help="clip candidate labels, e.g. 0..3")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH")
    p.set_defaults(func=run_agreement)

    p = sub.add_parser("evaluate", help="score and rank systems under one label set")
    p.add_argument("--runs", nargs="+", required=True, metavar="DIR_OR_FILE")
    p.add_argument("--qrels", required=True, metavar="QRELS")
    p.add_argument("--measures", default=DEFAULT_MEASURES)
    _add_tie_args(p)
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--report", metavar="DIR")
    p.set_defaults(func=run_evaluate)


def run_compare(args) -> int:
    from .._io import write_json
    from ..errors import ConfigError
    from ..metaeval import compare, export_tie_info
    from ..trec import read_qrels, read_runs

    if len(set(args.candidate)) != len(args.candidate):
        raise ConfigError("the same --candidate path is given twice; give each label set once")
    runs = read_runs(args.runs)
    reference = read_qrels(args.reference)
    candidates = {path: read_qrels(path) for path in args.candidate}
    result = compare(runs, reference, candidates, measures=args.measures,
                     queries=args.queries, tie_policy=args.tie_policy, seed=args.seed, bootstrap=args.bootstrap,
                     export_ties=export_tie_info(args.runs))
    print(format_compare(result))
    if args.json:
        write_json(args.json, result.to_json())
        print(f"\nJSON: {args.json}")
    if args.report:
        from ..report import write_compare_report

        path = write_compare_report(result, args.report)
        print(f"Report: {path}")
    return 0


def format_compare(result) -> str:
    import pandas as pd

    lines = [f"{len(result.reference.scores_frame())} systems; reference {result.settings['reference']}; "
             f"users: {result.settings['queries']}; tie policy: {result.settings['tie_policy']} "
             f"(seed {result.settings['seed']})"]
    for cand, by_measure in result.agreement.items():
        rows = []
        for m, ra in by_measure.items():
            rows.append({
                "measure": m,
                "tau_b": f"{ra.kendall_tau:.3f}",
                "95% CI": f"[{ra.kendall_tau_ci[0]:.3f}, {ra.kendall_tau_ci[1]:.3f}]",
                "weighted_tau": f"{ra.weighted_tau:.3f}",
                "tau_ap": f"{ra.tau_ap:.3f}",
                "med|Δrank|": f"{ra.median_abs_rank_displacement:g}",
                "max|Δrank|": f"{ra.max_abs_rank_displacement:g}",
            })
        lines += ["", f"candidate: {cand}", pd.DataFrame(rows).to_string(index=False)]
    scores = result.reference.scores_frame()
    lines += ["", "system scores under the reference:", scores.round(4).to_string()]
    return "\n".join(lines)


def run_agreement(args) -> int:
    import pandas as pd

    from .._io import write_json
    from ..agreement import agreement, parse_clip
    from ..errors import ConfigError
    from ..trec import read_qrels

    if len(set(args.candidate)) != len(args.candidate):
        raise ConfigError("the same --candidate path is given twice; give each label set once")
    if args.bootstrap < 0:
        raise ConfigError(f"--bootstrap must be 0 or more, not {args.bootstrap}")
    reference = read_qrels(args.reference)
    clip = parse_clip(args.clip)
    out, rows = {}, []
    for path in args.candidate:
        res = agreement(reference, read_qrels(path), args.missing, clip, args.bootstrap, args.seed)
        out[path] = res.to_json()
        pw = res.pairwise
        rows.append({
            "candidate": path,
            "pairs": res.n_pairs,
            "missing": res.n_missing,
            "kappa": f"{res.cohen_kappa:.4f}",
            "kappa_lin": f"{res.cohen_kappa_linear:.4f}",
            "alpha_ord": f"{res.krippendorff_alpha_ordinal:.4f}",
            "alpha_int": f"{res.krippendorff_alpha_interval:.4f}",
            "agree": f"{pw.agree:.3f} [{pw.agree_ci[0]:.3f}, {pw.agree_ci[1]:.3f}]",
            "tie": f"{pw.tie:.3f}",
            "disagree": f"{pw.disagree:.3f}",
            "binary agree": f"{res.pairwise_binary.agree:.3f}",
        })
    print(f"reference: {args.reference} (missing={args.missing}, clip={args.clip or 'none'})")
    print(pd.DataFrame(rows).to_string(index=False))
    if args.json:
        write_json(args.json, out)
        print(f"\nJSON: {args.json}")
    return 0


def run_evaluate(args) -> int:
    from .._io import write_json
    from ..metaeval import evaluate, export_tie_info
    from ..trec import read_qrels, read_runs

    result = evaluate(read_runs(args.runs), read_qrels(args.qrels), args.measures,
                      tie_policy=args.tie_policy, seed=args.seed, export_ties=export_tie_info(args.runs))
    scores = result.table.scores_frame()
    first = scores.columns[0]
    ranked = scores.sort_values(first, ascending=False)
    ranked.insert(0, "rank", result.table.ranks(first).reindex(ranked.index))
    print(f"{len(scores)} systems under {args.qrels}; ranked by {first}; tie policy {args.tie_policy}")
    print(ranked.round(4).to_string())
    if args.json:
        write_json(args.json, result.to_json())
        print(f"\nJSON: {args.json}")
    if args.report:
        from ..report import write_evaluation_report

        print(f"Report: {write_evaluation_report(result, args.report)}")
    return 0
