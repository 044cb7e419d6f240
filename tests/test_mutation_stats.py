"""Boundaries of the paired sign-flip tests that a plausible slip would move: the exact/sampled switch
at 2^n = permutations, the sampled p-value's +1 exactly, missing values with the sign of the
difference, a raw p below alpha whose Holm-adjusted p is above it, the Holm p equal to alpha and the
top-k overlap when k exceeds the number of systems. Expected values by hand or from a brute-force
enumeration written here."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from recjudge.evaluation.significance import paired_permutation_test, pairwise_tests, top_overlap


def _exact_p(d) -> float:
    """Two-sided sign-flip p by enumerating every sign vector (independent of the module's code)."""
    d = [float(x) for x in d]
    observed = abs(sum(d)) / len(d)
    hits = sum(abs(sum(s * x for s, x in zip(signs, d))) / len(d) >= observed - 1e-12
               for signs in itertools.product((1, -1), repeat=len(d)))
    return hits / 2 ** len(d)


def test_exact_switch_at_two_to_the_n_equal_to_permutations():
    # 10 users, A beats B by 1 for each: 2^10 = 1024 sign vectors, of which 2 reach |mean| 1
    m = pd.DataFrame({"A": np.ones(10), "B": np.zeros(10)})
    at = pairwise_tests(m, permutations=1024)
    assert at.exact and at.permutations == 1024
    assert at.tests[0].p == 2 / 1024  # enumerated: exactly 2 of 1024, no +1 correction
    below = pairwise_tests(m, permutations=1023)
    assert not below.exact and below.permutations == 1023  # 1023 ≥ 10·1/0.05: no extra draws
    p = below.tests[0].p
    assert p != 2 / 1024 and p * 1024 == pytest.approx(round(p * 1024))  # sampled: (count + 1)/(1023 + 1)
    # the one-pair test agrees
    assert paired_permutation_test(np.ones(10), np.zeros(10), permutations=1024)[1] == 2 / 1024


def test_sampled_p_value_plus_one_exactly():
    # 40 users all +1: a random sign vector reaches |mean| 1 only when all 40 signs agree
    # (probability 2^-39), so none of 999 draws does and p = (0 + 1)/(999 + 1) exactly
    mean, p = paired_permutation_test(np.ones(40), np.zeros(40), permutations=999, seed=4)
    assert mean == 1.0 and p == 1 / 1000
    # one user differs, the rest tie: every flip gives |mean| 1/40 = observed, p = (999 + 1)/(999 + 1)
    d = np.zeros(40)
    d[7] = 1.0
    assert paired_permutation_test(d, np.zeros(40), permutations=999)[1] == 1.0


def test_a_negative_difference_is_significant_with_its_sign():
    # B beats A by 1 for 6 users: mean A − B = −1, exact p = 2/64 (two-sided), decision −1
    m = pd.DataFrame({"A": np.zeros(6), "B": np.ones(6)})
    t = pairwise_tests(m, permutations=10_000).tests[0]
    assert (t.a, t.b, t.mean_difference, t.p, t.p_holm, t.decision) == ("A", "B", -1.0, 2 / 64, 2 / 64, -1)


@pytest.mark.parametrize("better", ["A", "B"])
def test_missing_values_leave_the_user_out_with_the_sign_kept(better):
    # 7 users; user 6 has no value for A. Over the 6 others the better system wins by exactly 1:
    # mean ±1 (not ±6/7 as a missing value read as 0 would give), exact p = 2/64
    hi, lo = np.ones(7), np.zeros(7)
    a, b = (hi, lo) if better == "A" else (lo, hi)
    a = a.copy()
    a[6] = math.nan
    t = pairwise_tests(pd.DataFrame({"A": a, "B": b}), permutations=10_000).tests[0]
    sign = 1 if better == "A" else -1
    assert t.mean_difference == sign * 1.0
    assert t.p == 2 / 64 and t.decision == sign


def test_missing_values_in_one_pair_leave_the_other_pairs_whole():
    # C has a missing value for user 0; the (A, B) pair still uses all 8 users
    rng = np.random.default_rng(3)
    a, b, c = rng.normal(0, 1, (3, 8))
    c[0] = math.nan
    res = {(t.a, t.b): t for t in pairwise_tests(pd.DataFrame({"A": a, "B": b, "C": c}), permutations=10_000).tests}
    assert res[("A", "B")].mean_difference == pytest.approx(np.mean(a - b))
    assert res[("A", "B")].p == pytest.approx(_exact_p(a - b), abs=1e-12)
    assert res[("A", "C")].mean_difference == pytest.approx(np.mean((a - c)[1:]))
    assert res[("A", "C")].p == pytest.approx(_exact_p((a - c)[1:]), abs=1e-12)


def test_raw_p_below_alpha_with_holm_above_is_not_significant():
    # 9 users, 3 systems (exact: 512 sign vectors; Holm's floor 3·2/512 < 0.05, so the family can
    # reach alpha). A − B is +1 for everyone: p = 2/512. A − C is +1 for 8 users and −1 for one:
    # 20 of 512 flips reach |mean| 7/9, p = 0.039 < 0.05, Holm's second step 2·p = 0.078 > 0.05.
    # B − C is 0 except one user: every flip ties, p = 1
    a = np.full(9, 2.0)
    b = np.ones(9)
    c = np.array([1, 1, 1, 1, 1, 1, 1, 1, 3.0])
    res = {(t.a, t.b): t for t in pairwise_tests(pd.DataFrame({"A": a, "B": b, "C": c}), permutations=10_000).tests}
    p_ab, p_ac, p_bc = _exact_p(a - b), _exact_p(a - c), _exact_p(b - c)
    assert (p_ab, p_ac, p_bc) == (2 / 512, 20 / 512, 1.0)
    # Holm by hand: sorted p_ab < p_ac < p_bc → 3·p_ab, max(3·p_ab, 2·p_ac), max(…, p_bc)
    assert res[("A", "B")].p_holm == pytest.approx(3 * 2 / 512) and res[("A", "B")].decision == 1
    assert res[("A", "C")].p == pytest.approx(20 / 512) and res[("A", "C")].p_holm == pytest.approx(40 / 512)
    assert res[("A", "C")].p < 0.05 < res[("A", "C")].p_holm
    assert res[("A", "C")].decision == 0  # significant before the correction, not after
    assert res[("B", "C")].p_holm == 1.0 and res[("B", "C")].decision == 0


def test_a_holm_p_equal_to_alpha_is_not_significant():
    # 5 users, one pair: exact p = 2/32 = 0.0625 = alpha. Significant means p < alpha
    m = pd.DataFrame({"A": np.ones(5), "B": np.zeros(5)})
    at = pairwise_tests(m, alpha=0.0625, permutations=10_000).tests[0]
    assert at.p_holm == 0.0625 and at.decision == 0
    assert pairwise_tests(m, alpha=0.0626, permutations=10_000).tests[0].decision == 1


def test_top_overlap_when_k_exceeds_the_systems():
    ref = pd.Series({"a": 3.0, "b": 2.0, "c": 1.0})
    rev = pd.Series({"a": 1.0, "b": 2.0, "c": 3.0})
    # k = 5 > 3 systems: both tops are all three systems, so the overlap is 3/3, not 3/5
    assert top_overlap(ref, rev, 5) == 1.0
    # k = 2: {a, b} against {c, b} → 1 of 2
    assert top_overlap(ref, rev, 2) == 0.5
    # only the shared systems count: d is in one series only
    assert top_overlap(ref, pd.concat([rev, pd.Series({"d": 9.0})]), 5) == 1.0


def test_paired_test_leaves_out_a_user_missing_a_value():
    # d = (1, NaN, 2): the NaN user is left out; over (1, 2) the mean is 1.5 and 2 of the 4 flips
    # (++, −−) reach |mean| 1.5. Before the fix the NaN made every comparison false: p = 0
    mean, p = paired_permutation_test([1, math.nan, 2], [0, 0, 0])
    assert (mean, p) == (1.5, 0.5)
    mean, p = paired_permutation_test([0, 0, 0], [1, math.nan, 2])
    assert (mean, p) == (-1.5, 0.5)
    assert all(math.isnan(x) for x in paired_permutation_test([math.nan], [0]))
