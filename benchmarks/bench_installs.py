"""`recjudge compare` on the same files from several installs (virtual environments), interleaved.

    python benchmarks/bench_installs.py DATA_DIR [--venv .venv-core] [--venv .venv] [--rounds 3]

DATA_DIR is a folder ``benchmarks/bench_compare.py --keep DIR`` wrote (runs/, reference.qrels,
candidate.qrels). Each round runs the command once from every install, in turn, each in a fresh
process (the one bench_compare.py times: tie share, hash tie policy, four measures under both qrels,
1,000 bootstrap resamples); the table gives medians and min-max of wall and CPU time, the peak RSS,
and each install's ratio to the first. The JSON outputs must be identical: the same values from
every install. Supported installs: the core one (``pip install -e ".[dev,fast]"``, newest NumPy and
pandas) and the README's (``.[train,dev]``, RecBole's NumPy 1 and pandas 2).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compare import MEASURES, fmt_range, run_child  # noqa: E402  (the same child timing)


def versions(python: Path) -> str:
    code = ("import importlib.metadata as m; print(', '.join(f'{d} {m.version(d)}' for d in "
            "('numpy', 'pandas', 'polars', 'scipy')))")
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path, help="a folder bench_compare.py --keep wrote")
    ap.add_argument("--venv", action="append", type=Path, help="an install to time (repeatable; default "
                    ".venv-core and .venv)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args()
    venvs = args.venv or [Path(".venv-core"), Path(".venv")]
    for v in venvs:
        if not (v / "bin" / "recjudge").exists():
            ap.error(f"{v}: no bin/recjudge here (pip install -e . into it first)")
    for need in ("runs", "reference.qrels", "candidate.qrels"):
        if not (args.data / need).exists():
            ap.error(f"{args.data}: no {need}; write the data with bench_compare.py --keep {args.data}")

    out = Path(tempfile.mkdtemp(prefix="bench-installs-"))
    samples: dict[Path, list] = {v: [] for v in venvs}
    print(f"# bench_installs: {args.data}, {args.rounds} rounds; load average at start: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for v in venvs:
        print(f"{v}: {versions(v / 'bin' / 'python')}")
    for r in range(args.rounds):
        for i, v in enumerate(venvs):
            cmd = [str(v / "bin" / "recjudge"), "compare", "--runs", str(args.data / "runs"),
                   "--reference", str(args.data / "reference.qrels"), "--candidate", str(args.data / "candidate.qrels"),
                   "--measures", ",".join(MEASURES), "--tie-policy", "hash", "--bootstrap", str(args.bootstrap),
                   "--json", str(out / f"{i}.json")]
            s = run_child(cmd)
            samples[v].append(s)
            print(f"  round {r + 1}: {str(v):<14} {s.wall:7.2f} s wall {s.cpu:7.2f} s CPU {s.rss_gb:5.2f} GB "
                  f"(load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    first = venvs[0]
    base_w = statistics.median(s.wall for s in samples[first])
    base_c = statistics.median(s.cpu for s in samples[first])
    print("| install | wall s, median (min–max) | CPU s, median (min–max) | peak RSS GB | wall ÷ first | CPU ÷ first |")
    print("|---|---|---|---|---|---|")
    for v in venvs:
        wall = [s.wall for s in samples[v]]
        cpu = [s.cpu for s in samples[v]]
        print(f"| {v} | {fmt_range(wall)} | {fmt_range(cpu)} | {max(s.rss_gb for s in samples[v]):.2f} | "
              f"{statistics.median(wall) / base_w:.2f} | {statistics.median(cpu) / base_c:.2f} |")
    worst = 0.0
    for i in range(1, len(venvs)):
        if filecmp.cmp(out / "0.json", out / f"{i}.json", shallow=False):
            continue
        diff = max_diff(json.loads((out / "0.json").read_text()), json.loads((out / f"{i}.json").read_text()))
        if diff is None:
            sys.exit(f"{venvs[i]}: its JSON differs from {first}'s in more than numbers ({out})")
        worst = max(worst, diff)
    print("\nJSON outputs across installs: " + ("byte-identical" if worst == 0 else f"numbers within {worst:.1e}"))
    if worst > 1e-9:
        sys.exit(f"installs disagree by {worst:.1e} (> 1e-9): {out}")


def max_diff(a, b) -> float | None:
    """The largest |a - b| over the numbers of two JSON values of one shape, None if anything else differs."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return None
        parts = [max_diff(a[k], b[k]) for k in a]
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return None
        parts = [max_diff(x, y) for x, y in zip(a, b)]
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b)
    else:
        return 0.0 if a == b else None
    return None if None in parts else max(parts, default=0.0)


if __name__ == "__main__":
    main()
