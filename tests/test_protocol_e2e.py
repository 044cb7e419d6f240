"""The penha2025 protocol end to end on a generated ML-32M-ext release: train → judge → compare → fill → ablate.

The release is generated with the published file names and columns (tests/ml32m_data.py), the LLM
is the local fake server, and the systems are the native ones (Pop and seeded Random), so this runs
without RecBole. Every output must name the protocol and list exactly the settings this test
changes from it (the grid, and the judging depth the protocol does not fix).
"""

from __future__ import annotations

import glob
import json
import re
import shlex
from pathlib import Path

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


# the protocol trains on the ratings >= 4 (the release's implicit-ratings.csv rule): the generated
# participants and ML-32M users rated what they liked, so the 20-interaction filter keeps them
POSITIVE = (4.0, 4.5, 5.0)

@pytest.fixture
def study(tmp_path, monkeypatch):
    """The release after make.sh: 6 participants, 40 ML-32M users, 40 movies, every user ≥ 25 ratings."""
    folder, facts = release(tmp_path, seed=3, after_make=True, participants=PARTICIPANTS,
                            ml_users=tuple(str(u) for u in range(1, 41)), movies=range(1, 41),
                            in_database=range(1, 31), profile_items=25, judged_items=20, ml_items=30,
                            ratings=POSITIVE)
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
    # the fake judge's labels carry no signal: the fill is refused unless allowed, and then says so
    argv = ["fill", "--protocol", "penha2025", "--human", interest, "--llm", "qrels/llm.qrels",
            "--runs", "runs", "--out", "qrels/filled.qrels", "--json", "fill.json"]
    assert main(argv) == 2 and not (root / "fill.json").exists()
    assert main([*argv, "--allow-weak-calibration"]) == 0
    filled = _json(root / "fill.json")
    assert filled["filled"]["weak_calibration"]
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
max_cost = 5  # the consent to the grid's calls (about $1.70 here: above the $1 that asks)
[grid]
fields = ["title", "all"]
''')
    fake_openai.models = ("gpt-5-2025-08-07",)  # the dry run and the run ask whether it serves the model
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


# ------------------------------------------------------------------- the documentation's recipe, as written

README = Path(__file__).resolve().parents[1] / "docs" / "reproducing-penha2025.md"


def _readme_commands(marker: str) -> list[list[str]]:
    """The commands of the docs' fenced block holding ``marker``, continuation lines joined."""
    blocks, current = [], None
    for line in README.read_text().splitlines():
        if line.strip().startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    block = next(b for b in blocks if marker in b)
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def _run_as_written(command: list[str], values: dict[str, str]) -> int:
    """One documented command with its placeholders filled in, globs expanded as a shell does."""
    args = []
    for word in command:
        for placeholder, value in values.items():
            word = word.replace(placeholder, value)
        args += sorted(glob.glob(word)) if "*" in word else [word]
    assert args[0] == "recjudge"
    return main(args[1:])


@pytest.fixture
def researcher(tmp_path, monkeypatch, fake_openai):
    """What the docs say a researcher supplies: the release, appendix-a.toml (native systems, the
    pooled ones marked), figure1.toml (a template) and an endpoint."""
    folder, facts = release(tmp_path, seed=5, after_make=True, participants=tuple(range(1, 9)),
                            ml_users=tuple(str(u) for u in range(1, 41)), movies=range(1, 41),
                            in_database=range(1, 41), profile_items=25, judged_items=10, ml_items=30,
                            ratings=POSITIVE)
    (tmp_path / "appendix-a.toml").write_text(GRID)
    template = (Path(__file__).resolve().parents[1] / "prompts" / "baseline.toml").read_text()
    (tmp_path / "figure1.toml").write_text(template.replace('name = "baseline"', 'name = "figure1"'))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme-test")
    fake_openai.labeler = lambda text: int(m.group(1)) % 8 if (m := re.search(r"Film (\d+)", text)) else 0
    return {"/path/to/ml-32m-ext": str(folder), "URL": fake_openai.url, "USD": "50"}, facts


def test_the_readme_reproduce_recipe_runs_as_written(researcher, fake_openai, capsys):
    values, _ = researcher
    dry_run, run = _readme_commands("recjudge reproduce penha2025 --collection /path/to/ml-32m-ext")
    assert "--dry-run" in dry_run and "--dry-run" not in run
    assert _run_as_written(dry_run, values) == 0
    assert "total: " in capsys.readouterr().out and fake_openai.chat_log() == []
    assert _run_as_written(run, values) == 0
    result = _json(Path("out/penha2025/reproduce.json"))
    assert result["complete"] and fake_openai.chat_log()
    settings = {d["setting"]: d for d in result["differences"]}
    # the grid and the prompt the researcher supplied are used; the figure's wording is no longer a difference
    assert "appendix-a.toml" in settings["systems"]["used"] and "prompt wording" not in settings
    assert {c["row"] for c in result["cells"] if c["target"] == "table1"} >= {"pooled", "non-pooled"}
    assert {c["target"] for c in result["cells"]} >= {"table1", "table3", "table4", "table5", "table8", "table9",
                                                      "figure2", "figure3", "figure4", "figure5"}


def test_the_readme_manual_steps_run_as_written(researcher, fake_openai):
    values, facts = researcher
    commands = _readme_commands("recjudge judge --protocol penha2025 --collection /path/to/ml-32m-ext")
    assert [c[1] for c in commands] == ["train", "judge", "compare"]
    for command in commands:
        assert _run_as_written(command, values) == 0, command
    # the judge labelled 100 (here: all 10) human-judged items per participant with the figure1 template
    judged = {(q, d) for q, d, _ in read_qrels("qrels/k100.qrels").frame[["qid", "docid", "label"]].itertuples(
        index=False, name=None)}
    assert judged == set(facts["interest"])
    assert (Path("out/table4-k100") / "report.md").exists()
