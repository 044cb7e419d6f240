"""nDCGexp at the top of its scale: a label of exactly 7 has gain 2^7 − 1 = 127 and is accepted; 8 is
refused (the boundary a `>=` for `>` would move). Values by hand and from ir-measures."""

from __future__ import annotations

import math

import ir_measures
import pytest

from recjudge.data.trec import read_qrels, read_run
from recjudge.errors import ConfigError
from recjudge.evaluation.metaeval import evaluate

RUN = "u Q0 low 1 2 sys\nu Q0 top 2 1 sys\n"  # the label-1 item ranked above the label-7 one


def test_a_label_of_seven_has_gain_127():
    qrels = read_qrels("u 0 top 7\nu 0 low 1\n")
    table = evaluate({"sys": read_run(RUN)}, qrels, ["nDCGexp@10"]).table
    # DCG = 1/log2(2) + 127/log2(3); ideal = 127/log2(2) + 1/log2(3)
    want = (1 + 127 / math.log2(3)) / (127 + 1 / math.log2(3))
    got = float(table.means(table.measures[0])["sys"])
    assert got == pytest.approx(want, abs=1e-12)
    ref = ir_measures.calc_aggregate([ir_measures.parse_measure("nDCG(gains={0:0,1:1,7:127})@10")],
                                     [ir_measures.Qrel("u", "top", 7), ir_measures.Qrel("u", "low", 1)],
                                     [ir_measures.ScoredDoc("u", "low", 2), ir_measures.ScoredDoc("u", "top", 1)])
    assert got == pytest.approx(list(ref.values())[0], abs=1e-12)


def test_a_label_of_eight_is_refused_under_exponential_gains():
    with pytest.raises(ConfigError, match="label 8 .* outside the 0-7 scale of nDCGexp"):
        evaluate({"sys": read_run(RUN)}, read_qrels("u 0 top 8\nu 0 low 1\n"), ["nDCGexp@10"])
