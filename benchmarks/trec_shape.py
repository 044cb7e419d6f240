"""TREC-shaped data for bench_compare.py: many queries, few judged, string docids, top-100 or top-1000 runs.

Shaped after TREC Deep Learning 2021 passage runs (477 queries × top-100, 53 judged by NIST, docids
like ``msmarco_passage_45_623131157``): every query has a pool of candidate passages of which each
system ranks ``depth``, so the runs share most of their docids; 53 queries are judged with grades
0-3 (NIST's pool: the top-10 of every run plus a sample deeper down, ~200 labels per query). A
fifth of the systems write scores rounded to two decimals (BM25-like runs tie often). Everything
comes from one seed.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import NamedTuple

TREC_MEASURES = ["nDCG@10", "AP(rel=2)@1000", "RR(rel=2)", "R(rel=2)@1000"]
TREC_VERSION = 1  # bump when the data a seed gives changes: --keep folders are regenerated
TOOLS = ("recjudge", "ir-measures", "ranx", "pytrec_eval")
COMPUTES = {
    "recjudge": "`evaluate --tie-policy trec_eval` (tie share and tie note included)",
    "ir-measures": "calc_aggregate per run, its own readers",
    "ranx": "evaluate per run (ndcg@10, map@1000-l2, mrr-l2, recall@1000-l2), runs read in Python",
    "pytrec_eval": "two evaluators per run (ndcg_cut_10; map_cut_1000, recip_rank, recall_1000 at level 2)",
}


class TrecShape(NamedTuple):
    queries: int = 477
    judged: int = 53
    systems: int = 63
    depth: int = 100
    seed: int = 0


def generate_trec(folder: Path, shape: TrecShape) -> dict:
    """Write runs/*.gz, qrels.txt and manifest.json into ``folder``; returns the manifest."""
    import numpy as np

    rng = np.random.default_rng(shape.seed)
    Q, D = shape.queries, shape.depth
    pool = min(10 * D, D + 1000)  # candidates per query: systems rank overlapping subsets of it
    qids = np.sort(rng.choice(np.arange(1, 1_200_000), Q, replace=False)).astype(str)
    shard = rng.integers(0, 70, size=(Q, pool))
    offset = rng.integers(0, 999_999_999, size=(Q, pool))
    docids = np.char.add(np.char.add(np.char.add("msmarco_passage_", np.char.zfill(shard.astype(str), 2)), "_"),
                         offset.astype(str))
    quality = rng.normal(size=(Q, pool))  # the latent relevance every system sees through noise
    runs = folder / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    top10 = np.zeros((Q, pool), dtype=bool)
    tied_runs = 0
    for s in range(shape.systems):
        name = f"sys{s:02d}"
        noise = rng.uniform(0.3, 1.5)
        score = quality + noise * rng.normal(size=(Q, pool))
        best = np.argsort(-score, axis=1, kind="stable")[:, :D]
        top = np.take_along_axis(score, best, axis=1) * 10 + 50
        if s % 5 == 0:
            top = np.round(top, 2 if s % 2 else 1)
            tied_runs += 1
        top10[np.arange(Q)[:, None], best[:, :10]] = True
        lines = []
        for q in range(Q):
            lines.extend(f"{qids[q]} Q0 {docids[q, j]} {r + 1} {top[q, r]:.6g} {name}\n"
                         for r, j in enumerate(best[q]))
        with gzip.open(runs / f"{name}.gz", "wt", compresslevel=1) as fh:
            fh.write("".join(lines))
    judged = np.sort(rng.choice(Q, shape.judged, replace=False))
    grade_cut = np.array([0.3, 1.0, 1.8])  # latent quality → grades 0-3, a few 3s per query
    out = []
    for q in judged:
        pooled = top10[q] | (rng.random(pool) < 0.15)
        for j in np.flatnonzero(pooled):
            grade = int(np.searchsorted(grade_cut, quality[q, j] + 0.3 * rng.normal()))
            out.append(f"{qids[q]} 0 {docids[q, j]} {grade}\n")
    (folder / "qrels.txt").write_text("".join(out))
    manifest = {"version": TREC_VERSION, "shape": shape._asdict(), "rows": Q * D * shape.systems,
                "judgments": len(out), "tied_runs": tied_runs}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return manifest


# --------------------------------------------------------------------------- the peers' scripts
# each: argv = runs folder, qrels, output JSON ({run: {measure: mean}}), the measures as JSON

_READ = """
import gzip, os, glob, json, sys
def rows(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as fh:
        for line in fh:
            f = line.split()
            if f:
                yield f
def read_run(path):
    run = {}
    for q, _, d, _, s, _ in rows(path):
        run.setdefault(q, {})[d] = float(s)
    return run
def read_qrels(path):
    qrels = {}
    for q, _, d, lab in rows(path):
        qrels.setdefault(q, {})[d] = int(lab)
    return qrels
runs, qrels_path, out = sys.argv[1:4]
files = sorted(glob.glob(os.path.join(runs, "*")))
def name(f):
    return os.path.basename(f).removesuffix(".gz")
"""

SCRIPTS = {
    "ir-measures": _READ + """
import ir_measures
measures = [ir_measures.parse_measure(m) for m in json.loads(sys.argv[4])]
qrels = list(ir_measures.read_trec_qrels(qrels_path))
res = {}
for f in files:
    agg = ir_measures.calc_aggregate(measures, qrels, ir_measures.read_trec_run(f))
    res[name(f)] = {str(m): v for m, v in agg.items()}
json.dump(res, open(out, "w"))
""",
    "ranx": _READ + """
from ranx import Qrels, Run, evaluate
names = {"ndcg@10": "nDCG@10", "map@1000-l2": "AP(rel=2)@1000", "mrr-l2": "RR(rel=2)", "recall@1000-l2": "R(rel=2)@1000"}
qrels = Qrels.from_dict(read_qrels(qrels_path))
res = {}
for f in files:
    got = evaluate(qrels, Run.from_dict(read_run(f)), list(names), make_comparable=True)
    res[name(f)] = {names[k]: float(v) for k, v in got.items()}
json.dump(res, open(out, "w"))
""",
    "pytrec_eval": _READ + """
import statistics, pytrec_eval
qrels = read_qrels(qrels_path)
graded = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
binary = pytrec_eval.RelevanceEvaluator(qrels, {"map_cut.1000", "recip_rank", "recall.1000"}, relevance_level=2)
names = {"ndcg_cut_10": "nDCG@10", "map_cut_1000": "AP(rel=2)@1000", "recip_rank": "RR(rel=2)", "recall_1000": "R(rel=2)@1000"}
res = {}
for f in files:
    run = read_run(f)
    per = {}
    for ev in (graded, binary):
        for q, values in ev.evaluate(run).items():
            per.setdefault(q, {}).update(values)
    res[name(f)] = {names[k]: statistics.fmean(v[k] for v in per.values()) for k in names}
json.dump(res, open(out, "w"))
""",
}


def command(tool: str, runs: Path, qrels: Path, out: Path) -> list[str]:
    import sys

    if tool == "recjudge":
        return [str(Path(sys.executable).with_name("recjudge")), "evaluate", "--runs", str(runs), "--qrels",
                str(qrels), "--measures", ",".join(TREC_MEASURES), "--tie-policy", "trec_eval", "-q",
                "--json", str(out)]
    return [sys.executable, "-c", SCRIPTS[tool], str(runs), str(qrels), str(out), json.dumps(TREC_MEASURES)]


def means(tool: str, path: Path) -> dict[str, dict[str, float]]:
    """{run: {measure: mean}} from a tool's output."""
    data = json.loads(path.read_text())
    if tool == "recjudge":
        return {row["system"]: row["scores"] for row in data["systems"]}
    return data


def max_diff(mine: dict, theirs: dict) -> dict[str, float]:
    worst: dict[str, float] = {}
    for run, values in theirs.items():
        for m, v in values.items():
            worst[m] = max(worst.get(m, 0.0), abs(mine[run][m] - v))
    return worst


def ensure_trec(folder: Path, shape: TrecShape) -> dict:
    """The manifest of the data in ``folder``, written by a child process unless it is there already."""
    import subprocess
    import sys

    manifest = folder / "manifest.json"
    if manifest.exists():
        m = json.loads(manifest.read_text())
        if m.get("version") == TREC_VERSION and m.get("shape") == shape._asdict():
            return m
    subprocess.run([sys.executable, __file__, str(folder), json.dumps(shape._asdict())], check=True)
    return json.loads(manifest.read_text())


def bench_trec(folder: Path, shapes: list[TrecShape], rounds: int, skipped: set[str], run_child, missing) -> None:
    """Time every tool on each TREC shape in interleaved rounds; print one table per shape."""
    import os
    import statistics

    for shape in shapes:
        data = folder / f"trec-q{shape.queries}-s{shape.systems}-d{shape.depth}"
        m = ensure_trec(data, shape)
        print(f"\n## TREC shape: {shape.systems} runs × {shape.queries} queries × top-{shape.depth} "
              f"({m['rows']:,} run lines, string docids msmarco_passage_NN_NNNNNNNNN; {m['tied_runs']} runs with "
              f"rounded scores that tie), {shape.judged} queries judged ({m['judgments']:,} labels, 0-3); "
              f"measures {', '.join(TREC_MEASURES)}", flush=True)
        status = {t: "not run (--skip)" for t in TOOLS if t in skipped}
        status.update({t: why for t in TOOLS if t not in status and (why := missing(t))})
        active = [t for t in TOOLS if t not in status]
        samples: dict[str, list] = {t: [] for t in active}
        out = data / "out"
        out.mkdir(exist_ok=True)
        # one untimed call of each tool on a tiny data set: ranx compiles its numba kernels into a cache on
        # first use, and every tool's modules come into the page cache
        tiny = folder / "trec-warmup"
        ensure_trec(tiny, TrecShape(queries=20, judged=5, systems=2, depth=10, seed=shape.seed))
        for tool in active:
            try:
                run_child(command(tool, tiny / "runs", tiny / "qrels.txt", out / f"warmup-{tool}.json"))
            except Exception as exc:
                status[tool] = f"failed on the warm-up: {exc}"
        for r in range(rounds):
            for tool in active:
                if tool in status:
                    continue
                try:
                    s = run_child(command(tool, data / "runs", data / "qrels.txt", out / f"{tool}.json"))
                except Exception as exc:  # ChildFailed: shown in the table
                    status[tool] = f"failed in round {r + 1}: {exc}"
                    continue
                samples[tool].append(s)
                print(f"  round {r + 1}: {tool:<12} {s.wall:8.2f} s wall {s.cpu:8.2f} s CPU {s.rss_gb * 1024:7.0f} MB "
                      f"(load {os.getloadavg()[0]:.2f})", file=__import__("sys").stderr, flush=True)
        _trec_table(samples, status, out, statistics)


def _trec_table(samples: dict, status: dict, out: Path, statistics) -> None:
    rj = samples.get("recjudge") or []
    rj_cpu = statistics.median(s.cpu for s in rj) if rj else None
    rj_rss = statistics.median(s.rss_gb for s in rj) if rj else None
    mine = means("recjudge", out / "recjudge.json") if rj else None
    print("\n| tool | computes | rounds | wall s, median | CPU s, median (min–max) | peak RSS MB, median "
          "| CPU ÷ recjudge | RSS ÷ recjudge | max abs Δ mean vs recjudge |")
    print("|---|---|---|---|---|---|---|---|---|")
    for tool in TOOLS:
        got = samples.get(tool) or []
        if not got:
            print(f"| {tool} | {COMPUTES[tool]} | 0 | {status.get(tool, 'not run')} | | | | | |")
            continue
        cpu = [s.cpu for s in got]
        rss = statistics.median(s.rss_gb for s in got)
        ratio = f"{statistics.median(cpu) / rj_cpu:.1f}×" if rj_cpu and tool != "recjudge" else "—"
        mem = f"{rss / rj_rss:.2f}×" if rj_rss and tool != "recjudge" else "—"
        diff = "—"
        if mine is not None and tool != "recjudge":
            try:
                diff = f"{max(max_diff(mine, means(tool, out / f'{tool}.json')).values()):.1e}"
            except (KeyError, ValueError, OSError) as exc:
                diff = f"not compared ({exc})"
        lo, hi = min(cpu), max(cpu)
        print(f"| {tool} | {COMPUTES[tool]} | {len(got)} | {statistics.median(s.wall for s in got):.1f} | "
              f"{statistics.median(cpu):.1f} ({lo:.1f}–{hi:.1f}) | {rss * 1024:.0f} | {ratio} | {mem} | {diff} |")
    print("(ratios: the peer's median over recjudge's; > 1× means recjudge is faster or smaller. Ties: 'trec_eval' "
          "orders equal scores as trec_eval does, so recjudge and pytrec_eval rank one order; ranx orders them its own "
          "way, hence its Δ on the tied runs)")


if __name__ == "__main__":
    import sys

    generate_trec(Path(sys.argv[1]), TrecShape(**json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}))
