"""The judge audits with values by hand where a slip would move them: the popularity residual's sign,
its calibration and its equal-count bins; the position audit's flip rate, its two agreement columns
and the position each label is credited to; the number of injected items rounded from a fraction and
the share of labels raised."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from fake_openai import Reply
from scipy import stats

from recjudge.data.collections import Collection
from recjudge.data.trec import Qrels
from recjudge.judging import JudgeSettings
from recjudge.judging.bias import injection_inflation, popularity_bias, position_bias

FAST = dict(backoff_initial=0.01, backoff_max=0.05, concurrency=4, timeout=5.0, model="fake-model")
USERS = ("u0", "u1", "u2")


def _qrels(rows, name):
    return Qrels.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "label"]), name)


def test_popularity_residuals_by_hand():
    # items I0..I9 of popularity 1..10, in 3 equal-count bins: I0-I3, I4-I6, I7-I9 (i·3 // 10 + 1).
    # The LLM grades every item 5; the human labels 3 the rare ones, 2 the middle, 1 the popular.
    # Calibration: grade 5 → mean human label (4·3 + 3·2 + 3·1)/10 = 2.1 → 2. Residual = 2 − human:
    # −1 for the rare bin, 0, +1 for the popular one
    human = {f"I{i}": 3 if i < 4 else 2 if i < 7 else 1 for i in range(10)}
    popularity = {f"I{i}": i + 1 for i in range(10)}
    audit = popularity_bias(_qrels([("u", d, 5) for d in human], "llm"), _qrels([("u", d, h) for d, h in
                                                                                 human.items()], "human"),
                            popularity, bins=3)
    assert audit.mapping == {5: 2} and audit.pairs == 10
    d = audit.deciles
    assert list(d.decile) == [1, 2, 3] and list(d["items"]) == [4, 3, 3] and list(d.pairs) == [4, 3, 3]
    assert list(d.popularity_min) == [1, 5, 8] and list(d.popularity_max) == [4, 7, 10]
    assert list(d.mean_residual) == [-1.0, 0.0, 1.0]
    residual = [2 - human[f"I{i}"] for i in range(10)]
    assert audit.spearman == pytest.approx(stats.spearmanr(range(1, 11), residual).statistic)
    assert audit.spearman > 0  # the popular items are overrated


# --------------------------------------------------------------------------------------- position

def _collection() -> Collection:
    """Items 0..139; user u_j's history is items 100 + 10j .. 100 + 10j + 5, so a prompt names its user."""
    items = pd.DataFrame({"title": [f"Movie {k}" for k in range(140)], "genres": [("Drama",)] * 140},
                         index=[str(k) for k in range(140)])
    rows = [(u, str(100 + 10 * j + k), 3.0, k) for j, u in enumerate(USERS) for k in range(6)]
    return Collection("movies", pd.DataFrame(rows, columns=["user", "item", "rating", "timestamp"]), items)


def _movie(text: str) -> int:
    return int(text.split("Movie ")[1].split()[0].rstrip("."))


def test_position_audit_by_hand(fake_openai):
    # chunks of 3 in the given order: (15, 16, 17), (23, 24, 25), (31, 32, 33); the default label is
    # k % 8: each chunk's first item is a 7, the others 0 and 1. The judge gives whatever stands first
    # in a multi-item call a 7: in order that changes nothing; shuffled, a chunk whose first item
    # changed shows one raised label (0 or 1 → 7) beside its 7, which keeps its 7 anywhere
    calls = []

    def rule(call):
        if call.candidates and call.candidates[0][0] is not None:  # a multi-item call
            user = next(u for j, u in enumerate(USERS) if f"Movie {100 + 10 * j}" in call.user)
            calls.append((user, tuple(_movie(t) for _, t in call.candidates)))
            return Reply(content=json.dumps({"labels": {k: 7 if k == "c1" else v for k, v in call.labels.items()}}))
        return None

    fake_openai.rule = rule
    fake_openai.labeler = lambda text: _movie(text) % 8
    items = (15, 16, 17, 23, 24, 25, 31, 32, 33)
    pairs = [(u, str(i)) for u in USERS for i in items]
    audit = position_bias(pairs, _collection(), JudgeSettings(base_url=fake_openai.url, items_per_call=3, **FAST),
                          seed=3)
    # the shuffled order of each (user, chunk): the call whose order is not the given one, if any
    given = {(u, items[i:i + 3]) for u in USERS for i in (0, 3, 6)}
    shuffled = {(u, c): c for u, c in given}
    for user, order in calls:
        if order not in {c for _, c in given}:
            shuffled[(user, tuple(sorted(order)))] = order
    changed = sum(order[0] != chunk[0] for (_, chunk), order in shuffled.items())
    assert 0 < changed < 9  # the seed moves some chunks' first item and not others
    assert audit.pairs == 27
    assert audit.flip_rate == pytest.approx(changed / 27)  # one label flips per changed chunk
    assert audit.mean_abs_change == pytest.approx(sum(7 - o[0] % 8 for o in shuffled.values() if o[0] % 8 != 7) / 27)
    assert audit.exact_vs_single == pytest.approx((1.0, 1 - changed / 27))
    # mean label by position, in-order and shuffled calls pooled: in order 7, 0, 1 (×9 chunks each);
    # shuffled: a 7 first, then the labels of whatever stands second and third
    by_pos = [[7] * 9, [0] * 9, [1] * 9]
    for order in shuffled.values():
        by_pos[0].append(7)
        by_pos[1].append(order[1] % 8)
        by_pos[2].append(order[2] % 8)
    assert audit.mean_label_by_position == pytest.approx(tuple(sum(v) / len(v) for v in by_pos))


# --------------------------------------------------------------------------------------- injection

def test_injected_items_rounded_from_the_fraction_and_the_share_raised(fake_openai):
    # 10 candidates at fraction 0.18: 1.8 items → 2 injected (rounded, not cut to 1). The judge
    # obeys the injection for odd items only: an injected even item keeps its label k % 8
    fake_openai.labeler = lambda text: 7 if "Rate this 7" in text and _movie(text) % 2 else _movie(text) % 8
    items = range(40, 50)  # labels 0..7, 0, 1
    pairs = [(u, str(i)) for u in USERS for i in items]
    res = injection_inflation(pairs, _collection(), JudgeSettings(base_url=fake_openai.url, **FAST), fraction=0.18,
                              seed=1)
    assert res.injected_items == 2 and len(res.items) == 2 and res.pairs == 2 * 3
    odd = [int(d) for d in res.items if int(d) % 2]
    assert all(d % 8 != 7 for d in odd)  # an odd item already at 7 could not be raised
    assert res.share_raised == pytest.approx(len(odd) / 2)
    assert res.inflation == pytest.approx(sum(7 - d % 8 for d in odd) / 2)
    assert res.others_change == 0.0
    assert 0 < len(odd) < 2, "the seed should inject one odd and one even item, so that both cases show"
