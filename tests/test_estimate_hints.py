"""``compare`` and ``fill`` point to ``recjudge estimate`` when the human labels judge only some of
the LLM's users, and say nothing of it when both judge the same users."""

from __future__ import annotations

from pathlib import Path

import recjudge as rj

ROOT = Path(__file__).resolve().parents[1]
RUNS = str(ROOT / "runs" / "example")
HUMAN, LLM = ROOT / "qrels" / "example-human.qrels", ROOT / "qrels" / "example-llm.qrels"


def _first_users(path: Path, out: Path, users: int = 20) -> str:
    keep = [line for line in path.read_text().splitlines() if int(line.split()[0]) <= users]
    out.write_text("\n".join(keep) + "\n")
    return str(out)


def test_compare_points_to_estimate_when_the_reference_judges_fewer_users(tmp_path):
    ref = _first_users(LLM, tmp_path / "ref.qrels")
    text = rj.compare(RUNS, ref, [str(LLM)], measures="P@10", bootstrap=0).format()
    assert text.count("recjudge estimate") == 1 and "judges 20 of the 40 users" in " ".join(text.split())
    same = rj.compare(RUNS, str(LLM), [str(LLM)], measures="P@10", bootstrap=0).format()
    assert "recjudge estimate" not in same


def test_fill_points_to_estimate_when_the_human_qrels_judge_fewer_users(tmp_path):
    human = _first_users(HUMAN, tmp_path / "human.qrels")
    text = " ".join(rj.fill(human, str(LLM), RUNS, k=10).format().split())
    assert "judges 20 of the 40 users" in text and f"--llm {LLM}" in text
    assert "recjudge estimate" not in rj.fill(str(HUMAN), str(LLM), RUNS, k=10).format()
