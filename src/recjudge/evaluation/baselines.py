"""Trivial judges on a candidate's own pairs: what a judge that reads nothing would score.

A τ of 0.84 or an agreement of 0.6 means little until one knows what a judge without information
gets on the same pairs: with pooled runs, a judge that labels every pair 3 still ranks the systems
by how many judged items they retrieve. Three judges, each built from the candidate label set
alone (its (user, item) pairs and its labels), so they label exactly the pairs it labels:

- ``constant``: every pair gets the candidate's most frequent relevant label (the most frequent
  label above 0, the lowest of them on a tie; the most frequent label when none is above 0). Not
  the plain mode or the median: on most label sets both are 0, and a judge that calls every pair
  non-relevant scores every system 0 — no ranking, no τ, nothing learnt. A judge that calls every
  pair relevant ranks the systems by how many judged items they retrieve, which is the number a
  judge's τ has to beat; and a candidate that labels every pair 3 *is* its constant judge.
- ``random``: the candidate's labels shuffled across its pairs (seeded, ``draws`` times; the pairs
  taken in the order of their ids, so the file's row order does not matter): the same label
  histogram exactly, assigned without looking at user or item. Reported as the mean over the
  draws with their standard deviation.
- ``popularity``: each pair labelled by its item's popularity — the number of users whose pairs in
  the candidate label set hold the item — mapped onto the candidate's labels by quantile: pairs in
  order of popularity (then item id, then user id) take the candidate's labels in ascending order,
  so the histogram is again exactly the candidate's.

The statistics are computed by the same code as the judge's (τ in
:func:`recjudge.evaluation.metaeval.compare`, κ / α / pairwise shares in
:func:`recjudge.evaluation.agreement.agreement`); this module builds the label sets, runs the
agreement ones, and says when a label set takes a single value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from ..data.trec import Qrels, QrelsTable
from ..data.trec.records import label_column

__all__ = ["TRIVIAL_JUDGES", "DEFAULT_DRAWS", "Spread", "trivial_judges", "constant_label", "single_label",
           "single_label_warning", "spread", "TRIVIAL_NOTE_AGREEMENT", "agreement_baselines", "trivial_agreement_rows", "format_spread",
           "TRIVIAL_NOTE", "TRIVIAL_KINDS"]

TRIVIAL_JUDGES = ("constant", "random", "popularity")
# random draws: each is one more label set in compare's pass over the runs (its matrices: users × runs
# × measures); at 3,000 users their τ varied by under 0.005, on 27 queries by 0.03-0.12
DEFAULT_DRAWS = 5
TRIVIAL_KINDS = ("constant = its most frequent label above 0 on every pair; random = its labels shuffled across its pairs "
                 "(mean ± sd of {draws} draws); popularity = its labels assigned by how many users' pairs hold the "
                 "item (same histogram)")
TRIVIAL_NOTE = "trivial judges on the candidate's own pairs: " + TRIVIAL_KINDS
TRIVIAL_NOTE_AGREEMENT = ("indented rows: trivial judges on the candidate's own pairs, measured the same way without "
                          "bootstrap: constant = its most frequent label above 0 on every pair; random = its labels shuffled "
                          "across its pairs (mean of {draws} draws); popularity = its labels assigned by how many "
                          "users' pairs hold the item (same histogram)")


def _with_labels(qrels: Qrels, labels: np.ndarray, name: str) -> Qrels:
    """The candidate's pairs (its codes, shared, not copied) under other labels."""
    t = qrels.table
    return Qrels(name, table=QrelsTable(t.codes, t.icode, t.iterations, label_column(labels)))


def constant_label(qrels: Qrels) -> int:
    """The most frequent label above 0 of ``qrels`` (the lowest of the most frequent, on a tie), or
    its most frequent label when none is above 0."""
    values, counts = np.unique(qrels.labels, return_counts=True)
    if (values > 0).any():
        values, counts = values[values > 0], counts[values > 0]
    return int(values[np.argmax(counts)])  # argmax: the first, i.e. lowest, of the most frequent


def single_label(qrels: Qrels) -> int | None:
    """The one label every pair of ``qrels`` has, or None when it has two or more (or no pair)."""
    labels = qrels.labels
    if len(labels) and int(labels.min()) == int(labels.max()):
        return int(labels[0])
    return None


def single_label_warning(name: str, label: int, what: str = "τ", kind: str = "label set") -> str:
    """The warning printed beside a label set (or a ``kind`` of one) that gives every pair one label."""
    return (f"{kind} {name!r} gives every pair the same label ({label}): its {what} reflects "
            + ("the runs (which systems retrieve judged items), not the judge" if what == "τ"
               else "the reference's label distribution, not the judge (κ is 0 or undefined by construction)"))


def _popularity(qrels: Qrels) -> np.ndarray:
    """Per pair: how many distinct users' pairs hold its item."""
    c = qrels.codes
    users_per_item = np.bincount(c.dcode, minlength=len(c.docids))  # a (user, item) pair occurs once
    return users_per_item[c.dcode]


