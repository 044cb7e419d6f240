"""Meta-evaluation: do two label sets rank recommender systems the same way?

Pipeline: one pass over the runs, one run in memory at a time (:func:`recjudge.evaluation.measures.score_runs`),
takes each run's tie share, makes it tie-free (:func:`recjudge.data.trec.ensure_tie_free`) and fills its
column of a per-user × per-system matrix for every measure and label set; everything else — system
scores, rankings, τ, bootstrap CIs — is aggregated from those matrices.

Which users count
-----------------
``queries="own"``: each label set is averaged over the users it judges (as trec_eval does);
``"shared"``: only users judged by both label sets. A user that a run does not rank scores 0 for
that run. Users whose labels hold no relevant item (no label > 0) are kept with the value
ir-measures gives them (see :mod:`recjudge.evaluation.measures`). For nDCG, Bpref and Compat that value is
the same for every system, so such users lower all means alike and change neither the ranking
nor τ (they do widen the bootstrap intervals honestly); Judged@k does not depend on relevance
and counts them like any other user.

Runs written by ``recjudge train`` are tie-free on disk (their ties were resolved at export);
:func:`export_tie_info` reads the sidecar JSON that records the policy and the share of users
with ties before it, so reports state what actually happened.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd

from ..data.trec import TIE_POLICIES, Qrels, Run
from ..errors import ConfigError
from .intervals import (
    DEFAULT_TAU_METHOD,
    NO_RESAMPLES,
    TAU_METHODS,
    Replicates,
    bias_corrected,
    coverage_note,
    coverage_summary,
    tau_interval,
)

if TYPE_CHECKING:
    from .measures import Scored

    RunSource = Run | str | os.PathLike  # a run, or a run file read when its turn comes

__all__ = [
    "DEFAULT_MEASURES",
    "SystemTable",
    "RankAgreement",
    "UserOverlap",
    "user_overlap",
    "CompareResult",
    "EvaluationResult",
    "evaluate",
    "compare",
    "kendall_tau",
    "weighted_tau",
    "tau_ap",
    "system_ranks",
    "bootstrap_kendall_tau",
    "kendall_tau_interval",
    "kendall_tau_replicates",
    "TauInterval",
    "bias_corrected_interval",
    "jackknife_kendall_tau",
    "label_set_names",
    "CI_METHODS",
    "DEFAULT_CI_METHOD",
    "export_tie_info",
    "system_means",
    "ranking_measure",
    "COVERAGE_MEASURES",
    "tied_ranking",
]

DEFAULT_MEASURES = ("Judged@100", "Compat(p=0.95)", "nDCG@100", "Bpref")
QUERY_SETS = ("own", "shared")


# ------------------------------------------------------------------------------ rank correlations

MEAN_DECIMALS = 12


def system_means(matrix: pd.DataFrame) -> pd.Series:
    """Per-system mean over users, rounded to 12 decimals: equal scores summed in another order
    (e.g. Judged@k = j/k) must stay equal, or τ-b, shared ranks and τ_AP see a false order."""
    return matrix.mean(axis=0).round(MEAN_DECIMALS)


def system_ranks(scores: pd.Series) -> pd.Series:
    """Rank 1 = best (highest mean score); equal scores share the average rank."""
    from scipy import stats  # here, not at import: scipy.stats takes ~0.5 s to load

    return pd.Series(stats.rankdata(-scores.to_numpy(dtype=float), method="average"), index=scores.index)


def kendall_tau(reference: Sequence[float], candidate: Sequence[float]) -> float:
    """Kendall's τ-b between two score vectors over the same systems (scipy.stats.kendalltau)."""
    from scipy import stats

    return float(stats.kendalltau(reference, candidate, variant="b").statistic)


def weighted_tau(reference: Sequence[float], candidate: Sequence[float]) -> float:
    """Weighted τ: scipy.stats.weightedtau on scores with its default hyperbolic weigher.

    This is Vigna's τ_h: an exchange between ranks r and s weighs 1/(r+1) + 1/(s+1), ranks taken
    from each score vector in turn and the two results averaged (``rank=True``), so swaps at the
    top of either ranking count most.
    """
    from scipy import stats

    return float(stats.weightedtau(np.asarray(reference, float), np.asarray(candidate, float)).statistic)


def system_order(scores: np.ndarray, names: Sequence[str]) -> np.ndarray:
    # Score descending, then name, so equal scores never fall back on input order.
    return np.lexsort((np.asarray(names, dtype=str), -np.asarray(scores, float)))


def tau_ap(reference: Sequence[float], candidate: Sequence[float], names: Sequence[str] | None = None) -> float:
    """AP correlation τ_AP of the candidate ranking against the reference (Yilmaz et al. 2008).

    τ_AP = 2/(n−1) · Σ_{i=2..n} C(i)/(i−1) − 1, where C(i) counts the systems above position i of
    the candidate ranking that the reference also ranks above the system at position i. Equal
    scores are ordered by system name (τ_AP has no tie correction); if either vector is constant
    the ranking is arbitrary and τ_AP is NaN, as τ-b is.
    """
    ref = np.asarray(reference, float)
    cand = np.asarray(candidate, float)
    n = len(ref)
    if n < 2 or np.all(ref == ref[0]) or np.all(cand == cand[0]):
        return math.nan
    names = list(names) if names is not None else [f"{i:09d}" for i in range(n)]
    ref_pos = np.empty(n, int)
    ref_pos[system_order(ref, names)] = np.arange(n)
    cand_order = system_order(cand, names)
    rp = ref_pos[cand_order]  # reference position of the system at each candidate position
    total = 0.0
    for i in range(1, n):
        total += np.count_nonzero(rp[:i] < rp[i]) / i
    return 2.0 / (n - 1) * total - 1.0


