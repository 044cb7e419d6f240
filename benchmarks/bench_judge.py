"""Judge benchmark: throughput against a local OpenAI-compatible server, and input tokens per judgment.

    python benchmarks/bench_judge.py [--latency 0.2] [--repeats 3]

1. Throughput at a fixed server latency (default 200 ms) for concurrency 8/32/128, end to end
   (profiles, prompts, the judge's HTTP client, retries, the SQLite cache), beside the bare openai
   client on each of its backends (httpx2, aiohttp), bare aiohttp and a minimal asyncio HTTP/1.1
   client sending the same request. The server runs in its own process so that it does not share the
   client's interpreter lock. Goal: ≥ 90% of concurrency / latency; the minimal client shows what the
   server and the machine allow.
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

from recjudge.data.collections import Collection  # noqa: E402
from recjudge.judging import JudgeSettings, judge_pairs  # noqa: E402

ROUNDS = 50  # calls per request slot in the throughput runs

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
    # a pool's shape: many users, a few candidates each; 50 rounds (10 s of ideal work at 200 ms),
    # so that the one-off costs (~0.3 s: profile index, cache, the last round's stragglers, the
    # summary) weigh ~3% rather than ~6% with 25 rounds
    n_users = max(4, concurrency)
    per_user = ROUNDS * concurrency // n_users
    n_calls = per_user * n_users
    coll = collection(1000, n_users, 50)
    pairs = [(f"u{u}", str(500 + k)) for u in range(n_users) for k in range(per_user)]
    rates = []
    for r in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            config = JudgeSettings(base_url=url, model="bench", concurrency=concurrency, profile_size=20,
                                 seed=r, timeout=30.0, yes=True)
            start = time.perf_counter()
            res = judge_pairs(pairs, coll, config, cache_path=Path(tmp) / "c.sqlite")
            elapsed = time.perf_counter() - start
            assert res.summary.judged == n_calls and res.summary.calls == n_calls, res.summary
            rates.append(n_calls / elapsed)
    return n_calls, statistics.median(rates)


def transport_ceiling(url: str, concurrency: int, repeats: int, via: str) -> float:
    """Calls/s of the same chat requests without recjudge: bare openai client on its httpx2 or aiohttp
    backend (``via`` openai, openai-aiohttp), or bare aiohttp."""
    import asyncio

    coll = collection(1000, 1, 50)
    from recjudge.judging.profile import HistoryProfiles, candidates_block
    from recjudge.judging.prompts import load_template

    prof = HistoryProfiles(coll, "title+genres", size=20)
    t = load_template("baseline")
    msgs = t.render(prof.profile_text("u0"), candidates_block([prof.render_item("500")], None), None)
    body = {"model": "bench", "messages": msgs.as_openai(),
            "response_format": {"type": "json_schema", "json_schema": t.json_schema(None)}}
    n = ROUNDS * concurrency

    async def go() -> float:
        if via.startswith("openai"):
            from openai import AsyncOpenAI, DefaultAioHttpClient
            http = DefaultAioHttpClient() if via == "openai-aiohttp" else None
            client = AsyncOpenAI(api_key="sk-bench", base_url=url, max_retries=0, http_client=http)
            send = lambda: client.post("/chat/completions", body=body, cast_to=dict)  # noqa: E731
            close = client.close
        else:
            import aiohttp
            client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency + 8))

            async def send():
                async with client.post(url + "/chat/completions", json=body) as resp:
                    return await resp.read()
            close = client.close
        sem = asyncio.Semaphore(concurrency)

        async def one():
            async with sem:
                await send()
        await one()
        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        rate = n / (time.perf_counter() - start)
        await close()
        return rate

    return statistics.median(asyncio.run(go()) for _ in range(repeats))


def minimal_client(url: str, concurrency: int, repeats: int) -> float:
    """Calls/s of a minimal asyncio HTTP/1.1 client (one keep-alive connection per worker, no
    library): what the server and this machine allow, the reference for the ratio."""
    import asyncio
    import json
    from urllib.parse import urlsplit

    coll = collection(1000, 1, 50)
    from recjudge.judging.profile import HistoryProfiles, candidates_block
    from recjudge.judging.prompts import load_template

    prof = HistoryProfiles(coll, "title+genres", size=20)
    t = load_template("baseline")
    msgs = t.render(prof.profile_text("u0"), candidates_block([prof.render_item("500")], None), None)
    payload = json.dumps({"model": "bench", "messages": msgs.as_openai(),
                          "response_format": {"type": "json_schema", "json_schema": t.json_schema(None)}}).encode()
    parts = urlsplit(url)
    head = (f"POST {parts.path}/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Authorization: Bearer sk-bench\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n").encode()
    n = ROUNDS * concurrency

    async def worker(count: int) -> None:
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        for _ in range(count):
            writer.write(head + payload)
            await writer.drain()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            json.loads(await reader.readexactly(length))
        writer.close()

    async def go() -> float:
        await worker(1)
        start = time.perf_counter()
        await asyncio.gather(*(worker(n // concurrency) for _ in range(concurrency)))
        return n / (time.perf_counter() - start)

    return statistics.median(asyncio.run(go()) for _ in range(repeats))


def tokens_per_judgment(profile_size: int, items_per_call: int) -> float:
    n_users, cands = 3, 10
    coll = collection(3000, n_users, profile_size + 50)
    hist = {u: set(g.item) for u, g in coll.interactions.groupby("user")}
    pairs = []
    for u in range(n_users):
        fresh = [str(k) for k in range(3000) if str(k) not in hist[f"u{u}"]][:cands]
        pairs += [(f"u{u}", d) for d in fresh]
    with FakeOpenAI() as server:
        config = JudgeSettings(base_url=server.url, model="bench", profile_size=profile_size,
                             items_per_call=items_per_call, concurrency=8)
        res = judge_pairs(pairs, coll, config)
        assert res.summary.judged == len(pairs), res.summary
        return res.summary.usage.prompt / len(pairs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrency", default="8,32,128")
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-key")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} cores (load average {load:.1f} at start), Python {sys.version.split()[0]}; "
          f"medians of {args.repeats} runs\n")

    print(f"1. throughput at {args.latency * 1000:.0f} ms server latency (server in its own process)")
    print("   calls/s of recjudge judge_pairs end to end, of the bare openai client (httpx2, aiohttp backends),")
    print("   bare aiohttp and a minimal asyncio client on the same requests; ratios are of the ideal C / latency")
    peers = ("openai", "openai-aiohttp", "aiohttp", "minimal")
    print(f"{'concurrency':>11} {'recjudge':>9} " + " ".join(f"{p:>14}" for p in peers) + f" {'ideal':>7} | ratio "
          f"{'recjudge':>8} " + " ".join(f"{p:>14}" for p in peers) + "  goal: recjudge >= 0.90")
    proc, url = start_server(args.latency)
    try:
        throughput(url, args.latency, 4, 1)  # warm-up: imports, connection pool
        ok = True
        for c in (int(x) for x in args.concurrency.split(",")):
            rate = throughput(url, args.latency, c, args.repeats)[1]
            rates = [transport_ceiling(url, c, args.repeats, p) for p in peers[:3]]
            rates.append(minimal_client(url, c, args.repeats))
            ideal = c / args.latency
            ok &= rate / ideal >= 0.9
            print(f"{c:>11} {rate:>9.1f} " + " ".join(f"{r:>14.1f}" for r in rates) + f" {ideal:>7.1f} |       "
                  f"{rate / ideal:>8.3f} " + " ".join(f"{r / ideal:>14.3f}" for r in rates) +
                  f"  {'ok' if rate / ideal >= 0.9 else 'BELOW GOAL'}")
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
