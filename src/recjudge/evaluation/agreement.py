"""Item-level agreement between a reference label set and a candidate (e.g. human vs LLM).

Measured over the (user, item) pairs the reference judges. ``clip=(lo, hi)`` clips the labels the
candidate gives; then ``missing="zero"`` gives a pair the candidate lacks the label 0 (the LLMJudge
convention: an unjudged pair is not relevant, so coverage counts as much as the labels) and
``"drop"`` leaves it out (agreement over the pairs both judge). Left unset (``None``), a candidate
that lacks none or at most :data:`MISSING_SHARE_LIMIT` of the reference's pairs is counted with
``"zero"`` and the count is reported; one that lacks more is refused, because either rule then
changes every number and only the user can say which question is asked. Every result reports how
many reference pairs the candidate lacks and how many candidate pairs the reference does not judge.

- Pairwise agreement (Penha et al. 2025): over pairs of items of the same user whose reference
  labels differ, the candidate *agrees* (orders them the same way), *ties* (equal labels) or
  *disagrees*. Shares with 95% CIs (Korn–Graubard: Clopper–Pearson at the effective number of
  pairs, SE from a user bootstrap: :func:`recjudge.evaluation.intervals.share_interval`), each with
  the number of users it rests on and, where that is few, a note of the coverage measured for it
  (:func:`recjudge.evaluation.intervals.share_coverage_note`); also for binarised labels (0 vs ≥ 1,
  both sides) and broken down by the distance between the two reference labels.
- Relevant vs not (the paper's Table 3 / Figure 3 / Table 8): pairs of one user's items with
  reference label 0 versus reference label ≥ 1, compared on the candidate's *raw* labels — the
  candidate agrees when it labels the relevant item higher. Unlike ``pairwise_binary`` the
  candidate is not binarised: human 0,0,3,6 with LLM 5,4,6,6 is agree 1.0 here, tie 1.0 there.
  Reference labels below 0 take no part. Computed from
  per-user contingency tables, so 600 judged items per user cost no 180,000-pair loop.
- Cohen's κ, unweighted and linear-weighted (weights |i − j| over the sorted label categories,
  as scikit-learn does); Krippendorff's α, ordinal and interval (coincidence matrix over the
  observed values, as the ``krippendorff`` package does); the confusion matrix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..data.trec import MAX_LABEL, Qrels, sorted_codes
from ..errors import ConfigError
from .intervals import CI_FLAG, NO_RESAMPLES

__all__ = [
    "PairwiseAgreement",
    "AgreementResult",
    "agreement",
    "cohen_kappa",
    "krippendorff_alpha",
    "aligned_labels",
    "parse_clip",
    "missing_rule",
    "MISSING_SHARE_LIMIT",
]

MISSING = ("zero", "drop")
# The share of the reference's pairs a candidate may lack before the rule for them must be chosen:
# at 1% either rule moves κ and the shares by well under their bootstrap spread.
MISSING_SHARE_LIMIT = 0.01


class PairwiseAgreement(NamedTuple):
    agree: float
    tie: float
    disagree: float
    n_pairs: int
    agree_ci: tuple[float, float]
    tie_ci: tuple[float, float]
    disagree_ci: tuple[float, float]
    n_users: int = 0        # users with at least one such pair: the clusters the CIs rest on
    ci_coverage: float = math.nan  # measured coverage of such 95% CIs from this many users (NaN: unknown)
    ci_note: str = ""       # why the CIs are flagged: that coverage is below nominal
    ci_summary: str = ""    # that note in one line, printed under the table
    ci_missing: str = ""    # why there are no CIs (0 resamples, ...); '' when there are

    def to_json(self) -> dict:
        ci = (lambda bounds: None if self.ci_missing else list(bounds))  # noqa: E731
        return {
            "agree": self.agree, "tie": self.tie, "disagree": self.disagree, "n_pairs": self.n_pairs,
            "agree_ci": ci(self.agree_ci), "tie_ci": ci(self.tie_ci),
            "disagree_ci": ci(self.disagree_ci), "ci_missing": self.ci_missing or None, "n_users": self.n_users,
            "ci_coverage": self.ci_coverage, "ci_note": self.ci_note, "ci_summary": self.ci_summary,
        }


@dataclass(frozen=True, eq=False)
class AgreementResult:
    candidate: str
    n_pairs: int
    n_missing: int
    cohen_kappa: float
    cohen_kappa_linear: float
    krippendorff_alpha_ordinal: float
    krippendorff_alpha_interval: float
    pairwise: PairwiseAgreement
    pairwise_binary: PairwiseAgreement
    pairwise_relevant_vs_not: PairwiseAgreement
    pairwise_by_distance: Mapping[int, PairwiseAgreement]
    confusion: pd.DataFrame  # reference label × candidate label counts
    settings: Mapping[str, object]
    n_reference: int = 0        # pairs the reference judges
    n_candidate_only: int = 0   # pairs the candidate judges and the reference does not (never compared)
    missing: str = "zero"       # the rule that counted the n_missing pairs

    @property
    def missing_note(self) -> str:
        """What the missing pairs are and how they were counted, in one line."""
        if self.n_missing == 0:
            return f"the candidate labels all {self.n_reference:,} reference pairs"
        share = self.n_missing / self.n_reference if self.n_reference else math.nan
        how = ("counted as label 0" if self.missing == "zero" else "left out")
        return f"the candidate lacks {self.n_missing:,} of {self.n_reference:,} reference pairs ({share:.1%}), {how}"

    def to_json(self) -> dict:
        return {
            "cohen_kappa": self.cohen_kappa,
            "cohen_kappa_linear": self.cohen_kappa_linear,
            "krippendorff_alpha_ordinal": self.krippendorff_alpha_ordinal,
            "krippendorff_alpha_interval": self.krippendorff_alpha_interval,
            "pairwise": self.pairwise.to_json(),
            "pairwise_binary": self.pairwise_binary.to_json(),
            "pairwise_relevant_vs_not": self.pairwise_relevant_vs_not.to_json(),
            "pairwise_by_distance": {str(d): p.to_json() for d, p in self.pairwise_by_distance.items()},
            "n_pairs": self.n_pairs,
            "n_missing": self.n_missing,
            "n_reference": self.n_reference,
            "n_candidate_only": self.n_candidate_only,
            "missing": self.missing,
            "missing_note": self.missing_note,
            "ci_note": self.pairwise.ci_note,
            "ci_summary": self.pairwise.ci_summary,
            "confusion": {
                "reference_labels": [int(x) for x in self.confusion.index],
                "candidate_labels": [int(x) for x in self.confusion.columns],
                "counts": self.confusion.to_numpy().tolist(),
            },
            "settings": dict(self.settings),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per pairwise variant (all, binary, relevant vs not, each label distance)."""
        variants = {"all": self.pairwise, "binary": self.pairwise_binary,
                    "relevant_vs_not": self.pairwise_relevant_vs_not,
                    **{f"distance {d}": p for d, p in self.pairwise_by_distance.items()}}
        rows = [{"candidate": self.candidate, "pairs": name, **p.to_json()} for name, p in variants.items()]
        return pd.DataFrame(rows)

    def summary_row(self) -> dict[str, object]:
        """The row ``recjudge agreement`` prints for this candidate."""
        pw, rv = self.pairwise, self.pairwise_relevant_vs_not
        return {
            "candidate": self.candidate,
            "pairs": self.n_pairs,
            "missing": f"{self.n_missing} ({self.missing})" if self.n_missing else "0",
            "cand-only": self.n_candidate_only,
            "kappa": f"{self.cohen_kappa:.4f}",
            "kappa_lin": f"{self.cohen_kappa_linear:.4f}",
            "alpha_ord": f"{self.krippendorff_alpha_ordinal:.4f}",
            "alpha_int": f"{self.krippendorff_alpha_interval:.4f}",
            "agree": (f"{pw.agree:.3f} {pw.ci_missing}" if pw.ci_missing else
                      f"{pw.agree:.3f} [{pw.agree_ci[0]:.3f}, {pw.agree_ci[1]:.3f}]" + (CI_FLAG if pw.ci_note else "")),
            "tie": f"{pw.tie:.3f}",
            "disagree": f"{pw.disagree:.3f}",
            "binary agree": f"{self.pairwise_binary.agree:.3f}",
            # the paper's Table 3: reference 0 vs ≥ 1, candidate labels raw
            "rel>non agree/tie": f"{rv.agree:.3f}/{rv.tie:.3f}",
        }

    def notes(self) -> list[str]:
        """The lines printed under the table: the missing pairs, and the CI's coverage note if any."""
        pw = self.pairwise
        ci = [f"{CI_FLAG} {self.candidate}: agree CI: {pw.ci_summary or pw.ci_note}"] if pw.ci_note else []
        return [f"{self.candidate}: {self.missing_note}", *ci]

    def format(self) -> str:
        return "\n".join([pd.DataFrame([self.summary_row()]).to_string(index=False), *self.notes()])


