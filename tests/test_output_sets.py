"""A command's outputs are one set: a failure at any file boundary (an injected error, a full disk,
SIGTERM) leaves the old set exactly as it was, and a process killed while it commits leaves a
journal that the next command completes, so readers see the old set or the new one, never a mix."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_ablate import _overlap_experiment
from test_fill_cli import HUMAN, LLM, RUN1, RUN2

from recjudge.cli import main
from recjudge.outputs import JOURNAL_PREFIX, OutputSet, recover

REPO = Path(__file__).resolve().parent.parent


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


VOLATILE = ("elapsed", "seconds", "time", "created")


def _stable(obj):
    if isinstance(obj, dict):
        return {k: _stable(v) for k, v in obj.items() if not any(w in k.lower() for w in VOLATILE)}
    if isinstance(obj, list):
        return [_stable(v) for v in obj]
    return obj


def _outputs(folder: Path, inputs: dict[str, bytes]) -> dict[str, bytes]:
    """The command's files; a JSON without its timings (two runs of one set differ only there)."""
    out = {}
    for k, v in _snapshot(folder).items():
        if k in inputs or k.endswith(".lock"):
            continue
        if k.endswith(".json") and not k.endswith(".recjudge-outputs.json"):
            v = json.dumps(_stable(json.loads(v)), sort_keys=True).encode()
        out[k] = v
    return out


# ------------------------------------------------------------------------------ the commands

def _fill_case(tmp: Path):
    (tmp / "runs").mkdir()
    for name, text in (("human.qrels", HUMAN), ("llm.qrels", LLM), ("runs/r1.run", RUN1), ("runs/r2.run", RUN2)):
        (tmp / name).write_text(text)

    def argv(version: int) -> list[str]:
        return ["fill", "--human", str(tmp / "human.qrels"), "--llm", str(tmp / "llm.qrels"), "--runs",
                str(tmp / "runs"), "--out", str(tmp / "out" / "filled.qrels"), "--json", str(tmp / "out" / "fill.json"),
                "--min-overlap", "1", "--allow-weak-calibration", "--k", str(1 + version)]
    return argv


def _compare_case(tmp: Path):
    def argv(version: int) -> list[str]:
        ref, cand = ("human", "llm") if version == 0 else ("llm", "human")
        return ["compare", "--runs", str(REPO / "runs" / "example"), "--reference", str(REPO / "qrels" / f"example-{ref}.qrels"),
                "--candidate", str(REPO / "qrels" / f"example-{cand}.qrels"), "--bootstrap", "50",
                "--report", str(tmp / "out" / "report"), "--json", str(tmp / "out" / "compare.json")]
    return argv


def _judge_case(tmp: Path):
    coll = tmp / "tiny"
    coll.mkdir()
    inter = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    inter += [f"u{u}\t{u + k}\t{1 + (u + k) % 5}\t{1000 + 10 * u + k}" for u in range(4) for k in range(6)]
    (coll / "tiny.inter").write_text("\n".join(inter) + "\n")
    (coll / "tiny.item").write_text("item_id:token\tmovie_title:token_seq\n" + "".join(f"{k}\tMovie {k}\n" for k in range(30)))
    (tmp / "sys.run").write_text("".join(f"u{u} Q0 {20 + r} {r + 1} {9 - r} sys\n" for u in range(4) for r in range(8)))

    def argv(version: int) -> list[str]:
        return ["judge", "--runs", str(tmp / "sys.run"), "--collection", str(coll), "--split", "none", "--judge",
                "popularity", "--fields", "title", "--out", str(tmp / "out" / "j.qrels"), "--depth", str(3 + 2 * version)]
    return argv


def _ablate_case(tmp: Path):
    exp = _overlap_experiment(tmp, 12, 'name = "sizes"\nbootstrap = 20', "profile_size = [3]")
    text = exp.read_text()

    def argv(version: int) -> list[str]:
        exp.write_text(text.replace("per_user = 6", f"per_user = {6 - 2 * version}"))
        return ["ablate", str(exp)]
    return argv