def _pair_signs(means: np.ndarray) -> np.ndarray:
    """sign(x_i − x_j) for all system pairs i < j, along the last axis."""
    i, j = np.triu_indices(means.shape[-1], k=1)
    return np.sign(means[..., i] - means[..., j])


def _tau_b_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """τ-b for each row pair of two (B, S) matrices: Σ s_x s_y / sqrt(Σ s_x² · Σ s_y²)."""
    sx, sy = _pair_signs(x), _pair_signs(y)
    num = np.einsum("bp,bp->b", sx, sy)
    den = np.sqrt(np.einsum("bp,bp->b", sx, sx) * np.einsum("bp,bp->b", sy, sy))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


class BootstrapWeights:
    """The resamples of one seed over one set of users: each user's count in each resample.

    Drawn once and shared by every measure compared over those users (a seed gives the same draws
    whichever measure asks for them), and kept as the smallest unsigned integers that hold them.
    """

    def __init__(self, seed: int, n_users: int, n_resamples: int, chunk: int = 200):
        self.seed, self.n_users, self.n_resamples, self.chunk = seed, n_users, n_resamples, chunk
        self._chunks: list[np.ndarray] | None = None

    @classmethod
    def over(cls, reference: SystemTable, candidate: SystemTable, seed: int, n_resamples: int
             ) -> BootstrapWeights | None:
        """The resamples :func:`bootstrap_kendall_tau` draws for every measure of two tables (whose
        matrices share their users), or None without resamples."""
        if n_resamples <= 0 or not reference.matrices:
            return None
        first = next(iter(reference.matrices))
        users = reference.matrices[first].index.union(candidate.matrices[first].index)
        return cls(seed, len(users), n_resamples)

    def chunks(self) -> Iterator[np.ndarray]:
        """The resamples ``chunk`` at a time, as float64 (resamples × users)."""
        if self._chunks is None:
            rng = np.random.default_rng(self.seed)
            stored = []
            for start in range(0, self.n_resamples, self.chunk):
                w = rng.multinomial(self.n_users, np.full(self.n_users, 1.0 / self.n_users),
                                    size=min(self.chunk, self.n_resamples - start))
                stored.append(w.astype(np.min_scalar_type(int(w.max(initial=0)))))
            self._chunks = stored
        for w in self._chunks:
            yield w.astype(np.float64)


def _weighted_means(weights: np.ndarray, matrix: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
    """Per-resample system means; NaN cells (user not in this label set) carry no weight.

    ``present`` (``~isnan(matrix)``, when the caller has it) with no False: every weight counts, and
    the denominators are the row sums, exactly what the product with ones gives (integer counts).
    """
    if present is None:
        present = ~np.isnan(matrix)
    if present.all():
        num = weights @ matrix
        den = weights.sum(axis=1)[:, None]
    else:
        num = weights @ np.where(present, matrix, 0.0)
        den = weights @ present.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.round(num / den, MEAN_DECIMALS)


CI_METHODS = tuple(TAU_METHODS)
DEFAULT_CI_METHOD = DEFAULT_TAU_METHOD
bias_corrected_interval = bias_corrected  # the BC/BCa construction, kept under its former name


def _jackknife_means(matrix: np.ndarray) -> np.ndarray:
    """(U, S) system means with user u left out, for every u at once; NaN cells carry no weight."""
    present = ~np.isnan(matrix)
    values = np.where(present, matrix, 0.0)
    num = values.sum(axis=0)[None, :] - values
    den = present.sum(axis=0)[None, :] - present
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.round(num / den, MEAN_DECIMALS)


def jackknife_kendall_tau(reference: np.ndarray, candidate: np.ndarray, chunk: int = 500) -> np.ndarray:
    """τ-b of system means with each user left out in turn: (U,) for two (U, S) user × system
    arrays over the same users (NaN = user not judged). Vectorised: no loop over users in Python
    beyond chunks of ``chunk`` rows, so 10,000 users cost one pass of pair signs."""
    ref_jk, cand_jk = _jackknife_means(reference), _jackknife_means(candidate)
    out = [_tau_b_rows(ref_jk[i:i + chunk], cand_jk[i:i + chunk]) for i in range(0, len(ref_jk), chunk)]
    return np.concatenate(out) if out else np.empty(0)


def _check_ci_method(method: str) -> None:
    if method not in CI_METHODS:
        raise ConfigError(f"CI method must be one of {', '.join(CI_METHODS)}, not {method!r}")


def kendall_tau_replicates(reference: np.ndarray, candidate: np.ndarray, weights: BootstrapWeights,
                           jackknife: bool = True) -> Replicates:
    """τ-b of the system means of two (U, S) user × system arrays over the same users (NaN: user not
    judged by that label set), its bootstrap replicates over ``weights`` (resamples of those users)
    and, with ``jackknife``, its leave-one-user-out values. Vectorised over the matrices: no measure
    is recomputed. The estimate goes through the replicates' own arithmetic, so "equal" means equal."""
    if weights.n_users != len(reference):
        raise ConfigError("bootstrap weights drawn for another seed, user set or number of resamples")
    ref_present, cand_present = ~np.isnan(reference), ~np.isnan(candidate)
    taus = [_tau_b_rows(_weighted_means(w, reference, ref_present), _weighted_means(w, candidate, cand_present))
            for w in weights.chunks()]
    t = np.concatenate(taus) if taus else np.empty(0)
    ones = np.ones((1, len(reference)))
    estimate = float(_tau_b_rows(_weighted_means(ones, reference), _weighted_means(ones, candidate))[0])
    n_pairs = reference.shape[1] * (reference.shape[1] - 1) // 2
    return Replicates(estimate, t[~np.isnan(t)], jackknife_kendall_tau(reference, candidate) if jackknife else None,
                      2.0 / n_pairs if n_pairs else 0.0)


class TauInterval(NamedTuple):
    """A confidence interval of τ-b over users, with what a reader needs to judge it."""

    low: float
    high: float
    method: str
    level: float
    bootstrap_bias_sd: float  # (τ − mean resampled τ) / SD of resampled τ; large: near-tied system pairs
    n_users: int              # the fewer users of the two label sets (what the coverage note is read at)
    coverage: float           # measured coverage of such intervals in simulation (NaN: not measured)
    note: str                 # "" when the measured coverage is near nominal, else what to make of it
    summary: str = ""         # the note in one line, as printed under a table

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.low, self.high)


