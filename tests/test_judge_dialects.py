"""Local servers as they are: each kind's quirks reproduced by the local fake (tests/fake_openai.py
``kind=``) — llama-cpp-python's HTTP 500 to json_schema, its ignored max_completion_tokens, one
request at a time, no cached-token report; llama-server's /props; vLLM's window and chat
tokenizer; Ollama — found by probing, spoken to in their own form, and reported in the summary.
Also the run summary's counts (they add up), progress lines, and the judge's and audit's help."""

from __future__ import annotations

import argparse
import json
import re

import pytest
from fake_openai import TEMPLATE_TOKENS, FakeOpenAI, Reply, fake_tokens
from judge_data import movies, pairs_for

from recjudge.cli import build_parser, main
from recjudge.errors import InputError
from recjudge.judging import JudgeSettings, judge_pairs, read_topics
from recjudge.judging.dialects import DIALECTS, grammar_schema, window_from_message

FAST = dict(backoff_initial=0.01, backoff_max=0.05, timeout=10.0, model="fake-model")


def judge(server, pairs, **cfg):
    return judge_pairs(pairs, movies(), JudgeSettings(base_url=server.url, **{**FAST, **cfg}))


def chat(server):
    return [r for r in server.chat_log() if r.status == 200]


@pytest.mark.parametrize("kind, structured, evidence", [
    ("llama-cpp-python", "json_object+schema", "extras/tokenize/count"),
    ("llama.cpp", "json_object+schema", "owned_by llamacpp"),
    ("vllm", "json_schema", "owned_by vllm"),
    ("ollama", "json_schema", "api/version"),
    ("openai", "json_schema", "no known server"),  # OpenAI's API at another host: a generic server
])
def test_each_kind_is_found_by_probing_and_asked_in_its_own_form(kind, structured, evidence):
    with FakeOpenAI(kind=kind) as server:
        pairs = pairs_for([10, 11])
        res = judge(server, pairs, params={"max_completion_tokens": 50})
        assert res.labels == {(u, d): int(d) % 8 for u, d in pairs} and res.summary.failures == {}
        (ep,) = res.summary.endpoints.values()
        assert ep["kind"] == ("generic" if kind == "openai" else kind) and evidence in ep["evidence"]
        assert ep["structured"] == structured and ep["fallback"] is None
        body = chat(server)[0].json
        # the cap goes out under the name every local kind honours; no kind got a refused request
        assert body["max_tokens"] == 50 and "max_completion_tokens" not in body
        assert all(r.status == 200 for r in server.chat_log())
        if structured == "json_object+schema":  # llama.cpp's grammar: the label range as an enum
            assert body["response_format"]["type"] == "json_object"
            assert body["response_format"]["schema"]["properties"]["label"]["enum"] == list(range(8))
        assert res.summary.usage.cached == 0  # no cached-token report is no error


def test_the_openai_api_gets_max_completion_tokens_and_no_probe(fake_openai, monkeypatch):
    # the OpenAI API is known by its host; here its host is the fake's (a forced kind), so no probe
    # but /v1/models (for the model's window) and the cap under OpenAI's name
    res = judge(fake_openai, pairs_for([10], ["u0"]), endpoint_kind="openai", params={"max_tokens": 30})
    assert res.summary.judged == 1
    body = chat(fake_openai)[0].json
    assert body["max_completion_tokens"] == 30 and "max_tokens" not in body
    assert [r.path for r in fake_openai.log if not r.path.endswith("/chat/completions")] == ["/v1/models"]


def test_a_refusal_of_json_schema_with_http_500_falls_back_to_text_once_and_says_so():
    # llama-cpp-python told to be a generic server: it answers json_schema with HTTP 500, whose
    # message names response_format; the fallback is taken, counted as an attempt, and recorded
    with FakeOpenAI(kind="llama-cpp-python") as server:
        pairs = pairs_for([10, 11])
        res = judge(server, pairs, endpoint_kind="generic", concurrency=1)
        assert res.labels == {(u, d): int(d) % 8 for u, d in pairs}
        statuses = [(r.status, "response_format" in r.json) for r in server.chat_log()]
        assert statuses == [(500, True)] + [(200, False)] * 6
        assert res.summary.attempts == 7  # the refused request is an attempt like any other
        (ep,) = res.summary.endpoints.values()
        assert ep["structured"] == "text" and "HTTP 500" in ep["fallback"] and "response_format" in ep["fallback"]
        text = res.summary.format()
        assert "fallback" in text and "text answers parsed" in text


