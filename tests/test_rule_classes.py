"""Rules an independent set of plausible bugs got past, pinned from hand arithmetic or a reference:
statistics over users one label set lacks, degenerate calibrations, agreement by label distance on
labels with gaps, a byte-order mark on file objects, and exponential gain at the top of the scale."""

from __future__ import annotations

import io
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from recjudge.data.trec import Qrels
from recjudge.evaluation.agreement import agreement, cohen_kappa, pairwise_agreement
from recjudge.evaluation.calibration import calibrate
from recjudge.evaluation.metaeval import BootstrapWeights, jackknife_kendall_tau, kendall_tau_replicates

# ------------------------------------------------------------------------------ users one label set lacks

# 5 users × 4 systems; the candidate lacks users 1 and 4 (NaN rows: not judged by it)
REF = np.array([[0.9, 0.5, 0.3, 0.1], [0.2, 0.8, 0.4, 0.6], [0.7, 0.6, 0.5, 0.2],
                [0.4, 0.3, 0.9, 0.8], [0.1, 0.7, 0.2, 0.5]])
CAND = np.array([[0.8, 0.6, 0.2, 0.3], [np.nan] * 4, [0.6, 0.7, 0.4, 0.1],
                 [0.5, 0.2, 0.8, 0.9], [np.nan] * 4])


def _tau(a, b) -> float:
    return float(stats.kendalltau(a, b, variant="b").statistic)


def test_jackknife_leaves_out_a_user_only_where_that_label_set_has_them():
    got = jackknife_kendall_tau(REF, CAND)
    for u in range(5):
        keep = [i for i in range(5) if i != u]
        # the mean of each system over the users left, each label set over its own users (rounded to
        # 12 decimals as recjudge's means are, so that equal means stay equal)
        ref_means = np.round(np.nanmean(REF[keep], axis=0), 12)
        cand_means = np.round(np.nanmean(CAND[keep], axis=0), 12)
        assert got[u] == pytest.approx(_tau(ref_means, cand_means), abs=1e-12), u


def test_bootstrap_replicates_weigh_only_the_users_a_label_set_has():
    weights = BootstrapWeights(3, 5, 400, chunk=64)
    reps = kendall_tau_replicates(REF, CAND, weights, jackknife=False)
    want = []
    for w in itertools.chain.from_iterable(weights.chunks()):
        w = np.asarray(w, float)
        ref_means = (w @ REF) / w.sum()
        present = ~np.isnan(CAND[:, 0])
        if w[present].sum() == 0:  # a resample without any of the candidate's users: no τ
            continue
        cand_means = (w[present] @ CAND[present]) / w[present].sum()
        t = _tau(np.round(ref_means, 12), np.round(cand_means, 12))
        if not math.isnan(t):
            want.append(t)
    assert len(reps.bootstrap) == len(want) and np.allclose(np.sort(reps.bootstrap), np.sort(want), atol=1e-9)
    # the estimate: every user once, each label set over its own
    assert reps.estimate == pytest.approx(_tau(np.round(REF.mean(0), 12), np.round(np.nanmean(CAND, 0), 12)),
                                          abs=1e-12)


# ------------------------------------------------------------------------------ degenerate calibrations

def _qrels(rows, name):
    return Qrels.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "label"]), name)


def test_a_binary_reference_is_not_flat_when_its_two_levels_are_used():
    # 40 pairs per LLM grade 0..3; human 1 on a share 0.1, 0.3, 0.7, 0.9 of them: means round to 0, 0, 1, 1
    human, llm = [], []
    for g, share in enumerate((0.1, 0.3, 0.7, 0.9)):
        for i in range(40):
            human.append(("u", f"{g}-{i}", int(i < share * 40)))
            llm.append(("u", f"{g}-{i}", g))
    cal = calibrate(_qrels(human, "h"), _qrels(llm, "l"), min_overlap=30)
    assert cal.mapping == {0: 0, 1: 0, 2: 1, 3: 1} and cal.reference_levels == 2
    assert cal.problems() == ()  # two labels are all a binary reference can give


@pytest.mark.parametrize("side", ["llm", "human"])
def test_constant_grades_have_no_association_and_are_refused(side):
    rows_h = [("u", f"d{i}", i % 3) for i in range(90)]
    rows_l = [("u", f"d{i}", 3) for i in range(90)]
    if side == "human":
        rows_h, rows_l = [("u", f"d{i}", 2) for i in range(90)], [("u", f"d{i}", i % 4) for i in range(90)]
    cal = calibrate(_qrels(rows_h, "h"), _qrels(rows_l, "l"), min_overlap=30)
    assert math.isnan(cal.association)
    assert any(p.startswith("no signal") for p in cal.problems())


# ------------------------------------------------------------------------------ labels with gaps

def test_pairwise_agreement_by_distance_uses_label_values_not_their_ranks():
    # one user; reference labels 0, 2, 5 (gaps), candidate 1, 1, 7
    overall, _, by_distance, _ = pairwise_agreement(["u"] * 3, np.array([0, 2, 5]), np.array([1, 1, 7]), n_boot=0)
    # pairs: (0,2) distance 2, candidate 1 = 1 → tie; (0,5) distance 5, 7 > 1 → agree; (2,5) distance 3 → agree
    assert sorted(by_distance) == [2, 3, 5]
    assert (by_distance[2].tie, by_distance[3].agree, by_distance[5].agree) == (1.0, 1.0, 1.0)
    assert (overall.agree, overall.tie, overall.disagree) == pytest.approx((2 / 3, 1 / 3, 0.0))


