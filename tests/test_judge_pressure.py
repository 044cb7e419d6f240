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

import pandas as pd
import pytest

from fake_openai import FakeOpenAI, Reply
from recjudge.collections import Collection
from recjudge.judge import JudgeConfig, judge_pairs

FAST = dict(backoff_initial=0.01, backoff_max=0.05, concurrency=4, timeout=5.0, model="fake-model")


def movies(n_items: int = 40, n_users: int = 3, history: int = 6) -> Collection:
    items = pd.DataFrame({"title": [f"Movie {k}" for k in range(n_items)],
                          "genres": [("Drama",) if k % 2 else ("Comedy",) for k in range(n_items)]},
                         index=[str(k) for k in range(n_items)])
    rows = [(f"u{u}", str(u + k), float(1 + (u + k) % 5), 100 * u + k)
            for u in range(n_users) for k in range(history)]
    return Collection("movies", pd.DataFrame(rows, columns=["user", "item", "rating", "timestamp"]), items)


def pairs_for(items, users=("u0", "u1", "u2")):
    return [(u, str(i)) for u in users for i in items]


def subset_answer(call, keys):
    """A JSON answer labelling only ``keys`` of the call (as the fake's labeler would)."""
    return Reply(content=json.dumps({"labels": {k: v for k, v in call.labels.items() if k in keys}}))


# ------------------------------------------------------------------------------- partial answers

def test_a_partial_answer_is_completed_by_asking_only_the_missing_items(fake_openai):
    fake_openai.rule = lambda call: subset_answer(call, {"c1", "c2"}) if call.index == 0 else None
    res = judge_pairs(pairs_for([10, 11, 12, 13], ["u0"]), movies(),
                      JudgeConfig(base_url=fake_openai.url, items_per_call=4, **FAST))
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
                      JudgeConfig(base_url=fake_openai.url, items_per_call=4, max_attempts=6, **FAST))
    assert res.labels == {("u0", str(k)): k % 8 for k in (10, 11, 12, 13)}
    log = fake_openai.chat_log()
    shown = [len(r.json["response_format"]["json_schema"]["schema"]["properties"]["labels"]["properties"])
             for r in log]
    assert shown == [4, 2, 1]  # 3 requests (not 6), each re-asking only what is missing
    j = {x.docid: x for x in res.judgments}
    # the call's usage is the sum of its three attempts, shared over its four items
    assert sum(x.usage.prompt for x in j.values()) == pytest.approx(res.summary.usage.prompt, abs=4)
