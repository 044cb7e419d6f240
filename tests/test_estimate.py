"""The prediction-powered estimates: ppi_py as the reference, hand arithmetic, the user as the unit."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from recjudge.estimation.engine import estimate_sample
from recjudge.estimation.ppi import finite_mean, ppi_mean
from recjudge.estimation.ranks import rank_sets
from recjudge.estimation.sample import Sample

ppi_py = pytest.importorskip("ppi_py")


@pytest.mark.parametrize("n,u,seed", [(10, 1000, 0), (25, 40, 1), (200, 10_000, 2), (50, 5, 3)])
def test_one_sample_mean_equals_ppi_py(n, u, seed):
    rng = np.random.default_rng(seed)
    y = rng.gamma(2.0, size=n)
    f = 0.6 * y + rng.normal(0.4, 0.5, size=n)
    fu = rng.normal(1.5, 1.0, size=u)
    m = ppi_mean(y, f, fu)
    lo, hi = m.interval(0.05)
    want_lo, want_hi = np.asarray(ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05)).ravel()
    point = np.asarray(ppi_py.ppi_mean_pointestimate(y, f, fu, lam=None)).ravel()[0]
    assert m.estimate[0] == pytest.approx(float(point), abs=1e-9)
    assert lo[0] == pytest.approx(float(want_lo), abs=1e-9)
    assert hi[0] == pytest.approx(float(want_hi), abs=1e-9)
    lo1, hi1 = ppi_mean(y, f, fu, lam=1.0).interval(0.1)
    ref1 = np.asarray(ppi_py.ppi_mean_ci(y, f, fu, alpha=0.1, lam=1.0)).ravel()
    assert (lo1[0], hi1[0]) == pytest.approx((float(ref1[0]), float(ref1[1])), abs=1e-9)


def _five_users() -> Sample:
    """Two systems, five human users of N = 10 (the arithmetic is in the test below)."""
    y = np.array([[0.2, 0.0], [0.4, 0.2], [0.6, 0.2], [0.8, 0.4], [1.0, 0.2]])
    f = np.array([[0.2, 0.2], [0.2, 0.2], [0.6, 0.2], [0.6, 0.6], [1.0, 0.2]])
    others = np.array([[0.0, 0.2], [0.0, 0.2], [0.4, 0.6], [0.8, 0.6], [0.8, 0.2]])
    users = [f"u{i}" for i in range(10)]
    return Sample(["A", "B"], users[:5], users, {"m": y}, {"m": f}, {"m": np.vstack([f, others])})


def test_two_systems_five_users_by_hand():
    r = estimate_sample(_five_users(), alpha=0.05, population="judged")["m"]
    t4 = 2.7764451051977987  # t quantile, 4 degrees of freedom, 0.975
    # A: Ȳ = 0.6, f̄_n = 0.52, f̄_N = 0.46; Σ Yc fc = 0.4, Σ fc² = 0.448 → λ = 25/28;
    # Σ (r − r̄)² = 0.4 − 0.4²/0.448 = 3/70; se² = (1 − 5/10) (3/70 / 4) / 5 = 3/2800
    assert r.ppi.lam[0] == pytest.approx(25 / 28, abs=1e-12)
    assert r.ppi.estimate[0] == pytest.approx(0.6 + 25 / 28 * (0.46 - 0.52), abs=1e-12)
    assert r.ppi.se[0] == pytest.approx(math.sqrt(3 / 2800), abs=1e-12)
    lo, hi = r.ci()
    assert (lo[0], hi[0]) == pytest.approx((0.5464285714 - t4 * math.sqrt(3 / 2800),
                                            0.5464285714 + t4 * math.sqrt(3 / 2800)), abs=1e-9)
    # B: Ȳ = 0.2, f̄_n = 0.28, f̄_N = 0.32; λ = 0.08 / 0.128 = 0.625; Σ (r − r̄)² = 0.08 − 0.05
    assert r.ppi.lam[1] == pytest.approx(0.625, abs=1e-12)
    assert r.ppi.estimate[1] == pytest.approx(0.225, abs=1e-12)
    assert r.ppi.se[1] == pytest.approx(math.sqrt(0.5 * 0.03 / 4 / 5), abs=1e-12)
    # human only: Ȳ_A = 0.6, s² = 0.4/4, se² = (1 − 1/2) 0.1 / 5; LLM only: f̄_N
    assert r.human.estimate[0] == pytest.approx(0.6) and r.human.se[0] == pytest.approx(0.1)
    assert r.llm_only.tolist() == pytest.approx([0.46, 0.32])
    # worth: the n with (1/n − 1/N) s² = se²: 1 / (3/280 + 1/10)
    assert r.effective[0] == pytest.approx(1 / (3 / 280 + 0.1))
    # A − B per user: D̄_Y = 0.4, D̄_f,n = 0.24, D̄_f,N = 0.14, λ = 0.32/0.512, Σ (r − r̄)² = 0.24 − 0.2
    assert r.pair_means.lam[0] == pytest.approx(0.625)
    assert r.pair_means.estimate[0] == pytest.approx(0.4 + 0.625 * (0.14 - 0.24))
    assert r.pair_means.se[0] == pytest.approx(math.sqrt(0.5 * 0.04 / 4 / 5))
    # one pair: the simultaneous critical value is the marginal one, and A − B's interval is above 0
    assert r.pair_crit == pytest.approx(t4)
    assert r.ranks.lo.tolist() == [1, 2] and r.ranks.hi.tolist() == [1, 2]


def test_inclusion_probabilities_uniform_equal_the_default():
    s = _five_users()
    plain = estimate_sample(s)["m"]
    weighted = estimate_sample(dataclasses.replace(s, pi=np.full(5, 0.5)))["m"]
    assert weighted.ppi.estimate == pytest.approx(plain.ppi.estimate, abs=1e-12)
    assert weighted.ppi.se == pytest.approx(plain.ppi.se, abs=1e-12)


def test_inclusion_weights_correct_a_biased_sample():
    # users with a high metric were twice as likely to be judged by hand; unweighted, the estimate
    # is pulled up, weighted (1/π) it is unbiased: checked over many draws against the known mean
    rng = np.random.default_rng(5)
    big_n = 2000
    y_all = rng.beta(2, 3, size=big_n)
    f_all = np.clip(y_all + rng.normal(0, 0.15, size=big_n), 0, 1)
    pi_all = np.where(y_all > np.median(y_all), 0.04, 0.02)
    plain, weighted = [], []
    for _ in range(300):
        chosen = rng.random(big_n) < pi_all
        y, f = y_all[chosen], f_all[chosen]
        plain.append(finite_mean(y, f, f_all).estimate[0])
        weighted.append(finite_mean(y, f, f_all, pi_all[chosen]).estimate[0])
    truth = y_all.mean()
    assert abs(np.mean(weighted) - truth) < 0.002
    assert np.mean(plain) - truth > 0.004


def test_user_clustered_errors_need_the_user_as_the_unit():
    # P@4 of each user is the mean of 4 labels, which are alike within a user; the LLM's error is
    # shared by a user's 4 pairs (one user is lenient throughout). Treating the 4n pairs as independent (a pair-level PPI) gives an
    # interval half as wide as it must be; the user-level one is the hand formula and covers.
    rng = np.random.default_rng(7)
    n, k, big_n = 20, 4, 400
    covered_user, covered_pair = 0, 0
    reps = 400
    for _ in range(reps):
        # users differ: some find most of their list relevant, others little (labels clustered by user)
        labels = (rng.random((big_n, k)) < rng.beta(0.3, 0.3, size=(big_n, 1))).astype(float)
        shift = rng.choice([-0.5, 0.5], size=(big_n, 1))
        llm = labels + shift  # the same error on every pair of a user
        truth = labels.mean()
        chosen = rng.choice(big_n, n, replace=False)
        y, f = labels[chosen].mean(1), llm[chosen].mean(1)
        m = finite_mean(y, f, llm.mean(1))
        lo, hi = m.interval(0.05)
        covered_user += lo[0] <= truth <= hi[0]
        # the pair-level formula: the same estimator, its variance from the 4n pairs as if independent
        r = (labels[chosen] - m.lam[0] * llm[chosen]).ravel()
        se_pair = math.sqrt((1 - n / big_n) * r.var(ddof=1) / (n * k))
        half = stats.t.ppf(0.975, n * k - 1) * se_pair
        covered_pair += abs(m.estimate[0] - truth) <= half
    r_user = y - m.lam[0] * f
    assert m.se[0] == pytest.approx(math.sqrt((1 - n / big_n) * r_user.var(ddof=1) / n), abs=1e-12)
    assert covered_user / reps >= 0.92
    assert covered_pair / reps <= 0.85


def test_rank_sets_from_simultaneous_intervals():
    # three systems: 0 surely ahead of 2, 1 unseparated from both
    pairs = [(0, 1), (0, 2), (1, 2)]
    sets = rank_sets(3, pairs, np.array([-0.1, 0.05, -0.2]), np.array([0.3, 0.4, 0.1]))
    assert sets.lo.tolist() == [1, 1, 2] and sets.hi.tolist() == [2, 3, 3]
    assert sets.can_be_best.tolist() == [True, True, False]


def test_a_zero_width_interval_is_marked_as_no_interval():
    from recjudge.estimation.report import EstimateReport

    s = _five_users()
    y = s.y["m"].copy()
    y[:, 1] = 0.5  # every human user scores B alike, and the LLM agrees: residuals all equal
    f = s.f_human["m"].copy()
    f[:, 1] = 0.5
    s = dataclasses.replace(s, y={"m": y}, f_human={"m": f})
    results = estimate_sample(s)
    assert results["m"].ppi.se[1] == 0
    report = EstimateReport(s.systems, results, 5, 10, "judged", False)
    data = report.to_json()
    assert data["measures"]["m"]["systems"]["B"]["degenerate"] is True
    assert data["measures"]["m"]["systems"]["A"]["degenerate"] is False
    assert "[0.500, 0.500]!" in report.format() and "it is no interval" in report.format()