def test_with_structured_on_a_refusal_is_a_failure_not_a_fallback():
    with FakeOpenAI(kind="llama-cpp-python") as server:
        res = judge(server, pairs_for([10], ["u0"]), endpoint_kind="generic", structured="on", max_attempts=2)
        assert res.summary.failures == {"server_error": 1}
        assert "response_format" in res.summary.failure_messages["server_error"]
        assert "first message" in res.summary.format()


def test_a_serial_server_gets_one_request_at_a_time_and_the_timeout_is_each_request_s_own():
    # one slot, 0.3 s per answer, 8 in flight asked: queued in recjudge, never at the server, so a
    # 1 s timeout is enough though the run takes 3 s
    with FakeOpenAI(kind="llama-cpp-python", latency=0.3) as server:
        res = judge(server, pairs_for([10, 11, 12]) + [("u0", "13")], concurrency=8, timeout=1.0, max_attempts=1)
        assert res.summary.judged == 10 and res.summary.failures == {}
        assert server.max_inflight == 1
        (ep,) = res.summary.endpoints.values()
        assert ep["concurrency"] == 1 and ep["concurrency_changes"] == ["8 -> 1 (the server serves 1 request(s) "
                                                                        "at once)"]


def test_concurrency_adapts_when_latency_grows_with_requests_in_flight():
    # a server of unknown kind that answers one request at a time: latency grows with the queue,
    # and recjudge lowers the requests in flight instead of letting them wait in the server
    with FakeOpenAI(kind="openai", latency=0.05, slots=1) as server:
        res = judge(server, pairs_for(range(10, 30), ["u0", "u1"]), concurrency=8, max_attempts=1)
        assert res.summary.judged == 40
        (ep,) = res.summary.endpoints.values()
        assert ep["kind"] == "generic" and ep["concurrency"] < 8
        assert ep["concurrency_changes"] and "latency grew" in ep["concurrency_changes"][0]


def test_a_parallel_server_keeps_its_concurrency():
    # 200 ms per answer: a busy test machine adds milliseconds per request, far from the 3× growth of
    # a one-slot server that makes the limiter step down
    with FakeOpenAI(kind="openai", latency=0.2) as server:
        res = judge(server, pairs_for(range(10, 30), ["u0", "u1"]), concurrency=8)
        (ep,) = res.summary.endpoints.values()
        assert ep["concurrency"] == 8 and "concurrency_changes" not in ep


def test_ignored_parameters_and_the_server_temperature_are_reported(capsys):
    with FakeOpenAI(kind="llama-cpp-python") as server:
        res = judge_pairs(pairs_for([10], ["u0"]), movies(),
                          JudgeSettings(base_url=server.url, **FAST, params={"reasoning_effort": "low", "seed": 1}),
                          progress=print)
    out = capsys.readouterr().out
    (ep,) = res.summary.endpoints.values()
    assert ep["ignored"] == ["reasoning_effort"]
    assert out.count("ignores reasoning_effort") == 1 and "samples at its default 0.8" in out
    assert "reasoning_effort: accepted by the server without effect" in res.summary.format()


@pytest.mark.parametrize("kind", ["vllm", "llama.cpp", "llama-cpp-python"])
def test_the_endpoint_tokenizer_counts_prompts_as_the_server_bills_them(kind):
    # the window is the server's own (vLLM's max_model_len, llama-server's n_ctx) or given; prompts
    # near it are counted by the server's tokenizer: the count the summary reports equals the bill
    window = 130
    with FakeOpenAI(kind=kind, n_ctx=None if kind == "llama-cpp-python" else window) as server:
        extra = {"context_tokens": window} if kind == "llama-cpp-python" else {}
        res = judge(server, pairs_for([10, 11], ["u0", "u1", "u2"]), **extra)
        sent = chat(server)
        billed = {r.prompt_sha: fake_tokens("\n".join(m["content"] for m in r.json["messages"])) + TEMPLATE_TOKENS - 1
                  for r in sent}
        s = res.summary
        assert s.context_tokens == window and s.token_counts == {"the endpoint's tokenizer": 6}
        assert all(v <= window for v in billed.values())
        over = {o.user: o.estimated_tokens for o in s.context_overflow}
        # u2 rated more items: its prompts exceed the window, were counted as the server counts, never sent
        assert set(over) == {u for u in ("u0", "u1", "u2") if over.get(u, 0) > window}
        assert s.judged + sum(s.failures.values()) == 6


def test_vllm_window_from_the_probe_stops_a_prompt_before_it_is_sent():
    with FakeOpenAI(kind="vllm", n_ctx=60) as server:
        res = judge(server, pairs_for([10], ["u0"]))
        assert res.summary.failures == {"context_overflow": 1} and chat(server) == []
        assert res.summary.context_tokens == 60 and res.provenance["context_tokens_from"] == "endpoint"


