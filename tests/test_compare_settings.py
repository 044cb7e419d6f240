"""compare-settings: the same systems ranked in two settings (Penha et al. 2025, Figure 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recjudge.cli import main

REPO = Path(__file__).resolve().parent.parent


def _runs(folder: Path, order: dict[str, list[str]]):
    folder.mkdir()
    for name, docs in order.items():
        (folder / f"{name}.run").write_text("".join(f"u Q0 {d} {i + 1} {10 - i} {name}\n" for i, d in enumerate(docs)))


def test_reversed_ranking_by_hand(tmp_path):
    # nDCG@1 under A: s1 3/3, s2 2/3, s3 1/3; under B the labels are reversed: 1/3, 2/3, 3/3
    _runs(tmp_path / "a", {"s1": ["x", "y"], "s2": ["y", "z"], "s3": ["z", "x"], "onlyA": ["x"]})
    _runs(tmp_path / "b", {"s1": ["x", "y"], "s2": ["y", "z"], "s3": ["z", "x"]})
    (tmp_path / "qa").write_text("u 0 x 3\nu 0 y 2\nu 0 z 1\n")  # nDCG order s1 > s2 > s3
    (tmp_path / "qb").write_text("u 0 x 1\nu 0 y 2\nu 0 z 3\n")  # reversed: s3 > s2 > s1
    assert main(["compare-settings", "--runs-a", str(tmp_path / "a"), "--qrels-a", str(tmp_path / "qa"),
                 "--runs-b", str(tmp_path / "b"), "--qrels-b", str(tmp_path / "qb"), "--measures", "nDCG@1",
                 "--json", str(tmp_path / "o.json")]) == 0
    out = json.loads((tmp_path / "o.json").read_text())
    m = out["measures"]["nDCG@1"]
    assert m["kendall_tau"] == pytest.approx(-1.0) and m["max_abs_rank_shift"] == 2.0
    shifts = {s["system"]: s["nDCG@1"]["shift"] for s in out["systems"]}
    assert shifts == {"s1": 2.0, "s2": 0.0, "s3": -2.0}
    assert out["settings"]["systems_in_one_setting_only"] == ["onlyA"]


def test_same_runs_give_compare_s_tau(tmp_path):
    runs, human, llm = REPO / "runs/example", REPO / "qrels/example-human.qrels", REPO / "qrels/example-llm.qrels"
    assert main(["compare-settings", "--runs-a", str(runs), "--qrels-a", str(human), "--runs-b", str(runs),
                 "--qrels-b", str(llm), "--json", str(tmp_path / "s.json")]) == 0
    assert main(["compare", "--runs", str(runs), "--reference", str(human), "--candidate", str(llm),
                 "--bootstrap", "0", "--json", str(tmp_path / "c.json")]) == 0
    settings = json.loads((tmp_path / "s.json").read_text())["measures"]
    compared = json.loads((tmp_path / "c.json").read_text())["measures"]
    for m in ("Compat(p=0.95)", "nDCG@100", "Bpref"):
        assert settings[m]["kendall_tau"] == pytest.approx(compared[m]["kendall_tau"], abs=1e-12)
        assert settings[m]["kendall_tau_p"] == pytest.approx(compared[m]["kendall_tau_p"], abs=1e-12)


def test_too_few_shared_systems_is_an_error(tmp_path, capsys):
    _runs(tmp_path / "a", {"s1": ["x"], "s2": ["y"]})
    _runs(tmp_path / "b", {"s1": ["x"], "t2": ["y"]})
    (tmp_path / "q").write_text("u 0 x 1\n")
    assert main(["compare-settings", "--runs-a", str(tmp_path / "a"), "--qrels-a", str(tmp_path / "q"),
                 "--runs-b", str(tmp_path / "b"), "--qrels-b", str(tmp_path / "q")]) == 2
    assert "share 1 system name(s) (s1)" in capsys.readouterr().err


def test_a_setting_that_ties_every_system_has_no_tau_and_no_shift(tmp_path, capsys):
    # Judged@2: every system's two items are judged under both qrels, so every mean is 1 (no ranking);
    # nDCG@1 ranks them (s1 > s2 > s3 under A, the reverse under B, as above)
    _runs(tmp_path / "a", {"s1": ["x", "y"], "s2": ["y", "z"], "s3": ["z", "x"]})
    _runs(tmp_path / "b", {"s1": ["x", "y"], "s2": ["y", "z"], "s3": ["z", "x"]})
    (tmp_path / "qa").write_text("u 0 x 3\nu 0 y 2\nu 0 z 1\n")
    (tmp_path / "qb").write_text("u 0 x 1\nu 0 y 2\nu 0 z 3\n")
    assert main(["compare-settings", "--runs-a", str(tmp_path / "a"), "--qrels-a", str(tmp_path / "qa"),
                 "--runs-b", str(tmp_path / "b"), "--qrels-b", str(tmp_path / "qb"), "--measures", "Judged@2,nDCG@1",
                 "--json", str(tmp_path / "o.json")]) == 0
    printed = capsys.readouterr().out
    reason = ("every system ties under setting A (qa) on Judged@2 (all 3 means are 1), so there is no ranking to "
              "compare: τ and the rank displacements are undefined")
    assert f"Judged@2: {reason}" in printed and "largest rank shifts on nDCG@1" in printed
    out = json.loads((tmp_path / "o.json").read_text())
    assert out["measures"]["Judged@2"]["undefined"] == reason and out["measures"]["Judged@2"]["kendall_tau"] is None
    assert {s["system"]: s["Judged@2"]["shift"] for s in out["systems"]} == {"s1": None, "s2": None, "s3": None}
    assert out["measures"]["nDCG@1"]["undefined"] is None and out["measures"]["nDCG@1"]["kendall_tau"] == -1.0