def parse_clip(text: str | None) -> tuple[int, int] | None:
    """Parse ``LO..HI`` (e.g. ``0..3``): whole numbers within the label range, LO ≤ HI."""
    if text is None:
        return None
    parts = text.split("..")
    try:
        lo, hi = (int(p) for p in parts)
    except ValueError:
        raise ConfigError(f"--clip takes LO..HI with whole numbers (e.g. 0..3), not {text!r}") from None
    # labels are read within ±MAX_LABEL; a bound beyond it would overflow the int64 label column
    for bound in (lo, hi):
        if abs(bound) > MAX_LABEL:
            raise ConfigError(f"--clip {text}: bound {bound} is outside the label range; "
                              f"give bounds from {-MAX_LABEL} to {MAX_LABEL}, e.g. 0..3")
    if lo > hi:
        raise ConfigError(f"--clip {text}: LO must not exceed HI; write the lower bound first, e.g. {hi}..{lo}")
    return lo, hi


class _Aligned(NamedTuple):
    """The reference's pairs with both labels, as arrays in the reference's row order."""

    rows: np.ndarray   # reference rows kept
    user: np.ndarray   # int64: each pair's user, numbered in the string order of the user ids
    ref: np.ndarray    # int64
    cand: np.ndarray   # int64
    n_missing: int
    n_candidate_only: int
    missing: str       # the rule applied to the n_missing pairs