def kendall_tau_interval(reference: pd.DataFrame, candidate: pd.DataFrame, n_resamples: int = 1000,
                         seed: int = 0, level: float = 0.95, chunk: int = 200,
                         method: str = DEFAULT_CI_METHOD, weights: BootstrapWeights | None = None) -> TauInterval:
    """Confidence interval of τ-b between system means, resampling users with replacement.

    ``reference`` and ``candidate`` are user × system matrices (same columns). Users are the union
    of both indexes; a user missing from one matrix counts for the other only. ``method`` is a key
    of :data:`recjudge.evaluation.intervals.TAU_METHODS`; the default, ``"normal"``, is the one whose
    coverage of the population τ came closest to nominal in ``benchmarks/bench_tau_ci.py`` among
    those that always contain the estimate. τ of resampled means is biased downward — resampling
    adds noise to both rankings — and so is the sample τ against the population's; when the bias is
    large the percentile interval can exclude the estimate and BCa collapses above it (on 63 TREC
    runs τ 0.897 gave BCa [0.905, 0.913]). ``note`` says when the measured coverage at this many
    users and this bootstrap bias is below nominal.

    ``weights``: the resamples of this seed over these users, when the caller compares several
    measures over them (:class:`BootstrapWeights`; the same numbers, drawn once).
    """
    _check_ci_method(method)
    users = reference.index.union(candidate.index)
    n_users = min(len(reference.index), len(candidate.index))
    if n_resamples <= 0:
        return TauInterval(math.nan, math.nan, method, level, math.nan, n_users, math.nan, "")
    cols = list(reference.columns)
    ref = reference.reindex(index=users, columns=cols).to_numpy(np.float64)
    cand = candidate.reindex(index=users, columns=cols).to_numpy(np.float64)
    if weights is None:
        weights = BootstrapWeights(seed, len(users), n_resamples, chunk)
    elif (weights.seed, weights.n_users, weights.n_resamples, weights.chunk) != (seed, len(users), n_resamples, chunk):
        raise ConfigError("bootstrap weights drawn for another seed, user set or number of resamples")
    reps = kendall_tau_replicates(ref, cand, weights, jackknife=TAU_METHODS[method].jackknife)
    if len(reps.bootstrap) == 0:
        return TauInterval(math.nan, math.nan, method, level, math.nan, n_users, math.nan, "")
    lo, hi = tau_interval(method, reps, level)
    bias = reps.bootstrap_bias_sd
    coverage, note = coverage_note(method, n_users, bias, level)
    return TauInterval(lo, hi, method, level, bias, n_users, coverage, note,
                       coverage_summary(method, n_users, bias, level))


def bootstrap_kendall_tau(reference: pd.DataFrame, candidate: pd.DataFrame, n_resamples: int = 1000,
                          seed: int = 0, level: float = 0.95, chunk: int = 200,
                          method: str = DEFAULT_CI_METHOD, weights: BootstrapWeights | None = None
                          ) -> tuple[float, float]:
    """(low, high) of :func:`kendall_tau_interval`."""
    return kendall_tau_interval(reference, candidate, n_resamples, seed, level, chunk, method, weights).bounds


# ----------------------------------------------------------------------------------- records

