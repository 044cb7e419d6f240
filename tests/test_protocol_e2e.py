"""The penha2025 protocol end to end on a generated ML-32M-ext release: train → judge → compare → fill → ablate.

The release is generated with the published file names and columns (tests/ml32m_data.py), the LLM
is the local fake server, and the systems are the native ones (Pop and seeded Random), so this runs
without RecBole. Every output must name the protocol and list exactly the settings this test
changes from it (the grid, and the judging depth the protocol does not fix).
"""

from __future__ import annotations

import json
import re

import pytest

from ml32m_data import release
from recjudge.cli import main
from recjudge.data.collections.ml32m_ext import ML32M_EXT_USER_OFFSET
from recjudge.data.trec import read_qrels

PARTICIPANTS = tuple(range(1, 7))
GRID = """name = "native"
description = "the native systems: popularity and three seeded random orders"

[[system]]
name = "Pop"
model = "Pop"
seed = 2020
group = "pooled"

[[system]]
name = "Random-1"
model = "Random"
seed = 1
group = "non-pooled"

[[system]]
name = "Random-2"
model = "Random"
seed = 2
group = "non-pooled"

[[system]]
name = "Random-3"
model = "Random"
seed = 3
group = "non-pooled"
"""


@pytest.fixture
def study(tmp_path, monkeypatch):
    """The release after make.sh: 6 participants, 40 ML-32M users, 40 movies, every user ≥ 25 ratings."""
    folder, facts = release(tmp_path, seed=3, after_make=True, participants=PARTICIPANTS,
                            ml_users=tuple(str(u) for u in range(1, 41)), movies=range(1, 41),
                            in_database=range(1, 31), profile_items=25, judged_items=20, ml_items=30)
    (tmp_path / "native.toml").write_text(GRID)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-protocol-test")
    return tmp_path, folder, facts


def _json(path):
    return json.loads(path.read_text())


def test_penha2025_from_training_to_ablation(study, fake_openai, capsys):
    root, folder, facts = study
    interest = str(next((folder / "qrels").glob("*interest*")))

    # train: the protocol's split (full), user sample, ≥ 20 filter and top-100; our grid differs
    assert main(["train", "--protocol", "penha2025", "--collection", str(folder), "--grid", "native.toml",
                 "--out", "runs"]) == 0
    sidecars = sorted((root / "runs").glob("*.json"))
    assert {p.stem for p in sidecars} >= {"Pop", "Random-1", "Random-2", "Random-3"}
    meta = _json(root / "runs" / "Pop.json")
    assert meta["protocol"]["name"] == "penha2025"
    assert meta["protocol"]["differs"] == {"grid": {"protocol": "penha2025-defaults", "used": "native.toml"}}
    # the participants are the judged users: each run ranks all six
    participants = {str(p + ML32M_EXT_USER_OFFSET) for p in PARTICIPANTS}
    pop_users = {line.split()[0] for line in (root / "runs" / "Pop.run").read_text().splitlines()}
    assert participants <= pop_users

    # the fake model labels a film by its number, so systems differ under the LLM's labels too
    fake_openai.labeler = lambda text: int(m.group(1)) % 8 if (m := re.search(r"Film (\d+)", text)) else 0
    # judge: gpt-5-2025-08-07, 1,000 randomly ordered history items, every field; depth is ours
    assert main(["judge", "--protocol", "penha2025", "--runs", "runs", "--collection", str(folder),
                 "--base-url", fake_openai.url, "--depth", "5",
                 "--out", "qrels/llm.qrels"]) == 0
    summary = _json(root / "qrels" / "llm.summary.json")
    assert summary["protocol"]["name"] == "penha2025" and summary["protocol"]["differs"] == {}
    calls = fake_openai.chat_log()
    assert calls and {c.json["model"] for c in calls} == {"gpt-5-2025-08-07"}
    assert {c.json.get("reasoning_effort") for c in calls} == {"medium"}
    prompt = calls[0].json["messages"][-1]["content"]
    # every field the release gives, half-star ratings on their own scale, history not in id order
    assert "Directors: Director" in prompt and "Overview: Plot" in prompt and "ratings from 0.5 to 5" in prompt
    llm = read_qrels(root / "qrels" / "llm.qrels")
    assert set(llm.qids) == participants

    # compare: the paper's measures, the gain function stated
    assert main(["compare", "--protocol", "penha2025", "--runs", "runs", "--reference", interest,
                 "--candidate", "qrels/llm.qrels", "--bootstrap", "100", "--json", "compare.json"]) == 0
    cmp = _json(root / "compare.json")
    assert list(cmp["measures"]) == ["Judged@100", "Compat(p=0.95)", "nDCGexp@100", "Bpref"]
    assert "ir-measures" in cmp["settings"]["measure_definitions"]["Compat(p=0.95)"]
    assert "exponential gain 2^rel − 1" in cmp["settings"]["measure_definitions"]["nDCGexp@100"]
    assert cmp["protocol"]["follows_protocol"] is True  # the protocol does not fix the bootstrap

    # fill: human labels first, the LLM's calibrated labels for the gaps, the protocol's measures
    assert main(["fill", "--protocol", "penha2025", "--human", interest, "--llm", "qrels/llm.qrels",
                 "--runs", "runs", "--out", "qrels/filled.qrels", "--json", "fill.json"]) == 0
    filled = _json(root / "fill.json")
    assert filled["protocol"]["name"] == "penha2025" and filled["protocol"]["follows_protocol"]
    human = read_qrels(interest)
    mixed = read_qrels(root / "qrels" / "filled.qrels")
    # every human label is kept as it is
    assert human.frame.merge(mixed.frame, on=["qid", "docid"], suffixes=("_h", "_m")).pipe(
        lambda f: (f.label_h == f.label_m).all())

    # ablate: three independent experiments, K = 50 per participant, τ against the complete qrels
    (root / "fields.toml").write_text(f'''name = "fields"
collection = "{folder}"
reference = "{interest}"
runs = "runs"
out = "out/ablate"
[judge]
judge = "openai"
model = "gpt-5-2025-08-07"
base_url = "{fake_openai.url}"
[grid]
fields = ["title", "all"]
''')
    assert main(["ablate", "--protocol", "penha2025", "fields.toml"]) == 0
    result = _json(root / "out" / "ablate" / "ablation.json")
    assert result["protocol"]["name"] == "penha2025" and result["protocol"]["follows_protocol"]
    text = json.dumps(result)
    assert '"tau_reference": "complete"' in text
    rows = result["rows"]
    assert [r["variant"] for r in rows] == ["base", "fields=title", "fields=all"]
    assert all(row["experiments"] == 3 and len(row["per_experiment"]) == 3 for row in rows)
    # 20 judged items per participant in the release: K = 50 takes all of them
    assert all(e["judged"] == 20 * len(PARTICIPANTS) for row in rows for e in row["per_experiment"])
