"""What compare, agreement and ablate print where an interval would mislead: one short coverage line per
flagged interval (the full note in the JSON), and "no interval (0 resamples)" instead of [nan, nan]."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recjudge.cli import main
from recjudge.evaluation.intervals import TAU_COVERAGE, coverage_note

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = ["--runs", str(REPO / "runs" / "example"), "--reference", str(REPO / "qrels" / "example-human.qrels"),
           "--candidate", str(REPO / "qrels" / "example-llm.qrels")]
HUMAN, LLM = REPO / "qrels" / "example-human.qrels", REPO / "qrels" / "example-llm.qrels"


# ------------------------------------------------------------------------------ coverage lines

def test_an_interval_flagged_by_its_worst_population_reads_without_contradiction():
    from recjudge.evaluation.intervals import coverage_summary

    # 50–199 users, resampled τ under 0.5 SD below: 98.3% pooled, 84.5% for the worst population
    # (benchmarks/bench_tau_ci.py's table): flagged by the worst one, and said so
    assert TAU_COVERAGE["normal"][(2, 0)] == (0.983, 0.845)
    assert coverage_summary("normal", 100, 0.2) == "may under-cover: 98% in simulation, worst 84% — see docs: statistics"
    cov, note = coverage_note("normal", 100, 0.2)
    assert cov == 0.983 and "below nominal" not in note
    assert note.startswith("may under-cover: in simulation (50–199 users per label set")
    assert "98% of such 95% intervals covered the population τ over all simulated populations, only 84% for the " \
           "worst one" in note


def test_the_dl2021_case_in_one_line():
    from recjudge.evaluation.intervals import coverage_summary

    # 53 queries, resampled τ 2.3 SD below the estimate: the "43% in simulation, worst 1%"
    assert coverage_summary("normal", 53, 2.3) == "may under-cover: 43% in simulation, worst 1% — see docs: statistics"
    assert coverage_summary("normal", 5000, 0.1) == ""  # near nominal: nothing said
    assert coverage_summary("normal", 10, 0.1) == ("coverage unknown: fewer than 25 users per label set, none "
                                                   "simulated — see docs: statistics")


def _band(bias: float) -> int:
    return sum(abs(bias) >= edge for edge in (0.5, 1.0, 1.5))


def test_compare_prints_one_short_line_per_flagged_interval(tmp_path, capsys):
    out, report = tmp_path / "c.json", tmp_path / "report"
    assert main(["compare", *EXAMPLE, "--bootstrap", "200", "--json", str(out), "--report", str(report)]) == 0
    printed = capsys.readouterr().out.splitlines()
    measures = json.loads(out.read_text())["measures"]
    flagged = {m: r for m, r in measures.items() if r["kendall_tau_ci_note"]}
    assert set(flagged) == {"Compat(p=0.95)", "nDCG@100", "Bpref"}  # 40 users: band 25–49, all flagged
    want = []
    for m, r in flagged.items():
        pooled, lowest = TAU_COVERAGE["normal"][(1, _band(r["kendall_tau_bootstrap_bias_sd"]))]
        want.append(f"* {m}: may under-cover: {pooled:.0%} in simulation, worst {lowest:.0%} — see docs: statistics")
        assert r["kendall_tau_ci_summary"] == want[-1][len(f"* {m}: "):]
        assert r["kendall_tau_ci_note"].startswith("may under-cover: in simulation (25–49 users")  # kept in full
    assert [line for line in printed if line.startswith("* ")] == want
    assert not any(r["kendall_tau_ci_note"] in line for line in printed for r in flagged.values())
    md = (report / "report.md").read_text().splitlines()
    assert [line for line in md if line.startswith("\\* ")] == ["\\" + w for w in want]


def test_agreement_prints_one_short_line_for_a_flagged_interval(tmp_path, capsys):
    qrels = tmp_path / "few.qrels"
    qrels.write_text("".join(f"u{u} 0 d{i} {(u + i) % 4}\n" for u in range(8) for i in range(6)))
    cand = tmp_path / "cand.qrels"
    cand.write_text("".join(f"u{u} 0 d{i} {(u * i) % 4}\n" for u in range(8) for i in range(6)))
    assert main(["agreement", "--reference", str(qrels), "--candidate", str(cand), "--bootstrap", "100"]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("* ")]
    # 8 users: the 5–9 band of the share simulation, 92.3% pooled, 85.9% for the worst population
    assert notes == ["* cand: agree CI: may under-cover: 92% in simulation, worst 86% — see docs: statistics"]


# ------------------------------------------------------------------------------ 0 resamples

def test_compare_without_resamples_says_no_interval_everywhere(tmp_path, capsys):
    out, report = tmp_path / "c.json", tmp_path / "report"
    assert main(["compare", *EXAMPLE, "--bootstrap", "0", "--json", str(out), "--report", str(report)]) == 0
    printed = capsys.readouterr().out
    assert "nan" not in printed.lower()
    rows = [line for line in printed.splitlines() if line.strip().startswith(("Compat", "nDCG@100", "Bpref"))][:3]
    assert len(rows) == 3 and all("no interval (0 resamples)" in row for row in rows)
    text = out.read_text()
    data = json.loads(text)
    for m in ("Compat(p=0.95)", "nDCG@100", "Bpref"):
        assert data["measures"][m]["kendall_tau_ci"] is None
        assert data["measures"][m]["kendall_tau_ci_missing"] == "no interval (0 resamples)"
    md = (report / "report.md").read_text()
    assert md.count("| no interval (0 resamples) |") == 3 and "nan" not in md.lower()
    assert "- Bootstrap: none (0 resamples), so no confidence interval for Kendall τ-b." in md.splitlines()


def test_agreement_without_resamples_says_no_interval(tmp_path, capsys):
    out = tmp_path / "a.json"
    assert main(["agreement", "--reference", str(HUMAN), "--candidate", str(LLM), "--bootstrap", "0",
                 "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "nan" not in printed.lower() and "no interval (0 resamples)" in printed
    pw = json.loads(out.read_text())["example-llm"]["pairwise"]
    assert pw["agree_ci"] is None and pw["tie_ci"] is None and pw["ci_missing"] == "no interval (0 resamples)"


def test_ablate_without_resamples_does_not_claim_intervals(tmp_path, capsys):
    from test_ablate import _overlap_experiment

    path = _overlap_experiment(tmp_path, 8, "bootstrap = 0", "profile_size = [3]")
    assert main(["ablate", str(path)]) == 0
    printed = capsys.readouterr().out
    md = (tmp_path / "out" / "ablation.md").read_text()
    for text in (printed, md):
        assert "nan" not in text.lower() and "with 95% CIs within it" not in text
    assert "pairwise shares with no interval (0 resamples: bootstrap = 0)" in md
    rows = json.loads((tmp_path / "out" / "ablation.json").read_text())["rows"]
    assert [r["boot_ci_missing"] for r in rows] == ["no interval (0 resamples)"] * 2
    assert all(r["agree_boot_lo"] is None for r in rows)


def test_agreement_with_pairs_of_one_user_says_why_there_is_no_interval():
    from recjudge.data.trec import read_qrels
    from recjudge.evaluation.agreement import agreement

    # only u1 has labels that differ, so every item pair comes from one user: no spread between users
    ref = read_qrels("u1 0 d1 0\nu1 0 d2 1\nu1 0 d3 2\nu2 0 d1 1\nu2 0 d2 1\n", "human")
    cand = read_qrels("u1 0 d1 0\nu1 0 d2 2\nu1 0 d3 1\nu2 0 d1 1\nu2 0 d2 0\n", "llm")
    res = agreement(ref, cand, bootstrap=50)
    # pairs (d1,d2), (d1,d3), (d2,d3) of u1: the candidate orders 2 of the 3 as the reference does
    assert res.pairwise.agree == pytest.approx(2 / 3)
    assert res.summary_row()["agree"] == "0.667 no interval (pairs from 1 user)"
    assert "nan" not in res.format().lower() and res.to_json()["pairwise"]["agree_ci"] is None