class RankAgreement(NamedTuple):
    """How a candidate label set's system ranking agrees with the reference's, for one measure."""

    measure: str
    n_systems: int
    n_users_reference: int
    n_users_candidate: int
    kendall_tau: float
    kendall_tau_ci: tuple[float, float]
    weighted_tau: float
    tau_ap: float
    median_abs_rank_displacement: float
    max_abs_rank_displacement: float
    most_displaced: tuple[tuple[str, float], ...]  # (system, candidate rank − reference rank)
    kendall_tau_p: float = math.nan  # scipy.stats.kendalltau's two-sided p-value (H0: no association)
    ci_method: str = DEFAULT_CI_METHOD
    ci_note: str = ""                         # why the CI is flagged: its measured coverage is below nominal
    ci_summary: str = ""                      # that note in one line, printed under the table
    ci_missing: str = ""                      # why there is no CI (0 resamples, τ undefined, ...); '' when there is
    ci_coverage: float = math.nan             # coverage such intervals achieved in simulation (NaN: not measured)
    bootstrap_bias_sd: float = math.nan       # (τ − mean resampled τ) / SD of resampled τ
    undefined: str = ""  # why τ and the displacements are undefined (every system ties under a label set)

    def to_json(self) -> dict:
        return {
            "undefined": self.undefined or None,
            "kendall_tau": self.kendall_tau,
            "kendall_tau_p": self.kendall_tau_p,
            "kendall_tau_ci": None if self.ci_missing else list(self.kendall_tau_ci),
            "kendall_tau_ci_missing": self.ci_missing or None,
            "kendall_tau_ci_method": self.ci_method,
            "kendall_tau_ci_description": TAU_METHODS[self.ci_method].description,
            "kendall_tau_ci_coverage": None if math.isnan(self.ci_coverage) else self.ci_coverage,
            "kendall_tau_ci_note": self.ci_note,
            "kendall_tau_ci_summary": self.ci_summary,
            "kendall_tau_bootstrap_bias_sd": None if math.isnan(self.bootstrap_bias_sd) else self.bootstrap_bias_sd,
            "weighted_tau": self.weighted_tau,
            "tau_ap": self.tau_ap,
            "median_abs_rank_displacement": self.median_abs_rank_displacement,
            "max_abs_rank_displacement": self.max_abs_rank_displacement,
            "most_displaced": [{"system": s, "displacement": d} for s, d in self.most_displaced],
            "n_systems": self.n_systems,
            "n_users_reference": self.n_users_reference,
            "n_users_candidate": self.n_users_candidate,
        }


class UserOverlap(NamedTuple):
    """How many users the reference and one candidate judge, and how many both; ``note`` says what τ
    then compares ('' when both judge the same users)."""

    reference: int
    candidate: int
    both: int
    note: str = ""

    def to_json(self) -> dict:
        return {"reference": self.reference, "candidate": self.candidate, "both": self.both,
                "note": self.note or None}


def _setting(spelled: Callable[[str], str], name: str, value: str) -> str:
    """``name`` set to ``value`` as the caller would write it: ``--queries own``, ``queries='own'``."""
    flag = spelled(name)
    if flag.endswith("="):
        return f"{flag}{value!r}"
    if flag.startswith("key "):
        return f'{name} = "{value}"'
    return f"{flag} {value}"


def user_overlap(reference: Qrels, candidates: Mapping[str, Qrels], queries: str | None = None,
                 spelled: Callable[[str], str] | None = None) -> dict[str, UserOverlap]:
    """Per candidate: the users it and the reference judge, and what τ compares under ``queries``.

    Refused (ConfigError) where a candidate shares no user with the reference, unless ``queries`` is
    ``"own"`` given explicitly (None: the default, read as "own"): τ then compares a ranking over one
    set of users with a ranking over another, which says how two user samples agree, not how two
    judges do. ``"shared"`` with no user in common leaves nothing to compare and is refused always.
    """
    spelled = spelled or (lambda name: "--" + name.replace("_", "-"))
    own, shared = _setting(spelled, "queries", "own"), _setting(spelled, "queries", "shared")
    ref_users = set(reference.qids)
    out: dict[str, UserOverlap] = {}
    for key, qrels in candidates.items():
        cand_users = set(qrels.qids)
        r, c, b = len(ref_users), len(cand_users), len(ref_users & cand_users)
        counts = f"reference judges {r:,} users, {key} judges {c:,}, both {b:,}"
        if ref_users == cand_users:
            note = ""
        elif b == 0 and queries == "shared":
            raise ConfigError(f"reference {reference.name!r} ({r:,} users) and candidate {key!r} ({c:,} users) "
                              f"judge no user in common, so {shared} leaves no user to compare; {own} compares "
                              "each label set's system ranking on its own users instead")
        elif b == 0 and queries is None:
            raise ConfigError(
                f"reference {reference.name!r} and candidate {key!r} share no user ({counts}): τ could only compare "
                "the systems ranked over one set of users with the systems ranked over another, which says whether "
                f"two samples of users rank the systems alike, not whether {key} judges as the reference does. "
                f"{own} compares each label set's system ranking on its own users (how SynDL's published figure is "
                "computed): give it to accept that τ, or give label sets that judge the same users (if these should, "
                "check that both use the same user ids)")
        elif b == 0:
            note = (f"{counts}: with {own}, τ compares the reference's system ranking over its {r:,} users with "
                    f"{key}'s over {c:,} other users — two samples of users, not two judges of the same users")
        elif queries == "shared":
            note = f"{counts}: with {shared}, both rankings are over the {b:,} users both judge"
        else:
            note = (f"{counts}: each ranking is over its own users ({own}), so τ compares rankings over partly "
                    f"different users; {shared} compares them over the {b:,} both judge")
        out[key] = UserOverlap(r, c, b, note)
    return out