def _evaluate_case(tmp: Path):
    def argv(version: int) -> list[str]:
        qrels = REPO / "qrels" / ("example-human.qrels" if version == 0 else "example-llm.qrels")
        return ["evaluate", "--runs", str(REPO / "runs" / "example"), "--qrels", str(qrels),
                "--report", str(tmp / "out" / "report"), "--json", str(tmp / "out" / "evaluate.json"),
                "--per-query", str(tmp / "out" / "per-query.tsv")]
    return argv


def _one_json_case(command: str):
    """agreement, ties: one JSON file, replaced whole or not at all."""
    def case(tmp: Path):
        def argv(version: int) -> list[str]:
            ref, cand = ("human", "llm") if version == 0 else ("llm", "human")
            q = {k: str(REPO / "qrels" / f"example-{k}.qrels") for k in ("human", "llm")}
            if command == "agreement":
                return ["agreement", "--reference", q[ref], "--candidate", q[cand], "--bootstrap", "20", "--missing", "drop",
                        "--json", str(tmp / "out" / "a.json")]
            return ["ties", "--runs", str(REPO / "runs" / "example"), "--qrels", q[ref], "--seeds", "3", "--permutations", "3",
                    "--json", str(tmp / "out" / "t.json")]
        return argv
    return case


def _compare_settings_case(tmp: Path):
    def argv(version: int) -> list[str]:
        ref, cand = ("human", "llm") if version == 0 else ("llm", "human")
        return ["compare-settings", "--runs-a", str(REPO / "runs" / "example"), "--qrels-a",
                str(REPO / "qrels" / f"example-{ref}.qrels"), "--runs-b", str(REPO / "runs" / "example"), "--qrels-b",
                str(REPO / "qrels" / f"example-{cand}.qrels"), "--json", str(tmp / "out" / "s.json")]
    return argv


def _audit_case(tmp: Path):
    (tmp / "a.qrels").write_text("u0 0 1 0\nu0 0 2 0\nu0 0 3 1\nu0 0 4 1\n")
    (tmp / "b.qrels").write_text("u0 0 1 0\nu0 0 2 1\nu0 0 3 1\nu0 0 4 1\n")

    def argv(version: int) -> list[str]:
        pair = ("a", "b") if version == 0 else ("b", "a")
        return ["audit", "consistency", "--qrels", *(str(tmp / f"{x}.qrels") for x in pair), "--json", str(tmp / "out" / "c.json")]
    return argv


def _annotate_case(tmp: Path):
    """annotate --export: each assessor's qrels and assessors.tsv from the logs (which argv rewrites)."""
    from recjudge.annotation.log import log_name

    labels = tmp / "out" / "labels"
    labels.mkdir(parents=True)
    logs = {name: labels / f"{log_name(name)}.jsonl" for name in ("ann", "ben")}
    for path in logs.values():
        path.write_text("")

    def line(name: str, item: int, label: int) -> str:
        return json.dumps({"v": 1, "event": "label", "annotator": name, "task": f"u0\t{item}", "user": "u0",
                           "item": str(item), "label": label, "seconds": 1.0, "epoch": 1.0}) + "\n"

    def argv(version: int) -> list[str]:
        logs["ann"].write_text("".join(line("ann", i, (i + version) % 8) for i in range(3 + version)))
        logs["ben"].write_text(line("ben", 1, 2) if version else "")
        return ["annotate", "--out", str(tmp / "out"), "--export"]
    return argv


CASES = {"annotate": _annotate_case, "fill": _fill_case, "compare": _compare_case, "judge": _judge_case, "ablate": _ablate_case,
         "evaluate": _evaluate_case, "agreement": _one_json_case("agreement"), "ties": _one_json_case("ties"),
         "compare-settings": _compare_settings_case, "audit": _audit_case}


