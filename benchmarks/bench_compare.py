"""`recjudge compare` end to end on runs shaped like recommender output, and `recjudge evaluate` on
TREC-shaped runs (``--shape trec``; benchmarks/trec_shape.py), next to their peers.

    .venv/bin/python benchmarks/bench_compare.py --quick        # both shapes, a few minutes

    .venv-core/bin/python benchmarks/bench_compare.py [--users 1000] [--rounds 3] [--peer-rounds N]
        [--rounds-for TOOL=N ...] [--skip TOOL,...] [--keep DIR] [--bootstrap 1000] [--profile]
        [--systems 52] [--depth 100] [--judged 600] [--items 40000] [--seed 0] [--runs-only]

Data (written by a child process, one run at a time, so 100,000 users fit): ``--systems`` runs of
the top ``--depth`` items per user over a catalogue of ``--items`` items with Zipf popularity, and
two qrels files labelling the same ``--judged`` items per user (drawn by popularity): the
reference on 0-7 (mean 1.4, as the human labels of Penha et al. 2025), the candidate on 0-4 (the
reference rescaled, with noise). The systems' Judged@100 spans about 0.1-0.9 (0.07-0.87 in the
paper). Runs are tie-heavy as recommenders write them: two
popularity systems score items by interaction counts (every list ties), neighbourhood systems
pad the lists of cold users with zero scores, factor models saturate for a share of users; scores
are written with six decimals, so unrelated scores collide now and then. The tie share the
generator produced is measured on the written values and printed.

Timed, each in a fresh process, in interleaved rounds (every tool once, then again):

- recjudge: ``recjudge compare`` on the runs as written (tie share, tie resolution by the hash
  policy, Judged@100, Compat(p=0.95), nDCG@100 and Bpref under both qrels, 1,000 bootstrap
  resamples, JSON written);
- ir-measures: the same four measures under both qrels, reading the files with its own readers;
- ranx: nDCG@100 and Bpref (it has neither Judged nor Compat), its own readers;
- pytrec_eval: ndcg_cut_100 and bpref (trec_eval has neither Judged nor Compat), its own readers;
- the floor: reading the bytes, parsing them with the fastest columnar library installed (polars
  or pyarrow, ids to integer codes) and numpy nDCG@100 and Judged@100 under both qrels.

The peers read a second copy of the runs in which every tie is already resolved (see
``write_tie_free``). Medians and min-max over rounds, CPU time and peak RSS of each child, ratios
to recjudge, the machine load at start and end. Values are checked untimed afterwards: recjudge on
the peers' copy against each peer and the floor. A peer that is not installed, skipped or failing
is shown as such; nothing is estimated.

``--runs-only`` writes no tie-free copy (the runs as written are the same) and times recjudge
alone, for sizes the peers cannot run at: ``--users 100000 --rounds 1 --runs-only --keep DIR``
prints recjudge's peak memory on 52 runs × 100,000 users.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

MEASURES = ["Judged@100", "Compat(p=0.95)", "nDCG@100", "Bpref"]
TOOLS = ("recjudge", "ir-measures", "ranx", "pytrec_eval", "floor")
PEERS = ("ir-measures", "ranx", "pytrec_eval")
COMPUTES = {
    "recjudge": "Judged@100, Compat(p=0.95), nDCG@100, Bpref × 2 qrels; tie share, hash tie policy; τ, {boot:,} "
                "bootstrap resamples",
    "ir-measures": "Judged@100, Compat(p=0.95), nDCG@100, Bpref × 2 qrels",
    "ranx": "nDCG@100, Bpref × 2 qrels",
    "pytrec_eval": "nDCG@100 (ndcg_cut_100), Bpref × 2 qrels",
    "floor": "read + parse + numpy nDCG@100, Judged@100 × 2 qrels",
}
IMPORTS = {"ir-measures": "ir_measures", "ranx": "ranx", "pytrec_eval": "pytrec_eval"}
GENERATOR_VERSION = 2  # bump when the data a seed gives changes: --keep folders are regenerated
ZIPF_A = 0.9
# the 0-7 interest scale, mean 1.39: Penha et al. 2025 (§5.3) report a human mean of 1.4
REFERENCE_P = (0.55, 0.12, 0.09, 0.07, 0.06, 0.05, 0.035, 0.025)
COLD_SHARE = 0.35  # users whose neighbourhood runs out before the cut-off
BLOCK = 20_000  # users generated at a time


class Shape(NamedTuple):
    users: int
    systems: int
    depth: int
    judged: int
    items: int
    seed: int


# ------------------------------------------------------------------------------------ the data


def families(systems: int) -> list[tuple[str, str]]:
    """(run name, family) per system: 2 popularity, about a quarter neighbourhood, the rest factor models."""
    n_pop = min(2, systems)
    n_knn = round((systems - n_pop) * 0.28)
    names = [("Pop", "pop"), ("PopRecent", "pop")][:n_pop]
    names += [(f"KNN{i:02d}", "knn") for i in range(n_knn)]
    names += [(f"MF{i:02d}", "mf") for i in range(systems - n_pop - n_knn)]
    return names


def tie_rows(scores):
    """Per row of a (users × depth) score matrix: whether two scores are equal."""
    import numpy as np

    s = np.sort(scores, axis=1)
    return (np.diff(s, axis=1) == 0).any(axis=1)


def generate(folder: Path, shape: Shape, copy: bool = True) -> dict:
    """Write runs/, runs-tie-free/ (unless ``copy`` is False), reference.qrels, candidate.qrels and
    manifest.json into ``folder``. The runs as written are the same either way."""
    import numpy as np

    rng = np.random.default_rng(shape.seed)
    U, D, J, N = shape.users, shape.depth, shape.judged, shape.items
    if J + 3 * D > N // 2 or D < 10:
        raise SystemExit(f"--items {N}, --judged {J}, --depth {D}: "
                         "need --depth ≥ 10 and --items ≥ 2 × (judged + 3 × depth)")
    item_ids = rng.choice(np.arange(1, 8 * N), N, replace=False)  # index = popularity rank
    # trec_eval orders equal scores by docid as strings, descending: the rank of each id as a string
    lex = np.empty(N, np.int64)
    lex[np.argsort(item_ids.astype(str), kind="stable")] = np.arange(N)
    weight = 1.0 / np.arange(1, N + 1) ** ZIPF_A
    p = weight / weight.sum()
    cdf = np.cumsum(p)
    user_ids = np.sort(rng.choice(np.arange(1, 3 * U + 11), U, replace=False))
    cold = rng.random(U) < COLD_SHARE

    # judged items: J per user without replacement, by popularity (exponential race, chunked)
    judged = np.empty((U, J), np.int32)
    inv_p = (1.0 / p).astype(np.float32)
    chunk = max(1, 8_000_000 // N)
    for lo in range(0, U, chunk):
        keys = rng.standard_exponential((min(chunk, U - lo), N), dtype=np.float32) * inv_p
        judged[lo:lo + chunk] = np.argpartition(keys, J - 1, axis=1)[:, :J]
    ref_labels = rng.choice(len(REFERENCE_P), size=(U, J), p=REFERENCE_P).astype(np.int8)
    # the candidate (an LLM on 0-4) follows the reference with noise
    cand_labels = np.clip(np.rint(ref_labels * 4 / 7 + rng.normal(0, 0.8, (U, J))), 0, 4).astype(np.int8)

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").unlink(missing_ok=True)  # written last: a half-written folder is not reused
    for name, labels in (("reference", ref_labels), ("candidate", cand_labels)):
        path = folder / f"{name}.qrels"
        path.unlink(missing_ok=True)
        for lo in range(0, U, 20_000):
            hi = min(U, lo + 20_000)
            write_table(path, {"q": np.repeat(user_ids[lo:hi], J), "it": "0", "d": item_ids[judged[lo:hi]].ravel(),
                               "l": labels[lo:hi].ravel()})

    runs, tie_free = folder / "runs", folder / "runs-tie-free"
    dirs = (runs, tie_free) if copy else (runs,)
    for d in dirs:
        d.mkdir(exist_ok=True)
        for f in d.iterdir():
            f.unlink()
    pop_counts = np.floor(3000 / np.arange(1, N + 1) ** ZIPF_A).astype(np.int64)  # equal below rank ~60
    recent = np.floor(pop_counts * rng.lognormal(0, 0.3, N)).astype(np.int64)
    shares, lines = {}, 0
    for name, family in families(shape.systems):
        # drawn once per system: its quality, popularity bias, taste for unjudged items, saturation
        params = (rng.uniform(0.1, 0.8), rng.uniform(0.0, 0.3), rng.uniform(-1.0, 3.0), rng.uniform(0.0, 0.45))
        tied = 0
        for lo in range(0, U, BLOCK):  # a block of users at a time bounds the memory at any size
            users = slice(lo, min(U, lo + BLOCK))
            n = users.stop - users.start
            if family == "pop":
                counts = pop_counts if name == "Pop" else recent
                order = np.argsort(-counts, kind="stable")[: 3 * D]
                seen = rng.random((n, 3 * D)) < 0.25  # items a user already has are not recommended
                items = order[np.argsort(seen, axis=1, kind="stable")[:, :D]]
                scores = counts[items]
            else:
                items, scores = ranked(rng, family, params, judged[users], ref_labels[users], cdf, cold[users], D)
            tied += int(tie_rows(scores).sum())
            write_run(runs / f"{name}.run", name, user_ids[users], item_ids[items], scores)
            if copy:
                write_tie_free(tie_free / f"{name}.run", name, user_ids[users], item_ids, items, scores, lex, rng)
            else:
                rng.uniform(0.001, 0.999, (n, D))  # the copy's draw: the next system's data stay the same
        shares[name] = tied / U
        lines += U * D
    manifest = {
        "version": GENERATOR_VERSION, "shape": shape._asdict(), "families": dict(families(shape.systems)),
        "tied_user_share": shares, "run_lines": lines, "qrels_lines": U * J,
        "tie_free_copy": copy,
        "bytes": {d.name: sum(f.stat().st_size for f in d.iterdir()) for d in dirs},
        "qrels_bytes": sum((folder / f"{n}.qrels").stat().st_size for n in ("reference", "candidate")),
        "writer": "pyarrow" if _pyarrow_csv() else "pandas",
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def ranked(rng, family, params, judged, ref_labels, cdf, cold, depth):
    """Top-``depth`` (item indexes, written scores) per user of one knn- or mf-like system.

    Candidates are the user's judged items plus fresh draws by popularity (duplicates dropped);
    the score mixes the latent relevance (the reference label; a fresh item gets a random one),
    popularity and noise, with a per-system preference for unjudged items, which sets Judged@100."""
    import numpy as np

    quality, pop_bias, outside, saturated = params
    U, J = judged.shape
    fresh = np.searchsorted(cdf, rng.random((U, 3 * depth)), side="right").astype(np.int32)
    fresh = np.minimum(fresh, len(cdf) - 1)
    cand = np.concatenate([judged, fresh], axis=1)
    latent = np.concatenate([ref_labels, rng.choice(len(REFERENCE_P), size=fresh.shape, p=REFERENCE_P)], axis=1)
    raw = quality * latent - pop_bias * np.log1p(cand) + rng.standard_normal(cand.shape)
    raw[:, J:] += outside
    # a repeated item keeps its first (judged) copy
    order = np.argsort(cand, axis=1, kind="stable")
    srt = np.take_along_axis(cand, order, axis=1)
    dup = np.zeros(cand.shape, bool)
    np.put_along_axis(dup, order[:, 1:], srt[:, 1:] == srt[:, :-1], axis=1)
    raw[dup] = -np.inf
    top = np.argpartition(-raw, depth - 1, axis=1)[:, :depth]
    top = np.take_along_axis(top, np.argsort(-np.take_along_axis(raw, top, axis=1), axis=1, kind="stable"), axis=1)
    items = np.take_along_axis(cand, top, axis=1)
    scores = 1.0 / (1.0 + np.exp(-np.take_along_axis(raw, top, axis=1) / 4))
    if family == "knn":
        # a cold user's neighbourhood runs out: the rest of the list is filled with score 0
        cut = rng.integers(depth // 10, depth - depth // 20, U)
        scores[cold] *= np.arange(depth)[None, :] < cut[cold, None]
    else:
        # the model saturates for some users: the top k scores are equal
        sat = rng.random(U) < saturated
        k = rng.integers(2, min(20, depth), U)
        cap = np.take_along_axis(scores, (k - 1)[:, None], axis=1)
        scores[sat] = np.minimum(scores[sat], cap[sat])
    return items, np.round(scores, 6)


def write_run(path: Path, name: str, user_ids, docids, scores) -> None:
    """One TREC run file, best first per user; equal scores stay in the order the system produced."""
    import numpy as np

    U, D = scores.shape
    write_table(path, {"q": np.repeat(user_ids, D), "q0": "Q0", "d": docids.ravel(),
                       "r": np.tile(np.arange(1, D + 1), U), "s": scores.ravel(), "t": name})


def write_table(path: Path, columns: dict) -> None:
    """Append space-separated lines (a str value fills its column): pyarrow's writer, about 7× faster
    than pandas', which writes the same values where pyarrow is not installed (floats in another
    spelling: 0.0 for 0, 1e-06 for 0.000001)."""
    n = next(len(v) for v in columns.values() if not isinstance(v, str))
    pacsv = _pyarrow_csv()
    if pacsv is None:
        import pandas as pd

        pd.DataFrame(columns, index=range(n)).to_csv(path, sep=" ", header=False, index=False, mode="a")
        return
    import pyarrow as pa

    table = pa.table({k: pa.repeat(v, n) if isinstance(v, str) else v for k, v in columns.items()})
    with open(path, "ab") as fh:
        pacsv.write_csv(table, fh, pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none"))


def _pyarrow_csv():
    try:
        import pyarrow.csv as pacsv
    except Exception:  # absent, or built for another NumPy
        return None
    return pacsv


def write_tie_free(path: Path, name: str, user_ids, item_ids, items, scores, lex, rng) -> None:
    """The same run with every tie resolved as trec_eval resolves it, scores made strictly decreasing.

    The peers read this copy, recjudge and the floor the runs as written. Why not let the peers
    see the ties too: each tool orders equal scores its own way (trec_eval, and so pytrec_eval
    and most of ir-measures, by docid descending; ranx and ir-measures' Compat by their own sorts;
    recjudge by its hash policy), so on tied input their values differ for reasons that say
    nothing about correctness and cannot be checked against one another. On this copy every tool
    ranks one order, recjudge's values are checked against each peer's (recjudge run once more on
    the copy, untimed: every tie policy agrees on tie-free input), and the cost of ties (the tie
    share, the hash resolution) is borne by recjudge alone: the timing does not favour it. The
    order is trec_eval's (score descending, then docid as a string descending), so pytrec_eval
    gives the same values on either copy. The new scores are (depth - 1 - position + a random
    fraction) / depth with six decimals: within a few per cent of the originals' bytes."""
    import numpy as np

    U, D = scores.shape
    order = _row_lexsort(scores, lex[items])
    items = np.take_along_axis(items, order, axis=1)
    fresh = np.round((np.arange(D - 1, -1, -1)[None, :] + rng.uniform(0.001, 0.999, (U, D))) / D, 6)
    write_run(path, name, user_ids, item_ids[items], fresh)


