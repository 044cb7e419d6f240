"""Do `recjudge agreement` and `recjudge ties` scale linearly? Each CLI at 1/10 and at full size.

    .venv/bin/python benchmarks/bench_scaling.py [--users 10000] [--repeats 3] [--keep DIR]

Each command runs as a user runs it (a fresh interpreter, files read included) on synthetic data
of `--users` and of a tenth as many: agreement on a reference and a candidate qrels of 60 judged
items per user (graded 0-4, the candidate a noisy copy); ties on one popularity-like run (every
user has ties in the top 100) with 60 judged items per user. Prints median wall time and peak RSS
at both sizes and the time ratio: linear scaling gives a ratio near 10 (startup pulls it below).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compare import timed  # noqa: E402
from bench_ties import synthetic  # noqa: E402

from recjudge.data.trec import Qrels, write_qrels, write_run  # noqa: E402


def label_sets(users: int, judged: int, seed: int = 0) -> tuple[Qrels, Qrels]:
    rng = np.random.default_rng(seed)
    qid = np.repeat([f"u{i}" for i in range(users)], judged)
    docid = [f"i{j}" for i in range(users) for j in rng.choice(5000, judged, replace=False)]
    human = rng.integers(0, 5, users * judged)
    llm = np.clip(human + rng.integers(-1, 2, human.size), 0, 7)
    frame = pd.DataFrame({"qid": qid, "iteration": "0", "docid": docid})
    return Qrels("human", frame.assign(label=human)), Qrels("llm", frame.assign(label=llm))


def input_paths(folder: Path) -> dict[str, Path]:
    """The input files of one size, by role (written by :func:`write_inputs`, read by the commands)."""
    return {"human": folder / "human.qrels", "llm": folder / "llm.qrels", "run": folder / "pop.run",
            "qrels": folder / "ties.qrels"}


def write_inputs(folder: Path, users: int) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    human, llm = label_sets(users, 60)
    run, qrels = synthetic(users, 100, 60)
    paths = input_paths(folder)
    write_qrels(human, paths["human"])
    write_qrels(llm, paths["llm"])
    write_run(run, paths["run"])
    write_qrels(qrels, paths["qrels"])
    return paths


def commands(p: dict[str, Path]) -> dict[str, list[str]]:
    exe = [str(Path(sys.executable).with_name("recjudge"))]  # the installed command, as a user runs it
    return {
        "agreement": [*exe, "agreement", "--reference", str(p["human"]), "--candidate", str(p["llm"])],
        "ties": [*exe, "ties", str(p["run"]), "--qrels", str(p["qrels"]), "--seeds", "20", "--permutations", "5"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="write the inputs here (default: a temporary folder)")
    ap.add_argument("--write-only", nargs=2, metavar=("DIR", "USERS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write_only:
        write_inputs(Path(args.write_only[0]), int(args.write_only[1]))
        return
    root = args.keep or Path(tempfile.mkdtemp(prefix="recjudge-scaling-"))
    sizes = (args.users // 10, args.users)
    inputs = {}
    for n in sizes:
        # written by a child: a fork of a parent holding the data would count it in the commands' peak RSS
        subprocess.run([sys.executable, __file__, "--write-only", str(root / f"u{n}"), str(n)], check=True)
        inputs[n] = input_paths(root / f"u{n}")
    rows = []
    for name in ("agreement", "ties"):
        row = {"command": name}
        for n in sizes:
            runs = [timed(commands(inputs[n])[name]) for _ in range(args.repeats)]
            row[f"s @{n}"] = statistics.median(w for w, _ in runs)
            row[f"GB @{n}"] = max(m for _, m in runs)
        row["time ratio"] = row[f"s @{sizes[1]}"] / row[f"s @{sizes[0]}"]
        rows.append(row)
    print(f"{args.repeats} runs each, medians; inputs in {root}")
    print(pd.DataFrame(rows).set_index("command").round(3).to_string())


if __name__ == "__main__":
    main()
