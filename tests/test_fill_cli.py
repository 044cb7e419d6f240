"""``recjudge fill`` refuses bad options, bad inputs and outputs that are inputs before writing anything."""

from __future__ import annotations

import os

import pytest

from recjudge.cli import main

HUMAN = "u1 0 a 3\nu1 0 b 1\nu1 0 c 0\nu2 0 d 2\nu2 0 e 0\n"
LLM = "u1 0 a 5\nu1 0 b 2\nu1 0 c 0\nu1 0 x 5\nu2 0 d 5\nu2 0 e 0\nu2 0 y 2\n"
RUN1 = "u1 Q0 a 1 3 r1\nu1 Q0 x 2 2 r1\nu1 Q0 b 3 1 r1\nu2 Q0 y 1 2 r1\nu2 Q0 d 2 1 r1\n"
RUN2 = "u1 Q0 z 1 2 r2\nu1 Q0 c 2 1 r2\nu2 Q0 e 1 1 r2\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "runs").mkdir()
    paths = {"human": tmp_path / "human.qrels", "llm": tmp_path / "llm.qrels",
             "run1": tmp_path / "runs" / "r1.run", "run2": tmp_path / "runs" / "r2.run"}
    for key, text in (("human", HUMAN), ("llm", LLM), ("run1", RUN1), ("run2", RUN2)):
        paths[key].write_text(text)
    return tmp_path, paths


