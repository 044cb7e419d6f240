"""Every fast measure equals ir-measures (the reference: its providers less recjudge's) to 1e-9 on generated edge cases.

Hypothesis draws small cases: tied scores, zero and negative scores, short and empty rankings,
users without relevant items or with only negative labels, users missing from a run or from the
qrels, graded labels. The same runs go to both backends, so both see one tie resolution.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from recjudge.data.trec import Qrels, Run
from recjudge.evaluation.ties.policy import ensure_tie_free
from recjudge.evaluation.measures import (
    fast_supported,
    parse_measures,
    per_query_matrix,
)

MEASURES = ["Judged@3", "Judged@10", "nDCG", "nDCG@3", "Bpref", "Bpref(rel=2)", "P@3", "P(rel=2)@2", "R@3",
            "Success@2", "RR", "RR(rel=2)", "AP", "AP(rel=2)", "Compat(p=0.8)", "Compat(p=0.95)",
            "Compat(p=0.9,normalize=False)", "nDCGexp@3", "nDCGexp", "nDCG(gains={0:1,1:5,2:2})@5",
            "nDCG(dcg='exp-log2')@2", "RR@3", "RR(rel=2)@2", "AP@3", "AP(rel=2)@2", "R(rel=2)@2", "Success(rel=2)@3",
            "P@10"]
ITEMS = [f"i{n}" for n in range(8)] + ["i10"]  # 'i10' sorts between 'i1' and 'i2' as a string
USERS = ["u1", "u2", "u3", "u10"]
LABELS = [-1, 0, 0, 1, 2, 3]
DISTINCT = [-2.0, -1.0, -0.5, 0.0, 0.25, 1.0, 2.0, 3.5, 7.0]  # zero and negative, no ties
TIED = [-1.0, 0.0, 1.0]  # few values: ties everywhere


@st.composite
def cases(draw):
    qrows = []
    for u in draw(st.lists(st.sampled_from(USERS), min_size=1, max_size=4, unique=True)):
        for d in draw(st.lists(st.sampled_from(ITEMS), min_size=1, max_size=6, unique=True)):
            qrows.append((u, d, draw(st.sampled_from(LABELS))))
    runs = {}
    for name, values in (("distinct", DISTINCT), ("tied", TIED)):
        rows = []
        for u in draw(st.lists(st.sampled_from(USERS), max_size=4, unique=True)):  # may miss qrels users
            docs = draw(st.lists(st.sampled_from(ITEMS), min_size=1, max_size=len(ITEMS), unique=True))
            if values is DISTINCT:
                scores = draw(st.lists(st.sampled_from(values), min_size=len(docs), max_size=len(docs), unique=True))
            else:
                scores = draw(st.lists(st.sampled_from(values), min_size=len(docs), max_size=len(docs)))
            rows += [(u, d, s) for d, s in zip(docs, scores)]
        if rows:
            runs[name] = Run.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "score"]), name)
    qrels = Qrels.from_frame(pd.DataFrame(qrows, columns=["qid", "docid", "label"]))
    return qrels, runs


def test_every_listed_measure_takes_the_fast_path():
    assert all(fast_supported(m) for m in parse_measures(MEASURES))


def _case(qrows, rows):
    return (Qrels.from_frame(pd.DataFrame(qrows, columns=["qid", "docid", "label"])),
            {"r": Run.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "score"]), "r")})


# Compat's ideal list puts unretrieved items at score 0.0: a retrieved relevant item scoring exactly
# 0 then ties with them and qrels order decides (b is listed before the unretrieved a)
ZERO_SCORE_TIE = _case([("u", "b", 1), ("u", "a", 1)], [("u", "b", 0.0), ("u", "c", -1.0)])


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
@example(ZERO_SCORE_TIE)
def test_fast_measures_equal_ir_measures(case):
    qrels, runs = case
    if not runs:
        runs = {"empty-user": Run.from_frame(pd.DataFrame({"qid": ["zz"], "docid": ["i1"], "score": [1.0]}), "e")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tied run is resolved (hash, seed 0) by both backends alike
        fast = per_query_matrix(runs, qrels, MEASURES, backend="numpy")
        ref = per_query_matrix(runs, qrels, MEASURES, backend="ir_measures")
    assert fast.keys() == ref.keys()
    for key in fast:
        np.testing.assert_allclose(fast[key].to_numpy(), ref[key].to_numpy(), rtol=0, atol=1e-9, err_msg=key)


@pytest.mark.parametrize("label", [-1, 0])
def test_a_user_without_relevant_items_scores_zero_everywhere_but_judged(label):
    """The property above, pinned on the case it is most likely to miss: no label >= 1."""
    qrels = Qrels.from_frame(pd.DataFrame({"qid": ["u"], "docid": ["a"], "label": [label]}))
    run = Run.from_frame(pd.DataFrame({"qid": ["u", "u"], "docid": ["a", "b"], "score": [0.0, -1.0]}), "r")
    fast = per_query_matrix({"r": run}, qrels, MEASURES, backend="numpy")
    for key, frame in fast.items():
        want = 0.5 if key.startswith("Judged") else 0.0  # 1 judged of 2 ranked
        if key.startswith("nDCG(gains={0:1") and label == 0:
            want = 1.0  # this map gives label 0 a gain: a, ranked first, is then the whole ideal list
        assert frame.loc["u", "r"] == want, key


def _script_compat(qrels: Qrels, run: Run, p: float) -> dict[str, float]:
    """Compatibility the way the trec-health-misinfo/Compatibility script defines it, set by set.

    Ideal list: items with label > 0 by label descending, equal labels by run rank (unretrieved last,
    in qrels order); RBO to depth 1000 by set intersection; the run's RBO over the ideal's; only
    users the run ranks and that have a label > 0 get a value.
    """
    out = {}
    ranked = run.frame.sort_values(["qid", "score"], ascending=[True, False], kind="stable")
    for user, items in ranked.groupby("qid", sort=False):
        ranking = list(items.docid)
        judged = qrels.frame[(qrels.frame.qid == user) & (qrels.frame.label > 0)]
        if judged.empty:
            continue
        rank = {d: i for i, d in enumerate(ranking)}
        ideal = sorted(judged.itertuples(), key=lambda r: (-r.label, rank.get(r.docid, len(ranking))))
        ideal = [r.docid for r in ideal]

        def rbo(a, b):
            total, seen_a, seen_b = 0.0, set(), set()
            for i in range(1000):
                if i < len(a):
                    seen_a.add(a[i])
                if i < len(b):
                    seen_b.add(b[i])
                total += p**i * len(seen_a & seen_b) / (i + 1)
            return total
        out[user] = rbo(ranking, ideal) / rbo(ideal, ideal)
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
@example(ZERO_SCORE_TIE)
def test_compat_hm_equals_the_script_definition(case):
    qrels, runs = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, run in runs.items():
            run = ensure_tie_free(run, "hash", 0)  # the order both sides see
            got = per_query_matrix({name: run}, qrels, ["CompatHM(p=0.8)"], backend="numpy")["CompatHM(p=0.8)"][name]
            want = _script_compat(qrels, run, 0.8)
            assert sorted(got.dropna().index) == sorted(u for u in want if u in got.index)
            for user, value in want.items():
                if user in got.index:
                    assert abs(got[user] - value) <= 1e-9, (user, got[user], value)
