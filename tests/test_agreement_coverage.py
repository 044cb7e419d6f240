"""The pairwise-agreement CIs say when their measured coverage is below nominal: with few users
(benchmarks/bench_tau_ci.py section C measured ~92% for 5–24 users) a `*` beside the interval
and one line, in the CLI table, ``AgreementResult.format`` and the JSON; with many users nothing."""

from __future__ import annotations

import json

import numpy as np

from recjudge.cli import main
from recjudge.data.trec import read_qrels
from recjudge.evaluation.agreement import agreement
from recjudge.evaluation.intervals import SHARE_COVERAGE


def _qrels_text(n_users: int, seed: int = 0, items: int = 12) -> tuple[str, str]:
    rng = np.random.default_rng(seed)
    qids = np.repeat([f"u{i:03d}" for i in range(n_users)], items)
    ref = rng.integers(0, 4, len(qids))
    cand = np.clip(ref + rng.integers(-1, 2, len(qids)), 0, 3)
    lines = lambda labels: "".join(f"{q} 0 d{i} {v}\n" for i, (q, v) in enumerate(zip(qids, labels)))  # noqa: E731
    return lines(ref), lines(cand)


def test_few_users_flag_the_interval_and_say_the_measured_coverage():
    ref, cand = _qrels_text(8)
    res = agreement(read_qrels(ref, "human"), read_qrels(cand, "llm"), bootstrap=200, seed=1)
    pw = res.pairwise
    assert pw.n_users == 8
    band = max(n for n in SHARE_COVERAGE if n <= 8)
    assert pw.ci_coverage == SHARE_COVERAGE[band][0] < 0.93
    assert pw.ci_note.startswith("may under-cover: 8 users") and f"{pw.ci_coverage:.0%}" in pw.ci_note
    assert res.summary_row()["agree"].endswith("]*")
    text = res.format()
    pooled, lowest = SHARE_COVERAGE[band]
    summary = f"may under-cover: {pooled:.0%} in simulation, worst {lowest:.0%} — see docs: statistics"
    assert pw.ci_summary == summary and f"* llm: agree CI: {summary}" in text.splitlines()
    j = res.to_json()
    assert j["ci_note"] == pw.ci_note and j["pairwise"]["ci_note"] == pw.ci_note
    assert j["pairwise"]["n_users"] == 8 and j["pairwise"]["ci_coverage"] == pw.ci_coverage
    # every variant carries its own (binarised pairs, each label distance)
    assert j["pairwise_binary"]["ci_note"] and all(d["ci_note"] for d in j["pairwise_by_distance"].values())


def test_many_users_print_no_flag_and_no_note():
    ref, cand = _qrels_text(300)
    res = agreement(read_qrels(ref, "human"), read_qrels(cand, "llm"), bootstrap=200, seed=1)
    pw = res.pairwise
    assert pw.n_users == 300 and pw.ci_note == "" and pw.ci_coverage >= 0.93
    assert not res.summary_row()["agree"].endswith("*")
    assert "agree CI" not in res.format() and res.to_json()["ci_note"] == ""


def test_no_bootstrap_no_interval_and_no_note():
    ref, cand = _qrels_text(8)
    pw = agreement(read_qrels(ref, "human"), read_qrels(cand, "llm"), bootstrap=0).pairwise
    assert np.isnan(pw.agree_ci).all() and pw.ci_note == ""


def test_cli_table_and_json_carry_the_note(tmp_path, capsys):
    ref, cand = _qrels_text(8)
    (tmp_path / "human.qrels").write_text(ref)
    (tmp_path / "llm.qrels").write_text(cand)
    out = tmp_path / "agreement.json"
    assert main(["agreement", "--reference", str(tmp_path / "human.qrels"), "--candidate",
                 str(tmp_path / "llm.qrels"), "--bootstrap", "200", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    got = json.loads(out.read_text())["llm"]
    assert got["ci_note"].startswith("may under-cover: 8 users")  # the full note, in the JSON only
    assert "]*" in printed and f"* llm: agree CI: {got['ci_summary']}" in printed.splitlines()
    assert got["ci_note"] not in printed