def _row_lexsort(scores, lexrank):
    """Per row: positions by score descending, then by the docid's string rank descending."""
    import numpy as np

    U, D = scores.shape
    rows = np.repeat(np.arange(U), D)
    flat = np.lexsort((-lexrank.ravel(), -scores.ravel(), rows))
    return (flat - rows * D).reshape(U, D)


# ------------------------------------------------------------------------------- the timed tools

IR_MEASURES_SCRIPT = r"""
import json, sys
from pathlib import Path
import ir_measures

runs_dir, ref_path, cand_path, out = sys.argv[1:5]
names = json.loads(sys.argv[5])
measures = [ir_measures.parse_measure(m) for m in names]
key = {str(m): name for m, name in zip(measures, names)}
# one evaluator per label set, built once (the qrels indexed once), every measure in it
evaluators = {label: ir_measures.evaluator(measures, ir_measures.read_trec_qrels(path))
              for label, path in (("reference", ref_path), ("candidate", cand_path))}
result = {label: {} for label in evaluators}
for f in sorted(Path(runs_dir).iterdir()):
    run = list(ir_measures.read_trec_run(str(f)))  # read once, scored under both label sets
    for label, ev in evaluators.items():
        result[label][f.stem] = {key[str(m)]: v for m, v in ev.calc_aggregate(run).items()}
Path(out).write_text(json.dumps(result))
"""

