"""A judge that cannot waste money: the plan shown (and confirmed) before the first paid call, and the
breaker that stops a run whose calls fail, against the local OpenAI server (tests/fake_openai.py)."""

from __future__ import annotations

import io
import json
import math
import re
import sys

import pytest
from fake_openai import Reply, default_labeler
from judge_data import movies, pairs_for, tiny_workspace

from recjudge.cli import main
from recjudge.errors import ConfigError, NotConfirmed
from recjudge.judging import JudgeSettings, judge_pairs
from recjudge.judging import budget
from recjudge.judging.budget import Breaker, Plan, confirm_spend
from recjudge.judging.results import read_judgments

FAST = dict(backoff_initial=0.01, backoff_max=0.05, concurrency=4, timeout=5.0)
PROSE = "Sure! I would rate this a 9 out of 7."  # parses into no label of the 0-7 scale
OUT_TOKENS = 10 + 8  # the baseline template's output estimate for one candidate (budget.output_estimate)


def run(server, pairs, tmp_path=None, coll=None, progress=None, **cfg):
    cache = tmp_path / "cache.sqlite" if tmp_path is not None else None
    config = JudgeSettings(base_url=server.url, **{"model": "fake-model", **FAST, **cfg})
    return judge_pairs(pairs, coll or movies(), config, cache_path=cache, progress=progress)


def prompt_chars(request) -> int:
    return sum(len(m["content"]) for m in request.json["messages"])


def est_tokens(log) -> int:
    # the estimate of a generic endpoint's prompt: 2.5 characters per token, plus 3 per message and
    # 3 for the reply's priming (budget.safe_messages_tokens)
    return sum(math.ceil(prompt_chars(r) / 2.5) + 9 for r in log)


@pytest.fixture
def not_a_terminal(monkeypatch):
    monkeypatch.setattr(budget, "_at_terminal", lambda: False)


