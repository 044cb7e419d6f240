"""Shared input/output guards: outputs never overwrite inputs, temp files never linger, errors name the line."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from recjudge._io import atomic_write, check_output_dir, check_outputs, read_text, sweep_stale_temps, write_json
from recjudge.cli import main
from recjudge.data.trec import iter_run_files, read_qrels, read_run, read_runs, run_name
from recjudge.errors import ConfigError, InputError, OutputError
from recjudge.evaluation.measures import parse_measures

RUN = "u1 Q0 i1 1 3.0 t\nu1 Q0 i2 2 2.0 t\n"


# ------------------------------------------------------------------------ outputs that are inputs

@pytest.fixture
def files(tmp_path):
    src = tmp_path / "in.qrels"
    src.write_text("u1 0 i1 1\n")
    return tmp_path, src


def test_output_equal_to_input_is_refused(files):
    tmp, src = files
    with pytest.raises(OutputError, match="--out is the input"):
        check_outputs({"--out": src}, [src])
    # the same file through another spelling of its path
    with pytest.raises(OutputError):
        check_outputs({"--out": tmp / "." / "in.qrels"}, [src])


def test_symlink_and_hard_link_to_an_input_are_refused(files):
    tmp, src = files
    (tmp / "sym").symlink_to(src)
    os.link(src, tmp / "hard")
    for alias in ("sym", "hard"):
        with pytest.raises(OutputError, match="would be overwritten"):
            check_outputs({"--json": tmp / alias}, [src])


def test_a_file_inside_an_input_folder_is_an_input(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "a.run").write_text(RUN)
    with pytest.raises(OutputError, match="a.run"):
        check_outputs({"--json": runs / "a.run"}, [runs])
    check_outputs({"--json": runs / "new.json"}, [runs])  # a new file beside the runs is fine


def test_unwritable_outputs_are_refused_before_work(tmp_path):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    with pytest.raises(OutputError, match="is a folder"):
        check_outputs({"--out": tmp_path / "adir"})
    with pytest.raises(OutputError, match="is a file, not a folder"):
        check_outputs({"--out": tmp_path / "afile" / "x.qrels"})
    with pytest.raises(OutputError, match="name the same file"):
        check_outputs({"--out": tmp_path / "o", "--json": tmp_path / "o"})
    with pytest.raises(OutputError, match="is a file, not a folder"):
        check_output_dir(tmp_path / "afile", "--report")
    check_outputs({"--out": tmp_path / "new" / "deeper" / "x.qrels"})  # created on write


def test_read_only_folder_is_refused(tmp_path):
    # the kernel's own answer: as root (CI) root writes anywhere, so the check runs in a child that
    # has dropped to the nobody user, in a folder that user can enter
    from permissions import is_root, shared_tmp, unprivileged

    root = is_root()
    base = shared_tmp() if root else tmp_path
    ro = base / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    writable = Path(tempfile.gettempdir()) if root else base  # /tmp: anyone may create files there

    def check():
        with pytest.raises(OutputError, match=f"the folder {ro} is not writable"):
            check_outputs({"--out": ro / "x.qrels"})
        check_outputs({"--out": writable / "x.qrels"})  # the same user can write elsewhere

    try:
        if root:
            ok, why = unprivileged(check)
            assert ok, why
        else:
            check()
    finally:
        ro.chmod(0o755)
        if base != tmp_path:
            import shutil

            shutil.rmtree(base)


def test_read_only_folder_is_refused_by_the_access_check(tmp_path, monkeypatch):
    # as root every folder is writable, so fake the kernel's answer for one folder
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == ro else real(p, mode))
    with pytest.raises(OutputError, match="the folder .* is not writable"):
        check_outputs({"--out": ro / "x.qrels"})


# an output folder's errors name the folder as given, never a file recjudge would probe it with

def test_report_folder_errors_name_the_users_path(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputError) as err:
        check_output_dir(tmp_path / "afile" / "report", "--report")
    assert str(err.value).startswith(f"{tmp_path / 'afile' / 'report'}: --report: {tmp_path / 'afile'} is a file")
    assert ".probe" not in str(err.value)


def test_unwritable_report_folder_names_the_users_path(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == ro else real(p, mode))
    for out in (ro / "report", ro):
        with pytest.raises(OutputError) as err:
            check_output_dir(out, "--report")
        assert str(err.value) == f"{out}: --report: the folder {ro} is not writable (fix: choose a writable folder)"


def test_compare_report_under_a_file_names_the_report_path(tmp_path, capsys):
    repo = Path(__file__).resolve().parents[1]
    (tmp_path / "afile").write_text("x")
    target = tmp_path / "afile" / "report"
    assert main(["compare", "--runs", str(repo / "runs" / "example"), "--reference",
                 str(repo / "qrels" / "example-human.qrels"), "--candidate", str(repo / "qrels" / "example-llm.qrels"),
                 "--bootstrap", "0", "--report", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"{target}: --report: {tmp_path / 'afile'} is a file, not a folder" in err and ".probe" not in err


# ------------------------------------------------------------------------------- temp files

def test_stale_temp_of_a_dead_writer_is_swept_and_a_live_one_kept(tmp_path):
    target = tmp_path / "out.json"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".out.json.{dead.pid}.abcd.tmp"
    legacy = tmp_path / ".out.json.k2j3h4.tmp"  # written before temp names carried a pid
    live = tmp_path / f".out.json.{os.getppid()}.efgh.tmp"  # a live process: maybe writing right now
    other = tmp_path / f".other.json.{dead.pid}.abcd.tmp"  # another target's: not ours to touch
    for f in (stale, legacy, live, other):
        f.write_text("partial")
    write_json(target, {"a": 1})
    assert target.read_text() == '{\n  "a": 1\n}\n'
    assert not stale.exists() and not legacy.exists()
    assert live.exists() and other.exists()


def test_failed_write_leaves_neither_temp_nor_target(tmp_path):
    target = tmp_path / "x.txt"
    with pytest.raises(RuntimeError):
        with atomic_write(target) as fh:
            fh.write("half")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


SLOW_WRITER = r"""
import sys, time, types
import recjudge.cli as cli
from recjudge._io import atomic_write

