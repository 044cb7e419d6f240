"""The reference semantics: ir-measures' own provider chain, without recjudge's provider, run by run.

What the numpy engine does not cover (``backend="auto"``), and every measure under
``backend="ir_measures"``, is computed here by ``ir_measures.DefaultPipeline``'s providers less
recjudge's own (:mod:`~recjudge.evaluation.measures.provider`), so the reference never checks the
engine against itself. ``nDCG(dcg='exp-log2')`` is given to pytrec_eval as trec_eval's nDCG with the
gains map ``{rel: 2^rel − 1}`` over the qrels' labels (the same value; ir-measures' other providers of
it, gdeval and ranx, are not always installed, and gdeval fails on this machine's perl).
"""

from __future__ import annotations

import functools

import numpy as np

from ...data.trec import Qrels, Run
from .parse import measure_key

PROVIDER_NAME = "recjudge"  # recjudge's provider in ir-measures' registry


@functools.cache
def reference_pipeline():
    """ir-measures' default chain of providers without recjudge's."""
    import ir_measures
    from ir_measures.providers import FallbackProvider

    return FallbackProvider([p for p in ir_measures.DefaultPipeline.providers if p.NAME != PROVIDER_NAME])


def _exp_log2(m) -> bool:
    return m.NAME == "nDCG" and m["dcg"] == "exp-log2" and "gains" not in m.params


def computes(measure) -> bool:
    """Whether the reference computes ``measure`` (else only recjudge's engine does, e.g. CompatHM)."""
    return _exp_log2(measure) or reference_pipeline().supports(measure)


def _as_reference(m, labels: set[int]):
    """``m`` as the reference computes it: ``nDCG(dcg='exp-log2')`` as a trec_eval gains map."""
    if not _exp_log2(m):
        return m
    params = {k: v for k, v in m.params.items() if k != "dcg"}
    return type(m)(**params, gains={rel: 2**rel - 1 for rel in sorted(labels) if rel > 0})


class Reference:
    """ir-measures' ``iter_calc`` (the reference semantics), one evaluator per measure, run by run.

    pytrec_eval hangs or crashes on a query whose labels are all negative (it sizes an array by
    the largest label + 1), so the measures it serves get the qrels without such queries; each
    of those measures is 0.0 there anyway (no relevant document), which ir-measures' default fills.
    Judged and Compat (Python providers) see every query.
    """

    def __init__(self, qrels: Qrels, measures, index: list[str]):
        self.wanted = set(index)
        self.row = {q: i for i, q in enumerate(index)}
        qf = qrels.frame
        keep = qf.qid.isin(self.wanted).to_numpy()
        qrels_dict: dict[str, dict[str, int]] = {}
        for q, d, lab in zip(qf.qid.to_numpy()[keep], qf.docid.to_numpy()[keep], qf.label.to_numpy()[keep]):
            qrels_dict.setdefault(q, {})[d] = int(lab)
        usable = {q: labels for q, labels in qrels_dict.items() if max(labels.values()) >= 0}
        present = {int(v) for v in np.unique(qf.label.to_numpy()[keep])}
        # One evaluator per measure: pytrec_eval takes one gain map and one judged_only switch per
        # evaluator, so nDCG@10 beside nDCG(gains=…)@10 in one evaluator gets one of the two settings
        # (which one depends on set order, i.e. on PYTHONHASHSEED).
        self.evaluators = []
        for m in measures:
            labels = qrels_dict if m.NAME in ("Judged", "Compat") else usable
            if labels:
                as_ref = _as_reference(m, present)
                self.evaluators.append((measure_key(m), reference_pipeline().evaluator([as_ref], labels)))

    def fill(self, run: Run, col: int, values: dict[str, np.ndarray]) -> None:
        run_dict = self._run_dict(run)
        for key, evaluator in self.evaluators:
            for metric in evaluator.iter_calc(run_dict):
                values[key][self.row[metric.query_id], col] = metric.value

    def _run_dict(self, run: Run) -> dict[str, dict[str, float]]:
        """The run as ir-measures' dict of dicts, evaluated queries only: one ``dict(zip(...))`` per
        query from the reader's codes (no frame, no Python step per row; a repeated docid keeps its last score)."""
        c = run.codes
        qids = c.qids.tolist()
        rows = np.flatnonzero(np.array([q in self.wanted for q in qids], dtype=bool)[c.qcode])
        rows = rows[np.argsort(c.qcode[rows], kind="stable")]  # query by query, file order inside
        qcode = c.qcode[rows]
        bounds = [*np.flatnonzero(np.r_[True, qcode[1:] != qcode[:-1]]).tolist(), len(rows)] if len(rows) else [0]
        docs, scores, first = c.docids[c.dcode[rows]].tolist(), run.scores[rows].tolist(), qcode.tolist()
        return {qids[first[lo]]: dict(zip(docs[lo:hi], scores[lo:hi])) for lo, hi in zip(bounds[:-1], bounds[1:])}
