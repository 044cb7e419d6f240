"""Confidence intervals (recjudge.evaluation.intervals): each construction by hand or against scipy,
the rules every shipped interval keeps (contains its estimate, stays in range), and the strongly
biased case where BCa collapsed above its own estimate."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from recjudge.evaluation.intervals import (
    DEFAULT_TAU_METHOD,
    TAU_COVERAGE,
    TAU_METHODS,
    Replicates,
    bounded_t,
    coverage_note,
    jackknife_se,
    percentile,
    share_interval,
    tau_interval,
)
from recjudge.evaluation.metaeval import (
    BootstrapWeights,
    jackknife_kendall_tau,
    kendall_tau,
    kendall_tau_interval,
    kendall_tau_replicates,
    system_means,
)

Z = NormalDist().inv_cdf(0.975)


def _four_users():
    # 3 systems a > b > c under the reference for every user. Under the candidate a is on top for
    # every user, and b beats c over all four users (means 0.55 vs 0.425) and over any three —
    # except without user 2, who carries b's lead (b 1.3/3 < c 1.6/3). So τ = 1 and the
    # leave-one-out τ are 1, 1, 1/3 (one of 3 pairs discordant: (2 − 1)/3), 1.
    ref = np.array([[1.0, 0.5, 0.0]] * 4)
    cand = np.array([[1.0, 0.5, 0.5],
                     [1.0, 0.5, 0.5],
                     [1.0, 0.9, 0.1],
                     [1.0, 0.3, 0.6]])
    return ref, cand


def test_fisher_z_jackknife_by_hand_on_four_users():
    ref, cand = _four_users()
    jk = jackknife_kendall_tau(ref, cand)
    np.testing.assert_allclose(jk, [1, 1, 1 / 3, 1], atol=1e-15)
    # θ̄ = 5/6; Σ(θ − θ̄)² = 3·(1/6)² + (1/2)² = 1/3; SE = sqrt(3/4 · 1/3) = 1/2
    assert jackknife_se(jk) == pytest.approx(0.5, abs=1e-15)
    r = Replicates(1.0, np.array([1.0]), jk, step=2 / 3)
    # τ resolves 3 pairs in steps of 2/3: ±1 are pulled in half a step, to 2/3, atanh(2/3) = ½ ln 5;
    # atanh(1/3) = ½ ln 2. The z values differ by d = ½ ln 2.5 (three) against one: deviations d/4
    # (three times) and −3d/4, Σ = 3d²/16 + 9d²/16 = 3d²/4, SE_z = sqrt(3/4 · 3d²/4) = 3d/4
    se_z = 3 / 4 * 0.5 * math.log(2.5)
    zt = 0.5 * math.log(5)
    # tanh(½ ln 5 + 1.96 · SE_z) < 1 = τ: the interval is extended to reach its estimate
    assert math.tanh(zt + Z * se_z) < 1
    assert tau_interval("jackknife-z", r) == pytest.approx((math.tanh(zt - Z * se_z), 1.0), abs=1e-12)
    # away from the bound, the plain construction: the same values and SE at an estimate of 1/3
    r3 = Replicates(1 / 3, np.array([1.0]), jk, step=2 / 3)
    z3 = 0.5 * math.log(2)
    assert tau_interval("jackknife-z", r3) == pytest.approx((math.tanh(z3 - Z * se_z), math.tanh(z3 + Z * se_z)),
                                                            abs=1e-12)
    # on the τ scale: 1 ± 1.96 · 1/2, clipped to [−1, 1]
    assert tau_interval("jackknife", r) == pytest.approx((1 - Z * 0.5, 1.0), abs=1e-12)


def test_the_library_path_gives_the_same_replicates_as_by_hand():
    ref, cand = _four_users()
    weights = BootstrapWeights(5, 4, 50)
    rep = kendall_tau_replicates(ref, cand, weights)
    assert rep.estimate == 1.0 and rep.step == pytest.approx(2 / 3)
    np.testing.assert_allclose(rep.jackknife, [1, 1, 1 / 3, 1], atol=1e-15)
    # each replicate is τ of the means over the drawn users, computed here one at a time
    w = np.concatenate(list(weights.chunks()))
    want = [kendall_tau((row[:, None] * ref).sum(0) / row.sum(), (row[:, None] * cand).sum(0) / row.sum())
            for row in w]
    np.testing.assert_allclose(rep.bootstrap, want, atol=1e-12)


def test_normal_takes_the_larger_standard_error():
    jk = np.array([1, 1, 1 / 3, 1])  # SE 1/2, as above
    narrow = np.array([0.9, 1.0, 0.8, 1.0, 0.9])
    # mean 0.92; deviations −0.02, 0.08, −0.12, 0.08, −0.02: sd = sqrt(0.028 / 4) ≈ 0.084 < 1/2
    assert float(np.std(narrow, ddof=1)) == pytest.approx(math.sqrt(0.028 / 4))
    r = Replicates(0.6, narrow, jk)
    assert tau_interval("normal", r) == pytest.approx((0.6 - Z * 0.5, min(1.0, 0.6 + Z * 0.5)), abs=1e-12)
    wide = np.array([-0.3, 0.3, -0.3, 0.3])  # sd = sqrt(4 · 0.09 / 3) ≈ 0.346
    small_jk = np.array([0.1, 0.1, 0.1, -0.1])  # mean 0.05, Σ dev² = 3 · 0.05² + 0.15² = 0.03: SE 0.15
    assert jackknife_se(small_jk) == pytest.approx(0.15)
    r = Replicates(0.0, wide, small_jk)
    half = Z * math.sqrt(4 * 0.09 / 3)
    assert tau_interval("normal", r) == pytest.approx((-half, half), abs=1e-12)
    # without a jackknife the bootstrap SE alone
    assert tau_interval("normal", Replicates(0.0, wide, None)) == pytest.approx((-half, half), abs=1e-12)


def test_bootstrap_fisher_z_centred_and_basic_by_hand():
    reps = np.array([0.2, 0.4, 0.6, 0.8, 0.5])
    est = 0.5
    z = np.arctanh(reps)
    zt = math.atanh(est)
    sd = float(np.std(z, ddof=1))
    assert tau_interval("bootstrap-z", Replicates(est, reps)) == pytest.approx(
        (math.tanh(zt - Z * sd), math.tanh(zt + Z * sd)), abs=1e-12)
    # linear quantiles of the sorted z (0.2, 0.4, 0.5, 0.6, 0.8 in τ): position 0.025·4 = 0.1
    zs = np.sort(z)
    q_lo = zs[0] + 0.1 * (zs[1] - zs[0])
    q_hi = zs[3] + 0.9 * (zs[4] - zs[3])
    mid = zs[2]
    assert tau_interval("centred-percentile", Replicates(est, reps)) == pytest.approx(
        (math.tanh(zt + q_lo - mid), math.tanh(zt + q_hi - mid)), abs=1e-12)
    assert tau_interval("basic", Replicates(est, reps)) == pytest.approx(
        (math.tanh(2 * zt - q_hi), math.tanh(2 * zt - q_lo)), abs=1e-12)
    assert percentile(reps) == pytest.approx((0.2 + 0.1 * 0.2, 0.6 + 0.9 * 0.2), abs=1e-12)


def test_bca_equals_scipy_bootstrap_bca():
    # a skewed statistic, so the acceleration matters; scipy's replicates feed our interval
    import inspect

    rng = np.random.default_rng(3)
    x = rng.exponential(size=30)
    seed_kw = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"
    res = stats.bootstrap((x,), np.mean, n_resamples=2000, method="BCa", confidence_level=0.95,
                          **{seed_kw: np.random.default_rng(1)})
    jk = np.array([np.delete(x, i).mean() for i in range(30)])
    r = Replicates(float(x.mean()), res.bootstrap_distribution, jk)
    assert tau_interval("BCa", r) == pytest.approx(tuple(res.confidence_interval), abs=1e-12)
    assert tau_interval("BC", r) != pytest.approx(tau_interval("BCa", r), abs=1e-6)


def _biased(seed: int = 0, users: int = 50, groups: int = 12):
    """60 systems in 12 groups of 5 near-identical variants, as a TREC track's runs: within a group
    the variants differ by less than the users can resolve, so resampled τ sits far below τ."""
    rng = np.random.default_rng(seed)
    effects = np.repeat(np.linspace(0, 1, groups), 5) + rng.uniform(-0.01, 0.01, 5 * groups)
    user = rng.normal(0, 0.5, (users, 1))
    ref = effects + user + rng.normal(0, 0.3, (users, effects.size))
    cand = effects + user + rng.normal(0, 0.3, (users, effects.size))
    cols = [f"s{i:02d}" for i in range(effects.size)]
    return pd.DataFrame(ref, columns=cols), pd.DataFrame(cand, columns=cols)


def test_strongly_biased_bootstrap_default_contains_its_estimate_where_bca_collapses_above_it():
    ref, cand = _biased()
    est = kendall_tau(system_means(ref), system_means(cand))
    ci = kendall_tau_interval(ref, cand, 1000, seed=0)
    assert ci.bootstrap_bias_sd > 1.5  # the resampled τ sits far below the estimate
    bca = kendall_tau_interval(ref, cand, 1000, 0, method="BCa").bounds
    assert est < bca[0] and bca[1] - bca[0] < 0.02  # BCa: a sliver above the estimate, as on DL-2021
    assert ci.method == DEFAULT_TAU_METHOD
    assert ci.low <= est <= ci.high  # the default contains it...
    assert ci.high - ci.low > 0.05
    # ... and says what its measured coverage is at 50 users with this much bias
    assert ci.n_users == 50 and ci.note.startswith("may under-cover") and ci.coverage < 0.93
    assert "50–199 users per label set, resampled τ 1.5 SD or more below the estimate" in ci.note


@pytest.mark.parametrize("seed", range(12))
def test_every_interval_built_to_contain_its_estimate_does(seed):
    rng = np.random.default_rng(seed)
    users, systems = int(rng.integers(3, 60)), int(rng.integers(3, 25))
    ref = pd.DataFrame(np.round(rng.random((users, systems)) * rng.random(systems), 1))
    cand = ref * rng.random(systems) + rng.normal(0, rng.random(), ref.shape)
    if seed % 3 == 0:
        ref, cand = _biased(seed, users=users)
    if seed % 4 == 1:  # users only one label set judges
        cand = cand.iloc[: max(2, users // 2)]
    users_all = ref.index.union(cand.index)
    weights = BootstrapWeights(seed, len(users_all), 300)
    rep = kendall_tau_replicates(ref.reindex(users_all).to_numpy(float), cand.reindex(users_all).to_numpy(float),
                                 weights)
    for name, m in TAU_METHODS.items():
        lo, hi = tau_interval(name, rep)
        if m.contains_estimate:
            assert lo - 1e-12 <= rep.estimate <= hi + 1e-12, name
        if not math.isnan(lo):
            assert -1 <= lo <= hi <= 1, name


def test_coverage_note_bands():
    cov, note = coverage_note(DEFAULT_TAU_METHOD, 10, 0.2)
    assert math.isnan(cov) and "fewer than 25 users" in note
    cov, note = coverage_note(DEFAULT_TAU_METHOD, 5000, 0.1)
    assert cov >= 0.93 and note == ""
    cov, note = coverage_note(DEFAULT_TAU_METHOD, 300, -2.5)  # either side of the estimate: |bias|
    assert cov >= 0.93 and note == ""
    # 50–199 users, the resampled τ 1.5 SD or more below: the DL-2021 case (53 queries)
    cov, note = coverage_note(DEFAULT_TAU_METHOD, 53, 2.3)
    pooled, lowest = TAU_COVERAGE[DEFAULT_TAU_METHOD][(2, 3)]
    assert cov == pooled < 0.93 and f"{pooled:.0%} of such 95% intervals" in note and f"{lowest:.0%} for the worst" in note
    assert coverage_note(DEFAULT_TAU_METHOD, 5000, 0.1, level=0.9) == (pytest.approx(math.nan, nan_ok=True), "")


# ------------------------------------------------------------------------------ bounded t, shares

def test_bounded_t_on_a_share_is_the_logit_t_interval():
    x = [0.2, 0.3, 0.4]
    # atanh(2p − 1) = ½ logit p, so the interval is logit(0.3) ± t · (s/√3) / (0.3 · 0.7), mapped back
    t = 0.95 / 0.04875 ** 0.5  # t(0.975, 2 df) in closed form
    h = t * 0.1 / 3 ** 0.5 / 0.21
    expit = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
    want = (expit(math.log(0.3 / 0.7) - h), expit(math.log(0.3 / 0.7) + h))
    assert bounded_t(x, (0.0, 1.0)) == pytest.approx(want, abs=1e-12)


def _cp_bounds_hold(lo: float, hi: float, x: float, n: float, alpha: float = 0.05) -> None:
    """Clopper–Pearson bounds at x of n (real-valued): the regularised incomplete beta I_lo(x, n − x + 1)
    is α/2 and I_hi(x + 1, n − x) is 1 − α/2 (the defining tail equations, checked with betainc)."""
    from scipy.special import betainc

    assert betainc(x, n - x + 1, lo) == pytest.approx(alpha / 2, abs=1e-9)
    assert betainc(x + 1, n - x, hi) == pytest.approx(1 - alpha / 2, abs=1e-9)


def test_share_interval_korn_graubard_by_hand():
    # 4 users, 10 pairs each, 6 / 4 / 8 / 2 agree: p = 20/40 = 0.5; residuals h − p·m = 1, −1, 3, −3;
    # linearised SE = sqrt(4/3 · 20) / 40 = 0.1291; n* = 0.25 / SE² = 15; shrunk for 3 df:
    # n*_df = 15 · (1.95996 / 3.18245)² = 5.689; x* = 2.845 "successes"
    hits, totals = np.array([6, 4, 8, 2]), np.array([10, 10, 10, 10])
    se = math.sqrt(4 / 3 * 20) / 40
    assert 0.25 / se ** 2 == pytest.approx(15.0)
    t3 = stats.t.ppf(0.975, 3)  # 3.1824 in a printed t table
    n_df = 15.0 * (Z / t3) ** 2
    lo, hi = share_interval(hits, totals)
    _cp_bounds_hold(lo, hi, 0.5 * n_df, n_df)
    assert lo == pytest.approx(1 - hi, abs=1e-12)  # p = 0.5: symmetric
    # 2.8 of 5.7 "pairs": a little wider than the exact interval of 3 of 6, far wider than any on 40 pairs
    ci = stats.binomtest(3, 6).proportion_ci(0.95, method="exact")
    assert lo < ci.low < ci.high < hi and ci.low - lo < 0.02
    # every pair agrees: SE 0, n* the 40 pairs; Clopper–Pearson at x = n has the closed form
    # [(α/2)^(1/n), 1] with n = 40 · (z/t)²
    lo, hi = share_interval(totals, totals)
    n_df = 40.0 * (Z / t3) ** 2
    assert lo == pytest.approx(0.025 ** (1 / n_df), abs=1e-12) and hi == 1.0
    # none agrees: [0, 1 − (α/2)^(1/n)]
    lo, hi = share_interval(np.zeros(4), totals)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / n_df), abs=1e-12)
    # replicates give the SE instead: SD 0.1 → n* = 25
    reps = np.array([0.4, 0.5, 0.6])
    lo, hi = share_interval(hits, totals, replicates=reps)
    n_df = 25.0 * (Z / t3) ** 2
    _cp_bounds_hold(lo, hi, 0.5 * n_df, n_df)
    # one user: no spread between users to measure
    assert all(math.isnan(v) for v in share_interval(np.array([3]), np.array([5])))


def test_share_interval_is_the_exact_binomial_interval_when_users_do_not_differ():
    # every user at the same rate: SE 0, so n* is capped at the pairs and only the df shrinkage
    # remains; with many users (t ≈ z) that is scipy's exact (Clopper–Pearson) binomial interval
    hits, totals = np.full(2000, 5), np.full(2000, 10)  # p = 0.5 exactly, SE 0
    lo, hi = share_interval(hits, totals)
    n_df = 20000 * (Z / stats.t.ppf(0.975, 1999)) ** 2
    _cp_bounds_hold(lo, hi, 0.5 * n_df, n_df)
    ci = stats.binomtest(10000, 20000).proportion_ci(0.95, method="exact")
    assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=2e-5)


@pytest.mark.parametrize("seed", range(6))
def test_share_interval_stays_in_range_and_contains_the_share(seed):
    rng = np.random.default_rng(seed)
    for n in (2, 3, 5, 8, 40):
        totals = rng.integers(0, 60, n)
        totals[:2] = np.maximum(totals[:2], 1)
        rate = rng.choice([0.0, 0.02, 0.5, 0.97, 1.0])
        hits = rng.binomial(totals, rng.beta(1 + 20 * rate, 1 + 20 * (1 - rate), n))
        p = hits.sum() / totals.sum()
        for reps in (None, rng.uniform(max(0, p - 0.1), min(1, p + 0.1), 50)):
            lo, hi = share_interval(hits, totals, replicates=reps)
            assert 0.0 <= lo <= p <= hi <= 1.0


def test_share_coverage_note_for_few_users_and_none_for_many():
    from recjudge.evaluation.intervals import SHARE_COVERAGE, share_coverage_note

    # the measured table: below 93% with fewest users, near nominal by 200
    assert min(SHARE_COVERAGE) <= 8 and SHARE_COVERAGE[200][0] >= 0.93
    cov, note = share_coverage_note(8)
    assert cov < 0.93 and note.startswith("may under-cover: 8 users")
    assert f"{cov:.0%}" in note and "bench_tau_ci.py section C" in note
    assert share_coverage_note(200) == (SHARE_COVERAGE[200][0], "")
    assert share_coverage_note(5000)[1] == ""
    cov, note = share_coverage_note(3)  # fewer than any simulated case
    assert math.isnan(cov) and note.startswith("coverage unknown: 3 users")
    assert share_coverage_note(8, level=0.9) == (pytest.approx(math.nan, nan_ok=True), "")


def test_fisher_z_intervals_reach_an_estimate_of_one():
    # identical rankings (τ = 1) with resamples that swap a pair now and then: atanh(1) is infinite,
    # so the Fisher-z intervals work half a step inside and must still reach 1
    r = Replicates(1.0, np.array([1.0, 1.0, 0.8, 1.0, 0.6, 1.0, 0.8]), np.array([1.0, 1.0, 0.8, 1.0]), step=0.2)
    for name in ("jackknife-z", "bootstrap-z", "centred-percentile"):
        lo, hi = tau_interval(name, r)
        assert lo < 1.0 and hi == 1.0, name