RANX_SCRIPT = r"""
import json, sys
from pathlib import Path
from ranx import Qrels, Run, evaluate

runs_dir, ref_path, cand_path, out = sys.argv[1:5]
metrics = {"ndcg@100": "nDCG@100", "bpref": "Bpref"}
qrels = {label: Qrels.from_file(path, kind="trec")
         for label, path in (("reference", ref_path), ("candidate", cand_path))}
result = {label: {} for label in qrels}
for f in sorted(Path(runs_dir).iterdir()):
    run = Run.from_file(str(f), kind="trec")
    for label, q in qrels.items():
        scores = evaluate(q, run, list(metrics))
        result[label][f.stem] = {metrics[m]: float(v) for m, v in scores.items()}
Path(out).write_text(json.dumps(result))
"""

PYTREC_EVAL_SCRIPT = r"""
import json, sys
from pathlib import Path
import pytrec_eval

runs_dir, ref_path, cand_path, out = sys.argv[1:5]
metrics = {"ndcg_cut_100": "nDCG@100", "bpref": "Bpref"}
evaluators, users = {}, {}
for label, path in (("reference", ref_path), ("candidate", cand_path)):
    with open(path) as fh:
        qrel = pytrec_eval.parse_qrel(fh)
    users[label] = len(qrel)
    evaluators[label] = pytrec_eval.RelevanceEvaluator(qrel, {"ndcg_cut.100", "bpref"})
result = {label: {} for label in evaluators}
for f in sorted(Path(runs_dir).iterdir()):
    with open(f) as fh:
        run = pytrec_eval.parse_run(fh)
    for label, ev in evaluators.items():
        per_user = ev.evaluate(run)
        # trec_eval -c: a user the run does not rank counts 0
        result[label][f.stem] = {name: sum(v[m] for v in per_user.values()) / users[label]
                                 for m, name in metrics.items()}
Path(out).write_text(json.dumps(result))
"""

