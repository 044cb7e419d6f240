"""The judge's two HTTP clients for chat requests (the lean built-in one and the openai SDK's),
against the local OpenAI server: same answers, same error handling, keep-alive, chunked bodies,
connections the server drops."""

from __future__ import annotations

import json

import pytest
from fake_openai import Reply
from judge_data import movies as _movies
from judge_data import pairs_for

from recjudge.judge import JudgeConfig, judge_pairs
from recjudge.judge.transport import proxy_configured


def movies():
    return _movies(40)  # these tests ask for items up to 39


FAST = dict(backoff_initial=0.01, backoff_max=0.05, timeout=5.0, model="fake-model")


def judge(server, pairs, **cfg):
    return judge_pairs(pairs, movies(), JudgeConfig(base_url=server.url, **{**FAST, "concurrency": 2, **cfg}))


@pytest.mark.parametrize("transport", ["lean", "sdk"])
def test_both_transports_send_the_same_request_and_read_the_same_answers(fake_openai, monkeypatch, transport):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-transport-test")
    pairs = pairs_for([10, 11, 12])
    res = judge(fake_openai, pairs, transport=transport)
    assert res.labels == {(u, d): int(d) % 8 for u, d in pairs}
    r = fake_openai.chat_log()[0]
    assert r.headers["authorization"] == "Bearer sk-transport-test"
    assert r.headers["content-type"].startswith("application/json")
    assert r.json["model"] == "fake-model" and r.json["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize("transport", ["lean", "sdk"])
def test_both_transports_retry_429_500_timeouts_and_bad_bodies(fake_openai, transport):
    script = {0: Reply(429, headers={"Retry-After": "0"}), 1: Reply(500), 2: Reply(delay=1.0),
              3: Reply(raw=b"<html>busy</html>"), 4: Reply(raw=b'{"choices": [')}
    fake_openai.rule = lambda call: script.get(call.index)
    res = judge(fake_openai, pairs_for([10]), transport=transport, timeout=0.3, concurrency=1, max_attempts=6)
    # one pair after five failed attempts of five kinds, each retried
    assert res.labels == {("u0", "10"): 2, ("u1", "10"): 2, ("u2", "10"): 2}
    assert res.summary.attempts == 3 + 5 and res.summary.failures == {}


def test_lean_transport_keeps_connections_alive(fake_openai):
    res = judge(fake_openai, pairs_for(range(10, 20)), transport="lean", concurrency=2)
    assert res.summary.judged == 30
    peers = {r.peer for r in fake_openai.chat_log()}
    assert 1 <= len(peers) <= 2  # 30 requests over at most two connections


def test_lean_transport_reads_chunked_bodies(fake_openai):
    fake_openai.rule = lambda call: Reply(chunked=True)
    pairs = pairs_for([10, 13])
    res = judge(fake_openai, pairs, transport="lean")
    assert res.labels == {(u, d): int(d) % 8 for u, d in pairs} and res.summary.attempts == 6


def test_lean_transport_honours_connection_close(fake_openai):
    fake_openai.rule = lambda call: Reply(headers={"Connection": "close"})
    res = judge(fake_openai, pairs_for([10, 11]), transport="lean", concurrency=1)
    assert res.summary.judged == 6 and res.summary.attempts == 6
    assert len({r.peer for r in fake_openai.chat_log()}) == 6  # a new connection each time


def test_lean_transport_resends_on_a_connection_the_server_dropped(fake_openai):
    # the server closes every connection after answering, without a Connection: close header (as
    # servers dropping idle keep-alive connections do): the next request on it finds it closed and
    # goes out on a fresh one, with no failed attempt
    fake_openai.rule = lambda call: Reply(drop_after=True)
    res = judge(fake_openai, pairs_for([10, 11, 12]), transport="lean", concurrency=1)
    assert res.summary.judged == 9 and res.summary.failures == {}
    assert res.summary.attempts == 9 and len(fake_openai.chat_log()) == 9


def test_auto_transport_leaves_proxies_to_the_sdk(fake_openai, monkeypatch):
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    assert not proxy_configured()
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert proxy_configured()
    # NO_PROXY keeps the SDK's stack away from the proxy for the local server
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    res = judge(fake_openai, pairs_for([10]), transport="auto")
    assert res.summary.judged == 3
    # the SDK's stack announces itself; the lean client sends recjudge's own user agent
    assert not fake_openai.chat_log()[0].headers.get("user-agent", "").startswith("recjudge/")


def test_lean_error_answers_name_the_endpoint_and_status(fake_openai):
    fake_openai.rule = lambda call: Reply(404, "The model `fake-model` does not exist")
    from recjudge.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        judge(fake_openai, pairs_for([10], ["u0"]), transport="lean")
    text = str(err.value)
    assert fake_openai.url in text and "HTTP 404" in text and "does not exist" in text


def test_a_bad_request_answer_is_a_recorded_failure(fake_openai):
    fake_openai.rule = lambda call: Reply(400, json.dumps({"detail": "messages too long"}))
    res = judge(fake_openai, pairs_for([10], ["u0"]), transport="lean")
    assert res.labels == {} and res.summary.failures == {"bad_request": 1}