def test_an_overflow_answer_is_a_context_overflow_with_the_servers_words_and_teaches_the_window():
    # llama-cpp-python declares no window: the first overflow answer says it; later prompts are checked
    with FakeOpenAI(kind="llama-cpp-python", n_ctx=60) as server:
        res = judge(server, pairs_for([10, 11], ["u0", "u1"]), concurrency=1)
        assert res.summary.failures == {"context_overflow": 4}
        assert len(server.chat_log()) == 1  # one prompt sent, which taught the window; none after it
        assert "maximum context length is 60" in res.summary.failure_messages["context_overflow"]


def test_grammar_schema_writes_small_integer_ranges_as_enums():
    schema = {"type": "object", "properties": {"label": {"type": "integer", "minimum": 0, "maximum": 3},
                                               "big": {"type": "integer", "minimum": 0, "maximum": 10 ** 6}}}
    out = grammar_schema(schema)
    assert out["properties"]["label"] == {"type": "integer", "enum": [0, 1, 2, 3]}
    assert out["properties"]["big"] == schema["properties"]["big"]  # too wide for an enum: left alone


def test_window_from_message_reads_the_common_wordings():
    assert window_from_message("This model's maximum context length is 8192 tokens. However, ...") == 8192
    assert window_from_message("Requested tokens (824) exceed context window of 800") == 800
    assert window_from_message("bad request") is None


def test_every_kind_is_a_choice_of_endpoint_kind():
    from typing import get_args

    assert set(get_args(JudgeSettings.model_fields["endpoint_kind"].annotation)) == {"auto", *DIALECTS}


# --------------------------------------------------------------------------- counts that add up

def test_the_summary_call_counts_add_up_and_name_every_difference(tmp_path):
    # items 30 and 31 render identically (same title and genres): their prompts are one call.
    # Run 1 is stopped by --max-calls; run 2 resumes from the cache; one prompt always fails.
    coll = movies(40)
    coll.items.loc["31", "title"] = coll.items.loc["30", "title"]
    coll.items.loc["31", "genres"] = coll.items.loc["30", "genres"]
    pairs = pairs_for([10, 11, 12, 30, 31], ["u0"])
    with FakeOpenAI() as server:
        server.rule = lambda call: Reply(500, "boom") if "Movie 12" in call.user else None
        cache = tmp_path / "c.sqlite"
        first = judge_pairs(pairs, coll, JudgeSettings(base_url=server.url, **FAST, max_calls=2, concurrency=1,
                                                     max_attempts=2), cache_path=cache)
        second = judge_pairs(pairs, coll, JudgeSettings(base_url=server.url, **FAST, concurrency=1, max_attempts=2),
                             cache_path=cache)
    for s in (first.summary, second.summary):
        assert s.planned_calls == sum(s.call_counts().values()) == 5
        assert s.calls == s.answered_calls + s.partial_calls + s.failed_calls
    a, b = first.summary, second.summary
    assert (a.answered_calls, a.skipped_calls, a.cache_hits) == (2, 2, 0) and a.shared_calls == 1
    assert (b.cache_hits, b.shared_calls, b.answered_calls, b.failed_calls) == (2, 1, 1, 1)
    line = re.search(r"calls planned\s+(.*)", b.format()).group(1)
    assert line == "5 = 2 from cache, 1 same prompt as another, 1 answered, 1 failed"
    assert "not asked (budget)" in a.format() and b.failure_messages == {"server_error": "HTTP 500: boom"}


def test_a_run_of_failures_is_never_reported_as_answered(fake_openai):
    fake_openai.rule = lambda call: Reply(500, "down")
    lines = []
    res = judge_pairs(pairs_for([10, 11]), movies(), JudgeSettings(base_url=fake_openai.url, **FAST, max_attempts=1),
                      progress=lines.append)
    assert res.summary.answered_calls == 0 and res.summary.failed_calls == 6
    assert re.search(r"calls planned +6 = 0 from cache, 0 answered, 6 failed\n", res.summary.format())


# --------------------------------------------------------------------------- inputs and options

@pytest.mark.parametrize("qid", ['{"a": 1}', "[1, 2]", "true", "1.5"])
def test_a_topics_qid_that_is_not_text_or_a_number_is_refused_with_file_and_line(tmp_path, qid):
    path = tmp_path / "topics.jsonl"
    path.write_text('{"qid": "q1", "text": "funny films"}\n' + f'{{"qid": {qid}, "text": "sad films"}}\n')
    with pytest.raises(InputError) as err:
        read_topics(path)
    text = str(err.value)
    assert f"{path}:2:" in text and "query id ('qid')" in text and '"qid": "q1"' in text


