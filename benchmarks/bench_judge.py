"""Judge benchmark: throughput against a local OpenAI-compatible server, and input tokens per judgment.

    python benchmarks/bench_judge.py [--latency 0.2] [--repeats 3]

1. Throughput at a fixed server latency (default 200 ms) for concurrency 1/8/32/64, through the real
   ``openai`` client, tenacity and the SQLite cache. The server runs in its own process so that it
   does not share the client's interpreter lock. Goal: ≥ 90% of concurrency / latency.
2. Input tokens per judgment for ``--items-per-call`` 1 vs 10 at 100- and 1,000-item profiles, as the
   server counts them (characters / 4). Goal: ≥ 5× fewer with 10 items per call.

Medians over ``--repeats`` runs, measured side by side in one process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fake_openai import FakeOpenAI  # noqa: E402
from recjudge.collections import Collection  # noqa: E402
from recjudge.judge import JudgeConfig, judge_pairs  # noqa: E402

GENRES = ("Action", "Adventure", "Animation", "Comedy", "Crime", "Drama", "Fantasy", "Horror", "Romance",
          "Sci-Fi", "Thriller", "War")
WORDS = ("Night", "River", "Last", "City", "Secret", "Summer", "Road", "House", "King", "Dream", "Storm", "Garden")


def collection(n_items: int, n_users: int, history: int) -> Collection:
    titles = [f"Movie {k}: The {WORDS[k % 12]} of the {WORDS[(k * 7) % 12]} ({1950 + k % 70})"
              for k in range(n_items)]
    genres = [tuple(GENRES[(k * j) % 12] for j in (1, 5, 7)[: 1 + k % 3]) for k in range(n_items)]
    items = pd.DataFrame({"title": titles, "genres": genres}, index=[str(k) for k in range(n_items)])
    rows = [(f"u{u}", str((u * 31 + k) % n_items), float(1 + (u + k) % 5), k)
            for u in range(n_users) for k in range(history)]
    return Collection("bench", pd.DataFrame(rows, columns=["user", "item", "rating", "timestamp"]), items)


def start_server(latency: float):
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "fake_openai.py"), str(latency)],
                            stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    return proc, url


def throughput(url: str, latency: float, concurrency: int, repeats: int) -> tuple[int, float]:
    # a pool's shape: many users, a few candidates each (8 per user, 8 x concurrency calls in all)
    n_users = max(4, concurrency)
    n_calls = 8 * n_users
    coll = collection(1000, n_users, 50)
    pairs = [(f"u{u}", str(500 + k)) for u in range(n_users) for k in range(8)]
    rates = []
    for r in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            config = JudgeConfig(base_url=url, model="bench", concurrency=concurrency, profile_size=20,
                                 seed=r, timeout=30.0)
            start = time.perf_counter()
            res = judge_pairs(pairs, coll, config, cache_path=Path(tmp) / "c.sqlite")
            elapsed = time.perf_counter() - start
            assert res.summary.judged == n_calls and res.summary.calls == n_calls, res.summary
            rates.append(n_calls / elapsed)
    return n_calls, statistics.median(rates)


def tokens_per_judgment(profile_size: int, items_per_call: int) -> float:
    n_users, cands = 3, 10
    coll = collection(3000, n_users, profile_size + 50)
    hist = {u: set(g.item) for u, g in coll.interactions.groupby("user")}
    pairs = []
    for u in range(n_users):
        fresh = [str(k) for k in range(3000) if str(k) not in hist[f"u{u}"]][:cands]
        pairs += [(f"u{u}", d) for d in fresh]
    with FakeOpenAI() as server:
        config = JudgeConfig(base_url=server.url, model="bench", profile_size=profile_size,
                             items_per_call=items_per_call, concurrency=8)
        res = judge_pairs(pairs, coll, config)
        assert res.summary.judged == len(pairs), res.summary
        return res.summary.usage.prompt / len(pairs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrency", default="1,8,32,64")
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-key")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} cores (load average {load:.1f} at start), Python {sys.version.split()[0]}; "
          f"medians of {args.repeats} runs\n")

    print(f"1. throughput at {args.latency * 1000:.0f} ms server latency (server in its own process)")
    print(f"{'concurrency':>11} {'calls':>6} {'calls/s':>9} {'ideal':>8} {'ratio':>7}  goal >= 0.90")
    proc, url = start_server(args.latency)
    try:
        throughput(url, args.latency, 4, 1)  # warm-up: imports, connection pool
        ok = True
        for c in (int(x) for x in args.concurrency.split(",")):
            n, rate = throughput(url, args.latency, c, args.repeats)
            ideal = c / args.latency
            ok &= rate / ideal >= 0.9
            print(f"{c:>11} {n:>6} {rate:>9.1f} {ideal:>8.1f} {rate / ideal:>7.3f}  "
                  f"{'ok' if rate / ideal >= 0.9 else 'BELOW GOAL'}")
    finally:
        proc.terminate()
        proc.wait()

    print("\n2. input tokens per judgment (fields title+genres; 3 users x 10 candidates)")
    print(f"{'profile':>8} {'M=1':>9} {'M=10':>9} {'ratio':>7}  goal >= 5x")
    for size in (100, 1000):
        one, ten = tokens_per_judgment(size, 1), tokens_per_judgment(size, 10)
        ok &= one / ten >= 5
        print(f"{size:>8} {one:>9.0f} {ten:>9.0f} {one / ten:>6.2f}x  {'ok' if one / ten >= 5 else 'BELOW GOAL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
