"""Named protocols: a protocol file sets a command's defaults, options given win, outputs say which differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recjudge.cli import main
from recjudge.protocol import load_protocol

ROOT = Path(__file__).resolve().parents[1]
RUNS = str(ROOT / "runs" / "example")
HUMAN = str(ROOT / "qrels" / "example-human.qrels")
LLM = str(ROOT / "qrels" / "example-llm.qrels")


def _protocol(tmp_path, body: str) -> str:
    path = tmp_path / "proto.toml"
    path.write_text('name = "mine"\ntitle = "a test protocol"\n' + body)
    return str(path)


def _compare(tmp_path, *extra: str) -> dict:
    out = tmp_path / "c.json"
    assert main(["compare", "--runs", RUNS, "--reference", HUMAN, "--candidate", LLM, "--bootstrap", "50",
                 "--json", str(out), *extra]) == 0
    return json.loads(out.read_text())


def test_protocol_settings_become_the_defaults_and_outputs_name_it(tmp_path):
    proto = _protocol(tmp_path, '[compare]\nmeasures = "P@5,nDCG@10"\nbootstrap_seed = 7\n')
    got = _compare(tmp_path, "--protocol", proto)
    plain = _compare(tmp_path, "--measures", "P@5,nDCG@10", "--bootstrap-seed", "7")
    assert list(got["measures"]) == ["P@5", "nDCG@10"]
    # the protocol's values are exactly what the options would have given
    assert got["systems"] == plain["systems"] and got["candidates"] == plain["candidates"]
    assert got["protocol"] == {"name": "mine", "title": "a test protocol", "source": "", "command": "compare",
                               "follows_protocol": True, "differs": {}}
    assert "protocol" not in plain


def test_an_option_given_on_the_command_line_wins_and_is_listed(tmp_path, capsys):
    proto = _protocol(tmp_path, '[compare]\nmeasures = "P@5,nDCG@10"\nbootstrap = 50\n')
    got = _compare(tmp_path, "--protocol", proto, "--measures", "P@10")
    assert list(got["measures"]) == ["P@10"]
    # --bootstrap 50 is the protocol's own value: not a difference; the measures are
    assert got["protocol"]["follows_protocol"] is False
    assert got["protocol"]["differs"] == {"measures": {"protocol": "P@5,nDCG@10", "used": "P@10"}}
    assert "protocol mine, except: measures = 'P@10' (protocol: 'P@5,nDCG@10')" in capsys.readouterr().err


def test_the_report_names_the_protocol(tmp_path):
    proto = _protocol(tmp_path, '[compare]\nmeasures = "P@5"\n')
    _compare(tmp_path, "--protocol", proto, "--report", str(tmp_path / "rep"))
    lines = (tmp_path / "rep" / "report.md").read_text().splitlines()
    assert lines[2] == "protocol mine: every setting as the protocol declares."


@pytest.mark.parametrize("body, words", [
    ('[compare]\nmeasure = "P@5"\n', "[compare] sets measure, which `recjudge compare` does not have"),
    ('[compare]\nbootstrap = "many"\n', "[compare]: key 'bootstrap' must be a whole number, not 'many'"),
    ('[compare]\ntie_policy = "random"\n', "[compare]: key 'tie_policy' must be 'hash', 'trec_eval', 'docid' or "
                                           "'input', not 'random'"),
    ('compare = 3\n', "top-level key 'compare' is not a command table"),
    ('[compare]\nmeasures = {a = 1}\n', "[compare] measures: a table is not an option value"),
])
def test_a_bad_protocol_file_is_refused_naming_the_file(tmp_path, capsys, body, words):
    proto = _protocol(tmp_path, body)
    out = tmp_path / "c.json"
    code = main(["compare", "--protocol", proto, "--runs", RUNS, "--reference", HUMAN, "--candidate", HUMAN,
                 "--json", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert proto in err and words in err
    assert not out.exists()


def test_an_unknown_protocol_name_lists_the_shipped_ones(capsys):
    assert main(["compare", "--protocol", "penha2052", "--runs", RUNS, "--reference", HUMAN, "--candidate", HUMAN]) == 2
    err = capsys.readouterr().err
    assert "no such protocol" in err and "penha2025" in err


def test_a_protocol_without_name_or_title_is_refused(tmp_path, capsys):
    path = tmp_path / "p.toml"
    path.write_text('[compare]\nmeasures = "P@5"\n')
    assert main(["compare", "--protocol", str(path), "--runs", RUNS, "--reference", HUMAN, "--candidate", HUMAN]) == 2
    assert "missing or empty top-level key 'name'" in capsys.readouterr().err


def test_penha2025_states_the_papers_settings():
    p = load_protocol("penha2025")
    # the paper's text: 10,000 sampled users, ≥ 20 interactions, top-100, 1,000 randomly ordered
    # history items, all metadata, gpt-5-2025-08-07, three experiments, K = 50
    assert p.settings("train")["sample_users"] == 10000 and p.settings("train")["min_interactions"] == 20
    assert p.settings("train")["k"] == 100
    judge = p.settings("judge")
    assert (judge["profile_size"], judge["history_order"], judge["fields"], judge["model"]) == (
        1000, "random", "all", "gpt-5-2025-08-07")
    assert p.settings("ablate") == {"experiments": 3, "per_user": 50}
    assert "nDCGexp@100" in p.settings("compare")["measures"]
