"""The judged-row join: recjudge's hash buckets next to ``pd.Index(q * ndoc + d).get_indexer``, time and peak memory.

    .venv/bin/python benchmarks/bench_join.py {hash,index} USERS [--judged 600] [--depth 100]

One variant per process (its peak RSS is its own): ``USERS × --judged`` judgments (labels 0-4) and a
run of ``USERS × --depth`` rows, half of them judged. ``hash`` builds
:func:`recjudge.evaluation.measures.judgments` (every array the engine keeps, the bucket index among
them) and joins with :meth:`~recjudge.evaluation.measures.index.Judgments.join`; ``index`` builds only
the sorted int64 keys, the labels in their order and pandas' hash table, then ``get_indexer``. Prints the seconds of the build
and of the join and the peak RSS above the inputs (VmHWM, reset once the inputs exist).
"""

from __future__ import annotations

import argparse
import time
import types

import numpy as np
import pandas as pd

N_ITEMS = 100_003


def _rss(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return float("nan")


def inputs(users: int, judged: int, depth: int):
    rng = np.random.default_rng(0)
    qcode = np.repeat(np.arange(users, dtype=np.int32), judged)
    base, step = rng.integers(0, N_ITEMS, users)[:, None], rng.integers(1, N_ITEMS, users)[:, None]
    dcode = ((base + step * np.arange(judged)) % N_ITEMS).astype(np.int32).ravel()
    label = rng.choice(5, len(qcode), p=(0.85, 0.06, 0.04, 0.03, 0.02)).astype(np.int32)
    k = np.arange(depth)
    take = np.where(k % 2 == 0, k // 2, judged + k)  # even ranks judged, odd ranks fresh items
    rq = np.repeat(np.arange(users, dtype=np.int32), depth)
    rd = ((base + step * take) % N_ITEMS).astype(np.int32).ravel()
    return qcode, dcode, label, rq, rd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variant", choices=("hash", "index"))
    ap.add_argument("users", type=int)
    ap.add_argument("--judged", type=int, default=600)
    ap.add_argument("--depth", type=int, default=100)
    a = ap.parse_args()
    qcode, dcode, label, rq, rd = inputs(a.users, a.judged, a.depth)
    docids = np.array([f"i{i}" for i in range(N_ITEMS)], dtype=object)
    qids = np.array([f"u{u:07d}" for u in range(a.users)], dtype=object)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM: the peak from here on
    before = _rss("VmRSS")
    t0 = time.perf_counter()
    if a.variant == "hash":
        from recjudge.evaluation.measures import judgments

        codes = types.SimpleNamespace(qids=qids, qcode=qcode, dcode=dcode, docids=docids)
        jd = judgments(types.SimpleNamespace(codes=codes, table=types.SimpleNamespace(label=label), name="q"),
                       list(qids))
        t1 = time.perf_counter()
        rows, _, _ = jd.join(np.arange(a.users), np.arange(N_ITEMS, dtype=np.int32), rq, rd)
    else:
        key = qcode.astype(np.int64) * N_ITEMS + dcode
        order = np.argsort(key)
        index = pd.Index(key[order])
        del key
        label = label[order]  # the labels in the index's order, as the engine would keep them
        del order
        index.get_indexer(index[:1])  # builds the hash table
        t1 = time.perf_counter()
        found = index.get_indexer(rq.astype(np.int64) * N_ITEMS + rd)
        rows = np.flatnonzero(found >= 0)
    t2 = time.perf_counter()
    print(f"{a.variant}: {len(qcode):,} judgments, {len(rq):,} run rows: build {t1 - t0:.3f} s, join {t2 - t1:.3f} s, "
          f"peak {_rss('VmHWM') - before:.0f} MB above the inputs, {len(rows):,} judged rows")


if __name__ == "__main__":
    main()
