"""Per-family training benchmark on MovieLens-100K: time, peak memory, ties, Judged@100.

    .venv/bin/python benchmarks/bench_systems.py                      # all18 grid, registered epochs
    .venv/bin/python benchmarks/bench_systems.py --grid quick         # the demo's grid, plus its total time
    .venv/bin/python benchmarks/bench_systems.py --systems BPR,EASE --repeats 3 --epochs 2

Each system trains in its own process (so peak RSS is that system's alone; the ``baseline`` row
is a process that imports torch + RecBole and loads the data without training). Columns:
train s (median over repeats, training + scoring + export), peak MB (max RSS), ties (share of
users whose top-100 held equal scores before the tie policy), Judged@100 and nDCG@10 under the
historical qrels (binary labels from the test part of the global time split), computed with
ir-measures on the exported run.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(args) -> None:
    import ir_measures
    from ir_measures import Judged, nDCG

    from recjudge.data.collections import load_collection
    from recjudge.data.splits import historical_qrels, make_split
    from recjudge.data.trec import read_run
    from recjudge.systems import train_systems
    from recjudge.systems._compat import import_recbole

    split = make_split(load_collection("ml-100k"), "global_time")
    import_recbole()
    if args.child == "baseline":
        out = {"seconds": 0.0}
    else:
        t0 = time.perf_counter()
        res = train_systems(split, systems=[args.child], out_dir=args.out, k=100, epochs=args.epochs, force=True,
                            progress=lambda m: None)[0]
        seconds = time.perf_counter() - t0
        if res.status != "trained":
            out = {"error": res.error, "seconds": seconds}
        else:
            qrels = historical_qrels(split, "binary").to_dict()
            run: dict[str, dict[str, float]] = {}
            for row in read_run(res.run_path):
                run.setdefault(row.qid, {})[row.docid] = row.score
            agg = ir_measures.calc_aggregate([Judged @ 100, nDCG @ 10], qrels, run)
            out = {"seconds": seconds, "tied": res.tied_user_share, "judged100": agg[Judged @ 100],
                   "ndcg10": agg[nDCG @ 10], "users": res.users}
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(out))


def run_child(name: str, out: str, epochs: int | None) -> dict:
    cmd = [sys.executable, __file__, "--child", name, "--out", out]
    if epochs is not None:
        cmd += ["--epochs", str(epochs)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grid", default="all18")
    p.add_argument("--systems", help="comma-separated names (overrides --grid)")
    p.add_argument("--epochs", type=int, help="override neural epochs")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    from recjudge.systems import GRIDS, SYSTEMS

    names = args.systems.split(",") if args.systems else list(GRIDS[args.grid])
    with tempfile.TemporaryDirectory() as tmp:
        base = run_child("baseline", tmp, None)
        print(f"ML-100K, global time split (0.8), k=100, torch threads=1, epochs={args.epochs or 'registered'}, "
              f"repeats={args.repeats}; baseline process (torch + RecBole + data): {base.get('peak_mb', 0):.0f} MB")
        header = f"{'system':<14}{'family':<12}{'epochs':>7}{'train s':>9}{'peak MB':>9}{'ties':>7}" \
                 f"{'Judged@100':>12}{'nDCG@10':>9}"
        print(header)
        print("-" * len(header))
        total = 0.0
        for name in names:
            runs = [run_child(name, tmp, args.epochs) for _ in range(args.repeats)]
            ok = [r for r in runs if "error" not in r]
            cfg = SYSTEMS[name]
            ep = args.epochs if args.epochs is not None and cfg.epochs is not None else (cfg.epochs or "-")
            if not ok:
                print(f"{name:<14}{cfg.model:<12}{ep!s:>7}  FAILED: {runs[0]['error']}")
                continue
            sec = statistics.median(r["seconds"] for r in ok)
            total += sec
            r = ok[0]
            print(f"{name:<14}{cfg.model:<12}{ep!s:>7}{sec:>9.1f}{max(x['peak_mb'] for x in ok):>9.0f}"
                  f"{r['tied']:>7.0%}{r['judged100']:>12.4f}{r['ndcg10']:>9.4f}", flush=True)
        print("-" * len(header))
        print(f"total train+export time: {total:.0f} s (sum of medians; excludes ~10 s of imports per process)")


if __name__ == "__main__":
    main()