def test_kappa_on_labels_with_gaps_matches_scikit_learn():
    sklearn = pytest.importorskip("sklearn.metrics")
    a = np.array([0, 2, 5, 5, 2, 0, 7, 7, 2, 5])
    b = np.array([0, 5, 5, 2, 2, 0, 7, 5, 0, 5])
    for weights in (None, "linear"):
        assert cohen_kappa(a, b, weights) == pytest.approx(sklearn.cohen_kappa_score(a, b, weights=weights),
                                                           abs=1e-12)


def test_agreement_on_labels_with_gaps_end_to_end():
    ref = _qrels([("u", "a", 0), ("u", "b", 2), ("u", "c", 5)], "h")
    cand = _qrels([("u", "a", 1), ("u", "b", 1), ("u", "c", 7)], "l")
    res = agreement(ref, cand, bootstrap=0)
    assert {d: (p.agree, p.tie, p.disagree) for d, p in res.pairwise_by_distance.items()} == {
        2: (0.0, 1.0, 0.0), 3: (1.0, 0.0, 0.0), 5: (1.0, 0.0, 0.0)}


# ------------------------------------------------------------------------------ a byte-order mark

@pytest.mark.parametrize("make", [
    lambda t: io.BytesIO(b"\xef\xbb\xbf" + t.encode()),
    lambda t: io.StringIO("\ufeff" + t),
    lambda t: "\ufeff" + t,
])
def test_a_byte_order_mark_on_any_form_is_not_part_of_the_first_id(make):
    from recjudge._io import read_text
    from recjudge.data.trec import read_qrels, read_run

    text = "u1 0 d1 3\nu2 0 d2 1\n"
    assert read_qrels(make(text)).frame.qid.tolist() == ["u1", "u2"]
    assert read_run(make("u1 Q0 d1 1 2.0 t\nu2 Q0 d1 1 2.0 t\n")).frame.qid.tolist() == ["u1", "u2"]
    assert read_text(make("q1\tdark drama\n"))[1].startswith("q1\t")


def test_a_gzip_stream_with_a_byte_order_mark():
    import gzip

    from recjudge._io import read_text
    from recjudge.data.trec import read_qrels

    data = gzip.compress(b"\xef\xbb\xbfu1 0 d1 3\n")
    assert read_qrels(io.BytesIO(data)).frame.qid.tolist() == ["u1"]
    assert read_text(io.BytesIO(data))[1] == "u1 0 d1 3\n"


# ------------------------------------------------------------------------------ gain at the top of the scale

def test_every_label_of_the_scale_gets_its_exponential_gain():
    import ir_measures

    from recjudge.data.trec import read_qrels, read_run
    from recjudge.evaluation.metaeval import evaluate

    # one user, items labelled 0..7 ranked in the reverse of their labels
    qrels = read_qrels("".join(f"u 0 d{g} {g}\n" for g in range(8)))
    run = read_run("".join(f"u Q0 d{g} {i + 1} {10 - i} s\n" for i, g in enumerate(range(8))))
    table = evaluate({"s": run}, qrels, ["nDCGexp@10"]).table
    got = float(table.means(table.measures[0])["s"])
    gain = [2 ** g - 1 for g in range(8)]
    dcg = sum(gain[g] / math.log2(i + 2) for i, g in enumerate(range(8)))
    ideal = sum(gain[g] / math.log2(i + 2) for i, g in enumerate(reversed(range(8))))
    assert got == pytest.approx(dcg / ideal, abs=1e-12)
    ref = ir_measures.calc_aggregate([ir_measures.parse_measure(
        "nDCG(gains={" + ",".join(f"{g}:{2 ** g - 1}" for g in range(8)) + "})@10")],
                                     [ir_measures.Qrel("u", f"d{g}", g) for g in range(8)],
                                     [ir_measures.ScoredDoc("u", f"d{g}", 10 - i) for i, g in enumerate(range(8))])
    assert got == pytest.approx(next(iter(ref.values())), abs=1e-12)


def test_the_means_behind_jackknife_and_bootstrap_are_over_each_label_sets_own_users():
    """τ does not change when every system's mean is scaled alike, so the means are checked themselves."""
    from recjudge.evaluation.metaeval import kendall

    jk = kendall._jackknife_means(CAND)
    for u in range(5):
        keep = [i for i in range(5) if i != u]
        assert np.allclose(jk[u], np.nanmean(CAND[keep], axis=0), atol=1e-12), u
    w = np.array([[2, 0, 1, 1, 1], [0, 3, 0, 0, 2], [1, 1, 1, 1, 1]], dtype=np.float64)
    got = kendall._weighted_means(w, CAND)
    present = ~np.isnan(CAND[:, 0])
    want = (w[:, present] @ CAND[present]) / w[:, present].sum(1, keepdims=True)
    # the second resample holds none of the candidate's users: no mean (NaN), not 0
    assert np.allclose(got[[0, 2]], want[[0, 2]], atol=1e-12) and np.isnan(got[1]).all()
