"""The fallback's cost: a measure only ir-measures computes, through recjudge next to ``ir_measures.calc_aggregate``.

    .venv/bin/python benchmarks/bench_fallback.py QRELS RUNS_FOLDER [--measure infAP] [--repeats 3]

Both sides read the same files: recjudge through :func:`recjudge.evaluation.measures.score_runs`
(its reader, the tie policy, the engine, and ir-measures' providers for the measure), ir-measures
through ``read_trec_qrels`` / ``read_trec_run`` and ``calc_aggregate`` run by run. Prints CPU seconds
(``process_time``: every thread), medians over ``--repeats``; the fallback's own part — building
ir-measures' run dicts from the engine's runs — timed apart; and the largest difference of a system mean.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    import ir_measures

    import recjudge.evaluation.measures.reference as reference
    from recjudge.data.trec import read_qrels, run_paths
    from recjudge.evaluation.measures import score_runs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("qrels")
    ap.add_argument("runs")
    ap.add_argument("--measure", default="infAP")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    paths, m = run_paths(a.runs), ir_measures.parse_measure(a.measure)
    own = [0.0]
    run_dict = reference.Reference._run_dict

    def timed_dict(self, run):
        t = time.thread_time()  # this thread's alone: the reading thread runs meanwhile
        out = run_dict(self, run)
        own[0] += time.thread_time() - t
        return out

    reference.Reference._run_dict = timed_dict

    def via_recjudge():
        scored = score_runs(paths, {"ref": read_qrels(a.qrels)}, [a.measure])
        return scored.matrices["ref"][str(m)].mean().to_dict()

    def via_ir_measures():
        qrels = list(ir_measures.read_trec_qrels(a.qrels))
        return {n: ir_measures.calc_aggregate([m], qrels, ir_measures.read_trec_run(str(p)))[m] for n, p in paths.items()}

    def timed(fn):
        cpu, res = [], None
        for _ in range(a.repeats):
            t = time.process_time()
            res = fn()
            cpu.append(time.process_time() - t)
        return res, statistics.median(cpu)

    mine, c_mine = timed(via_recjudge)
    theirs, c_theirs = timed(via_ir_measures)
    fallback = own[0] / a.repeats
    diff = max(abs(mine[n] - theirs[n]) for n in mine)
    print(f"{a.measure} over {len(paths)} runs: recjudge {c_mine:.2f} s CPU, ir_measures {c_theirs:.2f} s CPU; "
          f"the fallback's own part {fallback:.3f} s ({fallback / c_theirs:.1%} of ir_measures'); "
          f"largest system-mean difference {diff:.2e}")


if __name__ == "__main__":
    main()
