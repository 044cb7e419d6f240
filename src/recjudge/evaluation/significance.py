"""Whether two label sets call the same system differences significant: paired sign-flip tests over
users for every pair of systems, Holm-corrected, and their agreement (plus the top of the ranking).

A τ over many systems can hide closely matched top systems (the caveat Penha et al. 2025 take from
Otero et al.): two label sets may order systems alike while disagreeing on which differences are
real. For each pair of systems (a, b) the per-user differences d_u = a_u − b_u are tested with a
paired randomisation test: under H0 each d_u is as likely to have either sign, so the null
distribution of mean(d) is that of mean(s_u · d_u) over random signs s_u = ±1 (all 2^n sign
vectors when that is at most ``permutations``, else ``permutations`` seeded draws, the observed
one counted in). The two-sided p-value is P(|mean| ≥ |observed|); p-values of all pairs are
Holm-corrected (step-down, family-wise error ≤ alpha).

A sampled p-value is never below 1/(draws + 1), and Holm's first step needs p ≤ alpha/m for m
pairs: 10,000 draws over the 1,326 pairs of 52 systems can never reach it, so no pair could ever
be called significant whatever the data. :func:`pairwise_tests` therefore draws at least
10·m/alpha sign vectors (the requested number when larger), and says so. An exact test on few users
has the same floor, 2/2^n: when m·2/2^n ≥ alpha no pair can be significant, and the result says
that rather than reporting "no difference".

Against a reference (human labels), the candidate's (LLM's) decisions are counted per pair:
significant in the same direction by both, a false positive (candidate significant, reference
not), a false negative (reference significant, candidate not), or opposite directions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..errors import ConfigError

__all__ = [
    "PairTest",
    "PairwiseTests",
    "SignificanceAgreement",
    "holm",
    "needed_permutations",
    "smallest_holm_p",
    "paired_permutation_test",
    "pairwise_tests",
    "significance_agreement",
    "top_overlap",
]

# below this many users every sign vector is enumerated (2^n ≤ permutations), else drawn
DEFAULT_PERMUTATIONS = 10_000
# sampled p-values step by 1/(draws + 1): draw enough that Holm's strictest threshold alpha/m is
# this many steps above the floor
RESOLUTION = 10
_CHUNK = 2048
# means equal up to rounding count as equal (as metaeval's 12-decimal means): a flip that
# reproduces |observed| must not fall just below it
_REL_TOL = 1e-12


def _exact(n: int, permutations: int) -> bool:
    """Whether all 2^n sign vectors of ``n`` users fit in ``permutations`` (then they are enumerated)."""
    return n <= 30 and 2 ** n <= permutations


def _signs(n: int, permutations: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Sign vectors (rows) for ``n`` users: all 2^n when that fits in ``permutations``, else a sample."""
    if _exact(n, permutations):
        grid = ((np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1).astype(np.int8)
        return 1 - 2 * grid, True
    return 1 - 2 * rng.integers(0, 2, size=(permutations, n), dtype=np.int8), False


def _p_values(diffs: np.ndarray, permutations: int, seed: int) -> np.ndarray:
    """Two-sided sign-flip p-values for each column of ``diffs`` (users × tests), one set of flips."""
    n, m = diffs.shape
    if n == 0:
        return np.full(m, math.nan)
    observed = np.abs(diffs.mean(axis=0))
    tol = _REL_TOL * np.maximum(1.0, np.abs(diffs).max(axis=0))
    rng = np.random.default_rng(seed)
    signs, exact = _signs(n, permutations, rng)
    count = np.zeros(m)
    for start in range(0, len(signs), _CHUNK):
        s = signs[start:start + _CHUNK].astype(np.float64)
        null = np.abs(s @ diffs) / n
        count += (null >= observed - tol).sum(axis=0)
    if exact:
        return count / len(signs)
    return (count + 1.0) / (len(signs) + 1.0)  # the observed signs are one of the draws


def needed_permutations(n_pairs: int, alpha: float) -> int:
    """Sign vectors to draw so that the smallest sampled p-value, 1/(draws + 1), lies
    :data:`RESOLUTION` times below Holm's strictest threshold alpha/m over ``n_pairs`` tests."""
    return math.ceil(RESOLUTION * max(n_pairs, 1) / alpha)


def smallest_holm_p(n_users: int, n_pairs: int, permutations: int) -> float:
    """The smallest Holm-adjusted p-value any data can give: m · (2/2^n exact, else 1/(draws + 1))."""
    if n_users == 0 or n_pairs == 0:
        return math.nan
    floor = 2.0 / 2 ** n_users if _exact(n_users, permutations) else 1.0 / (permutations + 1)
    return min(1.0, n_pairs * floor)


def paired_permutation_test(a: Sequence[float], b: Sequence[float], permutations: int = DEFAULT_PERMUTATIONS,
                            seed: int = 0) -> tuple[float, float]:
    """(mean of a − b, two-sided sign-flip p-value) over paired per-user values; a user missing
    either value (NaN) is left out, as :func:`pairwise_tests` does."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape or a.ndim != 1:
        raise ConfigError(f"a paired test needs two equal-length vectors, got shapes {a.shape} and {b.shape}")
    d = a - b
    d = d[~np.isnan(d)][:, None]  # a NaN difference would make every flip fail the comparison: p = 0
    return float(d.mean()) if len(d) else math.nan, float(_p_values(d, permutations, seed)[0])


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values: the i-th smallest of m is max over j ≤ i of (m − j + 1)·p_(j),
    capped at 1. NaN p-values take no part and stay NaN."""
    p = np.asarray(p_values, float)
    out = np.full(p.shape, math.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


class PairTest(NamedTuple):
    a: str
    b: str
    mean_difference: float   # mean over users of a − b
    p: float
    p_holm: float
    decision: int            # +1: a significantly better, −1: b significantly better, 0: not significant


class PairwiseTests(NamedTuple):
    """Every pair of systems tested under one label set."""

    label_set: str
    measure: str
    n_users: int
    permutations: int           # sign vectors drawn (or 2^n enumerated) per pair
    exact: bool
    alpha: float
    tests: tuple[PairTest, ...]
    requested_permutations: int = 0  # what the caller asked for (0: same as ``permutations``)
    note: str = ""                   # when no pair can reach significance, or more draws were taken

    @property
    def smallest_holm_p(self) -> float:
        return smallest_holm_p(self.n_users, len(self.tests), self.permutations)

    def decisions(self) -> dict[tuple[str, str], int]:
        return {(t.a, t.b): t.decision for t in self.tests}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.tests, columns=list(PairTest._fields))

    def to_json(self) -> dict:
        return {"label_set": self.label_set, "measure": self.measure, "n_users": self.n_users,
                "permutations": self.permutations,
                "requested_permutations": self.requested_permutations or self.permutations,
                "exact": self.exact, "alpha": self.alpha, "correction": "Holm",
                "smallest_attainable_p_holm": self.smallest_holm_p, "note": self.note,
                "significant": int(sum(t.decision != 0 for t in self.tests)),
                "pairs": [t._asdict() for t in self.tests]}


def pairwise_tests(matrix: pd.DataFrame, label_set: str = "labels", measure: str = "", alpha: float = 0.05,
                   permutations: int = DEFAULT_PERMUTATIONS, seed: int = 0) -> PairwiseTests:
    """Sign-flip tests for every pair of columns (systems) of a users × systems matrix, Holm-corrected.

    Users with a missing value for either system of a pair are left out of that pair's test. When
    the users are too many to enumerate every sign vector, at least :func:`needed_permutations`
    are drawn (more than ``permutations`` when that could not reach Holm's threshold; ``note`` says
    so). When even so no pair could be significant (an exact test on few users), ``note`` says it.
    """
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must be between 0 and 1, got {alpha}")
    if permutations < 1:
        raise ConfigError(f"permutations must be at least 1, got {permutations}")
    systems = sorted(map(str, matrix.columns))
    values = matrix.rename(columns=str)[systems].to_numpy(dtype=float)
    pairs = list(itertools.combinations(range(len(systems)), 2))
    requested = permutations
    n = len(values)
    note = ""
    if pairs and not _exact(n, permutations):
        permutations = max(permutations, needed_permutations(len(pairs), alpha))
        if permutations > requested:
            note = (f"{permutations:,} sign flips drawn per pair, not {requested:,}: a sampled p-value is at least "
                    f"1/(draws + 1), and Holm over {len(pairs):,} pairs needs p ≤ {alpha:g}/{len(pairs):,}")
    complete = not np.isnan(values).any()
    means, ps = [], []
    if complete and pairs:
        i, j = np.array(pairs).T
        diffs = values[:, i] - values[:, j]
        means = diffs.mean(axis=0) if len(values) else np.full(len(pairs), math.nan)
        ps = _p_values(diffs, permutations, seed)
    else:
        for i, j in pairs:
            d = values[:, i] - values[:, j]
            d = d[~np.isnan(d)][:, None]
            means.append(float(d.mean()) if len(d) else math.nan)
            ps.append(float(_p_values(d, permutations, seed)[0]))
    adjusted = holm(ps)
    tests = []
    for (i, j), mean, p, ph in zip(pairs, means, ps, adjusted):
        decision = int(np.sign(mean)) if not math.isnan(ph) and ph < alpha and mean != 0 else 0
        tests.append(PairTest(systems[i], systems[j], float(mean), float(p), float(ph), decision))
    floor = smallest_holm_p(n, len(pairs), permutations)
    if floor >= alpha:
        note = (f"no pair can be significant: with {n} users the smallest Holm-adjusted p-value any data can give "
                f"over {len(pairs):,} pairs is {floor:.3g} ≥ alpha {alpha:g}; 'not significant' here means "
                "'not testable'")
    return PairwiseTests(label_set, measure, n, permutations, _exact(n, permutations), alpha, tuple(tests),
                         requested, note)


def top_overlap(reference: pd.Series, candidate: pd.Series, k: int = 5) -> float:
    """Share of the reference's top ``k`` systems (by mean, ties by name) also in the candidate's top ``k``."""
    from .metaeval import system_order  # τ_AP's order: score descending, then name

    def top(scores: pd.Series) -> set:
        names = list(scores.index)
        return {names[i] for i in system_order(scores.to_numpy(float), names)[:k]}

    shared = sorted(set(map(str, reference.index)) & set(map(str, candidate.index)))
    if not shared:
        return math.nan
    ref, cand = reference.rename(index=str)[shared], candidate.rename(index=str)[shared]
    k = min(k, len(shared))
    return len(top(ref) & top(cand)) / k


class SignificanceAgreement(NamedTuple):
    """The candidate's significance decisions against the reference's, over the same system pairs."""

    measure: str
    n_pairs: int
    reference_significant: int
    candidate_significant: int
    both_same_direction: int
    opposite_direction: int
    false_positives: int     # candidate significant, reference not
    false_negatives: int     # reference significant, candidate not
    agreement: float         # both significant in the same direction, or both not: share of pairs
    false_positive_rate: float   # false positives / pairs the reference calls not significant
    false_negative_rate: float   # false negatives / pairs the reference calls significant
    tau_ap: float
    top5_overlap: float
    note: str = ""           # when either side could not call any pair significant

    def to_json(self) -> dict:
        return dict(self._asdict())


def significance_agreement(reference: PairwiseTests, candidate: PairwiseTests,
                           reference_means: pd.Series | None = None,
                           candidate_means: pd.Series | None = None) -> SignificanceAgreement:
    """Count how the candidate's decisions match the reference's; τ_AP and top-5 overlap from the means."""
    from .metaeval import tau_ap

    ref, cand = reference.decisions(), candidate.decisions()
    shared = sorted(set(ref) & set(cand))
    r = np.array([ref[p] for p in shared], dtype=int)
    c = np.array([cand[p] for p in shared], dtype=int)
    same = int(((r != 0) & (r == c)).sum())
    opposite = int(((r != 0) & (c != 0) & (r != c)).sum())
    fp = int(((r == 0) & (c != 0)).sum())
    fn = int(((r != 0) & (c == 0)).sum())
    n_ref_sig, n_ref_not = int((r != 0).sum()), int((r == 0).sum())
    agree = int((r == c).sum())
    tap, top5 = math.nan, math.nan
    if reference_means is not None and candidate_means is not None:
        names = sorted(set(map(str, reference_means.index)) & set(map(str, candidate_means.index)))
        rm, cm = reference_means.rename(index=str)[names], candidate_means.rename(index=str)[names]
        tap = tau_ap(rm.to_numpy(float), cm.to_numpy(float), names)
        top5 = top_overlap(rm, cm, 5)
    untestable = [t.label_set for t in (reference, candidate) if t.tests and t.smallest_holm_p >= t.alpha]
    note = (f"{' and '.join(untestable)} cannot call any pair significant (too few users for Holm over "
            f"{len(shared):,} pairs): the agreement counts decisions that could not have gone otherwise"
            if untestable else "")
    return SignificanceAgreement(
        reference.measure, len(shared), n_ref_sig, int((c != 0).sum()), same, opposite, fp, fn,
        agree / len(shared) if shared else math.nan,
        fp / n_ref_not if n_ref_not else math.nan,
        fn / n_ref_sig if n_ref_sig else math.nan, tap, top5, note)
