"""`recjudge ties`: the denominator of its relevant-tie shares, and a quiet stderr."""

from __future__ import annotations

import logging

from recjudge.cli import main

# u1..u4 tie at ranks 1-2; the qrels judge u1 and u2 only, and only u1's tie holds a relevant item
RUN = ("u1 Q0 a 1 2 t\nu1 Q0 b 2 2 t\nu1 Q0 c 3 1 t\n"
       "u2 Q0 a 1 2 t\nu2 Q0 b 2 2 t\nu2 Q0 c 3 1 t\n"
       "u3 Q0 a 1 2 t\nu3 Q0 b 2 2 t\n"
       "u4 Q0 a 1 2 t\nu4 Q0 b 2 2 t\n")
QRELS = "u1 0 a 1\nu1 0 c 0\nu2 0 c 3\n"


def _files(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "r.run").write_text(RUN)
    (tmp_path / "q.qrels").write_text(QRELS)
    return str(tmp_path / "runs"), str(tmp_path / "q.qrels")


def test_relevant_tie_share_is_over_the_judged_users_and_says_so(tmp_path, capsys):
    import json

    runs, qrels = _files(tmp_path)
    out = tmp_path / "t.json"
    assert main(["ties", "--runs", runs, "--qrels", qrels, "--k", "1", "--seeds", "2", "--permutations", "1",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("r "))
    # users 4, tied 100%; judged 2; rel tied: u1 of the 2 judged users = 50.0% (not 1 of 4 = 25.0%)
    assert row.split()[:3] == ["r", "4", "100.0%"]
    assert "  2  " in row and "50.0%" in row and "25.0%" not in row
    assert "share of the run's users the qrels judge (column judged)" in text
    p = json.loads(out.read_text())["runs"]["r"]["prevalence"]
    assert p["judged_users"] == 2 and p["relevant_tied"] == 0.5 and p["relevant_tied_top1"] == 0.5


def test_ties_logs_nothing_per_run_at_info(tmp_path, caplog, capsys):
    runs, qrels = _files(tmp_path)
    for i in range(3):
        (tmp_path / "runs" / f"s{i}.run").write_text(RUN.replace(" t\n", f" s{i}\n"))
    with caplog.at_level(logging.INFO, logger="recjudge"):
        assert main(["ties", "--runs", runs, "--qrels", qrels, "--seeds", "2", "--permutations", "1"]) == 0
    info = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert info == []  # was two lines per run ("auditing …", "… audited in …")
    with caplog.at_level(logging.DEBUG, logger="recjudge"):
        assert main(["-v", "ties", "--runs", runs, "--qrels", qrels, "--seeds", "2", "--permutations", "1"]) == 0
    assert sum("audited in" in r.getMessage() for r in caplog.records) == 4  # --verbose still shows them