def missing_rule(missing: str | None, n_missing: int, n_reference: int, reference: str, candidate: str) -> str:
    """The rule for reference pairs the candidate lacks: ``missing`` when given, else ``"zero"`` if
    the candidate lacks at most :data:`MISSING_SHARE_LIMIT` of them; more is refused, naming both rules."""
    if missing is not None:
        if missing not in MISSING:
            raise ConfigError(f"--missing must be one of {', '.join(MISSING)}, not {missing!r}")
        return missing
    if n_missing <= MISSING_SHARE_LIMIT * n_reference:
        return "zero"
    kept = n_reference - n_missing
    raise ConfigError(
        f"candidate {candidate!r} lacks {n_missing:,} of the {n_reference:,} pairs reference {reference!r} judges "
        f"({n_missing / n_reference:.0%}); above {MISSING_SHARE_LIMIT:.0%} the rule for them changes every number, "
        f"so choose it: --missing zero counts each as label 0 (the LLMJudge convention: agreement then also "
        f"measures how much the candidate covers), --missing drop leaves them out (agreement over the {kept:,} "
        "pairs both judge)")


def _aligned(reference: Qrels, candidate: Qrels, missing: str | None, clip: tuple[int, int] | None) -> _Aligned:
    """Both label sets joined on the reference's pairs through the readers' integer codes: the
    candidate's distinct ids are looked up once, then pairs are matched as int64 keys."""
    if missing is not None and missing not in MISSING:
        raise ConfigError(f"--missing must be one of {', '.join(MISSING)}, not {missing!r}")
    rc, cc = reference.codes, candidate.codes
    ndoc = max(len(rc.docids), 1)
    cq = pd.Index(rc.qids).get_indexer(cc.qids)[cc.qcode]  # -1: an id the reference never uses
    cd = pd.Index(rc.docids).get_indexer(cc.docids)[cc.dcode]
    known = np.flatnonzero((cq >= 0) & (cd >= 0))
    ckeys = cq[known].astype(np.int64) * ndoc + cd[known]
    order = np.argsort(ckeys)
    ckeys, labels = ckeys[order], candidate.labels[known][order]
    if clip is not None:
        # clip the candidate's own labels; a pair it lacks is then 0 by convention, not a clipped label
        labels = np.clip(labels, clip[0], clip[1])
    rkeys = rc.qcode.astype(np.int64) * ndoc + rc.dcode
    at = np.searchsorted(ckeys, rkeys)
    found = at < len(ckeys)
    found[found] = ckeys[at[found]] == rkeys[found]
    cand = np.zeros(len(rkeys), dtype=np.int64)  # a pair the candidate lacks: 0 (or dropped below)
    cand[found] = labels[at[found]]
    n_found = int(found.sum())
    n_missing = len(rkeys) - n_found
    rule = missing_rule(missing, n_missing, len(rkeys), reference.name, candidate.name) if n_found else (missing or "zero")
    rows = np.arange(len(rkeys)) if rule == "zero" else np.flatnonzero(found)
    rank = sorted_codes(rc.qids)  # each distinct user's place in the string order
    return _Aligned(rows, rank[rc.qcode[rows]], reference.labels[rows], cand[rows], n_missing,
                    len(candidate) - n_found, rule)


