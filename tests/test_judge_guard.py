"""``recjudge judge``'s front door: outputs checked before any call, selections that select nothing,
numeric option ranges, criteria answers given as prose, the cached-input price.

Every case runs against the local OpenAI server (tests/fake_openai.py); "zero requests served" is
read from its log.
"""

from __future__ import annotations

import json

import pytest
from fake_openai import FakeOpenAI, Reply

from recjudge.cli import main
from recjudge.judging.cache import Usage
from recjudge.judging.parse import SINGLE, parse_answer
from recjudge.judging.budget import cost
from recjudge.judging.results import read_judgments

N_USERS, N_ITEMS, PER_USER = 3, 30, 4


@pytest.fixture
def ws(tmp_path, monkeypatch):
    """RecBole atomic files, one run (user u ranks items 20..23), a topics file, a price table."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-guard-test")
    coll = tmp_path / "tiny"
    coll.mkdir()
    inter = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    inter += [f"u{u}\t{u + k}\t{1 + (u + k) % 5}\t{1000 + 10 * u + k}" for u in range(N_USERS) for k in range(5)]
    (coll / "tiny.inter").write_text("\n".join(inter) + "\n")
    items = ["item_id:token\tmovie_title:token_seq\tclass:token_seq"]
    items += [f"{k}\tMovie {k}\tDrama" for k in range(N_ITEMS)]
    (coll / "tiny.item").write_text("\n".join(items) + "\n")
    run = [f"u{u} Q0 {20 + r} {r + 1} {PER_USER - r} sys" for u in range(N_USERS) for r in range(PER_USER)]
    (tmp_path / "sys.run").write_text("\n".join(run) + "\n")
    (tmp_path / "topics.tsv").write_text("q1\tfunny films\nq2\tsad films\n")
    (tmp_path / "prices.json").write_text('{"fake": {"input": 1, "output": 1}}')
    return tmp_path


def args_for(ws, server, out="qrels/j.qrels", *extra):
    return ["judge", "--runs", str(ws / "sys.run"), "--collection", str(ws / "tiny"), "--split", "none",
            "--out", str(ws / out) if not str(out).startswith("/") else str(out),
            "--cache", str(ws / "cache.sqlite"), "--base-url", server.url, "--model", "fake", *extra]


# --------------------------------------------------------------------------- outputs before any work

@pytest.mark.parametrize("option, target", [
    ("--out", "sys.run"),                      # the run file itself
    ("--judgments", "sys.run"),
    ("--cache", "sys.run"),
    ("--out", "tiny/tiny.item"),               # a file of the collection folder
    ("--out", "topics.tsv"),
    ("--judgments", "prices.json"),
])
def test_an_output_that_is_an_input_is_refused_before_any_call(ws, capsys, option, target):
    before = {p: p.read_bytes() for p in ws.rglob("*") if p.is_file()}
    with FakeOpenAI() as server:
        args = args_for(ws, server)
        if option == "--out":
            args[args.index("--out") + 1] = str(ws / target)
        elif option == "--cache":
            args[args.index("--cache") + 1] = str(ws / target)
        else:
            args += [option, str(ws / target)]
        args += ["--prices", str(ws / "prices.json"), "--topics", str(ws / "topics.tsv"),
                 "--prompt", "relevance"]
        assert main(args) == 2
        assert server.log == []
    err = capsys.readouterr().err
    assert option in err and str(ws / target) in err and "overwritten" in err
    assert {p: p.read_bytes() for p in ws.rglob("*") if p.is_file()} == before


def test_the_default_judgments_log_beside_out_is_checked_too(ws, capsys):
    # --out x.qrels writes x.judgments.jsonl beside it: here that name is the run file
    run = ws / "sys.run"
    alias = ws / "qrels" / "j.judgments.jsonl"
    alias.parent.mkdir()
    alias.hardlink_to(run)
    before = run.read_bytes()
    with FakeOpenAI() as server:
        assert main(args_for(ws, server)) == 2
        assert server.log == []
    assert "--judgments" in capsys.readouterr().err and run.read_bytes() == before


@pytest.mark.parametrize("case", ["parent_is_a_file", "out_is_a_folder", "cache_parent_is_a_file"])
def test_unwritable_outputs_fail_before_any_call(ws, capsys, case):
    (ws / "afile").write_text("x\n")
    (ws / "adir").mkdir()
    with FakeOpenAI() as server:
        out = {"parent_is_a_file": "afile/j.qrels", "out_is_a_folder": "adir"}.get(case, "qrels/j.qrels")
        args = args_for(ws, server, out)
        if case == "cache_parent_is_a_file":
            args[args.index("--cache") + 1] = str(ws / "afile" / "cache.sqlite")
        assert main(args) == 2
        assert server.log == []  # no call paid for and then lost
    err = capsys.readouterr().err
    assert "Traceback" not in err and ("folder" in err or "file" in err)
    assert not (ws / "qrels").exists()


def test_a_read_only_folder_fails_before_any_call(ws, capsys, monkeypatch):
    from permissions import is_root, owner_permissions

    if is_root():  # root writes anywhere: answer os.access as the kernel does for a non-root owner
        owner_permissions(monkeypatch)
    ro = ws / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with FakeOpenAI() as server:
            assert main(args_for(ws, server, "ro/j.qrels")) == 2
            assert server.log == []
    finally:
        ro.chmod(0o755)
    assert "not writable" in capsys.readouterr().err


# ------------------------------------------------------------------------------- selecting nothing

def test_dry_run_with_topics_matching_no_run_query_is_an_error(ws, capsys):
    with FakeOpenAI() as server:
        args = args_for(ws, server, "qrels/j.qrels", "--topics", str(ws / "topics.tsv"), "--prompt", "relevance",
                        "--dry-run")
        assert main(args) == 2
        assert server.log == []
    err = capsys.readouterr().err
    # names both sides and what each holds
    assert str(ws / "topics.tsv") in err and str(ws / "sys.run") in err
    assert "q1, q2" in err and "u0, u1, u2" in err and "0 calls" not in err


def test_a_pool_that_selects_nothing_is_an_error_in_a_real_run(ws, capsys):
    judged = ws / "judged.qrels"
    judged.write_text("".join(f"u{u} 0 {20 + r} 1\n" for u in range(N_USERS) for r in range(PER_USER)))
    with FakeOpenAI() as server:
        assert main(args_for(ws, server, "qrels/j.qrels", "--only-unjudged", str(judged))) == 2
        assert server.log == []
    err = capsys.readouterr().err
    assert "select no" in err and str(judged) in err and not (ws / "qrels").exists()


# ---------------------------------------------------------------------------------- numeric options

@pytest.mark.parametrize("option, value", [
    ("--seed", "-1"), ("--seed", str(2**63)), ("--depth", "0"), ("--per-user", "0"), ("--per-user", "-3"),
    ("--profile-size", "0"), ("--repeats", "0"), ("--repeats", "1001"), ("--items-per-call", "0"),
    ("--concurrency", "0"), ("--concurrency", "100000"), ("--max-calls", "-1"), ("--max-cost", "-0.5"),
    ("--max-cost", "nan"), ("--timeout", "0"), ("--timeout", "inf"), ("--retries", "0"),
    ("--temperature", "-1"), ("--max-tokens", "0"), ("--batch-poll", "0"), ("--seed", "1.5"),
])
def test_numeric_options_are_range_checked(ws, capsys, option, value):
    with FakeOpenAI() as server:
        try:  # argparse refuses what is no number at all; the settings refuse the ranges
            code = main(args_for(ws, server) + [f"{option}={value}"])
        except SystemExit as exc:
            code = exc.code
        assert code == 2 and server.log == []
    err = capsys.readouterr().err
    assert option in err and "Traceback" not in err


@pytest.mark.parametrize("option, value", [("--seed", str(2**63 - 1)), ("--max-calls", "0"),
                                           ("--max-cost", "0")])
def test_numeric_options_accept_their_bounds(ws, option, value):
    with FakeOpenAI() as server:
        # a dry run: the values are accepted and nothing is asked
        assert main(args_for(ws, server) + [f"{option}={value}", "--prices", str(ws / "prices.json"),
                                            "--dry-run"]) == 0
        assert server.log == []


# ------------------------------------------------------------------------------ criteria as prose

PROSE = ("Topic: 5\nCreators: 4\nStyle_format: 3\nTone_genre: 6\n"
         "Overall label: 4 - the user would be interested.")
JSON_ANSWER = '{"topic": 5, "creators": 4, "style_format": 3, "tone_genre": 6, "label": 4}'
CRIT = ("topic", "creators", "style_format", "tone_genre")


def test_criteria_answers_given_as_prose_are_recorded_failures():
    # the criteria template asks for JSON; prose holds "label: 4", which the label templates would
    # accept, but the per-criterion scores cannot be told apart from text, so it is unparseable
    r = parse_answer(PROSE, (0, 7), None, CRIT)
    assert r.labels == {} and r.errors == {SINGLE: "unparseable"}
    r = parse_answer("c1: 4\nc2: 5", (0, 7), ("c1", "c2"), CRIT)
    assert r.labels == {} and r.errors == {"c1": "unparseable", "c2": "unparseable"}
    # the same prose without criteria is a label (the other direction of the rule)
    assert parse_answer(PROSE, (0, 7)).labels == {SINGLE: 4}


def test_criteria_json_inside_prose_parses():
    r = parse_answer(f"Here is my judgment:\n```json\n{JSON_ANSWER}\n```\nThanks.", (0, 7), None, CRIT)
    assert r.labels == {SINGLE: 4}
    assert r.criteria == {SINGLE: {"topic": 5, "creators": 4, "style_format": 3, "tone_genre": 6}}


def test_criteria_prose_end_to_end_is_a_failure_never_a_label(ws, capsys):
    with FakeOpenAI() as server:
        server.rule = lambda call: Reply(content=PROSE)
        code = main(args_for(ws, server, "qrels/j.qrels", "--prompt", "criteria", "--structured", "off",
                             "--retries", "2", "--depth", "1"))
        assert code == 4  # nothing judged
        assert len(server.chat_log()) == N_USERS * 2  # one pair per user, asked twice
    assert not (ws / "qrels" / "j.qrels").exists()
    rows = read_judgments(ws / "qrels" / "j.judgments.jsonl")[1]
    assert [(r["label"], r["reason"]) for r in rows] == [(None, "unparseable")] * N_USERS


# ---------------------------------------------------------------------------------- cached input

def test_cached_prompt_tokens_are_priced_at_the_cached_rate():
    price = {"input": 0.15, "cached_input": 0.075, "output": 0.60}
    # 1,000 prompt tokens of which 400 cached, 200 completion tokens:
    # (600 * 0.15 + 400 * 0.075 + 200 * 0.60) / 1e6 = (90 + 30 + 120) / 1e6
    assert cost(Usage(1000, 400, 200, 0), price) == pytest.approx(240e-6, rel=1e-12)
    # no cached_input price: cached tokens cost the input price
    assert cost(Usage(1000, 400, 200, 0), {"input": 0.15, "output": 0.60}) == pytest.approx(270e-6, rel=1e-12)


def test_cached_input_price_end_to_end(ws, capsys):
    usage = {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200,
             "prompt_tokens_details": {"cached_tokens": 400}, "completion_tokens_details": {"reasoning_tokens": 0}}
    with FakeOpenAI() as server:
        server.rule = lambda call: Reply(usage=usage)
        code = main(args_for(ws, server, "qrels/j.qrels", "--model", "gpt-4o-mini", "--depth", "1"))
        assert code == 0 and len(server.chat_log()) == N_USERS
    summary = json.loads((ws / "qrels" / "j.summary.json").read_text())["summary"]
    assert summary["usage"] == {"prompt": 3000, "cached": 1200, "completion": 600, "reasoning": 0}
    # gpt-4o-mini: input 0.15, cached 0.075, output 0.60 USD per million; 3 calls of 240e-6 each
    assert summary["cost"] == pytest.approx(3 * (600 * 0.15 + 400 * 0.075 + 200 * 0.60) / 1e6, rel=1e-12)