@dataclass(frozen=True, eq=False)
class SystemTable:
    """Per-measure user × system matrices under one label set, and their means and ranks."""

    label_set: str
    matrices: Mapping[str, pd.DataFrame]
    # means and ranks, computed once per measure (a JSON output asks for them per system)
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def measures(self) -> list[str]:
        return list(self.matrices)

    def means(self, measure: str) -> pd.Series:
        key = ("means", measure)
        if key not in self._cache:
            self._cache[key] = system_means(self.matrices[measure])
        return self._cache[key].copy()  # a caller may change its copy

    def ranks(self, measure: str) -> pd.Series:
        key = ("ranks", measure)
        if key not in self._cache:
            self._cache[key] = system_ranks(self.means(measure))
        return self._cache[key].copy()

    def scores_frame(self) -> pd.DataFrame:
        """Systems × measures table of mean scores."""
        return pd.DataFrame({m: self.means(m) for m in self.matrices})


@dataclass(frozen=True, eq=False)
class EvaluationResult:
    table: SystemTable
    settings: Mapping[str, object]
    tie_share: Mapping[str, float]

    def to_json(self) -> dict:
        scores = self.table.scores_frame()
        systems = []
        for name in scores.index:
            systems.append({
                "system": name,
                "scores": {m: float(scores.loc[name, m]) for m in scores.columns},
                "ranks": {m: float(self.table.ranks(m)[name]) for m in scores.columns},
                "tied_user_share": self.tie_share.get(name),
            })
        return {"systems": systems, "settings": dict(self.settings)}


@dataclass(frozen=True, eq=False)
class CompareResult:
    """``reference`` covers the reference's own users; ``reference_for[c]`` is the reference table
    that candidate ``c`` was compared with (the shared users under ``queries="shared"``)."""

    reference: SystemTable
    candidates: Mapping[str, SystemTable]
    agreement: Mapping[str, Mapping[str, RankAgreement]]  # candidate → measure → agreement
    settings: Mapping[str, object]
    tie_share: Mapping[str, float] = field(default_factory=dict)
    reference_for: Mapping[str, SystemTable] = field(default_factory=dict)
    users: Mapping[str, UserOverlap] = field(default_factory=dict)  # candidate → users each and both judge

    def user_notes(self) -> list[str]:
        """One line per candidate that judges other users than the reference: the counts and what τ compares."""
        return [u.note for u in self.users.values() if u.note]

    def reference_table(self, candidate: str) -> SystemTable:
        return self.reference_for.get(candidate, self.reference)

    def to_json(self) -> dict:
        systems = []
        ref_scores = self.reference.scores_frame()
        for name in ref_scores.index:
            entry: dict = {
                "system": name,
                "reference": {m: float(ref_scores.loc[name, m]) for m in ref_scores.columns},
                "reference_rank": {m: float(self.reference.ranks(m)[name]) for m in ref_scores.columns},
                "tied_user_share": self.tie_share.get(name),
            }
            for cand, table in self.candidates.items():
                ref_t = self.reference_table(cand)
                entry.setdefault("candidates", {})[cand] = {
                    "scores": {m: float(table.means(m)[name]) for m in table.measures},
                    "ranks": {m: float(table.ranks(m)[name]) for m in table.measures},
                    "reference_scores": {m: float(ref_t.means(m)[name]) for m in ref_t.measures},
                    "reference_ranks": {m: float(ref_t.ranks(m)[name]) for m in ref_t.measures},
                }
            systems.append(entry)
        per_candidate = {
            cand: {m: ra.to_json() for m, ra in by_measure.items()}
            for cand, by_measure in self.agreement.items()
        }
        first = next(iter(per_candidate.values()), {})
        return {
            "users": {cand: u.to_json() for cand, u in self.users.items()},
            "measures": first,
            "candidates": per_candidate,
            "systems": systems,
            "settings": dict(self.settings),
        }


# ---------------------------------------------------------------------------------- pipeline

_INPUT_WARNING = ("tie policy 'input': equal scores are ordered by file order; a list written relevant-first "
                  "then wins every tie. Prefer 'hash'.")


def _check_runs(runs: Mapping, tie_policy: str) -> None:
    if tie_policy not in TIE_POLICIES:
        raise ConfigError(f"unknown tie policy {tie_policy!r}; choose one of: {', '.join(TIE_POLICIES)}")
    if not runs:
        raise ConfigError("no runs given; pass run files or a folder of runs")


def _name_key(name: str) -> str:
    # two names that would give one figure file name (report slugs) collide too
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()


