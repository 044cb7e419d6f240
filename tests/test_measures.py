"""Per-query measure matrices: hand arithmetic and equality with ir-measures."""

from __future__ import annotations

import math

import pytest

from recjudge.errors import ConfigError
from recjudge.measures import parse_measures, per_query_matrix
from recjudge.trec import read_qrels, read_run, resolve_ties

QRELS = read_qrels(
    "q1 0 a 2\n"   # relevant, gain 2
    "q1 0 b 0\n"   # judged non-relevant
    "q1 0 c -1\n"  # negative: judged for Judged, ignored by trec_eval
    "q1 0 d 1\n"   # relevant, gain 1
    "q1 0 f 0\n"   # judged non-relevant, not retrieved
    "q2 0 a 0\n"   # q2 has no relevant document
)
RUN = resolve_ties(read_run(
    "q1 Q0 c 1 6 t\n"
    "q1 Q0 b 2 4 t\n"
    "q1 Q0 a 3 3 t\n"
    "q1 Q0 z 4 2 t\n"  # z is not judged
    "q1 Q0 d 5 1 t\n"
    "q2 Q0 a 1 1 t\n"
    "q9 Q0 a 1 1 t\n"  # q9 is not in the qrels: ignored
))


@pytest.mark.parametrize("backend", ["ir_measures"])
def test_hand_arithmetic(backend):
    m = per_query_matrix({"r": RUN}, QRELS, ["nDCG@100", "Bpref", "Judged@100"], backend=backend)
    # ranking c b a z d; gains 0 0 2 0 1 at ranks 1..5
    dcg = 2 / math.log2(3 + 1) + 1 / math.log2(5 + 1)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert m["nDCG@100"].loc["q1", "r"] == pytest.approx(dcg / idcg, abs=1e-12)
    # R = 2 (a, d), N = 2 (b, f); a after 1 nonrel: 1 - 1/2; d after 1 nonrel: 1 - 1/2
    assert m["Bpref"].loc["q1", "r"] == pytest.approx(((1 - 1 / 2) + (1 - 1 / 2)) / 2, abs=1e-12)
    # c, b, a, d judged of 5 retrieved
    assert m["Judged@100"].loc["q1", "r"] == pytest.approx(4 / 5, abs=1e-12)
    assert list(m["Bpref"].index) == ["q1", "q2"]
    assert m["nDCG@100"].loc["q2", "r"] == 0.0


def test_parse_measures_rejects_unknown():
    with pytest.raises(ConfigError, match="Foo"):
        parse_measures("nDCG@10,Foo")
