"""System groups (Penha et al. 2025, Table 1: Judged@100 of pooled vs non-pooled systems)."""

from __future__ import annotations

import json

import pytest

from recjudge.cli import main
from recjudge.data.groups import read_groups
from recjudge.errors import InputError


def test_read_groups_and_its_errors():
    assert read_groups("# system group\nBPR pooled\n\nEASE\tnon-pooled  # a comment\n") == {
        "BPR": "pooled", "EASE": "non-pooled"}
    with pytest.raises(InputError, match=r"<inline>:2: expected 'system group', found 3 fields"):
        read_groups("BPR pooled\nEASE non pooled\n")
    with pytest.raises(InputError, match=r"<inline>:3: system 'BPR' is listed twice"):
        read_groups("BPR pooled\nEASE x\nBPR y\n")
    with pytest.raises(InputError, match="no system is listed"):
        read_groups("# nothing\n\n")


@pytest.fixture
def ws(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    # qrels judge a and b for user u; Judged@2 of [a, x] = 1/2, of [a, b] = 1, of [x, y] = 0
    for name, docs in (("s1", "a x"), ("s2", "a b"), ("s3", "x y")):
        d1, d2 = docs.split()
        (runs / f"{name}.run").write_text(f"u Q0 {d1} 1 2 {name}\nu Q0 {d2} 2 1 {name}\n")
    (tmp_path / "q.qrels").write_text("u 0 a 1\nu 0 b 0\n")
    return tmp_path


def test_evaluate_averages_each_group(ws, capsys):
    (ws / "groups.tsv").write_text("s1 pooled\ns2 pooled\ns3 non-pooled\nunused other\n")
    assert main(["evaluate", "--runs", str(ws / "runs"), "--qrels", str(ws / "q.qrels"), "--measures",
                 "Judged@2", "--groups", str(ws / "groups.tsv"), "--json", str(ws / "out.json")]) == 0
    groups = {g["group"]: g for g in json.loads((ws / "out.json").read_text())["groups"]}
    assert groups["pooled"]["systems"] == 2 and groups["pooled"]["Judged@2"] == pytest.approx((1 / 2 + 1) / 2)
    assert groups["non-pooled"]["systems"] == 1 and groups["non-pooled"]["Judged@2"] == 0.0
    assert "other" not in groups  # a group of systems that were not evaluated
    assert "means per system group" in capsys.readouterr().out


def test_groups_come_from_the_sidecars_train_wrote(ws):
    for name, group in (("s1", "pooled"), ("s2", "non-pooled"), ("s3", "non-pooled")):
        (ws / "runs" / f"{name}.json").write_text(json.dumps({"system": name, "group": group}))
    assert main(["compare", "--runs", str(ws / "runs"), "--reference", str(ws / "q.qrels"), "--candidate",
                 str(ws / "q.qrels"), "--measures", "Judged@2", "--bootstrap", "0", "--json", str(ws / "c.json")]) == 0
    rows = {(g["labels"], g["group"]): g["Judged@2"] for g in json.loads((ws / "c.json").read_text())["groups"]}
    assert rows[("reference", "pooled")] == pytest.approx(1 / 2)
    assert rows[("reference", "non-pooled")] == pytest.approx((1 + 0) / 2)


def test_a_system_without_a_group_is_an_error(ws, capsys):
    (ws / "groups.tsv").write_text("s1 pooled\ns2 pooled\n")
    assert main(["evaluate", "--runs", str(ws / "runs"), "--qrels", str(ws / "q.qrels"), "--groups",
                 str(ws / "groups.tsv"), "--json", str(ws / "out.json")]) == 2
    assert "no group for systems ['s3']" in capsys.readouterr().err
    assert not (ws / "out.json").exists()
