"""``recjudge compare``, ``recjudge agreement`` and ``recjudge evaluate``."""

from __future__ import annotations

import argparse

from ..data.trec import TIE_POLICIES
from ..evaluation.measures import DEFAULT_MEASURES as _MEASURES
from . import _args

DEFAULT_MEASURES = ",".join(_MEASURES)


def _add_tie_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tie-policy", choices=TIE_POLICIES, default="hash",
                   help="order of equal scores before any measure runs (default: hash of seed+user+item)")
    p.add_argument("--seed", type=_args.seed, default=0,
                   help="seed for the hash tie policy (and the bootstrap, unless --bootstrap-seed is given)")


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
    p.add_argument("--bootstrap", type=_args.count, default=1000,
                   help="bootstrap resamples of users for τ CIs (BCa; 0: no CI)")
    p.add_argument("--bootstrap-seed", type=_args.seed, default=None,
                   help="seed for the bootstrap alone (default: --seed); varies the CIs, never the rankings")
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
    p.add_argument("--bootstrap", type=_args.count, default=1000, help="bootstrap resamples of users (0: no CI)")
    p.add_argument("--seed", type=_args.seed, default=0, help="seed for the bootstrap")
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


def _named(reference_path: str, candidate_paths: list[str]):
    """Read the reference and candidate qrels; name each by the one naming rule of outputs."""
    from dataclasses import replace

    from ..data.trec import read_qrels
    from ..evaluation.metaeval import label_set_names

    paths = [reference_path, *candidate_paths]
    qrels = [read_qrels(p) for p in paths]
    names = label_set_names([q.name for q in qrels], paths)
    named = [replace(q, name=n) for q, n in zip(qrels, names)]
    return named[0], named[1:], dict(zip(names, paths))


def run_compare(args) -> int:
    from .._io import check_output_dir, check_outputs, write_json
    from ..data.trec import read_runs
    from ..errors import ConfigError
    from ..evaluation.metaeval import _measure_names, compare, export_tie_info

    if len(set(args.candidate)) != len(args.candidate):
        raise ConfigError("the same --candidate path is given twice; give each label set once")
    inputs = [*args.runs, args.reference, *args.candidate]
    check_outputs({"--json": args.json}, inputs=inputs)
    check_output_dir(args.report, "--report", inputs)
    _measure_names(args.measures)  # bad measure strings fail before any file is read
    runs = read_runs(args.runs)
    reference, candidates, sources = _named(args.reference, args.candidate)
    result = compare(runs, reference, {q.name: q for q in candidates}, measures=args.measures,
                     queries=args.queries, tie_policy=args.tie_policy, seed=args.seed, bootstrap=args.bootstrap,
                     export_ties=export_tie_info(args.runs), bootstrap_seed=args.bootstrap_seed,
                     sources=sources)
    print(format_compare(result))
    if args.json:
        write_json(args.json, result.to_json())
        print(f"\nJSON: {args.json}")
    if args.report:
        from ..report.evaluation import write_compare_report

        path = write_compare_report(result, args.report)
        print(f"Report: {path}")
    return 0


def format_compare(result) -> str:
    import pandas as pd

    s = result.settings
    seeds = f"seed {s['seed']}"
    if s.get("bootstrap_seed", s["seed"]) != s["seed"]:
        seeds += f"; bootstrap seed {s['bootstrap_seed']}"
    lines = [f"{len(result.reference.scores_frame())} systems; reference {s['reference']}; "
             f"users: {s['queries']}; tie policy: {s['tie_policy']} ({seeds})"]
    ci_header = f"95% CI ({s.get('ci_method', 'percentile')})"
    for cand, by_measure in result.agreement.items():
        rows = []
        for m, ra in by_measure.items():
            rows.append({
                "measure": m,
                "tau_b": f"{ra.kendall_tau:.3f}",
                "p": f"{ra.kendall_tau_p:.2g}",
                ci_header: f"[{ra.kendall_tau_ci[0]:.3f}, {ra.kendall_tau_ci[1]:.3f}]",
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

    from .._io import check_outputs, write_json
    from ..errors import ConfigError
    from ..evaluation.agreement import agreement, parse_clip

    if len(set(args.candidate)) != len(args.candidate):
        raise ConfigError("the same --candidate path is given twice; give each label set once")
    check_outputs({"--json": args.json}, inputs=[args.reference, *args.candidate])
    clip = parse_clip(args.clip)
    reference, candidates, sources = _named(args.reference, args.candidate)
    out, rows = {}, []
    for cand in candidates:
        res = agreement(reference, cand, args.missing, clip, args.bootstrap, args.seed)
        entry = res.to_json()
        entry["path"] = sources[cand.name]
        entry["settings"]["reference_path"] = args.reference
        out[cand.name] = entry
        pw = res.pairwise
        rows.append({
            "candidate": cand.name,
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
            # the paper's Table 3: reference 0 vs ≥ 1, candidate labels raw
            "rel>non agree/tie": f"{res.pairwise_relevant_vs_not.agree:.3f}/{res.pairwise_relevant_vs_not.tie:.3f}",
        })
    print(f"reference: {reference.name} ({args.reference}; missing={args.missing}, clip={args.clip or 'none'})")
    print(pd.DataFrame(rows).to_string(index=False))
    if args.json:
        write_json(args.json, out)
        print(f"\nJSON: {args.json}")
    return 0


def run_evaluate(args) -> int:
    from .._io import check_output_dir, check_outputs, write_json
    from ..data.trec import read_qrels, read_runs
    from ..evaluation.metaeval import _measure_names, evaluate, export_tie_info

    inputs = [*args.runs, args.qrels]
    check_outputs({"--json": args.json}, inputs=inputs)
    check_output_dir(args.report, "--report", inputs)
    _measure_names(args.measures)  # bad measure strings fail before any file is read
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
        from ..report.evaluation import write_evaluation_report

        print(f"Report: {write_evaluation_report(result, args.report)}")
    return 0
