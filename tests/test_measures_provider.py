"""recjudge's measures inside ir-measures: CompatHM a registered measure, the numpy engine a provider.

After ``import recjudge`` an ir-measures user's ``calc_aggregate`` knows CompatHM and computes
nDCG(dcg='exp-log2') with recjudge's engine, to 1e-12 of recjudge's own matrices; the providers that
computed ir-measures' other measures before still do.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import ir_measures
import numpy as np
import pytest
from ir_measures import nDCG

from recjudge.data.trec import Qrels, Run
from recjudge.evaluation.ties.policy import ensure_tie_free
from recjudge.evaluation.measures import CompatHM, SUPPORTED_MEASURES, fast_supported, parse_measures, per_query_matrix
from recjudge.evaluation.metaeval import system_means

QRELS = [("u1", "a", 3), ("u1", "b", 1), ("u1", "c", 0), ("u1", "d", -1), ("u2", "a", 2), ("u2", "e", 1),
         ("u3", "b", 0), ("u4", "f", 1)]  # u3: nothing relevant; u4: no run ranks it
RUN = [("u1", "b", 3.0), ("u1", "x", 2.5), ("u1", "a", 2.0), ("u1", "d", 1.5), ("u1", "c", 1.0),
       ("u2", "e", 0.5), ("u2", "y", 0.25), ("u3", "b", 1.0), ("u9", "a", 1.0)]  # u9: not judged

CALC = r"""
import json, recjudge, ir_measures
from ir_measures import nDCG
q = [ir_measures.Qrel(*r) for r in json.loads(input())]
run = [ir_measures.ScoredDoc(*r) for r in json.loads(input())]
got = ir_measures.calc_aggregate([ir_measures.parse_measure("CompatHM(p=0.95)"), nDCG(dcg='exp-log2')@100], q, run)
print(json.dumps({str(k): v for k, v in got.items()}))
"""


def _recjudge(measures):
    qrels = Qrels.from_frame(__import__("pandas").DataFrame(QRELS, columns=["qid", "docid", "label"]))
    run = Run.from_frame(__import__("pandas").DataFrame(RUN, columns=["qid", "docid", "score"]), "r")
    return per_query_matrix({"r": run}, qrels, measures, backend="numpy")


def test_calc_aggregate_after_import_recjudge_equals_the_engine():
    # a fresh interpreter: `import recjudge` alone registers CompatHM and the provider
    out = subprocess.run([sys.executable, "-c", CALC], input=json.dumps(QRELS) + "\n" + json.dumps(RUN) + "\n",
                         capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    mine = _recjudge(["CompatHM(p=0.95)", "nDCG(dcg='exp-log2')@100"])
    assert got.keys() == {"CompatHM", "nDCG(dcg='exp-log2')@100"}
    for key, value in got.items():
        assert value == pytest.approx(float(system_means(mine[key])["r"]), abs=1e-12), key
    # by hand: u1 ranks b (gain 1), x, a (gain 7); ideal a, b. u2 ranks e (1); ideal a (3), e (1). u3, u4: 0
    u1 = (1 + 7 / math.log2(4)) / (7 + 1 / math.log2(3))
    u2 = 1 / (3 + 1 / math.log2(3))
    assert got["nDCG(dcg='exp-log2')@100"] == pytest.approx((u1 + u2) / 4, abs=1e-12)


def test_compat_hm_is_an_ir_measures_measure():
    m = ir_measures.parse_measure("CompatHM(p=0.9)")
    assert m == CompatHM(p=0.9) and str(m) == "CompatHM(p=0.9)" and str(CompatHM) == "CompatHM"
    assert ir_measures.measures.registry["CompatHM"] is CompatHM
    assert set(CompatHM.SUPPORTED_PARAMS) == {"p"} and CompatHM["p"] == 0.95
    assert math.isnan(CompatHM.DEFAULT)  # a user the run does not rank has no value, as in the script
    assert ir_measures.DefaultPipeline.supports(m)


def test_the_provider_sits_after_the_providers_of_the_other_measures():
    names = [p.NAME for p in ir_measures.DefaultPipeline.providers]
    assert names.index("recjudge") < names.index("gdeval")
    assert all(names.index(p) < names.index("recjudge") for p in ("pytrec_eval", "compat", "judged", "msmarco"))
    assert ir_measures.providers.registry["recjudge"].supports(nDCG @ 10)  # asked by name, it computes it


def test_every_supported_measure_of_the_provider_equals_the_reference():
    # the provider through ir-measures' interface against recjudge's reference (ir-measures' providers less
    # recjudge's), per query; ties broken as trec_eval does on both sides
    measures = parse_measures("Judged@3,Compat(p=0.8),CompatHM(p=0.8),nDCG@3,nDCG(dcg='exp-log2')@3,"
                              "nDCG(gains={0:1,1:5,2:2,3:3})@4,Bpref,P@2,R@3,Success@2,RR,RR@2,AP,AP(rel=2)@3")
    assert {m.NAME for m in measures} == {m.NAME for m in SUPPORTED_MEASURES}
    assert all(fast_supported(m) for m in measures)
    provider = ir_measures.providers.registry["recjudge"]
    q = [ir_measures.Qrel(*r) for r in QRELS]
    rows = [ir_measures.ScoredDoc(*r) for r in RUN]
    got = {(str(x.measure), x.query_id): x.value for x in provider.iter_calc(measures, q, rows)}
    qrels = Qrels.from_frame(__import__("pandas").DataFrame(QRELS, columns=["qid", "docid", "label"]))
    run = ensure_tie_free(Run.from_frame(__import__("pandas").DataFrame(RUN, columns=["qid", "docid", "score"]),
                                         "r"), "trec_eval")
    ref = per_query_matrix({"r": run}, qrels, measures, backend="ir_measures")
    for key, frame in ref.items():
        for qid, value in frame["r"].items():
            if np.isnan(value):  # CompatHM: no value for the user, so the provider gives none
                assert (key, qid) not in got, (key, qid)
            else:
                assert got[key, qid] == pytest.approx(value, abs=1e-12), (key, qid)