def _fail_at(monkeypatch, k: int, how):
    """``how()`` when the k-th file of the set is about to be staged (a file boundary)."""
    seen = {"n": 0}
    stage = OutputSet.stage

    def staged(self, tmp, target):
        seen["n"] += 1
        if seen["n"] == k:
            how(target)
        return stage(self, tmp, target)

    monkeypatch.setattr(OutputSet, "stage", staged)
    return seen


def _count_files(monkeypatch, argv) -> int:
    seen = _fail_at(monkeypatch, 0, lambda target: None)
    assert main(argv) in (0, 4)
    monkeypatch.undo()
    return seen["n"]


@pytest.mark.parametrize("command", sorted(CASES))
def test_an_error_at_any_file_boundary_leaves_the_old_set(command, tmp_path, monkeypatch):
    argv = CASES[command](tmp_path)
    inputs = _snapshot(tmp_path)
    assert main(argv(0)) in (0, 4)
    old = _outputs(tmp_path, inputs)
    n = _count_files(monkeypatch, argv(1))  # the new set, to learn its files; then back to the old one
    new = _outputs(tmp_path, inputs)
    assert n >= 1 and new != old
    assert main(argv(0)) in (0, 4) and _outputs(tmp_path, inputs) == old
    for k in range(1, n + 1):
        def boom(target):
            raise OSError(28, "No space left on device", str(target))

        _fail_at(monkeypatch, k, boom)
        assert main(argv(1)) == 2, k
        monkeypatch.undo()
        # every old file as it was, no new file beside them, no temporary left behind
        assert _outputs(tmp_path, inputs) == old, (command, k)
        assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(JOURNAL_PREFIX)]
    assert main(argv(1)) in (0, 4) and _outputs(tmp_path, inputs) == new


