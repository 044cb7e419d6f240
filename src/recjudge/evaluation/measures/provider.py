"""recjudge's numpy engine as an ir-measures provider, registered in ir-measures' default chain on import.

After ``import recjudge``, ``ir_measures.calc_aggregate([CompatHM(p=0.95), nDCG(dcg='exp-log2')@100],
qrels, run)`` is computed here. In ``ir_measures.DefaultPipeline`` the provider sits after the
providers that computed recjudge's other measures before (pytrec_eval, compat, judged, msmarco), so
an ir-measures user's numbers for those do not change provenance by importing recjudge; it serves
what they lack (CompatHM; ``nDCG(dcg='exp-log2')``, ahead of gdeval and ranx). Every measure of
:data:`~recjudge.evaluation.measures.fast.SUPPORTED_MEASURES` can be asked of it by name:
``ir_measures.providers.registry["recjudge"].calc_aggregate(measures, qrels, run)``.

Tied scores are ordered as trec_eval orders them (score compared as float32, then docid descending),
as pytrec_eval does; ir-measures' Python providers (judged, compat) order ties by docid ascending.
"""

from __future__ import annotations

import math

from ir_measures import Metric, providers
from ir_measures.util import QrelsConverter, RunConverter

from ...data.trec import Qrels, Run
from ..ties.policy import ensure_tie_free, is_tie_free
from .engine import Scorer
from .fast import SUPPORTED_MEASURES
from .parse import measure_key
from .reference import PROVIDER_NAME


class RecjudgeProvider(providers.Provider):
    """recjudge's numpy engine: trec_eval's common measures, Judged, Compat and CompatHM, vectorised."""

    NAME = PROVIDER_NAME
    SUPPORTED_MEASURES = SUPPORTED_MEASURES  # noqa: RUF012 - as ir-measures declares its providers

    def _evaluator(self, measures, qrels):
        frame = QrelsConverter(qrels).as_pd_dataframe()
        frame = frame.rename(columns={"query_id": "qid", "doc_id": "docid", "relevance": "label"})
        return RecjudgeEvaluator(list(measures), Qrels.from_frame(frame, "qrels"))


class RecjudgeEvaluator(providers.Evaluator):
    """One label set's judgments, built once; each run scored by the engine in one pass."""

    def __init__(self, measures, qrels: Qrels):
        super().__init__(measures, set(qrels.qids))
        self.scorer = Scorer(qrels, tuple(measures), None, "numpy", 1)

    def iter_calc(self, run):
        # every query of the qrels gets its value here (0 when the run lacks it, as ir-measures fills);
        # CompatHM has none for a user the run does not rank or without a relevant item (its script's mean)
        frame = RunConverter(run).as_pd_dataframe().rename(columns={"query_id": "qid", "doc_id": "docid"})
        scored = Run.from_frame(frame, "run")
        if not is_tie_free(scored):
            scored = ensure_tie_free(scored, "trec_eval", 0)
        sc = self.scorer
        sc.reset(1)
        sc.add(scored, 0)
        for m in self.measures:
            for qid, value in zip(sc.index, sc.values[measure_key(m)][:, 0].tolist()):
                if not math.isnan(value):
                    yield Metric(query_id=qid, measure=m, value=value)


PROVIDER = RecjudgeProvider()


def register() -> None:
    """Put :data:`PROVIDER` in ir-measures' registry and its default chain (before gdeval); once."""
    import ir_measures

    if PROVIDER_NAME not in providers.registry:
        providers.register(PROVIDER)
    chain = ir_measures.DefaultPipeline.providers
    if not any(p.NAME == PROVIDER_NAME for p in chain):
        names = [p.NAME for p in chain]
        chain.insert(names.index("gdeval") if "gdeval" in names else len(chain), PROVIDER)


register()