FLOOR_SCRIPT = r"""
import json, sys, time
from contextlib import contextmanager
from pathlib import Path

wall, cpu = {}, {}  # seconds per stage, by the clock and by the CPU (every thread of the process)


@contextmanager
def clock(stage):
    t, c = time.perf_counter(), time.process_time()
    yield
    wall[stage] = wall.get(stage, 0.0) + time.perf_counter() - t
    cpu[stage] = cpu.get(stage, 0.0) + time.process_time() - c


with clock("import numpy"):
    import numpy as np
runs_dir, ref_path, cand_path, out = sys.argv[1:5]
CUT = 100
RUN = {"q": 0, "d": 2, "v": 4}  # column positions: qid Q0 docid rank score tag
QREL = {"q": 0, "d": 2, "v": 3}  # qid iteration docid label

libs = {}
with clock("import polars"):
    try:
        import polars as pl
        libs["polars"] = pl
    except Exception:  # absent, or built for another NumPy
        pass
with clock("import pyarrow"):
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pacsv
        libs["pyarrow"] = pa
    except Exception:
        pass
if not libs:
    raise SystemExit("neither polars nor pyarrow is installed: pip install -e '.[bench]'")


ANCHOR = []


def parse_polars(data, cols):
    # ids as Categorical: polars' global categories give every file the same code per id, as long as
    # a frame that uses them is alive (the qrels frames are kept for that; the value check would
    # catch codes that moved)
    width = 6 if cols is RUN else 4
    schema = {f"column_{i + 1}": pl.String for i in range(width)}
    schema["column_1"] = schema["column_3"] = pl.Categorical
    schema[f"column_{cols['v'] + 1}"] = pl.Float64 if cols is RUN else pl.Int32
    df = pl.read_csv(data, separator=" ", has_header=False, schema=schema,
                     columns=[cols["q"], cols["d"], cols["v"]])
    if cols is QREL:
        ANCHOR.append(df)
    q, d, v = df.get_columns()
    return q.to_physical().to_numpy(), d.to_physical().to_numpy(), v.to_numpy()


def parse_pyarrow(data, cols):
    width = 6 if cols is RUN else 4
    names = [f"c{i}" for i in range(width)]
    ids = pa.dictionary(pa.int32(), pa.string())
    types = {"c0": ids, "c2": ids, f"c{cols['v']}": pa.float64() if cols is RUN else pa.int32()}
    tab = pacsv.read_csv(pa.BufferReader(data), read_options=pacsv.ReadOptions(column_names=names),
                         parse_options=pacsv.ParseOptions(delimiter=" "),
                         convert_options=pacsv.ConvertOptions(column_types=types,
                                                              include_columns=["c0", "c2", f"c{cols['v']}"]))
    tab = tab.unify_dictionaries().combine_chunks()
    q, d, v = (tab.column(i).chunk(0) for i in range(3))
    return (q.indices, q.dictionary), (d.indices, d.dictionary), v.to_numpy()


class Space:
    # pyarrow gives each file its own dictionary: ids are mapped into the qrels' vocabulary
    # (an id the qrels lack maps to -1); polars' codes are shared already
    def __init__(self, lib, qrels_parsed):
        self.lib = lib
        if lib == "pyarrow":
            self.vocab = [pc.unique(pa.concat_arrays([p[i][1] for p in qrels_parsed])) for i in (0, 1)]

    def codes(self, parsed):
        if self.lib == "polars":
            return parsed
        out = []
        for i in (0, 1):
            idx, dictionary = parsed[i]
            lookup = pc.index_in(dictionary, value_set=self.vocab[i]).fill_null(-1).to_numpy()
            out.append(lookup[idx.to_numpy()])
        return out[0], out[1], parsed[2]


def key_of(q, d):
    return (q.astype(np.int64) << 32) | d.astype(np.int64)


def prepare(q, d, label):
    o = np.argsort(key_of(q, d), kind="stable")
    key, lab = key_of(q, d)[o], label[o]
    o2 = np.lexsort((-label, q))
    qs, ls = q[o2], label[o2]
    new = np.r_[True, qs[1:] != qs[:-1]]
    blk = np.cumsum(new) - 1
    pos = np.arange(len(qs)) - np.flatnonzero(new)[blk]
    gain = np.where(pos < CUT, np.maximum(ls, 0) / np.log2(pos + 2), 0.0)
    return key, lab, qs[new], np.bincount(blk, weights=gain)


def measure(q, d, s, all_qrels):
    new = np.r_[True, q[1:] != q[:-1]]
    same = ~new[1:]
    if not (np.all(s[1:][same] <= s[:-1][same]) and np.unique(q[new]).size == new.sum()):
        o = np.lexsort((-s, q))  # not grouped by user, best first: order it
        q, d, s = q[o], d[o], s[o]
        new = np.r_[True, q[1:] != q[:-1]]
    blk = np.cumsum(new) - 1
    pos = np.arange(len(q)) - np.flatnonzero(new)[blk]
    top = (pos < CUT) & (d >= 0) & (q >= 0)
    discount = 1.0 / np.log2(pos + 2)
    key = key_of(q, d)
    by_key = np.argsort(key)  # sorted needles make the binary searches cache-friendly: half the time
    sorted_key = key[by_key]
    nb = int(new.sum())
    bu = q[new]
    out = []
    for qkey, qlab, users, idcg in all_qrels:
        i = np.empty(len(key), np.int64)
        i[by_key] = np.minimum(np.searchsorted(qkey, sorted_key), len(qkey) - 1)
        hit = (qkey[i] == key) & top
        gain = np.where(hit, np.maximum(qlab[i], 0) * discount, 0.0)
        judged = np.bincount(blk, weights=hit, minlength=nb) / CUT
        dcg = np.bincount(blk, weights=gain, minlength=nb)
        j = np.minimum(np.searchsorted(users, bu), len(users) - 1)
        known = users[j] == bu
        ideal = np.where(known, idcg[j], 0.0)
        ndcg = np.divide(dcg, ideal, out=np.zeros(nb), where=ideal > 0)
        out.append({"nDCG@100": float(ndcg[known].sum() / len(users)),
                    "Judged@100": float(judged[known].sum() / len(users))})
    return out


n_bytes = rows = 0
qrels = {lib: [] for lib in libs}
for path in (ref_path, cand_path):
    with clock("read"):
        data = Path(path).read_bytes()
    n_bytes += len(data)
    rows += data.count(b"\n")
    for lib in libs:
        with clock(f"parse {lib}"):
            qrels[lib].append((parse_polars if lib == "polars" else parse_pyarrow)(data, QREL))
spaces, prepared = {}, {}
for lib in libs:
    with clock(f"score {lib}"):
        spaces[lib] = Space(lib, qrels[lib])
        prepared[lib] = [prepare(*spaces[lib].codes(p)) for p in qrels[lib]]
means = {lib: {"reference": {}, "candidate": {}} for lib in libs}
for f in sorted(Path(runs_dir).iterdir()):
    with clock("read"):
        data = f.read_bytes()
    n_bytes += len(data)
    rows += data.count(b"\n")
    for lib in libs:
        with clock(f"parse {lib}"):
            parsed = (parse_polars if lib == "polars" else parse_pyarrow)(data, RUN)
        with clock(f"score {lib}"):
            q, d, s = spaces[lib].codes(parsed)
            for label, m in zip(("reference", "candidate"), measure(q, d, s, prepared[lib])):
                means[lib][label][f.stem] = m
Path(out).write_text(json.dumps({"libs": list(libs), "wall": wall, "cpu": cpu, "bytes": n_bytes, "rows": rows,
                                 "means": means}))
"""

