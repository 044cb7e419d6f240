"""``recjudge fill``: calibrate LLM labels to the human scale and fill the gaps of human qrels."""

from __future__ import annotations

import argparse

from ..data.trec import TIE_POLICIES
from ._args import count, float_range, positive, seed


def register(sub) -> None:
    p = sub.add_parser(
        "fill", help="fill unjudged top-k items of human qrels with calibrated LLM labels",
        description="Calibrate LLM grades to the human scale (mean human label per LLM grade over the "
                    "pairs both judge, rounded half up), fill the unjudged items in the runs' top-k, and "
                    "compare Human-only, LLM-fills-gaps and Full-LLM system rankings.")
    p.add_argument("--human", required=True, metavar="QRELS", help="human (reference) qrels")
    p.add_argument("--llm", required=True, metavar="QRELS", help="LLM qrels covering the pool")
    p.add_argument("--runs", nargs="+", required=True, metavar="DIR_OR_FILE")
    p.add_argument("--out", required=True, metavar="QRELS", help="mixed qrels to write (+ .sources.tsv)")
    p.add_argument("--k", type=positive, default=100, help="fill the top-k of every run (default 100)")
    p.add_argument("--min-overlap", type=count, default=30, help="flag LLM grades with fewer shared pairs")
    p.add_argument("--tie-policy", choices=TIE_POLICIES, default="hash")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--validate", type=float_range(0, 1, lo_open=True, hi_open=True, what="a fraction"),
                   metavar="F",
                   help="also hide a seeded fraction F (0 < F < 1) of human labels, fill them and check "
                        "against them")
    p.add_argument("--json", metavar="PATH")
    p.set_defaults(func=run_fill)


def run_fill(args: argparse.Namespace) -> int:
    from .._io import check_outputs, write_json
    from ..data.trec import read_qrels, read_runs
    from ..evaluation.calibration import calibrate, fill_gaps, scenarios, sources_path, validate_fill, write_filled

    # Nothing is written until everything has been read, checked and computed: a refused option or
    # input leaves no output behind, and no output may overwrite an input.
    check_outputs({"--out": args.out, "--out's .sources.tsv": sources_path(args.out), "--json": args.json},
                  inputs=[args.human, args.llm, *args.runs])
    human, llm = read_qrels(args.human), read_qrels(args.llm)
    runs = read_runs(args.runs)
    cal = calibrate(human, llm, args.min_overlap)
    result = fill_gaps(human, llm, runs, cal, args.k, args.tie_policy, args.seed)
    rep = scenarios(runs, {"Human-only": human, "LLM fills gaps": result.qrels, "Full LLM": llm},
                    args.k, args.tie_policy, args.seed)
    val = None
    if args.validate is not None:
        val = validate_fill(human, llm, runs, args.validate, args.k, args.min_overlap, args.tie_policy, args.seed)

    qrels_path, side = write_filled(result, args.out)
    out = {"calibration": cal.to_json(), "filled": {"path": str(qrels_path), "sources": str(side),
           "n_human": result.n_human, "n_filled": result.n_filled, "n_unfilled": result.n_unfilled},
           "scenarios": rep.to_json(), "settings": {"k": args.k, "tie_policy": args.tie_policy, "seed": args.seed}}
    if val is not None:
        out["validation"] = val.to_json()
    if args.json:
        write_json(args.json, out)

    print("calibration (LLM grade → human scale):")
    print(cal.to_frame().to_string())
    print(f"\n{result.n_human} human labels + {result.n_filled} calibrated LLM labels "
          f"({result.n_unfilled} top-{args.k} items left unjudged by both) → {qrels_path} (sources: {side})")
    print(f"\naverage Judged@{args.k} over systems:")
    print(rep.judged.round(4).to_string())
    for m, tau in rep.tau.items():
        print(f"\nKendall τ-b between scenario rankings on {m}:")
        print(tau.round(3).to_string())
    for w in rep.warnings:
        print(f"\nwarning: {w}")
    if val is not None:
        print(f"\nvalidation: hid {val.n_hidden} human labels ({args.validate:.0%}), "
              f"LLM covered {val.n_hidden_filled}")
        if val.agreement:
            a = val.agreement
            print(f"  filled vs hidden human: κ {a['cohen_kappa']:.3f}, "
                  f"α ordinal {a['krippendorff_alpha_ordinal']:.3f}, pairwise agree {a['pairwise']['agree']:.3f}")
        for m in val.tau_with_fill:
            print(f"  τ vs all human labels on {m}: without fill {val.tau_without_fill[m]:.3f}, "
                  f"with fill {val.tau_with_fill[m]:.3f}")
    if args.json:
        print(f"\nJSON: {args.json}")
    return 0