@pytest.fixture
def priced(tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-model": {"input": 1000.0, "output": 1000.0}}))  # USD per Mtok
    return str(prices)


# ------------------------------------------------------------------------------------------ plan

def test_the_plan_is_shown_before_the_first_call(fake_openai, tmp_path, not_a_terminal):
    said: list[str] = []
    seen_by_first_call: list[list[str]] = []
    fake_openai.rule = lambda call: seen_by_first_call.append(list(said)) or None
    pairs = pairs_for(range(10, 20))
    res = run(fake_openai, pairs, tmp_path, progress=said.append)
    assert res.summary.judged == 30
    plans = [m for m in said if m.startswith("plan: ")]
    expected = (f"plan: 30 pairs; 30 calls to make (0 answered by the cache) to {fake_openai.url}, model "
                f"'fake-model'; est. {est_tokens(fake_openai.chat_log()):,} input tokens, est. cost unknown: no "
                "price for model 'fake-model' (give prices= with its price)")
    assert plans == [expected]
    assert expected in seen_by_first_call[0]  # said before the first request reached the server
    # a re-run: the cache answers everything, the plan says so
    said.clear()
    run(fake_openai, pairs, tmp_path, progress=said.append)
    assert [m for m in said if m.startswith("plan: ")][0].startswith(
        "plan: 30 pairs; 0 calls to make (30 answered by the cache)")


def test_offline_judges_say_that_nothing_is_paid(tmp_path, capsys):
    said: list[str] = []
    judge_pairs(pairs_for(range(10, 15)), movies(), JudgeSettings(judge="overlap"), progress=said.append)
    assert said == ["plan: 15 pairs for the overlap judge, offline: no calls are paid"]


def test_a_dear_run_without_a_terminal_needs_yes_or_max_cost(fake_openai, tmp_path, priced, not_a_terminal):
    pairs = pairs_for(range(10, 20))
    with pytest.raises(NotConfirmed) as err:
        run(fake_openai, pairs, prices=priced)
    assert fake_openai.chat_log() == []  # nothing asked, nothing paid
    # --yes starts them; the same prompts then give the estimate by hand: 1000 USD per million tokens
    res = run(fake_openai, pairs, prices=priced, yes=True)
    assert res.summary.judged == 30
    est = (est_tokens(fake_openai.chat_log()) + 30 * OUT_TOKENS) * 1000 / 1e6
    assert est > 1.0
    assert str(err.value) == (f"not started: 30 calls est. ${est:,.2f}, above confirm_above_usd= 1, and no terminal "
                              "to confirm them; nothing was paid. Give yes= to start them, or max_cost= USD to cap "
                              "what they may cost")
    n = len(fake_openai.chat_log())
    run(fake_openai, pairs, prices=priced, max_cost=1e6)  # a cap is consent too
    run(fake_openai, pairs, prices=priced, confirm_above_usd=est + 0.01)  # below the threshold: no question
    assert len(fake_openai.chat_log()) == n + 60


def test_many_calls_of_unknown_cost_need_confirming(fake_openai, not_a_terminal):
    pairs = pairs_for(range(10, 20))
    with pytest.raises(NotConfirmed) as err:
        run(fake_openai, pairs, confirm_above_calls=29)
    assert "30 calls of unknown cost (no price for model 'fake-model'), more than confirm_above_calls= 29" \
        in str(err.value) and "(with prices= giving the model's price)" in str(err.value)
    assert fake_openai.chat_log() == []
    assert run(fake_openai, pairs, confirm_above_calls=30).summary.judged == 30  # not more than N: no question
    # --max-calls caps what may start: 10 calls are below the threshold
    assert run(fake_openai, pairs_for(range(20, 30)), confirm_above_calls=29, max_calls=10).summary.calls == 10


@pytest.mark.parametrize("answer, starts", [("y\n", True), ("YES\n", True), ("n\n", False), ("\n", False),
                                            ("", False), ("sure\n", False)])
def test_at_a_terminal_the_user_is_asked(fake_openai, priced, monkeypatch, capsys, answer, starts):
    monkeypatch.setattr(budget, "_at_terminal", lambda: True)
    monkeypatch.setattr(sys, "stdin", io.StringIO(answer))
    pairs = pairs_for(range(10, 20))
    if starts:
        assert run(fake_openai, pairs, prices=priced).summary.judged == 30
    else:
        with pytest.raises(NotConfirmed, match="not started: 30 calls were not confirmed; nothing was paid"):
            run(fake_openai, pairs, prices=priced)
        assert fake_openai.chat_log() == []
    question = capsys.readouterr().err
    assert re.fullmatch(r"Start 30 calls \(est\. \$\d+\.\d\d\)\? \[y/N\] ", question)


def test_confirm_spend_serves_any_command():
    plan = Plan(10, 5000, 0, "http://127.0.0.1:1/v1", "m", 1000, None, what="ablate")
    said, asked = [], []

    class Settings:  # another command's settings: only what it has
        yes = False
    confirm_spend(plan, type("S", (), {"yes": True})(), said.append)  # yes: never asks
    with pytest.raises(NotConfirmed, match=r"5,000 calls of unknown cost .* more than --confirm-above-calls 1,000"):
        confirm_spend(plan, Settings(), said.append, interactive=False)
    confirm_spend(plan, Settings(), said.append, interactive=True, ask=lambda q: asked.append(q) or "y")
    assert asked == ["Start 5,000 calls (est. cost unknown)? [y/N] "]
    assert said[0] == ("plan: 10 pairs; 5,000 calls to make (0 answered by the cache) to http://127.0.0.1:1/v1, "
                       "model 'm'; est. 1,000 input tokens, est. cost unknown: no price for model 'm' (give "
                       "--prices with its price)")
    confirm_spend(Plan(10, 0, 10, "u", "m", 0, None), Settings(), said.append, interactive=False)  # nothing to pay


# ------------------------------------------------------------------------------------------- CLI

@pytest.fixture
def workspace(tmp_path):
    """A collection as RecBole atomic files and one run: user u ranks items 20..27 ('Movie k')."""
    return tiny_workspace(tmp_path)


def cli(ws, server, *extra):
    return main(["judge", "--runs", str(ws / "sys.run"), "--collection", str(ws / "tiny"), "--split", "none",
                 "--out", str(ws / "q" / "j.qrels"), "--cache", str(ws / "cache.sqlite"), "--base-url", server.url,
                 "--model", "fake-model", "--concurrency", "4", *extra])


def test_cli_refuses_a_large_run_without_yes_and_names_both_ways_out(workspace, fake_openai, capsys,
                                                                    not_a_terminal):
    assert cli(workspace, fake_openai, "--confirm-above-calls", "39") == 2
    err = capsys.readouterr().err
    assert f"plan: 40 pairs; 40 calls to make (0 answered by the cache) to {fake_openai.url}, model 'fake-model'" in err
    assert ("40 calls of unknown cost (no price for model 'fake-model'), more than --confirm-above-calls 39, and no "
            "terminal to confirm them; nothing was paid. Give --yes to start them, or --max-cost USD (with --prices "
            "giving the model's price) to cap what they may cost") in err
    assert fake_openai.chat_log() == [] and not (workspace / "q" / "j.qrels").exists()
    assert cli(workspace, fake_openai, "--confirm-above-calls", "39", "--yes") == 0
    assert len((workspace / "q" / "j.qrels").read_text().splitlines()) == 40


def test_cli_offline_judge_plan(workspace, capsys):
    assert main(["judge", "--runs", str(workspace / "sys.run"), "--collection", str(workspace / "tiny"), "--split",
                 "none", "--out", str(workspace / "o.qrels"), "--judge", "popularity", "--depth", "3"]) == 0
    assert "plan: 15 pairs for the popularity judge, offline: no calls are paid" in capsys.readouterr().err


def test_cli_stops_early_on_unparseable_answers(workspace, fake_openai, capsys):
    fake_openai.rule = lambda call: Reply(content=PROSE)
    assert cli(workspace, fake_openai) == 4  # incomplete: no pair has a label
    captured = capsys.readouterr()
    assert (f"stopped early: the first 8 calls all failed (unparseable): answer not usable: unparseable; the answer "
            f"began {PROSE!r}. The labels received are written and cached; fix the cause and re-run the same command "
            "to resume") in captured.err
    calls = int(re.search(r"calls made\s+(\d+) \(", captured.out).group(1))
    assert 8 <= calls <= 8 + 4 and len(fake_openai.chat_log()) == 2 * calls  # each asked once more, no more
    assert re.search(rf"paid, failed\s+{calls} failed calls were answered \(HTTP 2xx: billed\)", captured.out)
    assert f"{40 - calls} not asked (stopped: failing calls)" in captured.out
    summary = json.loads((workspace / "q" / "j.summary.json").read_text())["summary"]
    assert summary["failures"] == {"unparseable": calls, "stopped_early": 40 - calls}


# --------------------------------------------------------------------------------------- breaker

def test_always_unparseable_stops_after_the_first_calls(fake_openai, tmp_path):
    fake_openai.rule = lambda call: Reply(content=PROSE)
    res = run(fake_openai, pairs_for(range(0, 30)), tmp_path)
    s = res.summary
    log = fake_openai.chat_log()
    # the first 8 calls, and at most the 4 in flight, each asked twice (one parse retry): not 90 × 6
    assert 8 <= s.calls <= 12 and len(log) == 2 * s.calls
    assert s.stopped_early == (f"the first 8 calls all failed (unparseable): answer not usable: unparseable; the "
                               f"answer began {PROSE!r}")
    assert res.labels == {} and s.halted_calls == 90 - s.calls
    assert s.failures == {"unparseable": s.calls, "stopped_early": 90 - s.calls}
    # every failed call was answered (billed): their tokens as the server counted them (4 characters each)
    assert s.paid_failed_calls == s.calls
    assert s.paid_failed_usage.prompt == sum(prompt_chars(r) // 4 for r in log)
    assert s.paid_failed_usage.completion == len(log) * (len(PROSE) // 4)
    assert sum(s.call_counts().values()) == s.planned_calls == 90


def test_failures_dominating_a_window_stop_the_run_and_the_rerun_resumes(fake_openai, tmp_path):
    fake_openai.rule = lambda call: None if call.index < 20 else Reply(content=PROSE)
    coll = movies(n_items=120, n_users=1)
    pairs = pairs_for(range(10, 110), ["u0"])
    res = run(fake_openai, pairs, tmp_path, coll)
    s = res.summary
    n = int(re.match(r"(\d+) of the last 50 calls failed \(unparseable: \1\); unparseable: answer not usable",
                     s.stopped_early).group(1))
    assert n > 25
    assert len(res.labels) == 20 and s.calls <= 50 + 4 and len(fake_openai.chat_log()) <= 20 + 2 * (30 + 4)
    res.write(tmp_path / "q.qrels")
    assert len((tmp_path / "q.qrels").read_text().splitlines()) == 20  # the labels received are written
    rows = read_judgments(tmp_path / "q.judgments.jsonl")[1]
    assert all(r["label"] is None and r["status"] == "failed" for r in rows if r["reason"])
    # fixed, the same run resumes: the 20 answers come from the cache, only the rest is asked
    fake_openai.rule = None
    before = len(fake_openai.chat_log())
    again = run(fake_openai, pairs, tmp_path, coll)
    assert again.summary.cache_hits == 20 and again.summary.judged == 100 and again.summary.stopped_early is None
    assert len(fake_openai.chat_log()) - before == 80


def test_most_prompts_answered_500_stop_the_run(fake_openai, tmp_path):
    # items k with k % 8 % 5 < 3 (k % 8 in 0, 1, 2, 5, 6, 7: 75% of the prompts) always get HTTP 500
    fake_openai.rule = lambda call: Reply(500) if default_labeler(call.candidates[0][1]) % 5 < 3 else None
    coll = movies(n_items=120, n_users=1)
    res = run(fake_openai, pairs_for(range(10, 110), ["u0"]), tmp_path, coll, max_attempts=2)
    s = res.summary
    assert re.match(r"\d+ of the last 50 calls failed \(server_error: \d+\); server_error: HTTP 500: scripted 500",
                    s.stopped_early)
    assert len(fake_openai.chat_log()) <= 2 * (50 + 4)  # all 100 would be 160 requests
    assert s.paid_failed_calls == 0 and "paid, failed" not in s.format()  # error answers are not billed
    assert res.labels and all(int(d) % 8 in (3, 4) for _, d in res.labels)


# the first N prompts fail once, then the server is fine: 500s are retried (--retries 6); an unusable
# answer once (--parse-retries 1), which then parses. Keyed by prompt, not by arrival: under load a
# call's retry may arrive before another call's first request
@pytest.mark.parametrize("first, n", [(Reply(500), 7), (Reply(content=PROSE), 4)])
def test_a_few_failing_first_requests_do_not_stop_the_run(fake_openai, first, n):
    failed: set = set()

    def rule(call):
        if call.user in failed or len(failed) >= n:
            return None
        failed.add(call.user)
        return first

    fake_openai.rule = rule
    res = run(fake_openai, pairs_for(range(10, 30)))
    assert res.summary.stopped_early is None and res.summary.judged == 60


def test_a_refused_key_stops_at_once_and_keeps_what_was_answered(fake_openai, tmp_path):
    fake_openai.rule = lambda call: Reply(401, "Incorrect API key provided") if call.index >= 10 else None
    pairs = pairs_for(range(10, 30))
    with pytest.raises(ConfigError, match="refused the API key"):
        run(fake_openai, pairs, tmp_path)
    assert len(fake_openai.chat_log()) <= 10 + 4  # no retry; the calls in flight end
    fake_openai.rule = None
    again = run(fake_openai, pairs, tmp_path)
    assert again.summary.cache_hits >= 10 and again.summary.judged == 60


def test_an_unknown_model_stops_at_once(fake_openai):
    fake_openai.rule = lambda call: Reply(404, "The model `fake-model` does not exist or you do not have access to it.")
    # named as the caller wrote the settings (here keywords of JudgeSettings)
    with pytest.raises(ConfigError, match=r"answered HTTP 404: The model `fake-model` does not exist.*check model= "
                                          r"\(now 'fake-model'\) and base_url="):
        run(fake_openai, pairs_for(range(10, 30)))
    assert len(fake_openai.chat_log()) <= 4


@pytest.mark.parametrize("retries, requests", [(None, 2), (0, 1), (3, 4)])
def test_unusable_answers_are_retried_parse_retries_times(fake_openai, retries, requests):
    fake_openai.rule = lambda call: Reply(content=PROSE)
    cfg = {} if retries is None else {"parse_retries": retries}
    res = run(fake_openai, pairs_for([10], ["u0"]), max_attempts=6, **cfg)
    assert len(fake_openai.chat_log()) == requests and res.summary.failures == {"unparseable": 1}


def test_breaker_rules():
    sample = {"unparseable": "the answer began 'x'", "server_error": "HTTP 500"}.get
    mixed = Breaker(first=3, window=0)
    for reason in ("unparseable", "server_error", "unparseable"):
        mixed.observe("failed", reason, sample)
    assert mixed.tripped is None  # not the same way: the window decides
    alike = Breaker(first=3, window=0)
    for _ in range(3):
        alike.observe("failed", "unparseable", sample)
    assert alike.tripped == "the first 3 calls all failed (unparseable): the answer began 'x'"
    overflow = Breaker(first=2, window=4)
    for _ in range(10):
        overflow.observe("failed", "context_overflow", sample)  # one prompt too long: never the endpoint's fault
    assert overflow.tripped is None
    window = Breaker(first=2, window=4, share=0.5)
    for status in ("ok", "ok", "failed", "ok", "failed"):  # windows: 1 of 4, 2 of 4 failed: not more than half
        window.observe(status, "server_error" if status == "failed" else None, sample)
    assert window.tripped is None
    window.observe("failed", "server_error", sample)  # 3 of the last 4
    assert window.tripped == "3 of the last 4 calls failed (server_error: 3); server_error: HTTP 500"
    partly = Breaker(first=2, window=0)
    for _ in range(2):
        partly.observe("partial", "missing_item", sample)
    assert partly.tripped is None  # partly answered calls gave labels
