"""Malformed input across every command, by class: each must be a clear error, never a traceback,
a silent exit 0 or an overwritten input.

Run as a script to classify how another checkout handles the same corpus (for before/after counts):

    PYTHONPATH=OTHER/src python tests/test_bad_input_corpus.py
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RUN = "".join(f"u{u} Q0 i{i} {r + 1} {9 - r} sys\n" for u in range(3) for r, i in enumerate(range(u, u + 8)))
QRELS = "".join(f"u{u} 0 i{i} {(u + i) % 3}\n" for u in range(3) for i in range(u, u + 10))


@dataclass(frozen=True)
class Case:
    cls: str  # the class
    name: str
    argv: tuple  # "{w}" is the workspace folder
    expect: str = ""  # a piece of the error message
    code: int = 2


def workspace(w: Path) -> None:
    (w / "runs").mkdir()
    (w / "runs" / "a.run").write_text(RUN)
    (w / "runs" / "b.run").write_text(RUN.replace(" 9 sys", " 9.5 sys"))
    (w / "human.qrels").write_text(QRELS)
    (w / "llm.qrels").write_text(QRELS.replace(" 2\n", " 1\n"))
    (w / "other.qrels").write_text("x1 0 z1 1\nx2 0 z2 0\n")
    (w / "big.qrels").write_text("u1 0 i1 99999999999999999999\n")
    (w / "latin1.qrels").write_bytes(b"u1 0 i1 1\nu1 0 caf\xe9 1\n")
    (w / "fake.qrels.gz").write_text(QRELS)
    (w / "trunc.run.gz").write_bytes(gzip.compress(RUN.encode())[:30])
    (w / "afile").write_text("x\n")
    (w / "adir").mkdir()
    (w / "tomldir.toml").mkdir()
    os.symlink(w / "human.qrels", w / "human-link.qrels")
    os.link(w / "runs" / "a.run", w / "a-hard.run")
    coll = w / "tiny"
    coll.mkdir()
    inter = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    inter += [f"u{u}\ti{u + k}\t{1 + (u + k) % 5}\t{1000 + 10 * u + k}" for u in range(3) for k in range(6)]
    (coll / "tiny.inter").write_text("\n".join(inter) + "\n")
    items = ["item_id:token\tmovie_title:token_seq\tclass:token_seq"]
    items += [f"i{k}\tMovie {k}\t{'Drama' if k % 2 else 'Comedy'}" for k in range(20)]
    (coll / "tiny.item").write_text("\n".join(items) + "\n")
    (w / "topics.tsv").write_text("q9\tnothing matches\n")
    for name, body in TOMLS.items():
        (w / f"{name}.toml").write_text(body.format(w=w))


TOMLS = {
    "abl_judge_str": 'name = "x"\ncollection = "{w}/tiny"\nreference = "{w}/human.qrels"\nruns = "{w}/runs"\n'
                     'judge = "overlap"\n[grid]\nprofile_size = [5]\n',
    "abl_grid_int": 'name = "x"\ncollection = "{w}/tiny"\nreference = "{w}/human.qrels"\nruns = "{w}/runs"\n'
                    'grid = 3\n[judge]\njudge = "overlap"\n',
    "abl_size_str": 'name = "x"\ncollection = "{w}/tiny"\nreference = "{w}/human.qrels"\nruns = "{w}/runs"\n'
                    '[judge]\njudge = "overlap"\n[grid]\nprofile_size = "50"\n',
    "abl_runs_int": 'name = "x"\ncollection = "{w}/tiny"\nreference = "{w}/human.qrels"\nruns = 5\n'
                    '[judge]\njudge = "overlap"\n[grid]\nprofile_size = [5]\n',
    "abl_out_int": 'name = "x"\ncollection = "{w}/tiny"\nreference = "{w}/human.qrels"\nruns = "{w}/runs"\nout = 5\n'
                   '[judge]\njudge = "overlap"\n[grid]\nprofile_size = [5]\n',
    "abl_repeats_bool": 'name = "x"\ncollection = "{w}/tiny"\nreference = "{w}/human.qrels"\nruns = "{w}/runs"\n'
                        '[judge]\njudge = "overlap"\nrepeats = true\n[grid]\nprofile_size = [5]\n',
    "abl_measures_str": 'name = "x"\ncollection = "{w}/tiny"\nreference = "{w}/human.qrels"\nruns = "{w}/runs"\n'
                        'measures = "nDCG@10"\n[judge]\njudge = "overlap"\n[grid]\nprofile_size = [5]\n',
    "abl_bad_measure": 'name = "x"\ncollection = "{w}/tiny"\nreference = "{w}/human.qrels"\nruns = "{w}/runs"\n'
                       'measures = ["P@0"]\n[judge]\njudge = "overlap"\n[grid]\nprofile_size = [5]\n',
    "abl_bad_judge": 'name = "x"\ncollection = "{w}/tiny"\nreference = "{w}/human.qrels"\nruns = "{w}/runs"\n'
                     '[judge]\njudge = "oracle"\n[grid]\nprofile_size = [5]\n',
    "abl_bad_field": 'name = "x"\ncollection = "{w}/tiny"\nreference = "{w}/human.qrels"\nruns = "{w}/runs"\n'
                     '[judge]\njudge = "overlap"\n[grid]\nfields = ["title+nonsense"]\n',
}

R, H, L = "{w}/runs", "{w}/human.qrels", "{w}/llm.qrels"
JUDGE = ("judge", "--runs", R, "--collection", "{w}/tiny", "--split", "none", "--judge", "overlap",
         "--depth", "2", "--cache", "{w}/cache.sqlite")
CASES = [
    # 1. an output that is an input
    Case("output is input", "fill --out = --human", ("fill", "--human", H, "--llm", L, "--runs", R, "--out", H), "--out"),
    Case("output is input", "fill --out = symlink of --human",
         ("fill", "--human", H, "--llm", L, "--runs", R, "--out", "{w}/human-link.qrels"), "--out"),
    Case("output is input", "fill --json = --llm",
         ("fill", "--human", H, "--llm", L, "--runs", R, "--out", "{w}/o.qrels", "--json", L), "--json"),
    Case("output is input", "compare --json = run file",
         ("compare", "--runs", R, "--reference", H, "--candidate", L, "--json", "{w}/runs/a.run"), "--json"),
    Case("output is input", "compare --json = hard link of a run",
         ("compare", "--runs", "{w}/a-hard.run", "--reference", H, "--candidate", L, "--json", "{w}/runs/a.run"),
         "--json"),
    Case("output is input", "evaluate --json = qrels",
         ("evaluate", "--runs", R, "--qrels", H, "--json", H), "--json"),
    Case("output is input", "agreement --json = reference",
         ("agreement", "--reference", H, "--candidate", L, "--json", H), "--json"),
    Case("output is input", "ties --json = run", ("ties", "--runs", R, "--json", "{w}/runs/b.run"), "--json"),
    Case("output is input", "judge --out = run file", (*JUDGE, "--out", "{w}/runs/a.run"), "--out"),
    Case("output is input", "judge --out = hard link of a run", (*JUDGE, "--out", "{w}/a-hard.run"), "--out"),
    # 2. file-system errors
    Case("file system", "compare --json is a folder",
         ("compare", "--runs", R, "--reference", H, "--candidate", L, "--json", "{w}/adir"), "folder"),
    Case("file system", "evaluate --json parent is a file",
         ("evaluate", "--runs", R, "--qrels", H, "--json", "{w}/afile/x.json"), "not a folder"),
    Case("file system", "compare --report is a file",
         ("compare", "--runs", R, "--reference", H, "--candidate", L, "--report", "{w}/afile"), "not a folder"),
    Case("file system", "judge --out is a folder", (*JUDGE, "--out", "{w}/adir"), "folder"),
    Case("file system", "judge --out parent is a file", (*JUDGE, "--out", "{w}/afile/j.qrels"), "not a folder"),
    Case("file system", "ablate TOML is a folder", ("ablate", "{w}/tomldir.toml"), "folder"),
    Case("file system", "train --collection-config is a folder",
         ("train", "--collection", "{w}/tiny", "--collection-config", "{w}/tomldir.toml", "--systems", "Pop",
          "--out", "{w}/trained"), "folder"),
    Case("file system", "qrels is a folder", ("agreement", "--reference", "{w}/adir", "--candidate", L), "folder"),
    Case("file system", "qrels missing", ("evaluate", "--runs", R, "--qrels", "{w}/nope.qrels"), "not found"),
    Case("file system", "run .gz truncated", ("evaluate", "--runs", "{w}/trunc.run.gz", "--qrels", H), "gzip"),
    Case("file system", "qrels named .gz but plain", ("agreement", "--reference", "{w}/fake.qrels.gz",
                                                      "--candidate", L), "not gzip"),
    # 3. validate everything before writing
    Case("validate first", "fill --validate 1.5",
         ("fill", "--human", H, "--llm", L, "--runs", R, "--out", "{w}/v.qrels", "--validate", "1.5"), "validate"),
    Case("validate first", "fill with runs sharing no user",
         ("fill", "--human", "{w}/other.qrels", "--llm", "{w}/other.qrels", "--runs", R, "--out", "{w}/v2.qrels"),
         "user"),
    # 4. numbers and measure strings
    Case("numbers", "qrels label of 20 digits", ("agreement", "--reference", "{w}/big.qrels", "--candidate", L),
         "out of range"),
    Case("numbers", "compare --seed -1", ("compare", "--runs", R, "--reference", H, "--candidate", L,
                                          "--seed", "-1"), "seed"),
    Case("numbers", "ties --seed -1", ("ties", "--runs", R, "--seed", "-1"), "seed"),
    Case("numbers", "fill --seed -1", ("fill", "--human", H, "--llm", L, "--runs", R, "--out", "{w}/s.qrels",
                                       "--seed", "-1"), "seed"),
    Case("numbers", "judge --seed -1", (*JUDGE, "--out", "{w}/s.qrels", "--seed", "-1"), "seed"),
    Case("numbers", "agreement --clip huge", ("agreement", "--reference", H, "--candidate", L, "--clip",
                                              "0..99999999999999999999"), "clip"),
    Case("numbers", "fill --k huge", ("fill", "--human", H, "--llm", L, "--runs", R, "--out", "{w}/k.qrels",
                                      "--k", "100000000000000000000"), "k"),
    Case("numbers", "evaluate P@0", ("evaluate", "--runs", R, "--qrels", H, "--measures", "P@0"), "cutoff"),
    Case("numbers", "compare Judged@0", ("compare", "--runs", R, "--reference", H, "--candidate", L,
                                         "--measures", "Judged@0"), "cutoff"),
    Case("numbers", "evaluate Compat(p=1.5)", ("evaluate", "--runs", R, "--qrels", H, "--measures",
                                               "Compat(p=1.5)"), "between 0 and 1"),
    Case("numbers", "evaluate P(rel=0)@10", ("evaluate", "--runs", R, "--qrels", H, "--measures", "P(rel=0)@10"),
         "rel"),
    Case("numbers", "ties P(rel=0)@10", ("ties", "--runs", R, "--qrels", H, "--measures", "P(rel=0)@10"), "rel"),
    Case("numbers", "compare --bootstrap -5", ("compare", "--runs", R, "--reference", H, "--candidate", L,
                                               "--bootstrap", "-5"), "bootstrap"),
    # 5. ablate experiment files
    *[Case("ablate types", name, ("ablate", "{w}/" + name + ".toml"), "key") for name in TOMLS],
    # 6. results from nothing
    Case("results from nothing", "agreement with a candidate sharing no pair",
         ("agreement", "--reference", H, "--candidate", "{w}/other.qrels"), "other"),
    Case("results from nothing", "judge --dry-run --topics matching no query",
         ("judge", "--runs", R, "--collection", "{w}/tiny", "--split", "none", "--topics", "{w}/topics.tsv",
          "--dry-run", "--out", "{w}/t.qrels", "--model", "m"), "topics"),
    Case("results from nothing", "compare where the runs share no user with the qrels",
         ("compare", "--runs", R, "--reference", "{w}/other.qrels", "--candidate", L), "user"),
    # 8. bytes that are not UTF-8
    Case("encoding", "non-UTF-8 qrels names the line", ("agreement", "--reference", "{w}/latin1.qrels",
                                                        "--candidate", L), "latin1.qrels:2"),
]

CLI = "import sys; from recjudge.cli import main; sys.exit(main(sys.argv[1:]))"


def _argv(case: Case, w: Path) -> list[str]:
    return [a.replace("{w}", str(w)) for a in case.argv]


def _snapshot(w: Path) -> dict[str, bytes]:
    return {str(p.relative_to(w)): p.read_bytes() for p in sorted(w.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_a_clear_error(case, tmp_path, capsys, monkeypatch):
    from recjudge.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-used")
    workspace(tmp_path)
    before = _snapshot(tmp_path)
    try:
        code = main(_argv(case, tmp_path))
    except SystemExit as exc:  # argparse rejects a value by exiting 2
        code = exc.code
    err = capsys.readouterr().err
    assert code == case.code, err
    assert case.expect.lower() in err.lower(), err
    after = _snapshot(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before, "an input changed"
    new = set(after) - set(before)
    assert not [n for n in new if not n.startswith("cache.sqlite")], f"files written: {sorted(new)}"


def classify(cases=CASES) -> dict[str, dict[str, int]]:
    """Run each case in a fresh interpreter and say how it ended (clear error, traceback, silent accept, …)."""
    import tempfile

    out: dict[str, dict[str, int]] = {}
    for case in cases:
        with tempfile.TemporaryDirectory() as tmp:
            w = Path(tmp)
            workspace(w)
            before = _snapshot(w)
            proc = subprocess.run([sys.executable, "-c", CLI, *_argv(case, w)], capture_output=True, text=True,
                                  env={**os.environ, "OPENAI_API_KEY": "sk-never-used"}, timeout=300)
            after = _snapshot(w)
            if any(after.get(k) != v for k, v in before.items()):
                kind = "input overwritten"
            elif "Traceback" in proc.stderr:
                kind = "traceback"
            elif proc.returncode == 0:
                kind = "silent accept"
            elif [n for n in set(after) - set(before) if not n.startswith("cache.sqlite")]:
                kind = "wrote despite error"
            elif case.expect.lower() not in proc.stderr.lower():
                kind = "poor message"
            else:
                kind = "clear error"
            out.setdefault(case.cls, {}).setdefault(kind, 0)
            out[case.cls][kind] += 1
            print(f"{kind:18} {case.cls:22} {case.name}", flush=True)
    return out


if __name__ == "__main__":
    totals: dict[str, int] = {}
    for cls, kinds in classify().items():
        for kind, n in kinds.items():
            totals[kind] = totals.get(kind, 0) + n
    print("\n" + ", ".join(f"{n} {k}" for k, n in sorted(totals.items())) + f" of {len(CASES)} cases")
