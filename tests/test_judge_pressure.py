"""The judge under pressure, against the local OpenAI server: partial multi-item answers, batch
cost over rounds, interrupts that drain calls in flight, several endpoints."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from fake_openai import FakeOpenAI, Reply
from judge_data import movies as _movies
from judge_data import pairs_for, tiny_workspace

from recjudge.judging import JudgeSettings, judge_pairs
from recjudge.judging.results import read_judgments


def movies():
    return _movies(40)  # these tests ask for items up to 39


FAST = dict(backoff_initial=0.01, backoff_max=0.05, concurrency=4, timeout=5.0, model="fake-model")


def subset_answer(call, keys):
    """A JSON answer labelling only ``keys`` of the call (as the fake's labeler would)."""
    return Reply(content=json.dumps({"labels": {k: v for k, v in call.labels.items() if k in keys}}))


# ------------------------------------------------------------------------------- partial answers

def test_a_partial_answer_is_completed_by_asking_only_the_missing_items(fake_openai):
    fake_openai.rule = lambda call: subset_answer(call, {"c1", "c2"}) if call.index == 0 else None
    res = judge_pairs(pairs_for([10, 11, 12, 13], ["u0"]), movies(),
                      JudgeSettings(base_url=fake_openai.url, items_per_call=4, **FAST))
    # the fake labels Movie k with k % 8
    assert res.labels == {("u0", str(k)): k % 8 for k in (10, 11, 12, 13)}
    log = fake_openai.chat_log()
    assert len(log) == 2 and res.summary.failures == {}
    second = log[1].json["messages"][-1]["content"]
    # the retry shows c3 and c4 only, under their original keys, with the same profile
    shown = second.split("Candidate items:")[1]
    assert "[c3] Title: Movie 12" in shown and "[c4] Title: Movie 13" in shown
    assert "Movie 10" not in shown and "Movie 11" not in shown
    assert second.split("Candidate items:")[0] == log[0].json["messages"][-1]["content"].split("Candidate items:")[0]
    assert set(log[1].json["response_format"]["json_schema"]["schema"]["properties"]["labels"]["properties"]) \
        == {"c3", "c4"}


def test_attempts_that_together_answer_every_item_stop_the_retries(fake_openai):
    # attempt 1 answers c1, c2 of four; attempt 2 (asked c3, c4) answers c3; attempt 3 (asked c4) answers
    answers = {0: {"c1", "c2"}, 1: {"c3"}}
    fake_openai.rule = lambda call: subset_answer(call, answers[call.index]) if call.index in answers else None
    res = judge_pairs(pairs_for([10, 11, 12, 13], ["u0"]), movies(),
                      JudgeSettings(base_url=fake_openai.url, items_per_call=4, max_attempts=6, **FAST))
    assert res.labels == {("u0", str(k)): k % 8 for k in (10, 11, 12, 13)}
    log = fake_openai.chat_log()
    shown = [len(r.json["response_format"]["json_schema"]["schema"]["properties"]["labels"]["properties"])
             for r in log]
    assert shown == [4, 2, 1]  # 3 requests (not 6), each re-asking only what is missing
    j = {x.docid: x for x in res.judgments}
    # the call's usage is the sum of its three attempts, shared over its four items
    assert sum(x.usage.prompt for x in j.values()) == pytest.approx(res.summary.usage.prompt, abs=4)


# ------------------------------------------------------------------------------------ batch cost

def _billed_prompt(log) -> int:
    """Prompt tokens the fake billed for the batch lines it answered (its rule: characters / 4)."""
    return sum(sum(len(m.get("content") or "") for m in r.json["messages"]) // 4 for r in log)


def test_batch_cost_sums_every_round_failed_lines_included(fake_openai, tmp_path):
    # round 1: every other call answers prose that does not parse (billed all the same); round 2 answers
    fake_openai.rule = lambda call: Reply(content="I cannot say.") if call.seen == 0 and call.index % 2 == 0 \
        else None
    pairs = pairs_for([10, 11, 12, 13])
    res = judge_pairs(pairs, movies(), JudgeSettings(base_url=fake_openai.url, batch=True, batch_poll=0.01, **FAST),
                      cache_path=tmp_path / "c.sqlite")
    assert res.labels == {(u, d): int(d) % 8 for u, d in pairs}
    lines = [r for r in fake_openai.log if r.method == "BATCH"]
    assert 12 < len(lines) < 24  # some lines went twice
    billed_prompt = _billed_prompt(lines)
    assert res.summary.usage.prompt == billed_prompt
    # each line's completion: "I cannot say." is 13 characters -> 3 tokens; a JSON label answer is
    # json.dumps({"label": N}) = 12 characters -> 3 tokens
    assert res.summary.usage.completion == 3 * len(lines)
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        assert db.execute("SELECT SUM(prompt_tokens) FROM calls").fetchone()[0] == billed_prompt


# ------------------------------------------------------------------------------------- interrupts

@pytest.fixture
def workspace(tmp_path):
    """RecBole atomic files and one run: user u ranks items 20..27 ('Movie k')."""
    return tiny_workspace(tmp_path)


CLI = "import sys; from recjudge.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_interrupt_drains_the_calls_in_flight_into_the_cache(workspace, signum, code):
    latency = 1.0
    with FakeOpenAI(latency=latency) as server:
        args = ["judge", "--runs", str(workspace / "sys.run"), "--collection", str(workspace / "tiny"),
                "--split", "none", "--out", str(workspace / "j.qrels"), "--cache", str(workspace / "c.sqlite"),
                "--base-url", server.url, "--concurrency", "4"]
        # SIGINT as a terminal delivers it: a shell running the suite in the background ignores it,
        # and a child would inherit that
        proc = subprocess.Popen([sys.executable, "-c", CLI, *args], env={**os.environ, "OPENAI_API_KEY": "sk-x"},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.time() + 60
        while len(server.chat_log()) < 6 and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # calls 5..8 are in flight, each answered 1 s after it arrived
        sent = time.time()
        os.kill(proc.pid, signum)
        out, err = proc.communicate(timeout=60)
        took = time.time() - sent
        assert proc.returncode == code, err
        asked = {r.prompt_sha for r in server.chat_log()}
    assert "Traceback" not in err and ("terminated" if code == 143 else "interrupted") in err
    # nothing new was asked after the signal: 8 calls (two rounds of 4), not the 40 of the run
    assert len(asked) == 8
    with sqlite3.connect(workspace / "c.sqlite") as db:
        cached = {h for (h,) in db.execute("SELECT prompt_hash FROM calls WHERE status = 'ok'")}
    # every call the server received, the 4 in flight included, was answered and cached
    assert cached == asked
    # the in-flight calls end within their latency (a run that kept asking fails the count above); the
    # slack is for a loaded machine, where the child's exit alone took 7 s
    assert took < latency + 15 and not (workspace / "j.qrels").exists()


# ------------------------------------------------------------------------------ several endpoints

@pytest.fixture
def servers():
    with FakeOpenAI(latency=0.1) as a, FakeOpenAI(latency=0.1) as b:
        yield a, b


PAIRS24 = pairs_for(range(10, 18))  # 3 users x 8 items: 24 calls


def test_requests_spread_over_endpoints_and_each_label_names_its_endpoint(servers, tmp_path):
    a, b = servers
    res = judge_pairs(PAIRS24, movies(), JudgeSettings(base_url=[a.url, b.url], **FAST),
                      cache_path=tmp_path / "c.sqlite")
    assert res.labels == {(u, d): int(d) % 8 for u, d in PAIRS24}
    na, nb = len(a.chat_log()), len(b.chat_log())
    # least outstanding requests with equal latencies: 4 in flight split 2 + 2, so about half each
    assert na + nb == 24 and 8 <= na <= 16 and 8 <= nb <= 16
    assert {url: (v["requests"], v["failures"]) for url, v in res.summary.endpoints.items()} == \
        {a.url: (na, 0), b.url: (nb, 0)}
    by_endpoint = {url: sum(j.endpoints == (url,) for j in res.judgments) for url in (a.url, b.url)}
    assert by_endpoint == {a.url: na, b.url: nb}
    paths = res.write(tmp_path / "j.qrels")
    prov, rows = read_judgments(paths["judgments"])
    assert {r["repeat_endpoints"][0] for r in rows} == {a.url, b.url}
    assert prov["base_url"] == [a.url, b.url]
    # one cache: the same two servers in the other order answer from it, asking nothing
    again = judge_pairs(PAIRS24, movies(), JudgeSettings(base_url=[b.url, a.url], **FAST),
                        cache_path=tmp_path / "c.sqlite")
    assert again.summary.cache_hits == 24 and len(a.chat_log()) + len(b.chat_log()) == 24
    assert {j.endpoints for j in again.judgments} == {(a.url,), (b.url,)}  # recorded, not re-labelled


def test_a_failing_endpoint_rests_and_the_others_answer(servers):
    a, b = servers
    a.rule = lambda call: Reply(500, "overloaded")
    res = judge_pairs(PAIRS24, movies(), JudgeSettings(base_url=[a.url, b.url], endpoint_cooldown=5.0, **FAST))
    assert res.labels == {(u, d): int(d) % 8 for u, d in PAIRS24} and res.summary.failures == {}
    # A failed its first requests (at most the 2 sent before the first failure came back), then rested
    # for the whole run: B answered everything, at once (no backoff while a healthy endpoint exists)
    assert 1 <= len(a.chat_log()) <= 2 and len(b.chat_log()) == 24
    assert all(j.endpoints == (b.url,) for j in res.judgments)
    assert res.summary.endpoints[a.url]["failures"] == len(a.chat_log())


def test_a_rested_endpoint_is_tried_again_and_used_when_it_recovers(servers):
    a, b = servers
    b.latency = 0.3
    a.rule = lambda call: Reply(500, "starting up") if call.index < 2 else None  # A recovers after 2 errors
    res = judge_pairs(PAIRS24, movies(), JudgeSettings(base_url=[a.url, b.url], endpoint_cooldown=0.05, **FAST))
    assert res.labels == {(u, d): int(d) % 8 for u, d in PAIRS24}
    statuses = [r.status for r in a.chat_log()]
    assert statuses[:2] == [500, 500] and statuses.count(200) >= 4  # tried again after its rest, and used
    assert sum(j.endpoints == (a.url,) for j in res.judgments) == statuses.count(200)


def test_cli_takes_several_base_urls(servers, workspace, monkeypatch):
    from recjudge.cli import main

    a, b = servers
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    out = workspace / "q" / "j.qrels"
    code = main(["judge", "--runs", str(workspace / "sys.run"), "--collection", str(workspace / "tiny"),
                 "--split", "none", "--out", str(out), "--cache", str(workspace / "c.sqlite"),
                 "--base-url", a.url, "--base-url", b.url, "--depth", "2"])
    assert code == 0 and len(a.chat_log()) + len(b.chat_log()) == 10
    rows = read_judgments(workspace / "q" / "j.judgments.jsonl")[1]
    assert {r["repeat_endpoints"][0] for r in rows} <= {a.url, b.url} and len(rows) == 10
    from recjudge.errors import ConfigError

    with pytest.raises(ConfigError, match="one endpoint"):
        JudgeSettings(base_url=[a.url, b.url], batch=True)
