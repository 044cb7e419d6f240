"""Paired sign-flip tests, Holm's correction and the agreement of significance decisions: expected
values by hand and from scipy.stats.permutation_test."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from recjudge.evaluation.significance import (
    PairTest,
    PairwiseTests,
    holm,
    paired_permutation_test,
    pairwise_tests,
    significance_agreement,
    top_overlap,
)


def test_holm_by_hand():
    # m = 4, sorted p: 0.01, 0.02, 0.03, 0.04 → 4·0.01 = 0.04, 3·0.02 = 0.06, 2·0.03 = 0.06, 1·0.04 = 0.04
    # → running max: 0.04, 0.06, 0.06, 0.06 (each back in its input position)
    got = holm([0.03, 0.01, 0.04, 0.02])
    assert got == pytest.approx([0.06, 0.04, 0.06, 0.06])
    # capped at 1: 3·0.5 = 1.5 → 1
    assert holm([0.5, 0.9, 0.001]) == pytest.approx([1.0, 1.0, 0.003])
    # NaN takes no part: m = 2 → 2·0.01, max(0.02, 1·0.04)
    got = holm([0.04, math.nan, 0.01])
    assert got[0] == pytest.approx(0.04) and math.isnan(got[1]) and got[2] == pytest.approx(0.02)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_sign_flip_p_equals_scipy(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(0.5, 0.2, 9)
    b = a - rng.normal(0.08, 0.1, 9)

    def statistic(x, y, axis):
        return np.mean(x - y, axis=axis)

    # permutation_type="samples" swaps x_i and y_i within each pair: a sign flip of d_i;
    # 2^9 = 512 ≤ n_resamples, so scipy enumerates them all, as we do
    ref = stats.permutation_test((a, b), statistic, permutation_type="samples", vectorized=True,
                                 n_resamples=10_000, alternative="two-sided")
    mean, p = paired_permutation_test(a, b, permutations=10_000)
    assert mean == pytest.approx(float(np.mean(a - b)))
    assert p == pytest.approx(ref.pvalue, abs=1e-12)


def test_exact_p_by_hand():
    # d = (1, 2, 3): |mean| = 2; of the 8 sign vectors only (+,+,+) and (−,−,−) reach |mean| 2 → p = 2/8
    assert paired_permutation_test([1, 2, 3], [0, 0, 0])[1] == pytest.approx(0.25)
    # all differences 0: every flip ties the observed 0 → p = 1
    assert paired_permutation_test([1, 1], [1, 1])[1] == pytest.approx(1.0)


def test_sampled_p_is_close_to_scipy_and_seeded():
    rng = np.random.default_rng(5)
    a = rng.normal(0.5, 0.2, 40)
    b = a - rng.normal(0.03, 0.1, 40)
    exact_like = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis),
                                        permutation_type="samples", vectorized=True, n_resamples=200_000,
                                        alternative="two-sided", random_state=1).pvalue
    p1 = paired_permutation_test(a, b, permutations=20_000, seed=3)[1]
    assert p1 == paired_permutation_test(a, b, permutations=20_000, seed=3)[1]
    assert abs(p1 - exact_like) < 0.01  # Monte Carlo error of p ≈ 0.06 with 20,000 draws: sd ≈ 0.002


def test_pairwise_tests_decide_direction_after_holm():
    users = 10
    # A beats B by 1 for every user (exact p = 2/1024); C equals B for every user (p = 1)
    m = pd.DataFrame({"B": np.zeros(users), "A": np.ones(users), "C": np.zeros(users)})
    res = pairwise_tests(m, "human", "Compat", alpha=0.05, permutations=5000)
    assert res.exact and res.n_users == 10
    by = {(t.a, t.b): t for t in res.tests}
    # pairs in name order: (A, B), (A, C), (B, C); p = 2/1024 for the first two, 1 for the last
    assert by[("A", "B")].p == pytest.approx(2 / 1024) and by[("A", "B")].decision == 1
    # Holm: sorted 2/1024, 2/1024, 1 → 3·2/1024, max(that, 2·2/1024), 1
    assert by[("A", "C")].p_holm == pytest.approx(6 / 1024)
    assert by[("B", "C")].decision == 0 and by[("B", "C")].p_holm == pytest.approx(1.0)


def _tests(decisions: dict) -> PairwiseTests:
    return PairwiseTests("x", "m", 10, 100, True, 0.05,
                         tuple(PairTest(a, b, float(d), 0.0, 0.0, d) for (a, b), d in decisions.items()))


def test_significance_agreement_by_hand():
    pairs = [("A", "B"), ("A", "C"), ("A", "D"), ("B", "C"), ("B", "D"), ("C", "D")]
    human = dict(zip(pairs, [1, 1, 0, 0, -1, 0]))
    llm = dict(zip(pairs, [1, 0, 1, 0, 1, 0]))
    got = significance_agreement(_tests(human), _tests(llm))
    # human significant: AB, AC, BD (3); not: AD, BC, CD (3)
    # same direction: AB (1); opposite: BD (1); LLM FP: AD (1 of 3 not significant); FN: AC (1 of 3)
    assert (got.n_pairs, got.reference_significant, got.candidate_significant) == (6, 3, 3)
    assert (got.both_same_direction, got.opposite_direction) == (1, 1)
    assert (got.false_positives, got.false_negatives) == (1, 1)
    assert got.false_positive_rate == pytest.approx(1 / 3)
    assert got.false_negative_rate == pytest.approx(1 / 3)
    assert got.agreement == pytest.approx(3 / 6)  # AB, BC, CD


def test_top_overlap_and_tau_ap_of_identical_rankings():
    ref = pd.Series({f"s{i}": float(i) for i in range(8)})
    swapped = ref.copy()
    swapped["s7"], swapped["s0"] = 0.0, 7.0  # the best and worst change places
    # top 5 of ref: s7..s3; of swapped: s0, s6, s5, s4, s3 → 4 shared
    assert top_overlap(ref, swapped) == pytest.approx(4 / 5)
    same = significance_agreement(_tests({("a", "b"): 1}), _tests({("a", "b"): 1}), ref, ref)
    assert same.tau_ap == pytest.approx(1.0) and same.top5_overlap == 1.0


def test_needed_permutations_and_smallest_holm_p_by_hand():
    from recjudge.evaluation.significance import needed_permutations, smallest_holm_p

    # 1,326 pairs (52 systems) at alpha 0.05: Holm's first threshold 0.05/1326; 10 steps below it
    # needs 10 · 1326 / 0.05 = 265,200 draws
    assert needed_permutations(1326, 0.05) == 265_200
    # sampled: the floor is 1/(draws + 1), times m
    assert smallest_holm_p(51, 1326, 10_000) == pytest.approx(1326 / 10_001)
    # exact (2^10 ≤ 5000 is false, 2^10 = 1024 ≤ 2000 true): floor 2/1024, times 3 pairs
    assert smallest_holm_p(10, 3, 2000) == pytest.approx(3 * 2 / 1024)


def test_many_systems_can_be_significant_despite_few_requested_permutations():
    # 40 systems 0.1 apart, 50 users, small noise: every pair differs clearly. With 10,000 sampled
    # sign flips the p-value floor is 1/10,001 and Holm's first threshold 0.05/780 = 6.4e-5 lies
    # below it, so a test that took the requested number literally could call no pair significant
    rng = np.random.default_rng(0)
    systems = [f"s{i:02d}" for i in range(40)]
    m = pd.DataFrame(np.arange(40) * 0.1 + rng.normal(0, 0.05, (50, 40)), columns=systems)
    res = pairwise_tests(m, permutations=10_000, seed=1)
    assert res.requested_permutations == 10_000 and res.permutations == 156_000  # 10 · 780 / 0.05
    assert not res.exact and "156,000 sign flips" in res.note
    assert res.smallest_holm_p < 0.05
    significant = [t for t in res.tests if t.decision != 0]
    assert len(significant) == 780  # every pair: each user's differences all share one sign
    assert all(t.decision == -1 for t in significant)  # a = lower-numbered system, which is worse
    js = res.to_json()
    assert js["permutations"] == 156_000 and js["requested_permutations"] == 10_000


def test_too_few_users_for_any_significance_is_said():
    # 5 users: the exact floor is 2/32 = 0.0625 ≥ 0.05 even for one pair; 'not significant' then
    # means 'not testable', and the agreement of two such label sets is no evidence of anything
    m = pd.DataFrame({"A": np.ones(5), "B": np.zeros(5)})
    res = pairwise_tests(m, "human", permutations=10_000)
    assert res.exact and res.tests[0].p == pytest.approx(2 / 32) and res.tests[0].decision == 0
    assert res.smallest_holm_p == pytest.approx(0.0625) and "no pair can be significant" in res.note
    agree = significance_agreement(res, pairwise_tests(m, "llm", permutations=10_000))
    assert agree.agreement == 1.0 and "human and llm cannot call any pair significant" in agree.note
    six = pd.DataFrame({"A": np.ones(6), "B": np.zeros(6)})  # 2/64 < 0.05: testable, and significant
    ok = pairwise_tests(six, permutations=10_000)
    assert ok.note == "" and ok.tests[0].decision == 1