def test_the_disk_error_names_the_file_and_the_free_space(tmp_path, monkeypatch, capsys):
    argv = _compare_case(tmp_path)
    _fail_at(monkeypatch, 2, lambda target: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    assert main(argv(0)) == 2
    err = capsys.readouterr().err
    assert "no space left on the device (" in err and "bytes free on" in err and str(tmp_path / "out") in err
    assert "a file:" not in err


_WRAPPER = """
import os, signal, sys
from recjudge.outputs import OutputSet
k, how = int(sys.argv[1]), sys.argv[2]
seen = [0]
stage = OutputSet.stage
def staged(self, tmp, target):
    seen[0] += 1
    if how == "term" and seen[0] == k:
        os.kill(os.getpid(), signal.SIGTERM)
    return stage(self, tmp, target)
OutputSet.stage = staged
if how == "kill":
    import recjudge.outputs as o
    replace = os.replace
    done = [0]
    def dying(a, b):
        replace(a, b)
        done[0] += 1
        if done[0] == k:
            os.kill(os.getpid(), signal.SIGKILL)
    o.os.replace = dying
from recjudge.cli import main
sys.exit(main(sys.argv[3:]))
"""


def _child(k: int, how: str, argv: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", _WRAPPER, str(k), how, *argv], capture_output=True, text=True,
                          env=env, timeout=300)


SHARES = 3  # compare's report has many files, each boundary a fresh process: split over the suite's workers


@pytest.mark.parametrize("share", range(SHARES))
@pytest.mark.parametrize("command", ["compare", "judge", "fill", "evaluate", "annotate"])
def test_sigterm_at_any_file_boundary_leaves_the_old_set(command, share, tmp_path, monkeypatch):
    """Each share takes every SHARES-th boundary; together they take every one."""
    argv = CASES[command](tmp_path)
    inputs = _snapshot(tmp_path)
    assert main(argv(0)) in (0, 4)
    old = _outputs(tmp_path, inputs)
    n = _count_files(monkeypatch, argv(1))
    assert main(argv(0)) in (0, 4)
    assert n >= 1
    for k in range(1 + share, n + 1, SHARES):
        done = _child(k, "term", argv(1))
        assert done.returncode == 143, done.stderr[-2000:]
        assert _outputs(tmp_path, inputs) == old, (command, k)


@pytest.mark.parametrize("command", ["compare", "judge"])
def test_a_process_killed_while_committing_leaves_a_set_the_next_command_completes(command, tmp_path, monkeypatch):
    argv = CASES[command](tmp_path)
    inputs = _snapshot(tmp_path)
    assert _count_files(monkeypatch, argv(1)) >= 2
    new = _outputs(tmp_path, inputs)
    assert main(argv(0)) in (0, 4)
    old = _outputs(tmp_path, inputs)
    done = _child(1, "kill", argv(1))  # killed after the first of the set's renames
    assert done.returncode == -signal.SIGKILL
    mixed = _outputs(tmp_path, inputs)
    assert mixed != old and mixed != new  # half renamed: what a reader must never be shown
    journals = [p for p in tmp_path.rglob(f"{JOURNAL_PREFIX}*")]
    assert journals
    # any recjudge read or write in that folder completes the set first
    for folder in {j.parent for j in journals}:
        recover(folder)
    assert _outputs(tmp_path, inputs) == new
    assert not list(tmp_path.rglob(f"{JOURNAL_PREFIX}*"))


def test_a_reader_completes_a_killed_set_before_reading(tmp_path):
    from recjudge.data.trec import read_qrels
    from recjudge.outputs import output_set

    target = tmp_path / "q.qrels"
    target.write_text("u 0 d 1\n")
    staged = tmp_path / ".q.qrels.999999.x.tmp"
    staged.write_text("u 0 d 3\n")
    (tmp_path / f"{JOURNAL_PREFIX}999999.json").write_text(
        '{"pid": 999999, "renames": [["%s", "%s"]], "removals": []}' % (staged, target))
    assert read_qrels(target).frame.label.tolist() == [3]
    assert not staged.exists() and not list(tmp_path.glob(f"{JOURNAL_PREFIX}*"))
    with output_set():
        pass  # an empty set commits nothing


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    path.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def test_a_full_tmpfs_leaves_the_old_report_and_names_the_file(tmp_path, capsys):
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "1m"):
        pytest.skip("a tmpfs cannot be mounted here (needs root and mount)")
    try:
        argv = _compare_case(disk)
        assert main(argv(0)) == 0
        old = _snapshot(disk / "out")
        # fill the disk but for a few KB: the new report's figures do not fit
        with open(disk / "filler", "wb") as fh:
            free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
            fh.write(b"\0" * max(0, free - 8192))
        capsys.readouterr()
        assert main(argv(1)) == 2
        err = capsys.readouterr().err
        assert "no space left on the device" in err and "bytes free on" in err
        assert _snapshot(disk / "out") == old
        assert not [p for p in (disk / "out").rglob("*") if p.name.endswith(".tmp")]
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_train_commits_each_system_with_its_sidecar(tmp_path, monkeypatch):
    """A failure while a system's files are staged leaves no half of the new pair: the system's run and
    sidecar of another configuration were removed before its retraining (never read as this one's), and
    neither new file is written without the other."""
    case = _judge_case(tmp_path)
    case(0)
    argv = ["train", "--collection", str(tmp_path / "tiny"), "--systems", "Pop,Random",
            "--out", str(tmp_path / "runs"), "--k", "5"]
    if main(argv) != 0:
        pytest.skip("train needs a split with test users here")
    old = _snapshot(tmp_path / "runs")
    assert {"Pop.run", "Pop.json", "Random.run", "Random.json"} <= set(old)

    def boom(target):
        if Path(target).name == "Random.json":
            raise OSError(28, "No space left on device")

    stage = OutputSet.stage

    def staged(self, tmp, target):
        boom(target)
        return stage(self, tmp, target)

    monkeypatch.setattr(OutputSet, "stage", staged)
    main(argv + ["--force", "--k", "6"])
    monkeypatch.undo()
    now = _snapshot(tmp_path / "runs")
    # Pop was retrained whole; Random's failure left neither a new run without its sidecar nor the old pair
    assert "Random.run" not in now and "Random.json" not in now
    assert now["Pop.run"] != old["Pop.run"] and now["Pop.json"] != old["Pop.json"]
    assert not [p for p in (tmp_path / "runs").rglob("*.tmp")]


