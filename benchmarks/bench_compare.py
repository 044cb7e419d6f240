"""End-to-end `recjudge compare` as a user runs it, next to ir-measures on the same files.

    .venv/bin/python benchmarks/bench_compare.py [--users 1000] [--systems 52] [--depth 100]
        [--judged 600] [--repeats 3] [--reference-repeats 1] [--bootstrap 1000] [--skip-reference]
        [--keep DIR] [--reuse] [--no-engine] [--no-stages] [--no-readers] [--fallback]

Writes ``--systems`` run files (top-``--depth`` per user, distinct scores: no ties, so both tools
see one order) and two qrels files (reference and candidate, 0-4 labels) to a temp folder, one run
at a time (100,000 users fit), then times, each in a fresh interpreter (start-up and file reading
included):

- recjudge: ``recjudge compare --runs DIR --reference R --candidate C --json OUT`` (four default
  measures for both label sets, tie share, tie resolution, 1,000 bootstrap resamples);
- ir-measures: a script that reads every run with ``ir_measures.read_trec_run`` and computes the
  same four measures under both qrels with ``ir_measures.calc_aggregate``-equivalent per-query
  values (one evaluator per measure and label set), then the mean per system.

``compare`` reads and scores the runs one after another (``recjudge.evaluation.measures.score_runs``:
the next file is read in a second thread while the current run is scored), so its peak memory does
not grow with ``--systems``. Also times that engine called directly (``--no-engine`` skips it), which
shows what the command adds around it. Prints wall time (median over ``--repeats``; ir-measures over
``--reference-repeats``; ``--fallback``: once more without the compiled module, ``RECJUDGE_NATIVE=0``),
peak RSS of the child process, the speed ratios, throughput (run lines per
second of the whole command) and the largest difference between each tool's system means and
ir-measures'; then the read throughput of each reader recjudge has (the compiled scanner, pyarrow,
pandas: every run file read in a fresh interpreter, ``RECJUDGE_READER`` choosing); then the
per-stage split of the same work in one fresh interpreter (import, reading qrels, building the
judgments, then summed over the runs: waiting for the reading thread, tie share, ensure_tie_free,
the docid lookup and each label set's matrices; τ with the bootstrap), from
``score_runs(timings=…)``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


MEASURES = ["Judged@100", "Compat(p=0.95)", "nDCG@100", "Bpref"]

IR_MEASURES_SCRIPT = r"""
import json, sys
from pathlib import Path
import ir_measures

runs_dir, ref_path, cand_path, out = sys.argv[1:5]
measures = [ir_measures.parse_measure(m) for m in json.loads(sys.argv[5])]
result = {}
for label_name, path in (("reference", ref_path), ("candidate", cand_path)):
    qrels = {}
    for q in ir_measures.read_trec_qrels(path):
        qrels.setdefault(q.query_id, {})[q.doc_id] = q.relevance
    evaluators = {str(m): ir_measures.evaluator([m], qrels) for m in measures}
    result[label_name] = {}
    for f in sorted(Path(runs_dir).iterdir()):
        run = {}
        for r in ir_measures.read_trec_run(str(f)):
            run.setdefault(r.query_id, {})[r.doc_id] = r.score
        means = {}
        for key, ev in evaluators.items():
            total = 0.0
            for metric in ev.iter_calc(run):
                total += metric.value
            means[key] = total / len(qrels)  # trec_eval -c: a query the run misses counts 0
        result[label_name][f.stem] = means
Path(out).write_text(json.dumps(result))
"""


STREAM_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
from recjudge._io import read_concurrently
from recjudge.data.trec import read_qrels, run_paths
from recjudge.evaluation import metaeval
from recjudge.evaluation.measures import measure_key, parse_measures, score_runs
runs_dir, ref_path, cand_path, out = sys.argv[1:5]
measures, n_boot = json.loads(sys.argv[5]), int(sys.argv[6])
timings = {"import": time.perf_counter() - t0}
t = time.perf_counter()
ref, cand = read_concurrently(read_qrels, [ref_path, cand_path])  # as compare reads them
labels = {"reference": ref, "candidate": cand}
timings["read qrels"] = time.perf_counter() - t
scored = score_runs(run_paths(runs_dir), labels, measures, timings=timings)  # adds its stages, summed over runs
t = time.perf_counter()
ref_m, cand_m = scored.matrices["reference"], scored.matrices["candidate"]
# as compare does: one set of resamples for every measure
weights = metaeval.BootstrapWeights.over(metaeval.SystemTable("reference", ref_m),
                                         metaeval.SystemTable("candidate", cand_m), 0, n_boot)
for k in ref_m:
    metaeval._agreement(k, ref_m[k], cand_m[k], n_boot, 0, weights=weights)
timings["tau + bootstrap"] = time.perf_counter() - t
keys = {m: measure_key(p) for m, p in zip(measures, parse_measures(measures))}
means = {label: {m: metaeval.system_means(mats[k]) for m, k in keys.items()} for label, mats in scored.matrices.items()}
systems = [{"system": s, "reference": {m: float(means["reference"][m][s]) for m in keys},
            "candidates": {"candidate": {"scores": {m: float(means["candidate"][m][s]) for m in keys}}}}
           for s in scored.tied_user_share]
json.dump({"systems": systems, "timings": timings}, open(out, "w"))
"""

