"""Token estimates, the cost of used tokens and the --max-calls / --max-cost budget, each value by
hand: prices and costs chosen as binary fractions so that a budget exactly used up is exact."""

from __future__ import annotations

import pytest

from recjudge.judging import JudgeSettings
from recjudge.judging.budget import (
    Budget,
    cost,
    estimate_messages_tokens,
    estimate_tokens,
    output_estimate,
    safe_messages_tokens,
)
from recjudge.judging.cache import Usage
from recjudge.judging.prompts import load_template

# $250,000 per million input tokens: one prompt token costs exactly $0.25
QUARTER = {"input": 250_000.0, "output": 0.0}


def _budget(price=QUARTER, **settings) -> Budget:
    return Budget(JudgeSettings.from_dict({"model": "m", **settings}), price)


def test_token_estimates_by_hand():
    # ⌈characters / 4⌉
    assert [estimate_tokens(t) for t in ("", "a", "abcd", "abcde", "a" * 9)] == [0, 1, 1, 2, 3]
    # 2 + 1 tokens, 3 per message for two messages, 3 to prime the reply
    assert estimate_messages_tokens("abcde", "a") == 2 + 1 + 3 * 2 + 3
    # ⌈(3 + 4) / 3⌉ = 3, plus the same 9
    assert safe_messages_tokens("abc", "abcd") == 3 + 9


def test_output_estimate_by_hand():
    # 10 per call, 8 per item for a label; 6 more per item for each criterion of the template
    assert output_estimate(load_template("baseline"), 1) == 10 + 8
    assert output_estimate(load_template("baseline"), 5) == 10 + 8 * 5
    assert len(load_template("criteria").criteria) == 4
    assert output_estimate(load_template("criteria"), 3) == 10 + (8 + 6 * 4) * 3


def test_cost_by_hand():
    price = {"input": 2.0, "cached_input": 0.5, "output": 8.0}
    used = Usage(prompt=1000, cached=400, completion=100)
    # 600 uncached at $2/M, 400 cached at $0.5/M, 100 out at $8/M
    assert cost(used, price) == pytest.approx((600 * 2.0 + 400 * 0.5 + 100 * 8.0) / 1e6)
    # no cached price: cached tokens at the input price
    assert cost(used, {"input": 2.0, "output": 8.0}) == pytest.approx((1000 * 2.0 + 100 * 8.0) / 1e6)
    assert cost(used, None) is None


def test_max_calls_counts_starts_not_retries():
    b = _budget(max_calls=2)
    assert b.take(0.0) and b.take(0.0)
    assert not b.take(0.0) and b.stopped == "--max-calls 2 reached"
    assert b.started == 2
    one = _budget(max_calls=1)
    assert one.take(0.0) and one.take(0.0, retry=True) and one.started == 1  # the retry is the same call
    assert not one.take(0.0)


def test_max_cost_counts_calls_in_flight_and_allows_an_exact_fit():
    b = _budget(max_cost=1.0)
    assert b.take(0.5) and b.reserved == 0.5
    assert b.take(0.5)  # 0.5 reserved + 0.5 = 1.0: exactly the budget
    assert not b.take(0.25) and b.stopped == "--max-cost $1 would be exceeded"
    assert not b.take(0.0)  # stopped stays stopped


def test_settle_releases_the_reservation_and_books_the_cost():
    b = _budget(max_cost=1.0)
    assert b.take(0.5)
    b.settle(0.5, Usage(prompt=1))  # the call cost one token: $0.25
    assert (b.spent, b.reserved) == (0.25, 0.0)
    assert b.take(0.75)  # 0.25 spent + 0.75 = 1.0
    assert not b.take(0.25)


def test_reservations_grow_to_the_dearest_attempt_seen():
    b = _budget(max_cost=10.0)
    assert b.reservation(0.1) == 0.1
    assert b.take(0.1)
    b.settle(0.1, Usage(prompt=2), attempts=2)  # $0.50 over two attempts: $0.25 each
    assert b.max_seen == 0.25
    assert b.reservation(0.1) == 0.25 and b.reservation(0.3) == 0.3


def test_a_retry_fits_when_this_call_and_the_next_attempt_fit():
    b = _budget(max_cost=1.0)
    assert b.take(0.25)
    # used $0.50 in two attempts: the next may cost $0.25; 0.25 reserved + 0.5 + 0.25 = 1.0 fits exactly
    assert b.allows_retry(Usage(prompt=2), attempts=2) and b.stopped is None
    # the same $0.50 in one attempt: the next may cost $0.50 → 1.25 > 1
    assert not b.allows_retry(Usage(prompt=2), attempts=1)
    assert b.stopped == "--max-cost $1 would be exceeded"
    assert _budget().allows_retry(Usage(prompt=10**6))  # no --max-cost: always


def test_the_first_call_probes_only_when_nothing_caps_a_call():
    assert _budget(max_cost=1.0).needs_probe
    for key in ("max_tokens", "max_completion_tokens"):
        capped = _budget(max_cost=1.0, params={key: 50})
        assert capped.capped and not capped.needs_probe
    assert not _budget().needs_probe  # no --max-cost