def test_reproduce_keeps_its_old_report_at_any_file_boundary(tmp_path, monkeypatch, fake_openai):
    from test_reproduce import SMALL, build_study, oracle

    study = build_study(tmp_path / "study", participants=8, candidates=40, judged=10, run_length=15, systems=SMALL)
    oracle(fake_openai, study)
    out = tmp_path / "out"

    def argv(version: int) -> list[str]:
        return ["reproduce", "penha2025", "--collection", str(study["folder"]), "--out", str(out), "--model",
                "gpt-4o-mini", "--base-url", fake_openai.url, "--runs", str(study["runs"]), "--only", "table8",
                "--experiments", "1", "--per-user", str(6 - version), "--profile-size", "12", "--concurrency", "2",
                "--bootstrap", "20", "--yes"]

    def report() -> dict[str, bytes]:  # the report's files (the cache and runs beside it are not the set)
        files = _snapshot(out)
        return _outputs(out, {k: v for k, v in files.items() if k.endswith((".sqlite", ".sqlite-wal", ".sqlite-shm"))})

    assert main(argv(0)) == 0
    first = report()
    n = _count_files(monkeypatch, argv(1))
    assert n >= 3 and report() != first
    assert main(argv(0)) == 0
    old = report()  # the plan in the report counts what the cache now holds: the set as it stands
    for k in range(1, n + 1):
        _fail_at(monkeypatch, k, lambda target: (_ for _ in ()).throw(OSError(28, "No space left on device")))
        assert main(argv(1)) == 2, k
        monkeypatch.undo()
        assert report() == old, k


@pytest.mark.slow
@pytest.mark.parametrize("share", range(SHARES))
def test_demo_keeps_its_old_report_at_the_report_s_file_boundaries(share, tmp_path, monkeypatch):
    """The demo's report, figures, card and summary are one set: a failure while any of them is staged
    (each share of the test takes every SHARES-th file) leaves the old report folder as it was (the
    runs and qrels it wrote first are sets of their own)."""
    pytest.importorskip("recbole", reason="the demo loads MovieLens-100K from the recbole wheel")

    def argv(version: int) -> list[str]:
        return ["--quiet", "demo", "--reduced", "--systems", "Pop", "Random", "--judge", "overlap", "--depth", "3",
                "--per-user", str(5 - version), "--out", str(tmp_path / "out"), "--runs-dir", str(tmp_path / "runs"),
                "--qrels-dir", str(tmp_path / "qrels")]

    def report() -> dict[str, bytes]:
        return _outputs(tmp_path / "out", {})

    stage = OutputSet.stage

    def failing_at(k: int | None, seen: list):
        """Stage normally, counting the report folder's files; the k-th of them fails (a full disk)."""
        def staged(self, tmp, target):
            if (tmp_path / "out") in Path(target).parents:
                seen.append(Path(target).name)
                if len(seen) == k:
                    raise OSError(28, "No space left on device")
            return stage(self, tmp, target)
        return staged

    assert main(argv(0)) == 0  # trains: the runs' raw copies are then written once, not by every run after
    names: list[str] = []
    monkeypatch.setattr(OutputSet, "stage", failing_at(None, names))
    assert main(argv(1)) == 0
    monkeypatch.undo()
    new = report()
    assert len(names) >= 5 and "report.md" in names and "report.md" in new
    assert main(argv(0)) == 0
    old = report()
    assert old != new
    for k in range(1 + share, len(names) + 1, SHARES):  # the shares together: every file of the report
        monkeypatch.setattr(OutputSet, "stage", failing_at(k, []))
        assert main(argv(1)) == 2, k
        monkeypatch.undo()
        assert report() == old, k
        assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(JOURNAL_PREFIX)]
