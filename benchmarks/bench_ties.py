"""Speed of the tie audit on a synthetic popularity-like run (every user has ties in the top 100).

    .venv/bin/python benchmarks/bench_ties.py [--users 2000] [--depth 100] [--repeats 3]

Prints one table: median seconds per step, ours next to ir-measures (resolve_ties, then
recjudge.evaluation.measures.per_query_matrix with backend="ir_measures") where both compute the same thing,
with the ratio and the largest difference of the values. The first rows are the per-run tie stages
of ``recjudge compare`` (score order and tie share; the hash policy), each a linear pass plus one
sort of the tied rows. ``--users 10000`` is the 10k users × top-100 size of one system
in a 52-system audit.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
import pandas as pd

from recjudge.evaluation import ties
from recjudge.evaluation.ties import ranked, treatments
from recjudge.data.trec import Qrels, Run
from recjudge.evaluation.measures import per_query_matrix
from recjudge.evaluation.ties.policy import resolve_ties, score_order, tie_free, tied_user_share

MEASURES = ("Hit@10", "nDCG@10", "nDCG@100")


def synthetic(users: int, depth: int, judged: int, seed: int = 0) -> tuple[Run, Qrels]:
    rng = np.random.default_rng(seed)
    n_items = max(5 * depth, 5000)
    # heavy-tailed integer counts: long runs of equal scores, as popularity gives
    pop = np.sort(rng.zipf(1.3, n_items).clip(max=500))[::-1].astype(float)
    qid = np.repeat([f"u{i}" for i in range(users)], depth)
    items = np.concatenate([rng.choice(n_items, depth, replace=False) for _ in range(users)])
    run = Run("pop", pd.DataFrame({
        "qid": qid, "docid": [f"i{j}" for j in items], "rank": np.tile(np.arange(1, depth + 1), users),
        "score": pop[items], "tag": "pop"}))
    judged_items = np.concatenate([rng.choice(n_items, judged, replace=False) for _ in range(users)])
    qrels = Qrels("q", pd.DataFrame({
        "qid": np.repeat([f"u{i}" for i in range(users)], judged), "iteration": "0",
        "docid": [f"i{j}" for j in judged_items], "label": rng.integers(0, 4, users * judged)}))
    return run, qrels


def median_time(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=2000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--judged", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--permutations", type=int, default=20)
    args = ap.parse_args()

    run, qrels = synthetic(args.users, args.depth, args.judged)
    specs = ties.parse_tie_measures(MEASURES)
    rows = []

    def share():
        so = score_order(run)
        return so, tied_user_share(run, 100, order=so)

    t_share, (so, tied) = median_time(share, args.repeats)
    rows.append((f"compare per run: score order + tie share ({tied:.0%} of users tie in the top 100)", t_share,
                 None, None, None))
    t_policy, _ = median_time(lambda: tie_free(run, "hash", 0, so), args.repeats)
    rows.append(("compare per run: the hash tie policy (one sort of the tied rows)", t_policy, None, None, None))

    t_rank, r = median_time(lambda: ranked.Ranked(run, qrels), args.repeats)
    rows.append(("sort, split into tie blocks, join qrels (once per run)", t_rank, None, None, None))

    ev = treatments.Evaluator(r, specs)
    t_ours, ours = median_time(
        lambda: treatments.per_user_values(r, specs, ev, [r.treatment(r.sub_rows, "hash", seed=0)])[0], args.repeats)

    def reference():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            resolved = resolve_ties(run, "hash", 0)
        mats = per_query_matrix({"pop": resolved}, qrels, [s.key for s in specs], backend="ir_measures")
        return np.vstack([mats[s.key]["pop"].to_numpy() for s in specs])

    t_ref, ref = median_time(reference, max(1, args.repeats - 1))
    rows.append(("one hash order, 3 measures: ours vs ir-measures", t_ours, t_ref, t_ref / t_ours,
                 float(np.abs(ours - ref).max())))

    t_exp, exact = median_time(lambda: np.vstack([treatments._expected_closed(r, s) for s in specs]), args.repeats)

    def seeds_ours():
        return np.stack([treatments.per_user_values(r, specs, ev, [r.treatment(r.sub_rows, "hash", seed=s)])[0]
                         for s in range(args.seeds)]).mean(axis=0)

    t_seeds, seed_mean = median_time(seeds_ours, 1)
    rows.append((f"expectation: exact closed form vs mean of {args.seeds} hash seeds (ours)", t_exp, t_seeds,
                 t_seeds / t_exp, float(np.abs(exact.mean(axis=1) - seed_mean.mean(axis=1)).max())))
    rows.append((f"expectation: exact closed form vs {args.seeds} hash seeds in ir-measures "
                 f"({args.seeds} × measured order)", t_exp, t_ref * args.seeds, t_ref * args.seeds / t_exp, None))

    t_audit, audit = median_time(lambda: ties.sensitivity_ties(
        [run], qrels, MEASURES, seeds=args.seeds, permutations=args.permutations), 1)
    rows.append((f"full audit: prevalence, 4 treatments, {args.seeds} seeds, {args.permutations} perms × 2",
                 t_audit, None, None, None))

    print(f"run: {args.users} users × top-{args.depth}, {args.judged} judged per user; "
          f"measures {', '.join(MEASURES)}; median of {args.repeats}")
    header = ("step", "ours (s)", "other (s)", "other / ours", "max |Δ value|")
    table = [header] + [
        (name, f"{a:.4f}", "—" if b is None else f"{b:.3f}", "—" if c is None else f"{c:.1f}×",
         "—" if d is None else f"{d:.1e}") for name, a, b, c, d in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for i, row in enumerate(table):
        print("  ".join(cell.ljust(w) if j == 0 else cell.rjust(w) for j, (cell, w) in enumerate(zip(row, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    p = audit.runs[0].prevalence
    print(f"\nprevalence: tied users {p.tied:.1%}, tie block crossing top-10 {p.crossing_top[0]:.1%}, "
          f"tied rows {p.tied_rows:.1%}, largest block {p.largest_block}")


if __name__ == "__main__":
    main()