READ_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
from recjudge.data.trec import read_run, run_paths
rows = sum(len(read_run(path, name=name)) for name, path in run_paths(sys.argv[1]).items())
print(json.dumps({"rows": rows, "seconds": time.perf_counter() - t0}))
"""


@contextlib.contextmanager
def environment(name: str, value: str):
    """``name=value`` in the environment the timed children inherit, for the block."""
    os.environ[name] = value
    try:
        yield
    finally:
        del os.environ[name]


def stages(run_dir: Path, ref_path: Path, cand_path: Path, n_boot: int, out: Path) -> dict[str, float]:
    """Seconds per stage of the compare work: the engine script once more, in a fresh interpreter."""
    cmd = [sys.executable, "-c", STREAM_SCRIPT, str(run_dir), str(ref_path), str(cand_path), str(out),
           json.dumps(MEASURES), str(n_boot)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.read_text())["timings"]


def write_files(folder: Path, users: int, systems: int, depth: int, judged: int) -> tuple[Path, Path, Path, int]:
    from bench_measures import iter_synthetic

    from recjudge.data.trec import Qrels, write_qrels, write_run

    pieces = iter_synthetic(users, systems, depth, judged, seed=0)
    reference = next(pieces)
    # the candidate labels the same pairs as the reference, with other grades
    rng = np.random.default_rng(7)
    cand = reference.frame.copy()
    cand["label"] = np.clip(cand["label"].to_numpy() + rng.integers(-1, 2, len(cand)), 0, 4)
    ref_path, cand_path = folder / "reference.qrels", folder / "candidate.qrels"
    write_qrels(reference, ref_path)
    write_qrels(Qrels("candidate", cand), cand_path)
    del reference, cand
    run_dir = folder / "runs"
    lines = 0
    for name, run in pieces:  # one run in memory at a time
        write_run(run, run_dir / f"{name}.run")
        lines += len(run)
    return run_dir, ref_path, cand_path, lines


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in GB) of one child process, measured on that child alone."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed ({proc.returncode}):\n{stderr[-3000:]}")
    return wall, usage.ru_maxrss / 1024**2  # Linux reports KiB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--systems", type=int, default=52)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--judged", type=int, default=600)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--reference-repeats", type=int, default=1,
                    help="timed runs of ir-measures (minutes each at 52 × 1k; the median is reported)")
    ap.add_argument("--skip-reference", action="store_true", help="do not run ir-measures")
    ap.add_argument("--reuse", action="store_true", help="with --keep: use the files already in DIR")
    ap.add_argument("--engine", action=argparse.BooleanOptionalAction, default=True,
                    help="also time score_runs called directly (the engine compare runs, without the CLI)")
    ap.add_argument("--no-stages", dest="stages", action="store_false", help="skip the per-stage split")
    ap.add_argument("--no-readers", dest="readers", action="store_false",
                    help="skip the read throughput of each reader")
    ap.add_argument("--fallback", action="store_true",
                    help="also time compare without the compiled module (RECJUDGE_NATIVE=0: what an install "
                         "without a C compiler runs), once")
    ap.add_argument("--keep", metavar="DIR", help="write the generated files here and keep them")
    ap.add_argument("--write-only", nargs=5, metavar=("DIR", "USERS", "SYSTEMS", "DEPTH", "JUDGED"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write_only:
        folder, *sizes = args.write_only
        write_files(Path(folder), *(int(x) for x in sizes))
        return

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-compare-"))
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if args.reuse and args.keep and (folder / "runs").is_dir():
        run_dir, ref_path, cand_path = folder / "runs", folder / "reference.qrels", folder / "candidate.qrels"
        n_lines = sum(f.read_bytes().count(b"\n") for f in run_dir.iterdir())
        print(f"data: {n_lines:,} run lines reused from {folder}")
    else:
        # written by a child: a parent holding the data would lend its pages to every timed child it
        # forks, and the peak RSS would count them
        subprocess.run([sys.executable, __file__, "--write-only", str(folder), str(args.users), str(args.systems),
                        str(args.depth), str(args.judged)], check=True)
        run_dir, ref_path, cand_path = folder / "runs", folder / "reference.qrels", folder / "candidate.qrels"
        n_lines = args.systems * args.users * args.depth
        print(f"data: {args.systems} runs × {args.users} users × top-{args.depth} = {n_lines:,} run lines, "
              f"{args.judged} judged per user; written in {time.perf_counter() - t0:.1f} s to {folder}")
    recjudge = [str(Path(sys.executable).with_name("recjudge")), "compare", "--runs", str(run_dir),
                "--reference", str(ref_path), "--candidate", str(cand_path), "--bootstrap", str(args.bootstrap),
                "--json", str(folder / "recjudge.json")]
    rj = [timed(recjudge) for _ in range(args.repeats)]
    rows = [("recjudge compare", statistics.median(w for w, _ in rj), max(m for _, m in rj))]
    if args.fallback:
        with environment("RECJUDGE_NATIVE", "0"):
            wall, peak = timed(recjudge[:-1] + [str(folder / "fallback.json")])
        rows.append(("compare, no compiled module (once)", wall, peak))
    if args.engine:
        stream = [sys.executable, "-c", STREAM_SCRIPT, str(run_dir), str(ref_path), str(cand_path),
                  str(folder / "engine.json"), json.dumps(MEASURES), str(args.bootstrap)]
        en = [timed(stream) for _ in range(args.repeats)]
        rows.append(("engine, one run at a time (score_runs)", statistics.median(w for w, _ in en),
                     max(m for _, m in en)))
    diff = None
    if not args.skip_reference:
        ref_cmd = [sys.executable, "-c", IR_MEASURES_SCRIPT, str(run_dir), str(ref_path), str(cand_path),
                   str(folder / "ir_measures.json"), json.dumps(MEASURES)]
        ir = [timed(ref_cmd) for _ in range(max(1, args.reference_repeats))]
        ir_row = ("ir-measures (same 4 measures × 2 qrels)", statistics.median(w for w, _ in ir),
                  max(m for _, m in ir))
        diff = {name: compare_values(folder / f"{name}.json", folder / "ir_measures.json")
                for name in ("recjudge", "engine", "fallback") if (folder / f"{name}.json").exists()}
    print(f"\n{'command':<42} {'wall s (median)':>16} {'peak RSS GB':>12} {'lines/s':>12}")
    for name, wall, peak in rows:
        print(f"{name:<42} {wall:>16.2f} {peak:>12.2f} {n_lines / wall:>12,.0f}")
    if not args.skip_reference:
        print(f"{ir_row[0]:<42} {ir_row[1]:>16.2f} {ir_row[2]:>12.2f} {n_lines / ir_row[1]:>12,.0f}")
        for name, wall, _ in rows:
            print(f"speed-up of {name}: {ir_row[1] / wall:.1f}×")
        print("max |Δ system mean| vs ir-measures: " + ", ".join(f"{k} {v:.2e}" for k, v in diff.items()))
    print("(lines/s: run lines over the whole command's wall time, start-up included)")
    if args.readers:
        size = sum(f.stat().st_size for f in run_dir.iterdir())
        print(f"\nreading every run file ({size / 1e9:.2f} GB), fresh interpreter per reader, RECJUDGE_READER:")
        print(f"  {'reader':<10} {'wall s':>8} {'rows/s':>14} {'MB/s':>8} {'peak RSS GB':>12}")
        from recjudge.data.trec import available_readers

        for reader in available_readers():
            with environment("RECJUDGE_READER", reader):
                wall, peak = timed([sys.executable, "-c", READ_SCRIPT, str(run_dir)])
            print(f"  {reader:<10} {wall:>8.2f} {n_lines / wall:>14,.0f} {size / 1e6 / wall:>8.0f} {peak:>12.2f}")
    if not args.stages:
        return
    split = stages(run_dir, ref_path, cand_path, args.bootstrap, folder / "stages.json")
    total = sum(split.values())
    print(f"\nper-stage split (one fresh interpreter, run by run as compare does, {total:.2f} s in all):")
    for name, sec in split.items():
        print(f"  {name:<22} {sec:>8.2f} s {100 * sec / total:>5.1f}%")
    print(f"machine load (1 min): {os.getloadavg()[0]:.2f}")


def compare_values(recjudge_json: Path, ir_json: Path) -> float:
    """Largest |difference| of system means between the two tools, over both label sets."""
    import ir_measures

    mine = {row["system"]: row for row in json.loads(recjudge_json.read_text())["systems"]}
    theirs = json.loads(ir_json.read_text())
    ours_key = {str(ir_measures.parse_measure(m)): m for m in MEASURES}  # "Compat" -> "Compat(p=0.95)"
    worst = 0.0
    for label_set in ("reference", "candidate"):
        for system, means in theirs[label_set].items():
            row = mine[system]
            got = row["reference"] if label_set == "reference" else row["candidates"]["candidate"]["scores"]
            for key, value in means.items():
                worst = max(worst, abs(got[ours_key[key]] - value))
    return worst


if __name__ == "__main__":
    main()