def test_topics_qids_that_are_text_or_whole_numbers_are_read(tmp_path):
    path = tmp_path / "topics.jsonl"
    path.write_text('{"qid": "q1", "text": "funny films"}\n{"query_id": 7, "query": "sad films"}\n')
    assert read_topics(path) == {"q1": "funny films", "7": "sad films"}


def test_per_user_with_a_reference_judges_only_the_users_the_runs_rank(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    coll = tmp_path / "tiny"
    coll.mkdir()
    inter = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    inter += [f"u{u}\t{u + k}\t3\t{1000 + k}" for u in range(4) for k in range(4)]
    (coll / "tiny.inter").write_text("\n".join(inter) + "\n")
    (coll / "tiny.item").write_text("item_id:token\tmovie_title:token_seq\tclass:token_seq\n"
                                    + "".join(f"{k}\tMovie {k}\tDrama\n" for k in range(30)))
    (tmp_path / "ref.qrels").write_text("".join(f"u{u} 0 {20 + k} {k % 3}\n" for u in range(4) for k in range(3)))
    (tmp_path / "sys.run").write_text("".join(f"u{u} Q0 {20 + r} {r + 1} {5 - r} s\n" for u in (0, 1)
                                              for r in range(3)))
    with FakeOpenAI() as server:
        args = ["judge", "--collection", str(coll), "--split", "none", "--reference", str(tmp_path / "ref.qrels"),
                "--per-user", "2", "--out", str(tmp_path / "q.qrels"), "--cache", str(tmp_path / "c.sqlite"),
                "--base-url", server.url, "--model", "fake"]
        assert main(args + ["--runs", str(tmp_path / "sys.run")]) == 0
        err = capsys.readouterr().err
        assert "2 of its 4 users are ranked by the runs; only they are judged" in err
        assert {line.split()[0] for line in (tmp_path / "q.qrels").read_text().splitlines()} == {"u0", "u1"}
        assert main(args) == 0  # without runs: every user of the reference, and it says so
        assert "judging every one of its 4 users" in capsys.readouterr().err
        assert {line.split()[0] for line in (tmp_path / "q.qrels").read_text().splitlines()} == \
            {"u0", "u1", "u2", "u3"}


def _options(parser, name=""):
    for a in parser._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        if isinstance(a, argparse._SubParsersAction):
            for sub, p in a.choices.items():
                yield from _options(p, f"{name} {sub}".strip())
            continue
        if a.option_strings:
            yield name, a


@pytest.mark.parametrize("command", ["judge", "audit"])
def test_every_option_has_a_help_line_that_shows_its_default(command):
    subs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{where} {'/'.join(a.option_strings)}" for where, a in _options(subs.choices[command], command)
               if not a.help or ("default" not in a.help and not a.required)]
    assert missing == []


def test_judge_help_lists_temperature_and_reasoning_effort_with_their_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["judge", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert re.search(r"--temperature T sampling temperature, 0-2 \(default: not sent", out)
    assert re.search(r"--reasoning-effort \{minimal,low,medium,high\} a reasoning model's effort \(default: not sent",
                     out)


def test_audit_help_describes_collection_and_cache(capsys):
    with pytest.raises(SystemExit):
        main(["audit", "position", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--collection NAME_OR_PATH collection with item metadata" in out
    assert "--cache SQLITE answer cache shared with recjudge judge; re-runs resume from it (default: " \
           ".recjudge-cache/judge.sqlite)" in out


def test_the_summary_json_keeps_the_endpoint_and_the_counts(tmp_path):
    with FakeOpenAI(kind="llama.cpp") as server:
        res = judge(server, pairs_for([10], ["u0"]))
    res.write(tmp_path / "j.qrels")
    data = json.loads((tmp_path / "j.summary.json").read_text())
    (ep,) = data["summary"]["endpoints"].values()
    assert ep["kind"] == "llama.cpp" and ep["slots"] == 4 and ep["window"] == 8192
    assert data["summary"]["answered_calls"] == 1 and data["provenance"]["endpoint_kind"] == "auto"


def test_the_first_server_message_in_the_summary_never_holds_the_key(fake_openai, monkeypatch, capsys):
    key = "sk-secret-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    fake_openai.rule = lambda call: Reply(500, f"upstream refused key {key}")
    res = judge_pairs(pairs_for([10], ["u0"]), movies(), JudgeSettings(base_url=fake_openai.url, **FAST, max_attempts=1),
                      progress=print)
    message = res.summary.failure_messages["server_error"]
    assert "upstream refused key" in message and "[redacted]" in message
    assert key not in message and key not in res.summary.format() and key not in capsys.readouterr().out