def aligned_labels(reference: Qrels, candidate: Qrels, missing: str | None = "zero",
                   clip: tuple[int, int] | None = None) -> tuple[pd.DataFrame, int]:
    """Frame of qid, docid, ref, cand over the reference's pairs, and how many the candidate lacked."""
    a = _aligned(reference, candidate, missing, clip)
    rc = reference.codes
    frame = pd.DataFrame({"qid": rc.qids[rc.qcode[a.rows]], "docid": rc.docids[rc.dcode[a.rows]],
                          "ref": a.ref, "cand": a.cand})
    return frame, a.n_missing


def _unique(values: np.ndarray, return_inverse: bool = False):
    """``np.unique(values[, return_inverse=True])`` for integers, by counting when their range is
    small (labels, user numbers): linear where a sort is n log n, the same result."""
    values = np.asarray(values)
    if values.dtype.kind not in "iub" or len(values) == 0:
        return np.unique(values, return_inverse=return_inverse)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo > max(4 * len(values), 1 << 16):
        return np.unique(values, return_inverse=return_inverse)
    shifted = (values - lo).astype(np.int64)
    present = np.bincount(shifted, minlength=hi - lo + 1) > 0
    uniques = (np.flatnonzero(present) + lo).astype(values.dtype)
    if not return_inverse:
        return uniques
    return uniques, (np.cumsum(present) - 1)[shifted]


def _counts(shape: tuple[int, ...], *codes: np.ndarray) -> np.ndarray:
    """How often each combination of codes occurs, as a float array of ``shape`` (np.add.at's result)."""
    flat = np.ravel_multi_index(codes, shape) if codes and len(codes[0]) else np.zeros(0, dtype=np.int64)
    return np.bincount(flat, minlength=int(np.prod(shape))).astype(np.float64).reshape(shape)


# -------------------------------------------------------------------------------- chance-corrected

def cohen_kappa(a: np.ndarray, b: np.ndarray, weights: str | None = None) -> float:
    """Cohen's κ of two label vectors; ``weights=None`` or ``"linear"`` (|i−j| over sorted categories)."""
    a, b = np.asarray(a), np.asarray(b)
    cats, codes = _unique(np.concatenate([a, b]), return_inverse=True)
    k = len(cats)
    ca, cb = codes[: len(a)], codes[len(a):]
    observed = _counts((k, k), ca, cb)
    n = observed.sum()
    if n == 0:
        return math.nan
    expected = np.outer(observed.sum(1), observed.sum(0)) / n
    if weights is None:
        w = 1.0 - np.eye(k)
    elif weights == "linear":
        idx = np.arange(k)
        w = np.abs(idx[:, None] - idx[None, :]).astype(float)
    else:
        raise ConfigError(f"weights must be None or 'linear', not {weights!r}")
    denom = (w * expected).sum()
    if denom == 0:
        return 1.0 if (w * observed).sum() == 0 else math.nan
    return float(1.0 - (w * observed).sum() / denom)


