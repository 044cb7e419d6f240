"""The judgments log: the run's details once, on a header line; one short line per pair."""

from __future__ import annotations

import json

from judge_data import movies, pairs_for

from recjudge.judging import JudgeSettings, judge_pairs
from recjudge.judging.results import JUDGMENTS_FORMAT, read_judgments


def test_the_provenance_is_written_once_and_read_back(tmp_path, fake_openai):
    pairs = pairs_for([10, 11, 12, 13])
    res = judge_pairs(pairs, movies(), JudgeSettings(base_url=fake_openai.url, model="m", concurrency=2))
    path = res.write(tmp_path / "q.qrels")["judgments"]
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header == {"format": JUDGMENTS_FORMAT, "provenance": json.loads(json.dumps(dict(res.provenance)))}
    assert len(lines) == 1 + len(pairs) and not any("provenance" in line for line in lines[1:])
    # the run's details no longer repeat: each pair's line is shorter than the header alone
    assert max(len(line) for line in lines[1:]) < len(lines[0])
    provenance, rows = read_judgments(path)
    assert provenance == header["provenance"]
    assert {(r["qid"], r["docid"]): r["label"] for r in rows} == res.labels


def test_a_log_written_before_the_header_reads_the_same(tmp_path):
    old = tmp_path / "old.judgments.jsonl"
    prov = {"model": "m", "kind": "llm"}
    old.write_text("".join(json.dumps({"qid": "u1", "docid": d, "label": 3, "provenance": prov}) + "\n"
                           for d in ("1", "2")))
    provenance, rows = read_judgments(old)
    assert provenance == prov and [r["docid"] for r in rows] == ["1", "2"] and "provenance" not in rows[0]
