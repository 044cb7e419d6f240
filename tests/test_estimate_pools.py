"""Partly judged pools: Horvitz-Thompson per-user values of P@k, their two-stage variance (by hand
arithmetic), and the refusal of the measures that are not sums of per-pair gains."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from recjudge.data.trec import Qrels, Run
from recjudge.errors import ConfigError
from recjudge.estimation.engine import estimate_sample
from recjudge.estimation.pools import read_pools
from recjudge.estimation.sample import user_matrices

DOCS = ["d1", "d2", "d3", "d4"]
# P@2; system A ranks d1 d2 d3 d4 for every user, B the reverse
LLM = {"u1": [1, 1, 0, 1], "u2": [1, 0, 1, 1], "u3": [1, 1, 1, 0], "u4": [0, 0, 1, 1]}
HUMAN = {"u1": {"d1": 0, "d3": 0}, "u2": {"d2": 1, "d4": 0}}  # K = 2 of m = 4, two of N = 4 users


def _qrels(name, labels):
    rows = [(u, "0", d, lab) for u, per in labels.items() for d, lab in per.items()]
    return Qrels(name, pd.DataFrame(rows, columns=["qid", "iteration", "docid", "label"]))


def _run(name, order):
    rows = [(u, d, r + 1, float(len(order) - r), name) for u in LLM for r, d in enumerate(order)]
    return Run(name, pd.DataFrame(rows, columns=["qid", "docid", "rank", "score", "tag"]))


def _sample(measure="P@2"):
    llm = _qrels("llm", {u: dict(zip(DOCS, labs)) for u, labs in LLM.items()})
    human = _qrels("human", HUMAN)
    runs = {"A": _run("A", DOCS), "B": _run("B", DOCS[::-1])}
    pools = read_pools(human, llm, ["u1", "u2"])
    return user_matrices(runs, human, llm, {measure: measure}, "trec_eval", 0, None, pools), pools


def test_ht_values_and_within_user_variances_by_hand():
    sample, pools = _sample()
    assert pools.judged.tolist() == [2, 2] and pools.size.tolist() == [4, 4]
    t = sample.terms("P@2")
    # f (LLM, P@2): u1 A = 1, B = 0.5; u2 A = 0.5, B = 1. Residuals e = t (h(H) - h(L)), t = [rank <= 2]/2:
    # u1 A: d1 -0.5, d3 0; u1 B: 0, 0; u2 A: d2 +0.5, d4 0; u2 B: d2 0, d4 -0.5. Ŷ = f + (4/2) Σ e
    assert sample.f_human["P@2"].tolist() == [[1.0, 0.5], [0.5, 1.0]]
    assert t.y.tolist() == [[0.0, 0.5], [1.5, 0.0]]
    # human only: (4/2) Σ t h(H): u2 A has d2 relevant at rank 2
    assert t.human_y.tolist() == [[0.0, 0.0], [1.0, 0.0]]
    # v̂ = m² (1 - K/m) s² / K, s² of {-0.5, 0} = 0.125: 16 * 0.5 * 0.125 / 2 = 0.5
    assert t.within(np.eye(2)).tolist() == [[0.5, 0.0], [0.5, 0.5]]
    # A - B per pair: u1 {-0.5, 0} -> 0.5; u2 {0.5, 0.5} -> 0 (the systems' terms covary)
    assert t.within(np.array([[1.0], [-1.0]])).ravel().tolist() == [0.5, 0.0]


def test_two_stage_interval_by_hand():
    sample, _ = _sample()
    r = estimate_sample(sample, alpha=0.05, population="judged")["P@2"]
    # λ: the slope of Ŷ on f is negative for A, B and A - B: clipped to 0, so the estimate is mean Ŷ
    assert r.ppi.lam.tolist() == [0.0, 0.0]
    assert r.ppi.estimate.tolist() == pytest.approx([0.75, 0.25])
    # users: (1 - n/N) s²/n with s² of Ŷ (A: 1.125, B: 0.125); pairs: Σ w v̂ / (Σ w)², w = 2, Σ w = 4
    assert r.ppi.se[0] == pytest.approx(math.sqrt(0.5 * 1.125 / 2 + 2 * 1.0 / 16), abs=1e-12)
    assert r.ppi.se[1] == pytest.approx(math.sqrt(0.5 * 0.125 / 2 + 2 * 0.5 / 16), abs=1e-12)
    # human only, A: Ŷᴴ = (0, 1), s² = 0.5; v̂ᴴ = (0, 0.5)
    assert r.human.estimate[0] == pytest.approx(0.5)
    assert r.human.se[0] == pytest.approx(math.sqrt(0.5 * 0.5 / 2 + 2 * 0.5 / 16), abs=1e-12)
    # A - B: Ŷ differences (-0.5, 1.5), s² = 2; v̂ = (0.5, 0)
    assert r.pair_means.estimate[0] == pytest.approx(0.5)
    assert r.pair_means.se[0] == pytest.approx(math.sqrt(0.5 * 2 / 2 + 2 * 0.5 / 16), abs=1e-12)


def test_whole_pools_give_the_plain_values():
    full = {u: dict(zip(DOCS, [lab if lab is not None else 0 for lab in labs])) for u, labs in
            {"u1": [0, 1, 0, 1], "u2": [1, 1, 1, 0]}.items()}
    llm = _qrels("llm", {u: dict(zip(DOCS, labs)) for u, labs in LLM.items()})
    human = _qrels("human", full)
    pools = read_pools(human, llm, ["u1", "u2"])
    assert pools.partial == 0


def test_a_user_with_one_judged_pair_is_refused():
    llm = _qrels("llm", {u: dict(zip(DOCS, labs)) for u, labs in LLM.items()})
    with pytest.raises(ConfigError, match=r"fewer than 2 .*user u1: 1 of 4"):
        read_pools(_qrels("human", {"u1": {"d1": 0}, "u2": HUMAN["u2"]}), llm, ["u1", "u2"])