def krippendorff_alpha(a: np.ndarray, b: np.ndarray, level: str = "ordinal") -> float:
    """Krippendorff's α for two coders who both rated every unit; ``level`` ordinal or interval."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    both = np.concatenate([a, b])
    whole = np.all(both == np.round(both)) and np.abs(both).max(initial=0) < 2**53
    values, codes = _unique(both.astype(np.int64), return_inverse=True) if whole else np.unique(both, return_inverse=True)
    values = values.astype(float)
    k = len(values)
    if k < 2:
        return math.nan
    ca, cb = codes[: len(a)], codes[len(a):]
    # Coincidence matrix: each unit with two values adds 1/(m−1) = 1 to (a,b) and to (b,a).
    o = _counts((k, k), ca, cb) + _counts((k, k), cb, ca)
    n_c = o.sum(1)
    n = n_c.sum()
    if level == "interval":
        d2 = (values[:, None] - values[None, :]) ** 2
    elif level == "ordinal":
        cum = np.cumsum(n_c)
        # δ²(c,k) = (Σ_{g between c and k} n_g − (n_c + n_k)/2)²
        lo = np.minimum.outer(np.arange(k), np.arange(k))
        hi = np.maximum.outer(np.arange(k), np.arange(k))
        between = cum[hi] - np.where(lo > 0, cum[lo - 1], 0.0)
        d2 = (between - (n_c[:, None] + n_c[None, :]) / 2.0) ** 2
    else:
        raise ConfigError(f"level must be 'ordinal' or 'interval', not {level!r}")
    d_e = (np.outer(n_c, n_c) * d2).sum()
    if d_e == 0:
        return math.nan
    return float(1.0 - (n - 1) * (o * d2).sum() / d_e)


# ---------------------------------------------------------------------------------- pairwise

def _user_tables(qids: np.ndarray, ref: np.ndarray, cand: np.ndarray):
    users, u = _unique(qids, return_inverse=True)
    ref_vals, r = _unique(ref, return_inverse=True)
    cand_vals, c = _unique(cand, return_inverse=True)
    t = _counts((len(users), len(ref_vals), len(cand_vals)), u, r, c)
    return t, ref_vals


def _pair_counts(t: np.ndarray, ref_vals: np.ndarray) -> dict[int, np.ndarray]:
    """Per distance d = ref_hi − ref_lo: (U, 3) counts of agree, tie, disagree per user."""
    below = np.cumsum(t, axis=2) - t  # items of that ref level with a strictly lower cand label
    above = t.sum(axis=2, keepdims=True) - np.cumsum(t, axis=2)
    out: dict[int, np.ndarray] = {}
    for hi in range(len(ref_vals)):
        for lo in range(hi):
            d = int(ref_vals[hi] - ref_vals[lo])
            th = t[:, hi, :]
            counts = np.stack([
                (th * below[:, lo, :]).sum(1),   # cand(hi item) > cand(lo item)
                (th * t[:, lo, :]).sum(1),       # equal cand labels
                (th * above[:, lo, :]).sum(1),   # cand(hi item) < cand(lo item)
            ], axis=1)
            out[d] = out[d] + counts if d in out else counts
    return out


def _pairwise(counts: np.ndarray, n_boot: int, rng: np.random.Generator, chunk: int = 200) -> PairwiseAgreement:
    total = counts.sum()
    if total == 0:
        nan2 = (math.nan, math.nan)
        return PairwiseAgreement(math.nan, math.nan, math.nan, 0, nan2, nan2, nan2, ci_missing="no interval (no pairs)")
    shares = counts.sum(0) / total
    cis = [(math.nan, math.nan)] * 3
    n_users = int(np.count_nonzero(counts.sum(1)))
    coverage, note, summary, missing = math.nan, "", "", NO_RESAMPLES
    if n_boot > 0:
        # Korn–Graubard (Clopper–Pearson at the effective number of pairs: pairs of one user are a
        # cluster): nearest to 95% coverage in benchmarks/bench_tau_ci.py (section C), always in
        # [0, 1] and containing the share; with few users none reached 95%, so the note says so
        from .intervals import share_coverage_note, share_coverage_summary, share_interval

        coverage, note = share_coverage_note(n_users)
        summary, missing = share_coverage_summary(n_users), ""
        units = counts.shape[0]  # resampled: every user, those without such pairs too
        samples = []
        for start in range(0, n_boot, chunk):
            w = rng.multinomial(units, np.full(units, 1.0 / units),
                                size=min(chunk, n_boot - start)).astype(np.float64)
            sums = w @ counts
            with np.errstate(invalid="ignore", divide="ignore"):
                samples.append(sums / sums.sum(1, keepdims=True))
        s = np.concatenate(samples)
        s = s[~np.isnan(s).any(1)]
        per_user = counts.sum(1)
        cis = [share_interval(counts[:, j], per_user, replicates=s[:, j]) for j in range(3)]
        if math.isnan(cis[0][0]):  # pairs of one user tell nothing about the spread between users
            note, summary, missing = "", "", f"no interval (pairs from {n_users} user{'s' * (n_users != 1)})"
    return PairwiseAgreement(float(shares[0]), float(shares[1]), float(shares[2]), int(total), *cis,
                             n_users, coverage, note, summary, missing)


def _summed(counts: dict[int, np.ndarray], n_users: int) -> np.ndarray:
    return sum(counts.values()) if counts else np.zeros((n_users, 3))


def pairwise_agreement(qids, ref, cand, n_boot: int = 1000, seed: int = 0):
    """(all pairs, binary pairs, by distance, relevant vs not) pairwise agreement, with user-bootstrap CIs."""
    qids, ref, cand = np.asarray(qids), np.asarray(ref), np.asarray(cand)
    t, ref_vals = _user_tables(qids, ref, cand)
    by_d = _pair_counts(t, ref_vals)
    rng = np.random.default_rng(seed)
    n_users = t.shape[0]
    total = _summed(by_d, n_users)
    overall = _pairwise(total, n_boot, rng)
    by_distance = {d: _pairwise(by_d[d], n_boot, rng) for d in sorted(by_d)}
    tb, rb = _user_tables(qids, (ref > 0).astype(int), (cand > 0).astype(int))
    bin_counts = _pair_counts(tb, rb)
    binary = _pairwise(_summed(bin_counts, tb.shape[0]), n_boot, rng)
    # drawn after the others from the same generator, so their CIs stay as they were
    relevant_vs_not = _pairwise(relevant_vs_not_counts(qids, ref, cand), n_boot, rng)
    return overall, binary, by_distance, relevant_vs_not


def relevant_vs_not_counts(qids, ref, cand) -> np.ndarray:
    """(U, 3) agree/tie/disagree counts per user: reference 0 vs reference ≥ 1, candidate labels raw."""
    qids, ref, cand = np.asarray(qids), np.asarray(ref), np.asarray(cand)
    keep = ref >= 0
    users = _unique(qids)
    if not keep.any():
        return np.zeros((len(users), 3))
    t, rel = _user_tables(qids[keep], (ref[keep] > 0).astype(int), cand[keep])
    counts = _summed(_pair_counts(t, rel), t.shape[0])
    # users with only negative reference labels still count as (empty) bootstrap units
    full = np.zeros((len(users), 3))
    full[np.searchsorted(users, _unique(qids[keep]))] = counts
    return full


# ---------------------------------------------------------------------------------- entry point

def agreement(reference: Qrels, candidate: Qrels, missing: str | None = None, clip: tuple[int, int] | None = None,
              bootstrap: int = 1000, seed: int = 0) -> AgreementResult:
    """Item-level agreement of ``candidate`` with ``reference`` over the reference's pairs.

    ``missing``: how a reference pair the candidate lacks counts (``"zero"`` or ``"drop"``); None
    accepts ``"zero"`` only while at most :data:`MISSING_SHARE_LIMIT` of the pairs are missing
    (see :func:`missing_rule`)."""
    pairs = _aligned(reference, candidate, missing, clip)
    n_missing = pairs.n_missing
    if n_missing == len(reference):
        # under missing="zero" every label would be the fill value: κ, α and the shares would
        # describe the fill, not the candidate
        raise ConfigError(f"candidate {candidate.name!r} labels none of the {len(reference)} pairs that "
                          f"reference {reference.name!r} judges, so there is nothing to compare; check that both "
                          "use the same query and item ids")
    r, c = pairs.ref, pairs.cand
    # users by the string order of their ids: the order the bootstrap draws them in
    overall, binary, by_distance, relevant_vs_not = pairwise_agreement(pairs.user, r, c, bootstrap, seed)
    confusion = pd.crosstab(pd.Series(r, name="ref"), pd.Series(c, name="cand")).rename_axis(
        index="reference", columns="candidate")
    return AgreementResult(
        candidate=candidate.name,
        n_pairs=len(r),
        n_missing=n_missing,
        cohen_kappa=cohen_kappa(r, c),
        cohen_kappa_linear=cohen_kappa(r, c, "linear"),
        krippendorff_alpha_ordinal=krippendorff_alpha(r, c, "ordinal"),
        krippendorff_alpha_interval=krippendorff_alpha(r, c, "interval"),
        pairwise=overall,
        pairwise_binary=binary,
        pairwise_relevant_vs_not=relevant_vs_not,
        pairwise_by_distance=by_distance,
        confusion=confusion,
        settings={"missing": pairs.missing, "missing_given": missing is not None,
                  "clip": list(clip) if clip else None, "bootstrap": bootstrap,
                  "seed": seed, "reference": reference.name},
        n_reference=len(reference),
        n_candidate_only=pairs.n_candidate_only,
        missing=pairs.missing,
    )
