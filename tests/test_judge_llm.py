"""The LLM judge against a real local HTTP server speaking the OpenAI API (tests/fake_openai.py).

The real ``openai`` client runs; the server's request log is the evidence for retries, caching,
budgets and batches.
"""

from __future__ import annotations

import json
import logging
import sqlite3

import pandas as pd
import pytest
from fake_openai import Reply
from judge_data import movies, pairs_for

from recjudge.data.collections import Collection
from recjudge.errors import ConfigError
from recjudge.judging import JudgeSettings, judge_pairs
from recjudge.judging.results import read_judgments

FAST = dict(backoff_initial=0.01, backoff_max=0.05, concurrency=4, timeout=5.0)


def run(server, pairs, tmp_path=None, coll=None, **cfg):
    cache = tmp_path / "cache.sqlite" if tmp_path is not None else None
    config = JudgeSettings(base_url=server.url, **{"model": "fake-model", **FAST, **cfg})
    return judge_pairs(pairs, coll or movies(), config, cache_path=cache)


def test_labels_come_from_the_answers_and_reach_the_qrels(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unit-key-for-the-fake")
    pairs = pairs_for(range(10, 14))
    res = run(fake_openai, pairs, tmp_path)
    # the fake answers k % 8 for 'Movie k'
    assert res.labels == {(u, d): int(d) % 8 for u, d in pairs}
    log = fake_openai.chat_log()
    assert len(log) == len(pairs) == res.summary.calls
    assert log[0].headers["authorization"] == "Bearer sk-unit-key-for-the-fake"
    assert log[0].json["response_format"]["type"] == "json_schema"
    assert log[0].json["model"] == "fake-model"
    paths = res.write(tmp_path / "qrels" / "llm.qrels")
    lines = (tmp_path / "qrels" / "llm.qrels").read_text().splitlines()
    assert sorted(lines) == sorted(f"{u} 0 {d} {int(d) % 8}" for u, d in pairs)
    prov, rows = read_judgments(paths["judgments"])
    first = rows[0]
    assert prov["model"] == "fake-model" and prov["template"]["name"] == "baseline"
    assert len(prov["template"]["sha256"]) == 64 and prov["profiles"]["profile_size"] == 50
    assert prov["profiles"]["fields"] == ["title", "genres"] and prov["seed"] == 0
    assert first["repeat_labels"] == [first["label"]] and first["usage"]["prompt"] > 0


def test_text_answers_and_structured_output_fallback(fake_openai):
    # this server refuses response_format, as some local servers do
    def rule(call):
        if "response_format" in call.body:
            return Reply(400, "response_format json_schema is not supported")
        return None
    fake_openai.rule = rule
    pairs = pairs_for(range(3, 6), ["u0"])
    res = run(fake_openai, pairs, concurrency=1)
    assert res.labels == {(u, d): int(d) for u, d in pairs}
    log = fake_openai.chat_log()
    # one refused request, then text answers ("Score: N") for each pair
    assert [("response_format" in r.json) for r in log] == [True, False, False, False]
    assert res.summary.failures == {}


def test_429_with_retry_after_and_500_are_retried(fake_openai):
    def rule(call):
        if call.seen == 0 and "Movie 11" in call.user:
            return Reply(429, headers={"Retry-After": "1"})
        if call.seen < 2 and "Movie 12" in call.user:
            return Reply(500)
        return None
    fake_openai.rule = rule
    pairs = pairs_for([10, 11, 12], ["u0"])
    res = run(fake_openai, pairs)
    assert res.labels == {("u0", "10"): 2, ("u0", "11"): 3, ("u0", "12"): 4}
    log = fake_openai.chat_log()
    by_prompt: dict[str, list] = {}
    for r in log:
        by_prompt.setdefault(r.prompt_sha, []).append(r)
    statuses = sorted([x.status for x in v] for v in by_prompt.values())
    assert statuses == [[200], [429, 200], [500, 500, 200]]
    limited = next(v for v in by_prompt.values() if v[0].status == 429)
    assert limited[1].time - limited[0].time >= 1.0  # Retry-After honoured, not the 0.05 s backoff cap
    assert res.summary.attempts == 1 + 2 + 3 and res.summary.calls == 3


def test_timeouts_are_retried(fake_openai):
    fake_openai.rule = lambda call: Reply(delay=2.0) if call.seen == 0 else None
    res = run(fake_openai, pairs_for([9], ["u0"]), timeout=0.3)
    assert res.labels == {("u0", "9"): 1}
    assert len(fake_openai.chat_log()) == 2


def test_malformed_truncated_and_out_of_range_answers_are_retried(fake_openai):
    answers = ['{"label": ', '```json\n{"label": 99}\n```', None]
    fake_openai.rule = lambda call: Reply(content=answers[call.seen],
                                          finish_reason="length" if call.seen == 0 else "stop")
    res = run(fake_openai, pairs_for([13], ["u0"]), max_attempts=3, parse_retries=2)
    assert res.labels == {("u0", "13"): 5}
    assert len(fake_openai.chat_log()) == 3
    # all three answers cost tokens
    assert res.summary.usage.completion == sum(max(1, len(a or '{"label": 5}') // 4) for a in answers)


def test_persistent_failures_are_reported_and_absent_from_qrels(fake_openai, tmp_path):
    def rule(call):
        if "Movie 13" in call.user:
            return Reply(content="I would rather not say.")
        if "Movie 14" in call.user:
            return Reply(500)
        if "Movie 15" in call.user:
            return Reply(content='{"label": 8}')
        return None
    fake_openai.rule = rule
    pairs = pairs_for([12, 13, 14, 15], ["u0"])
    res = run(fake_openai, pairs, tmp_path, max_attempts=3)
    assert res.labels == {("u0", "12"): 4}
    assert res.summary.failures == {"unparseable": 1, "server_error": 1, "out_of_range": 1}
    assert res.summary.judged == 1 and res.summary.pairs == 4
    # the unusable answers (13, 15) are asked again once (parse_retries 1), the 500 (14) three times
    assert len(fake_openai.chat_log()) == 1 + 2 + 3 + 2
    res.write(tmp_path / "q.qrels")
    assert (tmp_path / "q.qrels").read_text() == "u0 0 12 4\n"
    rows = {r["docid"]: r for r in read_judgments(tmp_path / "q.judgments.jsonl")[1]}
    assert rows["13"]["label"] is None and rows["13"]["status"] == "failed" and rows["13"]["reason"] == "unparseable"
    assert rows["14"]["reason"] == "server_error" and rows["15"]["reason"] == "out_of_range"
    # the failures were not cached as answers: a re-run asks exactly those three again
    fake_openai.rule = None
    again = run(fake_openai, pairs, tmp_path, max_attempts=3)
    assert again.summary.cache_hits == 1 and again.summary.calls == 3
    assert again.labels == {("u0", d): int(d) % 8 for d in ("12", "13", "14", "15")}


def test_rerun_asks_nothing_already_answered(fake_openai, tmp_path):
    pairs = pairs_for(range(10, 16))
    first = run(fake_openai, pairs, tmp_path)
    n = len(fake_openai.chat_log())
    assert n == 18 and first.summary.cache_hits == 0
    second = run(fake_openai, pairs, tmp_path)
    assert len(fake_openai.chat_log()) == n and second.summary.cache_hits == 18 and second.summary.calls == 0
    assert second.labels == first.labels
    # a third repeat: only the new repetition index is asked
    third = run(fake_openai, pairs, tmp_path, repeats=2)
    assert len(fake_openai.chat_log()) == n + 18 and third.summary.cache_hits == 18
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM calls WHERE status='ok'").fetchone() == (36, 36)


def test_items_per_call_repeats_and_agreement(fake_openai):
    # repeat answers per prompt: base, base + 1, base + 1 (capped at 7)
    def rule(call):
        labels = {k: min(7, v + (call.seen > 0)) for k, v in call.labels.items()}
        return Reply(content=json.dumps({"labels": labels}))
    fake_openai.rule = rule
    pairs = pairs_for(range(10, 15), ["u0"])  # Movie 10..14 -> base 2..6
    res = run(fake_openai, pairs, items_per_call=3, repeats=3, concurrency=1)
    log = fake_openai.chat_log()
    assert len(log) == 2 * 3  # ceil(5 / 3) calls x 3 repeats
    assert "[c1] Title: Movie 10" in log[0].json["messages"][1]["content"]
    assert sorted(len(r.json["response_format"]["json_schema"]["schema"]["properties"]["labels"]["required"])
                  for r in log) == [2, 2, 2, 3, 3, 3]
    # mean of (b, b+1, b+1) = b + 2/3 -> rounds to b + 1
    assert res.labels == {("u0", str(k)): k % 8 + 1 for k in range(10, 15)}
    j = {x.docid: x for x in res.judgments}
    assert j["12"].repeat_labels == (4, 5, 5)
    mode = run(fake_openai, pairs, items_per_call=3, repeats=3, aggregate="mode")
    assert mode.labels == res.labels  # mode of (b, b+1, b+1) is b+1 as well
    a = res.summary.agreement
    # every pair: one of three pairs of repeats agrees -> pairwise 1/3, never all equal
    assert a.pairs == 5 and a.all_equal == 0.0 and a.pairwise_exact == pytest.approx(1 / 3)


def test_profile_precedes_candidates_and_is_shared(fake_openai):
    pairs = pairs_for(range(10, 14), ["u1"])
    run(fake_openai, pairs, items_per_call=2, concurrency=1, profile_size=3)
    users = [r.json["messages"][1]["content"] for r in fake_openai.chat_log()]
    prefix = [u.split("Candidate items:")[0] for u in users]
    assert prefix[0] == prefix[1] and prefix[0].count("\n- Title:") + prefix[0].startswith("- ") >= 2


def test_max_calls_stops_cleanly(fake_openai, tmp_path):
    pairs = pairs_for(range(10, 20), ["u0"])
    res = run(fake_openai, pairs, tmp_path, max_calls=3, concurrency=2)
    assert len(fake_openai.chat_log()) == 3 and res.summary.calls == 3
    assert res.summary.judged == 3 and res.summary.skipped_calls == 7
    assert "max-calls 3" in res.summary.stopped and res.summary.failures == {"not_asked": 7}
    # resuming with a larger budget asks only the rest
    more = run(fake_openai, pairs, tmp_path)
    assert len(fake_openai.chat_log()) == 10 and more.summary.judged == 10


def test_max_cost_stops_before_the_budget_is_exceeded(fake_openai, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-model": {"input": 1000.0, "output": 1000.0}}))  # $0.001 per token
    pairs = pairs_for(range(10, 30), ["u0"])
    dry = run(fake_openai, pairs, prices=str(prices), dry_run=True)
    per_call = dry.summary.estimated_cost / 20
    budget = 5.5 * per_call
    res = run(fake_openai, pairs, tmp_path, prices=str(prices), max_cost=budget, concurrency=1)
    assert res.summary.cost <= budget and "max-cost" in res.summary.stopped
    assert 1 <= res.summary.calls < 20 and res.summary.calls + res.summary.skipped_calls == 20
    with pytest.raises(ConfigError, match="price"):
        run(fake_openai, pairs, model="unpriced", max_cost=1.0)


def test_dry_run_makes_no_request_and_estimates_tokens(fake_openai, tmp_path):
    pairs = pairs_for(range(10, 16))
    dry = run(fake_openai, pairs, tmp_path, dry_run=True)
    assert fake_openai.log == [] and not (tmp_path / "cache.sqlite").exists()
    assert dry.summary.planned_calls == 18 and dry.summary.cache_hits == 0 and dry.qrels() is None
    real = run(fake_openai, pairs, tmp_path)
    prompts = [r.json["messages"] for r in fake_openai.chat_log()]
    # a local server of unknown kind without a tokenizer: 2.5 characters per token, rounded up, + 9
    # framing tokens (two messages and the reply), as the window check counts
    chars = [len(m[0]["content"]) + len(m[1]["content"]) for m in prompts]
    expected = sum(-(-2 * c // 5) + 9 for c in chars)
    assert dry.summary.estimated_input_tokens == expected
    # the fake counts floor(all chars / 4): the margin counts more, never less
    assert expected - real.summary.usage.prompt >= sum(c * 2 // 5 - c // 4 for c in chars)
    after = run(fake_openai, pairs + [("u0", "20")], tmp_path, dry_run=True)
    assert after.summary.cache_hits == 18 and after.summary.planned_calls == 19


def test_batch_api_feeds_the_same_cache(fake_openai, tmp_path):
    fake_openai.rule = lambda call: Reply(content="garbage") if call.seen == 0 and "Movie 11" in call.user else None
    pairs = pairs_for(range(10, 14), ["u0", "u1"])
    res = run(fake_openai, pairs, tmp_path, batch=True, batch_poll=0.01)
    assert res.labels == {(u, d): int(d) % 8 for u, d in pairs}
    routes = [(r.method, r.path) for r in fake_openai.log if r.method != "BATCH"]
    # round 1: upload, create, poll (in progress), poll (completed), download output and errors
    assert routes[:3] == [("POST", "/v1/files"), ("POST", "/v1/batches"), ("GET", routes[2][1])]
    assert sum(m == "POST" and p == "/v1/batches" for m, p in routes) == 2  # round 2 resubmits the 2 garbled
    batched = [r for r in fake_openai.log if r.method == "BATCH"]
    assert len(batched) == 8 + 2  # every pair once, the two garbled answers twice
    assert not any(r.method == "POST" and r.path == "/v1/chat/completions" for r in fake_openai.log)
    again = run(fake_openai, pairs, tmp_path)
    assert again.summary.cache_hits == 8 and again.summary.calls == 0


def test_criteria_template(fake_openai):
    pairs = pairs_for([10, 11, 12], ["u0"])
    res = run(fake_openai, pairs, prompt="criteria", items_per_call=2)
    assert res.labels == {("u0", "10"): 2, ("u0", "11"): 3, ("u0", "12"): 4}
    j = {x.docid: x for x in res.judgments}
    assert j["11"].criteria == ({"topic": 3, "creators": 3, "style_format": 3, "tone_genre": 3},)


def test_queries_as_profiles_with_the_relevance_template(fake_openai):
    fake_openai.labeler = lambda text: int(text.split("Movie ")[1].split()[0]) % 4
    topics = {"q1": "a comedy about dogs", "q2": "dark drama"}
    config = JudgeSettings(base_url=fake_openai.url, model="m", prompt="relevance", fields="title", **FAST)
    res = judge_pairs([("q1", "5"), ("q2", "6"), ("q3", "7")], movies(), config, topics=topics)
    assert res.labels == {("q1", "5"): 1, ("q2", "6"): 2}
    assert res.summary.failures == {"no_profile": 1}
    # the query opens the quoted data block
    assert {tuple(r.json["messages"][1]["content"].split("\n")[:2]) for r in fake_openai.chat_log()} == {
        ("<<<DATA", "Query: a comedy about dogs"), ("<<<DATA", "Query: dark drama")}
    with pytest.raises(ConfigError, match="expects query profiles"):
        judge_pairs([("u0", "5")], movies(), config)


def test_api_key_never_reaches_errors_logs_or_files(fake_openai, tmp_path, monkeypatch, caplog):
    secret = "sk-proj-SECRETSECRET0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    fake_openai.require_key = "sk-the-right-one"  # answers 401 echoing the presented key
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ConfigError) as err:  # many pairs: every worker stops, nothing waits forever
        run(fake_openai, pairs_for(range(10, 30)), tmp_path, concurrency=2)
    assert "refused the API key" in str(err.value) and "OPENAI_API_KEY" in str(err.value)
    chain, exc = [], err.value
    while exc is not None:  # the error and everything chained to it
        chain.append(f"{exc!s} {exc!r}")
        exc = exc.__cause__ or exc.__context__
    assert len(chain) == 1 and "SECRETSECRET" not in chain[0]
    # a run that works, with failures stored in the cache and judgments
    fake_openai.require_key = None
    fake_openai.rule = lambda call: Reply(500, f"internal error for key {secret}") if "Movie 11" in call.user else None
    res = run(fake_openai, pairs_for([10, 11], ["u0"]), tmp_path, max_attempts=2)
    res.write(tmp_path / "out.qrels")
    assert fake_openai.chat_log()[-1].headers["authorization"] == f"Bearer {secret}"  # it was sent
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
            assert b"SECRETSECRET" not in path.read_bytes(), path
    assert "SECRETSECRET" not in caplog.text
    assert res.summary.failures == {"server_error": 1}
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        (error,) = db.execute("SELECT error FROM calls WHERE status = 'failed'").fetchone()
    assert error == "HTTP 500: internal error for key [redacted]"


def test_judging_from_inside_a_running_event_loop(fake_openai):
    import asyncio

    async def notebook_cell():
        return run(fake_openai, pairs_for([10], ["u0"]))

    assert asyncio.run(notebook_cell()).labels == {("u0", "10"): 2}


@pytest.mark.live
def test_live_provider():
    """Opt in with RECJUDGE_LIVE=1 and OPENAI_API_KEY (optionally RECJUDGE_LIVE_MODEL, OPENAI_BASE_URL)."""
    import os

    if os.environ.get("RECJUDGE_LIVE") != "1" or not os.environ.get("OPENAI_API_KEY"):
        pytest.skip("live provider tests are opt-in: set RECJUDGE_LIVE=1 and OPENAI_API_KEY")
    config = JudgeSettings(model=os.environ.get("RECJUDGE_LIVE_MODEL", "gpt-4o-mini"),
                         base_url=os.environ.get("OPENAI_BASE_URL"), items_per_call=2, max_calls=2)
    res = judge_pairs(pairs_for([10, 11], ["u0"]), movies(), config)
    assert res.summary.calls == 1 and res.summary.judged == 2
    assert all(0 <= lab <= 7 for lab in res.labels.values())


def test_retry_after_forms():
    import email.utils
    import time as _time

    from recjudge.judging.retry import retry_after as _retry_after

    assert _retry_after({"retry-after": "3"}) == 3.0
    assert _retry_after({"retry-after-ms": "250", "retry-after": "3"}) == 0.25  # the finer one wins
    in_ten = email.utils.formatdate(_time.time() + 10, usegmt=True)
    assert 8.0 <= _retry_after({"retry-after": in_ten}) <= 10.0
    assert _retry_after({}) is None


def test_partial_and_refused_answers(fake_openai, tmp_path):
    def rule(call):
        # Movie 12 is never labelled: the full call (c1 Movie 10, c2 Movie 12) gets c1 only, and the
        # retry, which asks for c2 alone, gets an answer for c1 again
        if any("Movie 12" in text for _, text in call.candidates):
            return Reply(content=json.dumps({"labels": {"c1": 2}}))
        return None
    fake_openai.rule = rule
    pairs = pairs_for([10, 12, 13], ["u0"])
    res = run(fake_openai, pairs, tmp_path, items_per_call=2, max_attempts=2, concurrency=1)
    # call 1 judges (10, 12): 10 parsed, 12 missing in both attempts; call 2 judges 13
    assert res.labels == {("u0", "10"): 2, ("u0", "13"): 5}
    assert res.summary.failures == {"missing_item": 1}
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        assert sorted(r[0] for r in db.execute("SELECT status FROM calls")) == ["ok", "partial"]
    # a partial call is not an answer: the re-run asks it again (and now the server answers fully)
    fake_openai.rule = None
    again = run(fake_openai, pairs, tmp_path, items_per_call=2)
    assert again.summary.calls == 1 and again.labels[("u0", "12")] == 4

    refusal = {"choices": [{"message": {"role": "assistant", "content": None, "refusal": "I can't help"},
                            "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}
    fake_openai.rule = lambda call: Reply(raw=json.dumps(refusal).encode())
    refused = run(fake_openai, pairs_for([20], ["u0"]), max_attempts=1)
    assert refused.summary.failures == {"refused": 1} and refused.labels == {}


def test_max_calls_in_batch_mode(fake_openai):
    res = run(fake_openai, pairs_for(range(10, 20), ["u0"]), batch=True, batch_poll=0.01, max_calls=4)
    batched = [r for r in fake_openai.log if r.method == "BATCH"]
    assert len(batched) == 4 and res.summary.judged == 4 and res.summary.skipped_calls == 6


def test_max_cost_also_stops_retries_of_unusable_answers(fake_openai, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-model": {"input": 1000.0, "output": 1000.0}}))
    fake_openai.rule = lambda call: Reply(content="no idea")  # every answer is unusable and costs tokens
    pairs = pairs_for([10], ["u0"])
    one = run(fake_openai, pairs, prices=str(prices), max_attempts=1)
    cost_per_attempt = one.summary.cost
    n = len(fake_openai.log)
    budget = 2.5 * cost_per_attempt  # room for the first attempt's estimate and about one retry more
    res = run(fake_openai, pairs, prices=str(prices), max_attempts=6, max_cost=budget)
    attempts = len(fake_openai.log) - n
    assert 1 <= attempts < 6 and res.summary.cost <= budget and "max-cost" in res.summary.stopped
    assert res.summary.failures == {"unparseable": 1}


def test_identical_prompts_give_every_pair_its_label(fake_openai, tmp_path):
    # u0 and u1 rated the same items alike, and item 20 renders exactly like item 12: two pairs of
    # requests share a rendered prompt (and a cache key), yet each pair must get its own label
    items = pd.DataFrame({"title": [f"Movie {k}" for k in range(20)] + ["Movie 12"],
                          "genres": [("Drama",)] * 21}, index=[str(k) for k in range(21)])
    rows = [(u, str(k), 4.0, k) for u in ("u0", "u1") for k in range(3)]
    coll = Collection("c", pd.DataFrame(rows, columns=["user", "item", "rating", "timestamp"]), items)
    pairs = [("u0", "10"), ("u1", "10"), ("u0", "12"), ("u0", "20")]
    # the fake labels 'Movie k' k % 8: 10 -> 2, 12 -> 4, and 20 (titled 'Movie 12') -> 4
    expected = {("u0", "10"): 2, ("u1", "10"): 2, ("u0", "12"): 4, ("u0", "20"): 4}
    for attempt in (1, 2):
        res = run(fake_openai, pairs, tmp_path, coll=coll, concurrency=1)
        assert res.labels == expected and res.summary.failures == {}
        # two distinct prompts, asked once on the first run and never again
        assert len(fake_openai.chat_log()) == 2
    qrels = res.write(tmp_path / "q.qrels")["qrels"].read_text().split("\n")
    assert sorted(filter(None, qrels)) == sorted(f"{q} 0 {d} {v}" for (q, d), v in expected.items())
    # queries with identical text: both pairs judged from one answer
    topics = {"q1": "dogs", "q2": "dogs"}
    config = JudgeSettings(base_url=fake_openai.url, model="fake-model", prompt="relevance", fields="title", **FAST)
    res = judge_pairs([("q1", "3"), ("q2", "3")], coll, config, topics=topics, cache_path=tmp_path / "t.sqlite")
    assert res.labels == {("q1", "3"): 3, ("q2", "3"): 3}


def test_structured_output_fallback_with_concurrent_requests_in_flight():
    # eight requests with response_format are in flight when the first refusal arrives: each is
    # asked again without it, none becomes a permanent bad_request
    from fake_openai import FakeOpenAI

    with FakeOpenAI(latency=0.1) as server:
        server.rule = lambda call: (Reply(400, "response_format json_schema is not supported")
                                    if "response_format" in call.body else None)
        pairs = pairs_for(range(10, 18), ["u0"])
        res = run(server, pairs, concurrency=8)
        assert res.labels == {(u, d): int(d) % 8 for u, d in pairs} and res.summary.failures == {}
        log = server.chat_log()
        refused = [r for r in log if "response_format" in r.json]
        assert all(r.status == 400 for r in refused) and 1 <= len(refused) <= 8
        # every pair answered once in text; no text request was refused
        assert sorted(r.status for r in log if "response_format" not in r.json) == [200] * 8


@pytest.mark.parametrize("raw", [
    b'{"choices": [{"message": {"content": "{\\"label\\": 3}"',            # cut-off HTTP body
    b"<html>bad gateway</html>",
    json.dumps({"choices": [{"message": "5"}]}).encode(),                 # message not an object
    json.dumps({"choices": []}).encode(),
    json.dumps({"choices": [{"message": {"content": 5}}]}).encode(),      # content not text
    json.dumps({"id": "x"}).encode(),
])
def test_malformed_http_200_bodies_are_retried_not_fatal(fake_openai, raw):
    def rule(call):
        return Reply(raw=raw) if call.seen == 0 else None  # the retry gets a proper answer
    fake_openai.rule = rule
    res = run(fake_openai, pairs_for([10, 11], ["u0"]), max_attempts=3)
    assert res.labels == {("u0", "10"): 2, ("u0", "11"): 3}
    assert len(fake_openai.chat_log()) == 4
    fake_openai.rule = lambda call: Reply(raw=raw)
    res = run(fake_openai, pairs_for([12], ["u0"]), max_attempts=2)
    assert res.labels == {} and res.summary.failures == {"bad_response": 1}


def test_odd_usage_fields_do_not_stop_the_run(fake_openai):
    body = {"choices": [{"message": {"content": '{"label": 3}'}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": "abc", "completion_tokens": None, "prompt_tokens_details": [1],
                      "completion_tokens_details": {"reasoning_tokens": 1e400}}}
    fake_openai.rule = lambda call: Reply(raw=json.dumps(body).encode())
    res = run(fake_openai, pairs_for([10], ["u0"]))
    assert res.labels == {("u0", "10"): 3} and res.summary.usage.as_dict() == \
        {"prompt": 0, "cached": 0, "completion": 0, "reasoning": 0}


def test_answers_and_refusals_echoing_the_key_are_stored_redacted(fake_openai, tmp_path, monkeypatch):
    secret = "sk-proj-SECRETSECRET0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)

    def rule(call):
        if "Movie 10" in call.user:
            return Reply(content=f"key {secret} Score: 3")
        body = {"choices": [{"message": {"content": None, "refusal": f"no, {secret}"}, "finish_reason": "stop"}]}
        return Reply(raw=json.dumps(body).encode())
    fake_openai.rule = rule
    res = run(fake_openai, pairs_for([10, 11], ["u0"]), tmp_path, max_attempts=1)
    res.write(tmp_path / "out.qrels")
    assert res.labels == {("u0", "10"): 3} and res.summary.failures == {"refused": 1}
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        raws = sorted(r for (r,) in db.execute("SELECT raw FROM calls"))
    assert raws == ["key [redacted] Score: 3", "no, [redacted]"]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert b"SECRETSECRET" not in path.read_bytes(), path


def test_fatal_error_names_the_endpoint_without_credentials(fake_openai):
    fake_openai.require_key = "sk-the-right-one"
    # credentials and query strings in the URL are refused up front (tests/test_judge_endpoints.py);
    # the 401 names the endpoint and the way out, never the key presented
    config = JudgeSettings(base_url=fake_openai.url, model="fake-model", **FAST)
    with pytest.raises(ConfigError) as err:
        judge_pairs(pairs_for([10], ["u0"]), movies(), config)
    text = str(err.value)
    # the setting named as the caller wrote it: a keyword of JudgeSettings here, the flag on the command line
    assert "refused the API key" in text and fake_openai.url in text and "named by api_key_env=" in text
    with pytest.raises(ConfigError) as err:
        JudgeSettings(base_url=fake_openai.url.replace("http://", "http://admin:hunter2pass@") + "?token=qwerty123",
                    model="fake-model", **FAST)
    text = str(err.value)
    assert "hunter2pass" not in text and "admin" not in text and "qwerty123" not in text


def test_nothing_judged_removes_an_earlier_qrels_file(fake_openai, tmp_path):
    out = tmp_path / "q.qrels"
    run(fake_openai, pairs_for([10], ["u0"])).write(out)
    assert out.read_text() == "u0 0 10 2\n"
    fake_openai.rule = lambda call: Reply(500)
    res = run(fake_openai, pairs_for([10], ["u0"]), max_attempts=1)
    paths = res.write(out)
    # the old labels must not pass for this run's; the judgments say why nothing was judged
    assert not out.exists() and paths["removed_qrels"] == out and "qrels" not in paths
    assert [r["reason"] for r in read_judgments(paths["judgments"])[1]] == ["server_error"]


def test_candidate_counts_leave_out_the_users_own_rating_in_prompts(fake_openai):
    # movies(): user u rated items u..u+5, so item 3 is rated by u0, u1 and u2; as u0's
    # candidate it shows the other two ratings only
    run(fake_openai, [("u0", "3")], fields="title+num_ratings")
    user = fake_openai.chat_log()[0].json["messages"][-1]["content"]
    assert "Title: Movie 3 | Number of ratings: 2" in user and "Number of ratings: 3" not in user.split(
        "Candidate")[-1]


def _long_answers(call):
    """An answer that costs 100 prompt + 1,000 completion tokens (990 of them reasoning)."""
    body = {"choices": [{"message": {"role": "assistant", "content": json.dumps({"label": call.labels["_"]})},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 1000,
                      "completion_tokens_details": {"reasoning_tokens": 990}}}
    return Reply(raw=json.dumps(body).encode())


@pytest.mark.parametrize("cap", [None, 1000])
def test_max_cost_holds_with_long_answers_at_concurrency(tmp_path, cap):
    from fake_openai import FakeOpenAI

    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-model": {"input": 1000.0, "output": 1000.0}}))  # $0.001 per token
    # each call costs (100 + 1000) * $0.001 = $1.10, far above the small-answer estimate
    with FakeOpenAI(latency=0.05) as server:
        server.rule = _long_answers
        params = {"max_completion_tokens": cap} if cap else {}
        res = run(server, pairs_for(range(10, 30), ["u0"]), prices=str(prices), max_cost=5.0, concurrency=8,
                  params=params)
        # without a cap: one call alone ($1.10), then $1.10 reserved per call: 1.1 + 3 * 1.1 = 4.4 <= 5
        # and a fifth would reach 5.5; with the cap the reservation is at least the same $1.10
        assert res.summary.cost <= 5.0 and "max-cost" in res.summary.stopped
        assert res.summary.calls == len(server.chat_log())
        if cap is None:
            assert res.summary.calls == 4 and res.summary.cost == pytest.approx(4.4)
        else:
            assert 3 <= res.summary.calls <= 4


def test_max_cost_retry_counts_the_next_attempt(tmp_path):
    from fake_openai import FakeOpenAI

    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-model": {"input": 1000.0, "output": 1000.0}}))

    def rule(call):  # unusable and dear: $1.10 per attempt
        body = {"choices": [{"message": {"content": "no idea"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 1000}}
        return Reply(raw=json.dumps(body).encode())
    with FakeOpenAI() as server:
        server.rule = rule
        # $2.00: after one attempt ($1.10) another would reach $2.20, so none is sent
        res = run(server, pairs_for([10], ["u0"]), prices=str(prices), max_cost=2.0, max_attempts=6)
        assert len(server.chat_log()) == 1 and res.summary.cost == pytest.approx(1.1)


def test_partial_labels_survive_later_failures(fake_openai, tmp_path):
    out = tmp_path / "q.qrels"
    pairs = pairs_for([10, 12], ["u0"])
    cfg = dict(items_per_call=2, max_attempts=2, concurrency=1)
    # run 1: every answer labels c1 only (Movie 10 -> 2); the pair of c2 fails
    fake_openai.rule = lambda call: Reply(content=json.dumps({"labels": {"c1": 2}}))
    r1 = run(fake_openai, pairs, tmp_path, **cfg)
    assert r1.labels == {("u0", "10"): 2}
    # run 2: the server fails outright; the stored label of c1 is not lost
    fake_openai.rule = lambda call: Reply(500)
    r2 = run(fake_openai, pairs, tmp_path, **cfg)
    assert r2.labels == {("u0", "10"): 2} and r2.summary.failures == {"server_error": 1}
    r2.write(out)
    assert out.read_text() == "u0 0 10 2\n"
    # run 3: an answer labelling only c2 completes the call, which is then answered for good
    fake_openai.rule = lambda call: Reply(content=json.dumps({"labels": {"c2": 4}}))
    r3 = run(fake_openai, pairs, tmp_path, **cfg)
    assert r3.labels == {("u0", "10"): 2, ("u0", "12"): 4} and r3.summary.failures == {}
    n = len(fake_openai.chat_log())
    assert run(fake_openai, pairs, tmp_path, **cfg).labels == r3.labels and len(fake_openai.chat_log()) == n


def test_partial_labels_survive_a_failed_retry_within_a_run(fake_openai):
    def rule(call):  # first attempt labels c1 only, the retry hits a server error
        return Reply(content=json.dumps({"labels": {"c1": 2}})) if call.index == 0 else Reply(500)
    fake_openai.rule = rule
    res = run(fake_openai, pairs_for([10, 12], ["u0"]), items_per_call=2, max_attempts=2, concurrency=1)
    assert res.labels == {("u0", "10"): 2} and res.summary.failures == {"server_error": 1}


def test_requests_state_the_collections_rating_scale(fake_openai, monkeypatch):
    # half-star ratings (0.5 … 5): the prompt must not claim "1 to 5"; whole stars keep it
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unit-key-for-the-fake")
    half = movies()
    half = Collection("half", half.interactions.assign(rating=[0.5, 4.5, 3.0, 5.0, 1.5, 2.0] * 3), half.items)
    run(fake_openai, pairs_for([10], ["u0"]), coll=half)
    run(fake_openai, pairs_for([11], ["u0"]), coll=movies())
    first, second = (r.json["messages"][-1]["content"] for r in fake_openai.chat_log())
    assert "(ratings from 0.5 to 5):" in first and "ratings from 1 to 5" not in first
    assert "(ratings from 1 to 5):" in second
