"""Speed of the per-query measure matrix: recjudge's numpy path next to plain ir-measures.

    .venv/bin/python benchmarks/bench_measures.py [--users 51,1000,10000] [--systems 52]
        [--depth 100] [--judged 600] [--repeats 3] [--skip-reference-above N]

For each size it generates synthetic data (``--systems`` tie-free runs of top-``--depth`` per user,
``--judged`` graded labels 0-4 per user), then times, side by side in this process:

- ir-measures 0.4.3: one ``ir_measures.evaluator([measure], qrels)`` per measure (timed) and
  ``evaluator.iter_calc(run)`` per run (timed); turning a run frame into the dict ir-measures
  takes is done once per run and *not* timed (reported separately), which favours ir-measures;
- recjudge: ``per_query_matrix(runs, qrels, measures)`` on the four together, from the ``Run``
  frames (id encoding, ranking and the qrels join included), split into the time inside each
  measure and the shared rest; ``--alone`` also times a call per measure.

It checks that both give the same per-query values (max abs diff) and prints one table. Medians
over ``--repeats`` for recjudge; ir-measures runs ``--repeats`` times only up to 1,000 users and
once above (minutes at 10,000 users), or not at all above ``--skip-reference-above``.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time

import numpy as np
import pandas as pd

import recjudge.evaluation.measures as measures_module
from recjudge.data.trec import Qrels, Run
from recjudge.evaluation.measures import DEFAULT_MEASURES, measure_key, parse_measures, per_query_matrix

N_ITEMS = 100_003  # prime: base + step * k (mod N) gives distinct items per user
LABEL_P = (0.85, 0.06, 0.04, 0.03, 0.02)  # labels 0..4: ~90 of 600 judged items relevant


def synthetic(users: int, systems: int, depth: int = 100, judged: int = 600, seed: int = 0):
    """``systems`` tie-free runs (as ``resolve_ties`` leaves them) and graded qrels."""
    it = iter_synthetic(users, systems, depth, judged, seed)
    qrels = next(it)
    return dict(it), qrels


def iter_synthetic(users: int, systems: int, depth: int = 100, judged: int = 600, seed: int = 0):
    """:func:`synthetic` one piece at a time: first the qrels, then ``(name, run)`` per system, so a
    caller writing them to files holds one run at a time (the same data, draw for draw)."""
    rng = np.random.default_rng(seed)
    pool = judged + 2 * depth  # candidates per user and system: the judged items + fresh unjudged ones
    if judged + systems * 2 * depth >= N_ITEMS:
        raise SystemExit("too many systems for the synthetic catalogue")
    qids = np.array([f"u{u}" for u in range(users)], dtype=object)
    qids.sort()  # runs and qrels in qid string order, as resolve_ties writes them
    vocab = np.array([f"i{i}" for i in range(N_ITEMS)], dtype=object)  # shared objects, as read_csv interns
    base = rng.integers(0, N_ITEMS, users)[:, None]
    step = rng.integers(1, N_ITEMS, users)[:, None]

    def items(offsets: np.ndarray) -> np.ndarray:
        return (base + step * offsets[None, :]) % N_ITEMS

    judged_items = items(np.arange(judged))
    labels = rng.choice(len(LABEL_P), size=(users, judged), p=LABEL_P)
    yield Qrels("synthetic", pd.DataFrame({
        "qid": np.repeat(qids, judged), "iteration": "0",
        "docid": vocab[judged_items.ravel()], "label": labels.ravel().astype(np.int64)}))
    for s in range(systems):
        quality = rng.uniform(0.0, 1.0)
        bias = rng.uniform(0.0, 2.5)  # how much the system favours items outside the judged pool
        fresh = items(judged + s * 2 * depth + np.arange(2 * depth))
        cand = np.concatenate([judged_items, fresh], axis=1)
        score = np.concatenate([quality * labels, np.full((users, 2 * depth), bias)], axis=1)
        score += rng.standard_normal((users, pool))
        top = np.argpartition(-score, depth - 1, axis=1)[:, :depth]
        top = np.take_along_axis(top, np.argsort(-np.take_along_axis(score, top, axis=1), axis=1), axis=1)
        del score
        frame = pd.DataFrame({
            "qid": np.repeat(qids, depth),
            "docid": vocab[np.take_along_axis(cand, top, axis=1).ravel()],
            "rank": np.tile(np.arange(1, depth + 1), users),
            "score": np.tile(np.arange(depth, 0, -1).astype(np.float64), users),
            "tag": f"sys{s:02d}",
        })
        yield f"sys{s:02d}", Run(f"sys{s:02d}", frame, tie_policy="hash", seed=0)


def reference(runs: dict[str, Run], qrels: Qrels, measures, index: list[str]):
    """Plain ir-measures: seconds per measure, per-query values, and the untimed conversion time."""
    import ir_measures

    row = {q: i for i, q in enumerate(index)}
    qf = qrels.frame
    qrels_dict: dict = {}
    for q, d, lab in zip(qf.qid.to_numpy(), qf.docid.to_numpy(), qf.label.to_numpy()):
        qrels_dict.setdefault(q, {})[d] = int(lab)
    seconds = {measure_key(m): 0.0 for m in measures}
    values = {measure_key(m): np.zeros((len(index), len(runs))) for m in measures}
    evaluators = {}
    for m in measures:
        t0 = time.perf_counter()
        evaluators[measure_key(m)] = ir_measures.evaluator([m], qrels_dict)
        seconds[measure_key(m)] += time.perf_counter() - t0
    convert = 0.0
    for col, run in enumerate(runs.values()):
        t0 = time.perf_counter()
        f = run.frame
        run_dict: dict = {}
        for q, d, s in zip(f.qid.to_numpy(), f.docid.to_numpy(), f.score.to_numpy().tolist()):
            run_dict.setdefault(q, {})[d] = s
        convert += time.perf_counter() - t0
        for key, ev in evaluators.items():
            out = values[key]
            t0 = time.perf_counter()
            for metric in ev.iter_calc(run_dict):
                out[row[metric.query_id], col] = metric.value
            seconds[key] += time.perf_counter() - t0
        del run_dict
        gc.collect()
    return seconds, values, convert


def median_time(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


class MeasureClock:
    """Time spent inside each numpy measure function during a per_query_matrix call."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._saved = dict(measures_module.MEASURE_FUNCTIONS)

    def __enter__(self):
        def timed(name, fn):
            def wrapper(m, rows, ctx):
                t0 = time.perf_counter()
                out = fn(m, rows, ctx)
                key = measure_key(m)
                self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - t0
                return out
            return wrapper
        for name, fn in self._saved.items():
            measures_module.MEASURE_FUNCTIONS[name] = timed(name, fn)
        return self

    def __exit__(self, *exc):
        measures_module.MEASURE_FUNCTIONS.update(self._saved)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", default="51,1000,10000", help="comma-separated user counts")
    ap.add_argument("--systems", type=int, default=52)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--judged", type=int, default=600)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-reference-above", type=int, default=None, metavar="N",
                    help="do not run ir-measures above N users")
    ap.add_argument("--alone", action="store_true",
                    help="time recjudge on each measure alone also above 1,000 users (each call encodes again)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    measures = parse_measures(DEFAULT_MEASURES)
    keys = [measure_key(m) for m in measures]
    shared, total = "shared: ids, ranking, join", "all four"
    rows = []
    for users in [int(u) for u in args.users.split(",")]:
        t0 = time.perf_counter()
        runs, qrels = synthetic(users, args.systems, args.depth, args.judged, args.seed)
        print(f"[{users} users] generated {args.systems} runs x {users} users x top-{args.depth}, "
              f"{args.judged} judged per user in {time.perf_counter() - t0:.1f} s", flush=True)
        mine: dict = {}
        walls, clocks = [], []
        for _ in range(args.repeats):
            with MeasureClock() as clock:
                wall, matrix = median_time(lambda: per_query_matrix(runs, qrels, measures), 1)
            walls.append(wall)
            clocks.append(clock.seconds)
        mine[total] = statistics.median(walls)
        for key in keys:
            mine[key] = statistics.median(c[key] for c in clocks)
        mine[shared] = statistics.median(w - sum(c.values()) for w, c in zip(walls, clocks))
        alone: dict = {}
        if args.alone or users <= 1000:
            for m, key in zip(measures, keys):
                alone[key], _ = median_time(lambda m=m: per_query_matrix(runs, qrels, [m]), args.repeats)
        print(f"[{users} users] recjudge: " + ", ".join(f"{k} {v:.3f} s" for k, v in mine.items()), flush=True)
        ref_s: dict = {}
        diff: dict = {}
        if args.skip_reference_above is None or users <= args.skip_reference_above:
            index = list(matrix[keys[0]].index)
            reps = args.repeats if users <= 1000 else 1
            results = [reference(runs, qrels, measures, index) for _ in range(reps)]
            for key in keys:
                ref_s[key] = statistics.median(r[0][key] for r in results)
                diff[key] = float(np.abs(matrix[key].to_numpy() - results[-1][1][key]).max())
            ref_s[total] = sum(ref_s[k] for k in keys)
            diff[total] = max(diff[k] for k in keys)
            print(f"[{users} users] ir-measures ({reps}x): " + ", ".join(f"{k} {v:.2f} s" for k, v in ref_s.items())
                  + f"; untimed dict conversion {statistics.median(r[2] for r in results):.1f} s", flush=True)
        for key in [shared, *keys, total]:
            rows.append((key, users, ref_s.get(key), mine[key], alone.get(key), diff.get(key)))
        del runs, qrels, matrix
        gc.collect()
    print()
    print(f"{args.systems} systems x top-{args.depth}, {args.judged} judged per user (labels 0-4, ~15% > 0). "
          f"recjudge: one per_query_matrix call on all four measures, median of {args.repeats}; per-measure "
          f"rows = time inside that measure, the shared row = the rest of the call; 'alone' = a call on that "
          f"measure only (speedup of a measure uses it). ir-measures: per measure, "
          f"median of {args.repeats} up to 1,000 users, once above. {os.cpu_count()} cores shared with other "
          f"work (load average {os.getloadavg()[0]:.2f} at the end).")
    cols = ["measure", "users", "ir-measures s", "recjudge s", "alone s", "speedup", "max abs diff"]
    widths = [max(len(c), 26 if i == 0 else 0) for i, c in enumerate(cols)]
    print("| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cols, widths))) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for key, users, ref, me, me_alone, d in rows:
        # speedup: all four = ir-measures sum / one call; a measure = ir-measures / a call on it alone
        base = me if key == total else me_alone
        cells = [key, str(users), f"{ref:.2f}" if ref is not None else "-", f"{me:.3f}",
                 f"{me_alone:.3f}" if me_alone is not None else "-",
                 f"{ref / base:.1f}x" if ref is not None and base else "-",
                 f"{d:.1e}" if d is not None and key != shared else "-"]
        print("| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                for i, (c, w) in enumerate(zip(cells, widths))) + " |")


if __name__ == "__main__":
    main()
