"""What a command prints on the terminal fits 100 columns, tables included (their full width goes to
the CSV and JSON files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recjudge.cli import main
from recjudge.report.terminal import table

REPO = Path(__file__).resolve().parent.parent
RUNS, HUMAN, LLM = (str(REPO / p) for p in ("runs/example", "qrels/example-human.qrels", "qrels/example-llm.qrels"))


@pytest.mark.parametrize("argv", [
    ["compare", "--runs", RUNS, "--reference", HUMAN, "--candidate", LLM, "--bootstrap", "50"],
    ["agreement", "--reference", HUMAN, "--candidate", LLM, "--bootstrap", "50"],
    ["ties", "--runs", RUNS, "--qrels", HUMAN, "--seeds", "5", "--permutations", "5"],
    ["evaluate", "--runs", RUNS, "--qrels", HUMAN],
    ["fill", "--human", HUMAN, "--llm", LLM, "--runs", RUNS, "--out", "{tmp}/f.qrels", "--allow-weak-calibration"],
], ids=lambda a: a[0])
def test_every_line_fits_a_hundred_columns(argv, tmp_path, capsys):
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 0
    out = capsys.readouterr().out
    wide = [line for line in out.splitlines() if len(line) > 100]
    assert not wide, "\n".join(wide)


def test_a_wide_table_wraps_into_blocks_that_repeat_the_row_names():
    rows = [[f"system-{i}"] + [f"{i * j / 7:.4f}" for j in range(14)] for i in range(3)]
    text = table(rows, ["run"] + [f"measure {j}" for j in range(14)])
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100
    # every block names its rows, and every column is somewhere
    assert sum(line.startswith("system-1") for line in lines) >= 2
    assert all(f"measure {j}" in text for j in range(14))