SCRIPTS = {"ir-measures": IR_MEASURES_SCRIPT, "ranx": RANX_SCRIPT, "pytrec_eval": PYTREC_EVAL_SCRIPT,
           "floor": FLOOR_SCRIPT}


class Sample(NamedTuple):
    wall: float
    cpu: float
    rss_gb: float


class ChildFailed(Exception):
    pass


def run_child(cmd: list[str]) -> Sample:
    """Wall and CPU seconds and peak RSS of one child process, measured on that child alone."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    if proc.returncode != 0:
        last = [line for line in err.strip().splitlines() if line.strip()][-1:] or ["(no message)"]
        raise ChildFailed(f"exit {proc.returncode}: {last[0].strip()[:200]}")
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024**2)  # Linux: KiB


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in GB) of one child process; exits naming the command when it fails
    (bench_scaling.py times its commands with this)."""
    try:
        s = run_child(cmd)
    except ChildFailed as exc:
        raise SystemExit(f"{shlex.join(cmd[:3])} failed: {exc}") from None
    return s.wall, s.rss_gb


def command(tool: str, runs: Path, ref: Path, cand: Path, out: Path, bootstrap: int) -> list[str]:
    if tool == "recjudge":
        return [str(Path(sys.executable).with_name("recjudge")), "compare", "--runs", str(runs),
                "--reference", str(ref), "--candidate", str(cand), "--measures", ",".join(MEASURES),
                "--tie-policy", "hash", "--bootstrap", str(bootstrap), "--json", str(out)]
    return [sys.executable, "-c", SCRIPTS[tool], str(runs), str(ref), str(cand), str(out), json.dumps(MEASURES)]


def missing(tool: str) -> str | None:
    """Why ``tool`` cannot run in this environment, or None."""
    if tool == "recjudge":
        exe = Path(sys.executable).with_name("recjudge")
        return None if exe.exists() else f"no {exe} (pip install -e .)"
    if tool == "floor":
        # the floor runs with whichever of the two imports
        probe = "try:\n import polars\nexcept Exception:\n import pyarrow.csv"
        what = "polars or pyarrow"
    else:
        probe = f"import {IMPORTS[tool]}"
        what = IMPORTS[tool]
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    if done.returncode == 0:
        return None
    last = (done.stderr.strip().splitlines() or ["?"])[-1][:160]
    return f"not installed: {what} does not import here ({last}; pip install -e '.[bench]')"


def versions() -> str:
    found = []
    for dist in ("recjudge", "numpy", "pandas", "ir-measures", "ranx", "numba", "pytrec-eval-terrier",
                 "pytrec-eval", "polars", "pyarrow"):
        try:
            found.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(found)


# ------------------------------------------------------------------------------------ the report


def fmt_range(values: list[float], digits: int = 1) -> str:
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def recjudge_means(path: Path) -> dict[str, dict[str, dict[str, float]]]:
    """{label set: {system: {measure: mean}}} from ``compare --json``."""
    data = json.loads(path.read_text())
    out: dict = {"reference": {}, "candidate": {}}
    for row in data["systems"]:
        out["reference"][row["system"]] = row["reference"]
        (cand,) = row["candidates"].values()
        out["candidate"][row["system"]] = cand["scores"]
    return out