def trivial_judges(qrels: Qrels, draws: int = DEFAULT_DRAWS, seed: int = 0) -> dict[str, list[Qrels]]:
    """The trivial label sets of ``qrels``: ``constant`` and ``popularity`` (one each) and ``random``
    (``draws`` of them, from ``seed``), each over exactly ``qrels``' pairs."""
    from ..data.trec import sorted_codes

    labels = qrels.labels
    name = qrels.name
    out: dict[str, list[Qrels]] = {
        "constant": [_with_labels(qrels, np.full(len(labels), constant_label(qrels), dtype=np.int64),
                                  f"{name}~constant")]}
    c = qrels.codes
    user, item = sorted_codes(c.qids)[c.qcode], sorted_codes(c.docids)[c.dcode]
    # the pairs in the ids' string order, whatever the file order: the same labels give the same draws
    canonical = np.lexsort((item, user))
    rng = np.random.default_rng(seed)
    out["random"] = []
    for r in range(draws):
        shuffled = np.empty(len(labels), dtype=np.int64)
        shuffled[canonical] = rng.permutation(labels[canonical])
        out["random"].append(_with_labels(qrels, shuffled, f"{name}~random{r + 1}"))
    order = np.lexsort((user, item, _popularity(qrels)))  # popularity, then item id, then user id
    pop = np.empty(len(labels), dtype=np.int64)
    pop[order] = np.sort(labels)
    out["popularity"] = [_with_labels(qrels, pop, f"{name}~popularity")]
    return out


class Spread(NamedTuple):
    """One statistic of a trivial judge: its mean over the draws (one for constant and popularity),
    their standard deviation (NaN for one draw) and each value."""

    mean: float
    sd: float
    values: tuple[float, ...]

    def to_json(self) -> dict:
        return {"mean": _finite(self.mean), "sd": _finite(self.sd), "values": [_finite(v) for v in self.values]}


def _finite(x: float) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def spread(values: Sequence[float]) -> Spread:
    """Mean and sample standard deviation of the defined values."""
    values = tuple(float(v) for v in values)
    x = np.array([v for v in values if not math.isnan(v)])
    if len(x) == 0:
        return Spread(math.nan, math.nan, values)
    return Spread(float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else math.nan, values)


def format_spread(s: Spread, digits: int = 2) -> str:
    """``0.84``, or ``0.12 ± 0.10`` when the draws vary, ``–`` when undefined."""
    if math.isnan(s.mean):
        return "–"
    if math.isnan(s.sd):
        return f"{s.mean:.{digits}f}"
    return f"{s.mean:.{digits}f} ± {s.sd:.{digits}f}"


# ---------------------------------------------------------------------------------- agreement

AGREEMENT_STATS = ("cohen_kappa", "cohen_kappa_linear", "krippendorff_alpha_ordinal", "krippendorff_alpha_interval",
                   "agree", "tie", "disagree", "binary_agree", "relevant_agree", "relevant_tie")


def _agreement_stats(res) -> dict[str, float]:
    pw, rv = res.pairwise, res.pairwise_relevant_vs_not
    return {"cohen_kappa": res.cohen_kappa, "cohen_kappa_linear": res.cohen_kappa_linear,
            "krippendorff_alpha_ordinal": res.krippendorff_alpha_ordinal,
            "krippendorff_alpha_interval": res.krippendorff_alpha_interval,
            "agree": pw.agree, "tie": pw.tie, "disagree": pw.disagree, "binary_agree": res.pairwise_binary.agree,
            "relevant_agree": rv.agree, "relevant_tie": rv.tie}


def agreement_baselines(reference: Qrels, candidate: Qrels, missing: str, clip: tuple[int, int] | None = None,
                        draws: int = DEFAULT_DRAWS, seed: int = 0) -> dict[str, dict[str, Spread]]:
    """judge → statistic → :class:`Spread`: the trivial judges of ``candidate`` measured against
    ``reference`` by :func:`recjudge.evaluation.agreement.agreement` under the rule for missing pairs
    the candidate was measured with (its pairs are theirs) and the same clip; no bootstrap."""
    from .agreement import agreement

    out: dict[str, dict[str, Spread]] = {}
    for judge, label_sets in trivial_judges(candidate, draws, seed).items():
        stats = [_agreement_stats(agreement(reference, q, missing, clip, bootstrap=0)) for q in label_sets]
        out[judge] = {k: spread([s[k] for s in stats]) for k in AGREEMENT_STATS}
    return out


def trivial_agreement_rows(candidate: str, baselines: Mapping[str, Mapping[str, Spread]]) -> list[dict[str, str]]:
    """The rows ``recjudge agreement`` prints under a candidate's: one per trivial judge, in its columns."""
    def cell(s: Spread, digits: int) -> str:
        return "–" if math.isnan(s.mean) else f"{s.mean:.{digits}f}"

    rows = []
    for judge, st in baselines.items():
        rows.append({
            "candidate": f"  {judge}" + (f" (mean of {len(st['cohen_kappa'].values)})" if judge == "random" else ""),
            "pairs": "", "missing": "", "cand-only": "",
            "kappa": cell(st["cohen_kappa"], 4), "kappa_lin": cell(st["cohen_kappa_linear"], 4),
            "alpha_ord": cell(st["krippendorff_alpha_ordinal"], 4),
            "alpha_int": cell(st["krippendorff_alpha_interval"], 4),
            "agree": cell(st["agree"], 3), "tie": cell(st["tie"], 3), "disagree": cell(st["disagree"], 3),
            "binary agree": cell(st["binary_agree"], 3),
            "rel>non agree/tie": f"{cell(st['relevant_agree'], 3)}/{cell(st['relevant_tie'], 3)}",
        })
    return rows
