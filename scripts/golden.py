"""Record the outputs a refactoring must keep: run before and after, then diff the two folders.

    python scripts/golden.py OUT_DIR [--with-demo]

Writes, from the repository's example data, a generated tie-heavy set and a tiny collection judged
through the local fake OpenAI server (tests/fake_openai.py): the JSON of compare, agreement,
evaluate, ties and fill, the judge's qrels and summary, and (``--with-demo``) `demo --reduced`'s
summary. Volatile fields (timings, absolute paths, versions) are removed so two runs of unchanged
code give byte-identical files: ``diff -r BEFORE AFTER`` must print nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

VOLATILE = ("seconds", "elapsed", "time", "version", "created", "started", "finished", "wall")


def _clean(obj, root: str):
    if isinstance(obj, dict):
        return {k: _clean(v, root) for k, v in obj.items() if not any(w in k.lower() for w in VOLATILE)}
    if isinstance(obj, list):
        return [_clean(v, root) for v in obj]
    if isinstance(obj, str):
        return obj.replace(root, "<tmp>").replace(str(REPO), "<repo>")
    return obj


def run(argv: list[str]) -> tuple[int, str]:
    from recjudge.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    return code, out.getvalue()


def tie_heavy(folder: Path) -> tuple[Path, Path]:
    """Five runs whose scores tie in blocks (popularity-like) and graded qrels."""
    rng = np.random.default_rng(11)
    runs = folder / "ties-runs"
    runs.mkdir(parents=True, exist_ok=True)
    for s in range(5):
        lines = []
        for u in range(30):
            items = rng.choice(200, 20, replace=False)
            scores = np.sort(rng.integers(0, 5 + s, 20))[::-1]
            lines += [f"u{u} Q0 i{i} {r + 1} {sc} sys{s}" for r, (i, sc) in enumerate(zip(items, scores))]
        (runs / f"sys{s}.run").write_text("\n".join(lines) + "\n")
    qrels = folder / "ties.qrels"
    qrels.write_text("".join(f"u{u} 0 i{i} {rng.integers(0, 5)}\n"
                             for u in range(30) for i in rng.choice(200, 40, replace=False)))
    return runs, qrels


def judge_fake(folder: Path) -> dict:
    from fake_openai import FakeOpenAI

    coll = folder / "tiny"
    coll.mkdir(parents=True, exist_ok=True)
    inter = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    inter += [f"u{u}\t{u + k}\t{1 + (u + k) % 5}\t{1000 + 10 * u + k}" for u in range(5) for k in range(6)]
    (coll / "tiny.inter").write_text("\n".join(inter) + "\n")
    items = ["item_id:token\tmovie_title:token_seq\tclass:token_seq"]
    items += [f"{k}\tMovie {k}\t{'Drama' if k % 2 else 'Comedy Drama'}" for k in range(40)]
    (coll / "tiny.item").write_text("\n".join(items) + "\n")
    (folder / "sys.run").write_text("".join(f"u{u} Q0 {20 + r} {r + 1} {8 - r} sys\n"
                                            for u in range(5) for r in range(8)))
    with FakeOpenAI() as server:
        import os

        os.environ["OPENAI_API_KEY"] = "sk-golden"
        try:
            code, _ = run(["judge", "--runs", str(folder / "sys.run"), "--collection", str(coll), "--split", "none",
                       "--out", str(folder / "j.qrels"), "--cache", str(folder / "cache.sqlite"),
                           "--model", "fake-model", "--base-url", server.url, "--depth", "8"])
        finally:
            os.environ.pop("OPENAI_API_KEY")  # the demo would otherwise ask the real API
    return {"exit": code, "qrels": (folder / "j.qrels").read_text().splitlines()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--with-demo", action="store_true")
    args = ap.parse_args()
    import tempfile

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        root = str(tmpdir)
        # the repository's inputs by relative path: wrapped lines that name them do not depend on where
        # the checkout is
        os.chdir(REPO)
        ex_runs, human, llm = Path("runs/example"), Path("qrels/example-human.qrels"), Path("qrels/example-llm.qrels")
        t_runs, t_qrels = tie_heavy(tmpdir)
        jobs = {
            "compare-example": ["compare", "--runs", str(ex_runs), "--reference", str(human), "--candidate", str(llm),
                                "--bootstrap", "200"],
            "compare-ties": ["compare", "--runs", str(t_runs), "--reference", str(t_qrels), "--candidate", str(human),
                             "--bootstrap", "200"],
            "agreement-example": ["agreement", "--reference", str(human), "--candidate", str(llm)],
            "evaluate-example": ["evaluate", "--runs", str(ex_runs), "--qrels", str(human)],
            "evaluate-ties": ["evaluate", "--runs", str(t_runs), "--qrels", str(t_qrels)],
            "ties-ties": ["ties", "--runs", str(t_runs), "--qrels", str(t_qrels), "--seeds", "5", "--permutations", "3",
                          "--mc-samples", "20"],
            "fill-example": ["fill", "--human", str(human), "--llm", str(llm), "--runs", str(ex_runs),
                             "--out", str(tmpdir / "filled.qrels"), "--min-overlap", "5"],
        }
        for name, argv in jobs.items():
            code, stdout = run(argv + ["--json", str(tmpdir / f"{name}.json")])
            data = json.loads((tmpdir / f"{name}.json").read_text()) if code == 0 else None
            (out / f"{name}.json").write_text(json.dumps({"exit": code, "result": _clean(data, root)},
                                                         indent=1, sort_keys=True) + "\n")
            (out / f"{name}.stdout").write_text(stdout.replace(root, "<tmp>").replace(str(REPO), "<repo>"))
        (out / "filled.qrels").write_text((tmpdir / "filled.qrels").read_text())
        (out / "judge-fake.json").write_text(json.dumps(judge_fake(tmpdir / "judge"), indent=1) + "\n")
        if args.with_demo:
            code, _ = run(["demo", "--reduced", "--out", str(tmpdir / "demo"), "--qrels-dir", str(tmpdir / "q"),
                           "--runs-dir", str(tmpdir / "r")])
            summary = json.loads((tmpdir / "demo" / "summary.json").read_text())
            (out / "demo-summary.json").write_text(json.dumps({"exit": code, "summary": _clean(summary, root)},
                                                              indent=1, sort_keys=True) + "\n")
    print(f"golden outputs in {out}")


if __name__ == "__main__":
    main()