def max_diff(mine: dict, theirs: dict) -> dict[str, float]:
    """Largest |difference| of system means per measure, over both label sets and every system."""
    worst: dict[str, float] = {}
    for label, systems in theirs.items():
        for system, values in systems.items():
            for m, v in values.items():
                worst[m] = max(worst.get(m, 0.0), abs(mine[label][system][m] - v))
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=1000, help="users per run (1000, 3000, 10000, 100000 …)")
    ap.add_argument("--systems", type=int, default=52)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--judged", type=int, default=600, help="judged items per user in each qrels file")
    ap.add_argument("--items", type=int, default=40_000, help="catalogue size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bootstrap", type=int, default=1000, help="compare's bootstrap resamples")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds of recjudge and the floor")
    ap.add_argument("--peer-rounds", type=int, help="timed rounds of each peer (default: --rounds)")
    ap.add_argument("--rounds-for", action="append", default=[], metavar="TOOL=N",
                    help=f"timed rounds of one tool ({', '.join(TOOLS)}); 0 = not run; repeatable")
    ap.add_argument("--skip", default="", metavar="TOOL,...", help="tools not to run at all")
    ap.add_argument("--keep", metavar="DIR", help="write the data here and keep it; reused when its shape matches")
    ap.add_argument("--profile", action="store_true",
                    help="also run recjudge compare once under cProfile (untimed) and print its hottest functions")
    ap.add_argument("--runs-only", action="store_true",
                    help="write no tie-free copy and time recjudge alone (the peers and the value check read "
                         "the copy): for sizes only recjudge runs at, e.g. --users 100000 --rounds 1")
    ap.add_argument("--shape", choices=("recommender", "trec", "both"), default="both",
                    help="the recommender shape (above), the TREC shape (trec_shape.py: top-100 and top-1000 runs, "
                         "string docids, few judged queries) or both, one after the other (default)")
    ap.add_argument("--trec-systems", default="63,12", metavar="N100,N1000",
                    help="TREC shape: runs of the top-100 and of the top-1000 data sets (default 63,12)")
    ap.add_argument("--quick", action="store_true",
                    help="a few minutes in all: 1 round, 300 users × 12 runs, 100 resamples, TREC 16 + 4 runs")
    ap.add_argument("--write-only", nargs=3, metavar=("DIR", "SHAPE", "COPY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.users, args.systems, args.bootstrap, args.trec_systems = 1, 300, 12, 100, "16,4"
    if args.write_only:
        folder, shape, copy = args.write_only
        generate(Path(folder), Shape(**json.loads(shape)), copy == "copy")
        return

    rounds = dict.fromkeys(TOOLS, args.rounds)
    if args.peer_rounds is not None:
        rounds.update(dict.fromkeys(PEERS, args.peer_rounds))
    for item in args.rounds_for:
        tool, _, n = item.partition("=")
        if tool not in TOOLS or not n.isdigit():
            ap.error(f"--rounds-for {item!r}: expected TOOL=N with TOOL one of {', '.join(TOOLS)}")
        rounds[tool] = int(n)
    skipped = {t.strip() for t in args.skip.split(",") if t.strip()}
    if skipped - set(TOOLS):
        ap.error(f"--skip: unknown tool(s) {', '.join(sorted(skipped - set(TOOLS)))}; known: {', '.join(TOOLS)}")
    if any(n < 0 for n in rounds.values()):
        ap.error("rounds cannot be negative")

    if args.shape == "trec":
        return trec(args, rounds, skipped)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-compare-"))
    try:
        shape = Shape(args.users, args.systems, args.depth, args.judged, args.items, args.seed)
        manifest = ensure_data(folder, shape, copy=not args.runs_only)
        ensure_data(folder / "warmup", Shape(30, 4, args.depth, args.judged, args.items, args.seed))
        runs, tie_free = folder / "runs", folder / "runs-tie-free"
        ref, cand = folder / "reference.qrels", folder / "candidate.qrels"
        outdir = folder / "out"
        outdir.mkdir(exist_ok=True)

        status: dict[str, str] = {}
        for tool in TOOLS:
            if tool in skipped:
                status[tool] = "not run (--skip)"
            elif args.runs_only and tool != "recjudge":
                status[tool] = "not run (--runs-only: no tie-free copy)"
            elif rounds[tool] == 0:
                status[tool] = "not run (0 rounds)"
            elif why := missing(tool):
                status[tool] = why
        active = [t for t in TOOLS if t not in status]

        load_start = os.getloadavg()
        print(f"# bench_compare: {shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])}", flush=True)
        describe(manifest, folder)
        print(f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()}; {versions()}")
        blas = {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_")}
        if blas:
            print("environment: " + " ".join(f"{k}={v}" for k, v in sorted(blas.items())))
        print(f"load average (1/5/15 min) at start: {' '.join(f'{x:.2f}' for x in load_start)}", flush=True)

        # one untimed call of each tool on a tiny data set: ranx compiles its numba kernels into a cache
        # on first use, and every tool's modules come into the page cache
        warmup: dict[str, Sample] = {}
        for tool in active:
            w = folder / "warmup"
            try:
                warmup[tool] = run_child(command(tool, w / ("runs-tie-free" if tool in PEERS else "runs"),
                                                 w / "reference.qrels", w / "candidate.qrels",
                                                 outdir / f"warmup-{tool}.json", 10))
            except ChildFailed as exc:
                status[tool] = f"failed on the warm-up: {exc}"
        active = [t for t in active if t not in status]

        samples: dict[str, list[Sample]] = {t: [] for t in active}
        for r in range(max((rounds[t] for t in active), default=0)):
            for tool in active:
                if tool in status or r >= rounds[tool]:
                    continue
                out = outdir / (f"floor-{r + 1}.json" if tool == "floor" else f"{tool}.json")
                cmd = command(tool, tie_free if tool in PEERS else runs, ref, cand, out, args.bootstrap)
                try:
                    s = run_child(cmd)
                except ChildFailed as exc:
                    status[tool] = f"failed in round {r + 1}: {exc}"
                    continue
                samples[tool].append(s)
                print(f"  round {r + 1}: {tool:<12} {s.wall:8.2f} s wall {s.cpu:8.2f} s CPU {s.rss_gb:6.2f} GB "
                      f"(load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
        load_end = os.getloadavg()

        # values, untimed: recjudge on the tie-free copy against each peer and the floor
        diffs: dict[str, dict[str, float] | str] = {}
        tie_effect = None
        check = outdir / "recjudge-tie-free.json"
        if samples.get("recjudge") and not args.runs_only:
            try:
                run_child(command("recjudge", tie_free, ref, cand, check, args.bootstrap))
                mine = recjudge_means(check)
                tie_effect = max_diff(mine, recjudge_means(outdir / "recjudge.json"))
                for tool in PEERS:
                    if samples.get(tool):
                        diffs[tool] = max_diff(mine, json.loads((outdir / f"{tool}.json").read_text()))
                if samples.get("floor"):
                    run_child(command("floor", tie_free, ref, cand, outdir / "floor-tie-free.json", 0))
                    floor_means = json.loads((outdir / "floor-tie-free.json").read_text())["means"]
                    for lib, means in floor_means.items():
                        diffs[f"floor ({lib})"] = max_diff(mine, means)
            except (ChildFailed, KeyError, ValueError) as exc:
                diffs = {"all": f"not compared: {exc}"}

        report(manifest, status, samples, warmup, outdir, diffs, tie_effect, load_end, args.bootstrap)
        if args.profile and samples.get("recjudge"):
            profile(command("recjudge", runs, ref, cand, outdir / "recjudge-profile.json", args.bootstrap), outdir)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)  # gigabytes at 10,000 users; --keep DIR keeps them
    if args.shape == "both":
        trec(args, rounds, skipped)


def trec(args, rounds: dict[str, int], skipped: set[str]) -> None:
    """The TREC shape (benchmarks/trec_shape.py), timed like the recommender shape; its own tables."""
    from trec_shape import TrecShape, bench_trec

    try:
        n100, n1000 = (int(x) for x in args.trec_systems.split(","))
    except ValueError:
        raise SystemExit(f"--trec-systems {args.trec_systems!r}: expected two numbers, e.g. 63,12") from None
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-compare-trec-"))
    try:
        print(f"\n# bench_compare, TREC shape: {shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])}")
        print(f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()}; {versions()}")
        print(f"load average (1/5/15 min) at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        shapes = [TrecShape(systems=n, depth=d, seed=args.seed) for n, d in ((n100, 100), (n1000, 1000)) if n]
        bench_trec(folder, shapes, max(rounds["recjudge"], 1), skipped, run_child, missing)
        print(f"load average (1/5/15 min) at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


def ensure_data(folder: Path, shape: Shape, copy: bool = True) -> dict:
    """The manifest of the data in ``folder``, written first by a child process unless it is there already
    (with the tie-free copy when ``copy``)."""
    manifest = folder / "manifest.json"
    if manifest.exists():
        m = json.loads(manifest.read_text())
        if m.get("version") == GENERATOR_VERSION and m.get("shape") == shape._asdict() and \
                (m.get("tie_free_copy", True) or not copy):
            m["reused"] = True
            return m
    t0 = time.perf_counter()
    # a child writes it: a parent holding the data would lend its pages to every timed child it forks
    subprocess.run([sys.executable, __file__, "--write-only", str(folder), json.dumps(shape._asdict()),
                    "copy" if copy else "no-copy"], check=True)
    m = json.loads(manifest.read_text())
    m["written_s"] = time.perf_counter() - t0
    return m


def size(n_bytes: int) -> str:
    return f"{n_bytes / 1e9:.2f} GB" if n_bytes >= 1e9 else f"{n_bytes / 1e6:.0f} MB"


def describe(m: dict, folder: Path) -> None:
    s = m["shape"]
    shares = m["tied_user_share"]
    fam = m["families"]
    overall = statistics.fmean(shares.values())
    how = "reused" if m.get("reused") else f"written in {m['written_s']:.0f} s"
    how += f", lines written by {m['writer']}"
    print(f"data ({how}, {folder}): {s['systems']} runs × {s['users']:,} users × top-{s['depth']} = "
          f"{m['run_lines']:,} run lines ({size(m['bytes']['runs'])} as written, "
          f"{size(m['bytes']['runs-tie-free']) + ' tie-free copy' if 'runs-tie-free' in m['bytes'] else 'no tie-free copy'}"
          f"); items Zipf(a={ZIPF_A}) over {s['items']:,}; "
          f"qrels: {s['judged']} judged items per user (reference 0–7, candidate 0–4), "
          f"{m['qrels_lines']:,} lines each, {size(m['qrels_bytes'])} both; seed {s['seed']}")
    parts = []
    for family, label in (("pop", "popularity"), ("knn", "neighbourhood"), ("mf", "factor")):
        vals = [v for k, v in shares.items() if fam[k] == family]
        if vals:
            parts.append(f"{len(vals)} {label} {100 * min(vals):.0f}–{100 * max(vals):.0f}%")
    print(f"ties as written: {100 * overall:.1f}% of (system, user) lists hold two equal scores "
          f"(per system: {', '.join(parts)})")


def report(manifest, status, samples, warmup, outdir, diffs, tie_effect, load_end, bootstrap) -> None:
    rj = samples.get("recjudge") or []
    rj_wall = statistics.median(s.wall for s in rj) if rj else None
    rj_cpu = statistics.median(s.cpu for s in rj) if rj else None
    print(f"load average (1/5/15 min) at end: {' '.join(f'{x:.2f}' for x in load_end)}")
    print("\nrecjudge (and the floor) read the runs as written; recjudge resolves their ties by its hash policy. The "
          "peers read a copy with every tie resolved beforehand (trec_eval's order: score, then docid descending; "
          "scores strictly decreasing), so all of them rank one order and their values can be checked; the cost of "
          "ties falls on recjudge alone. Each tool: its own process, its own file reading.")
    print("\n| tool | computes | input | rounds | wall s, median (min–max) | CPU s, median (min–max) | peak RSS GB "
          "| wall ÷ recjudge | CPU ÷ recjudge | tiny input, wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for tool in TOOLS[:-1]:
        inp = "runs as written" if tool == "recjudge" else "tie-free copy"
        computes = COMPUTES[tool].format(boot=bootstrap)
        got = samples.get(tool) or []
        tiny = f"{warmup[tool].wall:.1f}" if tool in warmup else "—"
        if not got:
            print(f"| {tool} | {computes} | {inp} | 0 | {status.get(tool, 'not run')} | | | | | {tiny} |")
            continue
        wall = [s.wall for s in got]
        cpu = [s.cpu for s in got]
        note = f" ({status[tool]})" if tool in status else ""
        ratio_w = f"{statistics.median(wall) / rj_wall:.1f}×" if rj_wall and tool != "recjudge" else "—"
        ratio_c = f"{statistics.median(cpu) / rj_cpu:.1f}×" if rj_cpu and tool != "recjudge" else "—"
        print(f"| {tool} | {computes} | {inp} | {len(got)}{note} | {fmt_range(wall)} | {fmt_range(cpu)} | "
              f"{max(s.rss_gb for s in got):.2f} | {ratio_w} | {ratio_c} | {tiny} |")
    print("(tiny input: the untimed warm-up on 30 users × 4 runs, i.e. each tool's start-up: imports, ranx's "
          "numba kernels from its cache)")
    floor_report(samples.get("floor") or [], status.get("floor"), outdir, rj)
    if rj and (outdir / "recjudge.json").exists():
        try:
            data = json.loads((outdir / "recjudge.json").read_text())
            shares = [row.get("tied_user_share") for row in data["systems"]]
            shares = [x for x in shares if x is not None]
            judged = [row["reference"]["Judged@100"] for row in data["systems"]]
            if shares:
                print(f"\nrecjudge's own tie share of these runs: {100 * statistics.fmean(shares):.1f}% of lists "
                      f"(generator: {100 * statistics.fmean(manifest['tied_user_share'].values()):.1f}%); "
                      f"Judged@100 under the reference: {min(judged):.2f}–{max(judged):.2f} across systems")
        except (KeyError, ValueError):
            pass
    if diffs:
        print("\nvalues, untimed: max |Δ system mean| against recjudge on the tie-free copy (both label sets, every "
              "system; — = not computed by that tool)")
        if "all" in diffs:
            print(f"  {diffs['all']}")
        else:
            print("| tool | " + " | ".join(MEASURES) + " |")
            print("|---|" + "---|" * len(MEASURES))
            for tool, d in diffs.items():
                print(f"| {tool} | " + " | ".join(f"{d[m]:.1e}" if m in d else "—" for m in MEASURES) + " |")
    if tie_effect:
        print("effect of the tie order on recjudge's system means, max |Δ| (hash policy on the runs as written vs "
              "the copy's trec_eval order): " + ", ".join(f"{m} {v:.1e}" for m, v in tie_effect.items()))


def floor_report(got: list[Sample], why: str | None, outdir: Path, rj: list[Sample]) -> None:
    if not got:
        print(f"\nfloor: {why or 'not run'}")
        return
    split = [json.loads((outdir / f"floor-{r + 1}.json").read_text()) for r in range(len(got))]
    libs = split[0]["libs"]
    stages = ("import numpy", "import {lib}", "read", "parse {lib}", "score {lib}")

    def med(clock: str, stage: str, lib: str) -> float:
        return statistics.median(d[clock][stage.format(lib=lib)] for d in split)

    def totals(clock: str, lib: str) -> list[float]:
        return [sum(d[clock][st.format(lib=lib)] for st in stages) for d in split]

    best = min(libs, key=lambda lib: statistics.median(totals("wall", lib)))
    parts = (("import numpy + {lib}", ("import numpy", "import {lib}")), ("read {size}", ("read",)),
             ("parse {rows:,} lines with {lib}", ("parse {lib}",)),
             ("numpy nDCG@100 and Judged@100 under both qrels (ids to the qrels' codes, order check, join)",
              ("score {lib}",)))
    rows, size_ = split[0]["rows"], size(split[0]["bytes"])
    print(f"\nfloor (fresh process, {len(got)} round{'s' if len(got) > 1 else ''}, medians; the process itself, "
          f"parsing with both libraries, took {fmt_range([s.wall for s in got])} s wall, "
          f"{fmt_range([s.cpu for s in got])} s CPU), wall / CPU seconds:")
    for label, stage_names in parts:
        w = sum(med("wall", st, best) for st in stage_names)
        c = sum(med("cpu", st, best) for st in stage_names)
        print(f"  {label.format(lib=best, size=size_, rows=rows)}: {w:.2f} / {c:.2f}")
    floor_wall, floor_cpu = totals("wall", best), totals("cpu", best)
    print(f"  = {fmt_range(floor_wall, 2)} s wall, {fmt_range(floor_cpu, 2)} s CPU")
    rates = ", ".join(f"{lib} {rows / med('wall', 'parse {lib}', lib) / 1e6:.1f} M lines/s "
                      f"(parse {med('wall', 'parse {lib}', lib):.2f} s "
                      f"+ the rest {med('wall', 'score {lib}', lib):.2f} s)"
                      for lib in libs)
    print(f"  per library (ids to integer codes, default threads; wall): {rates}")
    print("  the floor keeps the file order among equal scores: no tie share, no tie policy, no Compat or Bpref")
    if rj:
        print(f"  recjudge compare: {statistics.median(s.wall for s in rj) / statistics.median(floor_wall):.1f}× the "
              f"floor by wall time, {statistics.median(s.cpu for s in rj) / statistics.median(floor_cpu):.1f}× by CPU")


def profile(cmd: list[str], outdir: Path) -> None:
    import pstats

    prof = outdir / "recjudge.prof"
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), *cmd], check=True, stdout=subprocess.DEVNULL)
    stats = pstats.Stats(str(prof))
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:20]
    total = sum(v[2] for v in stats.stats.values())
    print(f"\nrecjudge compare under cProfile (untimed, {total:.1f} s of own time): hottest functions by own time")
    print(f"  {'own s':>7} {'cum s':>7} {'calls':>9}  function")
    for (file, line, func), (_, calls, own, cum, _) in rows:
        where = f"{Path(file).name}:{line}" if line else file
        print(f"  {own:7.2f} {cum:7.2f} {calls:9d}  {func} ({where})")


if __name__ == "__main__":
    main()