def _snapshot(folder):
    """Every file under ``folder`` with its bytes: a refused command must leave it exactly as it was."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _fill(tmp_path, paths, *extra, out=None, allow_weak=False):
    args = ["fill", "--human", str(paths["human"]), "--llm", str(paths["llm"]), "--runs", str(tmp_path / "runs"),
            "--out", str(out if out is not None else tmp_path / "filled.qrels"), "--min-overlap", "1", *extra,
            *(["--allow-weak-calibration"] if allow_weak else [])]
    return main(args)


def _refused(tmp_path, paths, *extra, out=None, allow_weak=False):
    """A fill that must exit 2 and leave every file under ``tmp_path`` exactly as it was."""
    before = _snapshot(tmp_path)
    assert _fill(tmp_path, paths, *extra, out=out, allow_weak=allow_weak) == 2
    assert _snapshot(tmp_path) == before


def test_a_weak_calibration_is_refused_before_anything_is_written(files, capsys):
    tmp_path, paths = files
    # at --min-overlap 2, LLM grade 2 (one shared pair) cannot be calibrated, and it fills y
    _refused(tmp_path, paths, "--json", str(tmp_path / "fill.json"), "--min-overlap", "2")
    assert "too few shared pairs: llm grade(s) 2 (1)" in capsys.readouterr().err
    assert _fill(tmp_path, paths, "--json", str(tmp_path / "fill.json"), "--min-overlap", "2", allow_weak=True) == 0
    assert "llm-calibrated-weak" in (tmp_path / "filled.qrels.sources.tsv").read_text()


def test_a_good_fill_writes_qrels_sources_and_json(files):
    tmp_path, paths = files
    # --validate calibrates on half of five human labels, which cannot calibrate: allowed explicitly
    assert _fill(tmp_path, paths, "--json", str(tmp_path / "fill.json"), "--validate", "0.5", allow_weak=True) == 0
    assert {"filled.qrels", "filled.qrels.sources.tsv", "fill.json"} <= set(_snapshot(tmp_path))


@pytest.mark.parametrize("target", ["human", "llm", "run1"])
@pytest.mark.parametrize("how", ["same path", "symlink", "hard link"])
def test_out_that_is_an_input_is_refused_and_the_input_untouched(files, capsys, target, how):
    tmp_path, paths = files
    if how == "same path":
        out = paths[target]
    else:
        out = tmp_path / "alias.qrels"
        (os.symlink if how == "symlink" else os.link)(paths[target], out)
    _refused(tmp_path, paths, out=out)  # nothing overwritten, no .sources.tsv, no temp file
    assert "would be overwritten" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["human", "run2"])
def test_json_that_is_an_input_is_refused(files, capsys, target):
    tmp_path, paths = files
    _refused(tmp_path, paths, "--json", str(paths[target]))
    assert "--json" in capsys.readouterr().err


def test_sources_companion_that_is_an_input_is_refused(files, capsys):
    tmp_path, paths = files
    # --out x.qrels writes x.qrels.sources.tsv: here that name is the human qrels
    human = tmp_path / "mixed.qrels.sources.tsv"
    paths["human"].rename(human)
    paths["human"] = human
    _refused(tmp_path, paths, out=tmp_path / "mixed.qrels")
    assert ".sources.tsv" in capsys.readouterr().err


def test_json_and_out_on_one_path_are_refused(files, capsys):
    tmp_path, paths = files
    _refused(tmp_path, paths, "--json", str(tmp_path / "filled.qrels"))
    assert "same file" in capsys.readouterr().err


@pytest.mark.parametrize("option,value", [
    ("--validate", "1.5"), ("--validate", "1"), ("--validate", "0"), ("--validate", "-0.2"),
    ("--validate", "nan"), ("--validate", "half"),
    ("--k", "0"), ("--k", "-3"), ("--k", str(2**31)), ("--k", "1e3"),
    ("--min-overlap", "-1"), ("--min-overlap", "two"),
    ("--seed", "-1"), ("--seed", str(2**63)),
])
def test_option_out_of_range_exits_2_before_writing(files, capsys, option, value):
    tmp_path, paths = files
    before = _snapshot(tmp_path)
    try:
        code = _fill(tmp_path, paths, option, value)
    except SystemExit as exc:  # argparse refused the text; the settings refuse the value (main returns 2)
        code = exc.code
    assert code == 2
    assert _snapshot(tmp_path) == before
    assert option in capsys.readouterr().err


def test_runs_sharing_no_user_with_the_human_qrels_write_nothing(files, capsys):
    tmp_path, paths = files
    for key in ("run1", "run2"):
        paths[key].write_text(paths[key].read_text().replace("u1", "v1").replace("u2", "v2"))
    _refused(tmp_path, paths, "--json", str(tmp_path / "fill.json"))
    assert "share no user" in capsys.readouterr().err


def test_uncalibratable_llm_qrels_write_nothing(files, capsys):
    tmp_path, paths = files
    paths["llm"].write_text("u9 0 zz 3\n")  # no (user, item) pair in common with the human qrels
    _refused(tmp_path, paths)
    assert "cannot be calibrated" in capsys.readouterr().err


def test_validation_that_cannot_run_writes_nothing(files, capsys):
    """--validate fails after the fill itself could be written: the fill must not be written either."""
    tmp_path, paths = files
    # 5 human labels: hiding 1% of them hides none (seed 0), which validation refuses
    _refused(tmp_path, paths, "--validate", "0.01", "--json", str(tmp_path / "fill.json"))
    assert "leaves nothing to compare" in capsys.readouterr().err


def test_unknown_measure_exits_2_before_writing(files, capsys):
    tmp_path, paths = files
    _refused(tmp_path, paths, "--measures", "nDCG@10,Bogus@3", "--json", str(tmp_path / "fill.json"))
    assert "Bogus@3" in capsys.readouterr().err


def test_measures_reach_every_scenario_table(files, capsys):
    import json

    tmp_path, paths = files
    assert _fill(tmp_path, paths, "--allow-weak-calibration", "--measures", "P@1,RR", "--validate", "0.5",
                 "--json", str(tmp_path / "fill.json")) == 0
    data = json.loads((tmp_path / "fill.json").read_text())
    assert data["scenarios"]["measures"] == ["P@1", "RR"]
    assert list(data["scenarios"]["kendall_tau"]) == list(data["scenarios"]["scores"]) == ["P@1", "RR"]
    assert set(data["validation"]["tau_with_fill"]) == {"P@1", "RR"}
    out = capsys.readouterr().out
    assert "rankings on P@1" in out and "rankings on RR" in out and "nDCG" not in out