def label_set_names(names: Sequence[str], paths: Sequence[str | os.PathLike]) -> list[str]:
    """One output name per label set, for tables, JSON keys and figure names.

    ``names`` are the qrels names (:func:`recjudge.data.trec.read_qrels`: the file stem without .gz and
    .qrels), ``paths`` the files they came from, in input order (reference first). A name shared by
    several inputs (compared as letters and digits, ignoring case) is prefixed with each one's
    parent folder (``judgeA/llm``, ``judgeB/llm``); a name that still repeats gets ``-2``, ``-3``
    in input order.
    """
    from collections import Counter
    from pathlib import Path

    counts = Counter(_name_key(n) for n in names)
    named = []
    for name, path in zip(names, paths):
        parent = Path(path).resolve().parent.name  # resolved: "llm.qrels" has no parent in its text
        named.append(f"{parent}/{name}" if counts[_name_key(name)] > 1 and parent else name)
    out: list[str] = []
    seen: set[str] = set()
    for name in named:
        unique, k = name, 2
        while _name_key(unique) in seen:
            unique, k = f"{name}-{k}", k + 1
        seen.add(_name_key(unique))
        out.append(unique)
    return out


def export_tie_info(run_files: Sequence[str | os.PathLike]) -> dict[str, dict]:
    """Per run name: the tie handling recorded at export (``<run>.json`` beside a run from
    ``recjudge train``: tie_policy, tie_seed, tied_user_share before the policy), where present."""
    from ..data.trec import iter_run_files, run_name

    info: dict[str, dict] = {}
    for f in iter_run_files(run_files):
        side = f.parent / f"{run_name(f)}.json"
        if not side.is_file() or side.name == f.name:  # a ranx JSON run is no sidecar of itself
            continue
        try:
            meta = json.loads(side.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and "tie_policy" in meta:
            info[run_name(f)] = {"tie_policy": meta.get("tie_policy"), "tie_seed": meta.get("tie_seed"),
                                 "tied_user_share": meta.get("tied_user_share"), "k": meta.get("k")}
    return info


def _measure_names(measures: Sequence[str] | str | None) -> dict[str, str]:
    """User spelling → ir-measures key. Output keeps the user's spelling (``Compat(p=0.95)``, which
    ir-measures would print as ``Compat`` since 0.95 is its default); a trec_eval name is named in
    ir-measures spelling (``ndcg_cut_10`` → ``nDCG@10``)."""
    from .measures import measure_key, measure_names, parse_measures, split_top_level

    if measures is None:
        measures = DEFAULT_MEASURES
    items = split_top_level(measures) if isinstance(measures, str) else [str(m).strip() for m in measures]
    parsed = parse_measures(items)
    return {name.replace(" ", ""): measure_key(m) for name, m in zip(measure_names(items), parsed)}


def _missing_users(names) -> dict:
    """The settings saying how a user without a score counts: 0, except for measures whose mean
    leaves such users out (CompatHM, as its script), listed when there are any."""
    left_out = {n: "users the run does not rank, or without a relevant label, are left out of the mean"
                for n in names if n.replace(" ", "").startswith("CompatHM")}
    return {"missing_user_score": 0.0, **({"missing_user_exceptions": left_out} if left_out else {})}


# measures of how much of a ranking is judged, not of how good it is
COVERAGE_MEASURES = ("Judged",)


def ranking_measure(names: Sequence[str]) -> tuple[str, str]:
    """The measure systems are ranked by: the first that is not a coverage measure (Judged@k says how
    much of a ranking is labelled, not how good it is), and a note saying so."""
    from .measures import measure_key

    names = list(names)
    effective = [n for n in names if measure_key(n).split("@")[0].split("(")[0] not in COVERAGE_MEASURES]
    if effective:
        skipped = names[:names.index(effective[0])]
        note = "the first effectiveness measure" + (
            f"; {', '.join(skipped)} {'measures' if len(skipped) == 1 else 'measure'} coverage, not effectiveness"
            if skipped else "")
        return effective[0], note
    return names[0], (f"{names[0]} measures coverage (how much of each ranking is judged), not effectiveness: "
                      "no effectiveness measure was given")


def measure_definitions(names) -> dict[str, str]:
    """Each measure's definition in words (gain function, variant), as reports and JSON state it."""
    from .measures import describe_measure

    return {name: describe_measure(name) for name in names}


def _score(runs: Mapping[str, RunSource], label_sets: Mapping, measures: Mapping[str, str], tie_policy: str,
           seed: int) -> Scored:
    """Every run scored under every label set in one pass over the runs, one run in memory at a time
    (:func:`recjudge.evaluation.measures.score_runs`); the tied-user shares are taken at k = 100."""
    from .measures import score_runs

    _check_runs(runs, tie_policy)
    scored = score_runs(runs, label_sets, list(measures), tie_policy, seed, k=100)
    if tie_policy == "input":  # score_runs keeps each run's own warning quiet: said once here
        warnings.warn(_INPUT_WARNING, stacklevel=3)
    return scored


def _table(label_set: str, scored: Scored, key, measures: Mapping[str, str], unranked: str | None = None
           ) -> SystemTable:
    """The matrices of label set ``key`` in ``scored`` under the user's measure names. ``unranked``
    is the error when no run ranks any of the label set's users (every measure would be 0)."""
    if not any(scored.users_ranked[key].values()):
        raise ConfigError(unranked or f"no run ranks any user that {label_set!r} judges: every measure would be 0; "
                          "check that runs and qrels use the same user ids")
    mats = scored.matrices[key]
    return SystemTable(label_set, {name: mats[k] for name, k in measures.items()})


def evaluate(runs: Mapping[str, RunSource], qrels: Qrels, measures: Sequence[str] | str | None = None,
             tie_policy: str = "hash", seed: int = 0, export_ties: Mapping[str, dict] | None = None
             ) -> EvaluationResult:
    """Score and rank systems under one label set.

    ``runs`` maps a name to a Run or to a run file (:func:`recjudge.data.trec.run_paths`); files are
    read one at a time, so the memory does not grow with the number of runs.
    """
    names = _measure_names(measures)
    scored = _score(runs, {"labels": qrels}, names, tie_policy, seed)
    table = _table(qrels.name, scored, "labels", names)
    ranked_by, why = ranking_measure(list(names))
    settings = {"measures": list(names), "measure_definitions": measure_definitions(names),
                "ranked_by": ranked_by, "ranked_by_note": why,
                "tie_policy": tie_policy, "seed": seed,
                "qrels": qrels.name, "n_users": len(qrels.qids), **_missing_users(names),
                "export_ties": dict(export_ties or {})}
    return EvaluationResult(table, settings, scored.tied_user_share)


def tied_ranking(means: pd.Series, label_set: str, measure: str) -> str:
    """Why ``means`` give no ranking to correlate ('' when they do): every system has the same mean."""
    values = means.to_numpy(dtype=float)
    if len(values) and np.all(values == values[0]):
        return (f"every system ties under {label_set} on {measure} (all {len(values)} means are "
                f"{values[0]:.4g}), so there is no ranking to compare: τ and the rank displacements are undefined")
    return ""


def _undefined(measure: str, ref: pd.DataFrame, cand: pd.DataFrame, reference: str, label: str,
               ci_method: str = DEFAULT_CI_METHOD) -> RankAgreement:
    """The record of a measure on which a label set ties every system: no τ, no CI, no displacement."""
    why = tied_ranking(system_means(ref), reference, measure) or tied_ranking(system_means(cand), label, measure)
    nan = math.nan
    return RankAgreement(measure=measure, n_systems=ref.shape[1], n_users_reference=len(ref.index),
                         n_users_candidate=len(cand.index), kendall_tau=nan, kendall_tau_ci=(nan, nan),
                         weighted_tau=nan, tau_ap=nan, median_abs_rank_displacement=nan,
                         max_abs_rank_displacement=nan, most_displaced=(), ci_method=ci_method, undefined=why,
                         ci_missing="no interval: τ is undefined")


def _agreement(measure: str, ref: pd.DataFrame, cand: pd.DataFrame, n_boot: int, seed: int,
               top: int = 5, ci_method: str = DEFAULT_CI_METHOD, label: str = "candidate",
               weights: BootstrapWeights | None = None, reference: str = "the reference") -> RankAgreement:
    from scipy import stats

    names = list(ref.columns)
    ref_means, cand_means = system_means(ref), system_means(cand)
    if tied_ranking(ref_means, reference, measure) or tied_ranking(cand_means, label, measure):
        return _undefined(measure, ref, cand, reference, label, ci_method)
    r, c = ref_means.to_numpy(), cand_means.to_numpy()
    tau = stats.kendalltau(r, c, variant="b")
    ci = kendall_tau_interval(ref, cand, n_boot, seed, method=ci_method, weights=weights)
    missing = NO_RESAMPLES if n_boot <= 0 else ""
    if n_boot > 0 and not math.isfinite(ci.low):
        one_side = ci_method in ("BC", "BCa") and math.isfinite(tau.statistic)
        missing = ("no interval (every resampled τ-b on one side of the estimate)" if one_side
                   else "no interval (no resample gave a defined τ-b)")
        why = (f"every bootstrap τ-b falls on one side of the estimate {tau.statistic:.3f}, so the {ci_method} "
               "interval is undefined (reported as no interval); the systems' differences are small against the "
               "users' spread" if one_side else
               f"no resample gave a defined τ-b, so the {ci_method} interval is undefined (reported as no interval)")
        if math.isfinite(tau.statistic):
            warnings.warn(f"{label}, {measure}: {why}", stacklevel=3)
    displacement = system_ranks(cand_means) - system_ranks(ref_means)
    abs_disp = displacement.abs()
    movers = abs_disp.sort_values(ascending=False, kind="stable")
    most = tuple((str(s), float(displacement[s])) for s in movers.index[:top] if movers[s] > 0)
    return RankAgreement(
        measure=measure,
        n_systems=len(names),
        n_users_reference=len(ref.index),
        n_users_candidate=len(cand.index),
        kendall_tau=float(tau.statistic),
        kendall_tau_ci=ci.bounds,
        weighted_tau=weighted_tau(r, c),
        tau_ap=tau_ap(r, c, names),
        median_abs_rank_displacement=float(abs_disp.median()),
        max_abs_rank_displacement=float(abs_disp.max()),
        most_displaced=most,
        kendall_tau_p=float(tau.pvalue),
        ci_method=ci_method,
        ci_note=ci.note,
        ci_summary=ci.summary,
        ci_missing=missing,
        ci_coverage=ci.coverage,
        bootstrap_bias_sd=ci.bootstrap_bias_sd,
    )


def compare(runs: Mapping[str, RunSource], reference: Qrels, candidates: Sequence[Qrels] | Mapping[str, Qrels],
            measures: Sequence[str] | str | None = None, queries: str | None = None, tie_policy: str = "hash",
            seed: int = 0, bootstrap: int = 1000, export_ties: Mapping[str, dict] | None = None,
            bootstrap_seed: int | None = None, ci_method: str = DEFAULT_CI_METHOD,
            sources: Mapping[str, str] | None = None, spelled: Callable[[str], str] | None = None
            ) -> CompareResult:
    """Rank systems under the reference and each candidate label set and compare the rankings.

    ``seed`` drives the hash tie policy and, unless ``bootstrap_seed`` is given, the bootstrap;
    a separate ``bootstrap_seed`` varies the CIs without changing any score or rank.
    ``sources`` (label set name → path it was read from) is recorded in the settings. ``runs`` maps
    a name to a Run or to a run file, read one at a time as in :func:`evaluate`.

    ``queries`` None counts users as ``"own"`` but refuses a candidate that shares no user with the
    reference: τ would then compare two rankings over different users, which only an explicit
    ``"own"`` accepts (:func:`user_overlap`). ``spelled`` (a setting's name → how the caller wrote it,
    e.g. ``--queries``) words that refusal; default: the command line's.
    """
    spelled = spelled or (lambda name: "--" + name.replace("_", "-"))
    if queries is not None and queries not in QUERY_SETS:
        raise ConfigError(f"{spelled('queries')} must be one of {', '.join(QUERY_SETS)}, not {queries!r}")
    if isinstance(candidates, Mapping):
        cand_map = dict(candidates)
    else:
        cand_map = {}
        for q in candidates:
            key = q.name
            while key in cand_map:
                key += "'"
            cand_map[key] = q
    if not cand_map:
        raise ConfigError("no candidate qrels given; pass --candidate QRELS at least once")
    if len(runs) < 2:
        raise ConfigError(f"comparing system rankings needs at least 2 runs, got {len(runs)}")
    if bootstrap < 0:
        raise ConfigError(f"--bootstrap must be 0 (no CI) or a positive number of resamples, not {bootstrap}")
    _check_ci_method(ci_method)
    boot_seed = seed if bootstrap_seed is None else bootstrap_seed
    names = _measure_names(measures)
    users = user_overlap(reference, cand_map, queries, spelled)  # refused here, before any run is read
    explicit, queries = queries is not None, queries or "own"
    # every table's label set, so that one pass over the runs scores them all: ("reference",) over
    # the reference's users; per candidate, ("candidate", key) and, under "shared", ("shared", key)
    # for the reference over the users both judge
    label_sets: dict[tuple, Qrels | tuple] = {("reference",): reference}
    shared: dict[str, list[str]] = {}
    ref_users = set(reference.qids)
    for key, qrels in cand_map.items():
        if queries == "shared":
            shared[key] = sorted(ref_users & set(qrels.qids))
            label_sets[("shared", key)] = (reference, shared[key])
            label_sets[("candidate", key)] = (qrels, shared[key])
        else:
            label_sets[("candidate", key)] = qrels
    scored = _score(runs, label_sets, names, tie_policy, seed)
    ref_table = _table(reference.name, scored, ("reference",), names)
    cand_tables: dict[str, SystemTable] = {}
    ref_tables: dict[str, SystemTable] = {}
    agreement: dict[str, dict[str, RankAgreement]] = {}
    for key in cand_map:
        if queries == "shared":
            unranked = (f"no run ranks any of the {len(shared[key])} users that reference {reference.name!r} and "
                        f"candidate {key!r} both judge: every measure would be 0; check that runs and qrels use "
                        "the same user ids, or use --queries own")
            ref_t = _table(reference.name, scored, ("shared", key), names, unranked)
            cand_t = _table(key, scored, ("candidate", key), names, unranked)
        else:
            ref_t = ref_table
            cand_t = _table(key, scored, ("candidate", key), names)
        cand_tables[key] = cand_t
        ref_tables[key] = ref_t
        # every measure of a label set is over the same users: one set of resamples serves them all
        weights = BootstrapWeights.over(ref_t, cand_t, boot_seed, bootstrap)
        agreement[key] = {
            m: _agreement(m, ref_t.matrices[m], cand_t.matrices[m], bootstrap, boot_seed, ci_method=ci_method,
                          label=f"candidate {key!r}", weights=weights, reference=f"reference {reference.name!r}")
            for m in names
        }
    settings = {
        "measures": list(names),
        "measure_definitions": measure_definitions(names),
        "queries": queries,
        "queries_given": explicit,
        "tie_policy": tie_policy,
        "seed": seed,
        "bootstrap": bootstrap,
        "bootstrap_seed": boot_seed,
        "ci_method": ci_method,
        "ci_level": 0.95,
        "reference": reference.name,
        "candidates": list(cand_map),
        **_missing_users(names),
        "rank_order": "mean score descending (rounded to 12 decimals); equal means share the average rank",
        "export_ties": dict(export_ties or {}),
    }
    if sources is not None:
        settings["paths"] = {name: str(path) for name, path in sources.items()}
    return CompareResult(ref_table, cand_tables, agreement, settings, scored.tied_user_share, ref_tables, users)