def func(args):
    with atomic_write(args.path) as fh:
        fh.write("partial")
        fh.flush()
        print("writing", flush=True)
        time.sleep(60)
    return 0

def register(sub):
    p = sub.add_parser("slow")
    p.add_argument("path")
    p.set_defaults(func=func)

sys.modules["slowcmd"] = types.SimpleNamespace(register=register)
cli.COMMAND_MODULES = ("slowcmd",)
sys.exit(cli.main(["slow", sys.argv[1]]))
"""


def _start_writer(target: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(target)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    return proc


def test_sigterm_removes_the_temp_file_and_exits_143(tmp_path):
    target = tmp_path / "out.txt"
    proc = _start_writer(target)
    assert any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert "terminated" in proc.stderr.read()
    assert list(tmp_path.iterdir()) == []


def test_sigkill_leftover_is_swept_by_the_next_write(tmp_path):
    target = tmp_path / "out.txt"
    proc = _start_writer(target)
    proc.kill()
    proc.wait(timeout=30)
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1 and not target.exists()
    with atomic_write(target) as fh:
        fh.write("whole\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    assert sweep_stale_temps(target) == []


# ------------------------------------------------------------------------------ reading errors

def test_non_utf8_byte_is_reported_by_line(tmp_path):
    f = tmp_path / "bad.qrels"
    f.write_bytes(b"u1 0 i1 1\nu1 0 i\xe92 1\nu2 0 i3 0\n")  # 0xe9 is the 7th byte of line 2
    with pytest.raises(InputError) as exc:
        read_qrels(f)
    assert exc.value.line == 2
    assert str(exc.value).startswith(f"{f}:2: not UTF-8 text (byte 0xe9 at column 7)")


def test_unreadable_gzip_names_the_file(tmp_path):
    f = tmp_path / "r.run.gz"
    f.write_bytes(gzip.compress(RUN.encode())[:20])
    with pytest.raises(InputError, match="unreadable gzip run"):
        read_text(f, "run")


@pytest.mark.parametrize("label", ["99999999999999999999", "-1000000000", "1000000000"])
def test_labels_beyond_a_c_int_are_refused_with_the_line(label):
    with pytest.raises(InputError) as exc:
        read_qrels(f"u1 0 i1 1\nu1 0 i2 {label}\n")
    assert exc.value.line == 2 and "out of range" in str(exc.value)


def test_largest_label_is_accepted():
    assert read_qrels("u1 0 i1 999999999\n").frame.label.tolist() == [999_999_999]


# ------------------------------------------------------------------------------ measure strings

@pytest.mark.parametrize("bad, why", [
    ("P@0", "cutoff"), ("Judged@0", "cutoff"), ("nDCG@100000000000000000000", "cutoff"),
    ("Compat(p=1.5)", "between 0 and 1"), ("Compat(p=0)", "unknown measure"),
    ("P(rel=0)@10", "rel"), ("Bpref(rel=0)", "rel"), ("P@-1", "unknown measure"), ("Nope@3", "unknown measure"),
    ("nDCG@10,nDCG@10", "twice"),
])
def test_bad_measure_strings_are_config_errors(bad, why):
    with pytest.raises(ConfigError, match=why):
        parse_measures(bad)


def test_bad_measure_exits_2_on_every_command_that_takes_measures(tmp_path, capsys):
    runs = Path(__file__).resolve().parent.parent / "runs" / "example"
    qrels = Path(__file__).resolve().parent.parent / "qrels" / "example-human.qrels"
    for argv in (["evaluate", "--runs", str(runs), "--qrels", str(qrels), "--measures", "P@0"],
                 ["compare", "--runs", str(runs), "--reference", str(qrels), "--candidate", str(qrels),
                  "--measures", "Compat(p=1.5)"],
                 ["ties", "--runs", str(runs), "--qrels", str(qrels), "--measures", "P(rel=0)@10"]):
        assert main(argv) == 2, argv
        assert "error: --measures: measure" in capsys.readouterr().err


# ------------------------------------------------------------------------------ runs as people have them

@pytest.mark.parametrize("name, expected", [
    ("input.BM25.gz", "BM25"), ("BM25.gz", "BM25"), ("input.BM25", "BM25"), ("sys.run.gz", "sys"),
    ("input.run", "run"), ("a.trec", "a"), (".run", ".run"), ("input.a.b.txt", "a.b"),
])
def test_run_names_of_trec_archives(name, expected):
    assert run_name(name) == expected


def test_runs_folder_takes_every_run_and_says_what_it_skipped(tmp_path):
    (tmp_path / "input.alpha.gz").write_bytes(gzip.compress(RUN.encode()))
    (tmp_path / "beta.gz").write_bytes(gzip.compress(RUN.encode()))
    (tmp_path / "gamma").write_text(RUN)  # no suffix, parses as a run
    (tmp_path / "delta.run").write_text(RUN)
    (tmp_path / "delta.json").write_text("{}")  # a sidecar: not a run, not worth a word
    (tmp_path / "notes.md").write_text("# notes\n")
    (tmp_path / "README").write_text("these are runs\n")  # not a run: said
    (tmp_path / ".hidden.run").write_text(RUN)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "eps.run").write_text(RUN)
    with pytest.warns(UserWarning) as record:
        runs = read_runs(tmp_path)
    assert sorted(runs) == ["alpha", "beta", "delta", "gamma"]
    said = str(record[0].message)
    assert "sub: a subfolder" in said and "README: not a TREC run" in said
    assert "notes.md" not in said and "delta.json" not in said and ".hidden" not in said


def test_a_broken_file_named_like_a_run_is_an_error_not_a_skip(tmp_path):
    (tmp_path / "a.run").write_text(RUN)
    (tmp_path / "input.b.gz").write_bytes(gzip.compress(b"u1 Q0 i1 1\n"))
    with pytest.raises(InputError, match="input.b.gz:1: expected 6 columns"):
        read_runs(tmp_path)


def test_explicitly_named_file_is_taken_whatever_its_name(tmp_path):
    f = tmp_path / "results.dat"
    f.write_text(RUN)
    assert [p.name for p in iter_run_files([f])] == ["results.dat"]


def test_folder_without_runs_says_why(tmp_path):
    (tmp_path / "README").write_text("nothing here\n")
    with pytest.raises(InputError, match="folder holds no run files .*README: not a TREC run"):
        read_runs(tmp_path)


# ------------------------------------------------------------------------------ numbers on the CLI

@pytest.mark.parametrize("argv", [
    ["ties", "--runs", "runs/example", "--seed", "-1"],
    ["ties", "--runs", "runs/example", "--seed", str(2**64)],
    ["ties", "--runs", "runs/example", "--seeds", "1"],
    ["ties", "--runs", "runs/example", "--k", "0,10"],
    ["ties", "--runs", "runs/example", "--k", str(2**40)],
])
def test_out_of_range_numbers_exit_2(argv, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse reports type errors by exiting 2
        code = exc.code
    assert code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_cli_turns_a_stray_oserror_into_exit_2(tmp_path, capsys):
    folder = tmp_path / "noread"
    folder.mkdir()
    (folder / "a.run").write_text(RUN)
    # a qrels "file" that is a fifo-less special case: a folder where a file is expected
    assert main(["ties", "--runs", str(folder), "--qrels", str(tmp_path)]) == 2
    assert "expected a qrels, found a folder" in capsys.readouterr().err


def test_ties_json_may_not_overwrite_a_run(tmp_path, capsys):
    run = tmp_path / "a.run"
    run.write_text(RUN)
    before = run.read_bytes()
    assert main(["ties", "--runs", str(run), "--json", str(run)]) == 2
    assert run.read_bytes() == before
    assert "--json is the input" in capsys.readouterr().err


def test_monte_carlo_interval_is_two_sided_student_t():
    from recjudge.evaluation.ties import mc_interval

    # draws 1,2,3,4: mean 2.5, sd sqrt(5/3), se sqrt(5/3)/2; t(0.975, df=3) = 3.182446305284263
    lo, hi = mc_interval([1.0, 2.0, 3.0, 4.0], 0.95)
    half = 3.182446305284263 * (5 / 3) ** 0.5 / 2
    assert lo == pytest.approx(2.5 - half, abs=1e-12)
    assert hi == pytest.approx(2.5 + half, abs=1e-12)
    assert mc_interval([0.3, 0.3, 0.3], 0.95) == (0.3, 0.3)


def test_the_run_reader_keeps_ids_as_strings_and_names_faults():
    text = ("NA Q0 null 1 1e3 tag\n\n  u1\tQ0 nan 2 -0.5 tag  \n"
            "None Q0 007 1 2.50 t2\nu1 Q0 None 3 0 tag\n")
    f = read_run(text).frame
    assert f.qid.tolist() == ["NA", "u1", "None", "u1"]
    assert f.docid.tolist() == ["null", "nan", "007", "None"]  # ids stay strings: never missing values
    assert f.score.tolist() == [1000.0, -0.5, 2.5, 0.0] and f["rank"].tolist() == [1, 2, 1, 3]
    for bad in ("u Q0 d 1 nan t\n", "u Q0 d 1 1 t\nu Q0 d 2 1 t\n", "u Q0 d 1.5 1 t\n", "u Q0 d 1 1\n"):
        with pytest.raises(InputError, match=r"<inline>:\d"):
            read_run(bad)


def test_the_qrels_reader_names_every_fault_by_line():
    f = read_qrels("NA 0 null 2\n\nu1 Q0 nan -1\nu1 0 007 +3\n").frame
    assert f.qid.tolist() == ["NA", "u1", "u1"] and f.docid.tolist() == ["null", "nan", "007"]
    assert f.label.tolist() == [2, -1, 3] and f.iteration.tolist() == ["0", "Q0", "0"]
    for bad in ("u 0 d 1.5\n", "u 0 d 1\nu 0 d 2\n", "u 0 d\n", "u 0 d 1 x\n", "u 0 d 1000000000\n",
                "u 0 d 99999999999999999999\n"):
        with pytest.raises(InputError, match=r"<inline>:\d"):
            read_qrels(bad)


@pytest.mark.parametrize("policy", ["hash", "trec_eval", "docid", "input"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tie_order_keys_only_tied_rows_like_the_full_sort(policy, seed):
    # reference: one lexsort over every row with the policy's full keys (the documented order)
    import numpy as np
    import pandas as pd

    from recjudge.data.trec import hash_keys
    from recjudge.evaluation.ties.policy import order_rows

    rng = np.random.default_rng(seed)
    n = 400
    frame = pd.DataFrame({"qid": rng.choice(["u1", "u10", "u2", "é"], n),
                          "docid": [f"d{i}" for i in rng.permutation(n)],
                          "score": rng.integers(0, 6, n).astype(float)})
    docrank = pd.factorize(frame.docid.to_numpy(dtype=object), sort=True)[0]
    qrank = pd.factorize(frame.qid.to_numpy(dtype=object), sort=True)[0]
    keys = {"hash": (docrank, hash_keys(frame.qid, frame.docid, 5)), "trec_eval": (-docrank,),
            "docid": (docrank,), "input": (np.arange(n),)}[policy]
    want = np.lexsort((*keys, -frame.score.to_numpy(), qrank))
    assert order_rows(frame, policy, 5).tolist() == want.tolist()


def test_toml_files_that_are_folders_unreadable_or_not_utf8_name_the_path(tmp_path):
    from recjudge._io import read_toml

    (tmp_path / "dir.toml").mkdir()
    (tmp_path / "latin1.toml").write_bytes(b'name = "caf\xe9"\n')
    (tmp_path / "bad.toml").write_text('name = "x"\nname = "y"\n')
    with pytest.raises(InputError, match="dir.toml: expected a experiment file, found a folder"):
        read_toml(tmp_path / "dir.toml", "experiment file")
    with pytest.raises(InputError, match=r"latin1.toml:1: not UTF-8"):
        read_toml(tmp_path / "latin1.toml")
    with pytest.raises(InputError, match=r"bad.toml:2: not valid TOML"):
        read_toml(tmp_path / "bad.toml")
    with pytest.raises(InputError, match="missing.toml: file not found"):
        read_toml(tmp_path / "missing.toml")
