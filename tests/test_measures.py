"""Per-query measure matrices: hand arithmetic and equality with ir-measures."""

from __future__ import annotations

import math
import os
import warnings

import ir_measures
import numpy as np
import pandas as pd
import pytest

from recjudge.data.trec import Qrels, Run, read_qrels, read_run
from recjudge.evaluation.ties.policy import resolve_ties
from recjudge.errors import ConfigError
from recjudge.evaluation.measures import (
    DEFAULT_MEASURES,
    EXP_GAINS,
    describe_measure,
    measure_key,
    parse_measures,
    per_query_matrix,
)
from recjudge.evaluation.metaeval import system_means

QRELS = read_qrels(
    "q1 0 a 2\n"   # relevant, gain 2
    "q1 0 b 0\n"   # judged non-relevant
    "q1 0 c -1\n"  # negative: judged for Judged, "unjudged" for trec_eval
    "q1 0 d 1\n"   # relevant, gain 1
    "q1 0 f 0\n"   # judged non-relevant, not retrieved
    "q2 0 a 0\n"   # q2 has no relevant document
    "q3 0 a 1\n"   # q3 is not ranked by the run
)
RUN = resolve_ties(read_run(
    "q1 Q0 c 1 6 t\n"
    "q1 Q0 b 2 4 t\n"
    "q1 Q0 a 3 3 t\n"
    "q1 Q0 z 4 2 t\n"  # z is not judged
    "q1 Q0 d 5 1 t\n"
    "q2 Q0 a 1 2 t\n"
    "q2 Q0 y 2 1 t\n"
    "q9 Q0 a 1 1 t\n"  # q9 is not in the qrels: ignored
))

FAST = ("Judged@100", "Judged@3", "Judged", "Compat(p=0.95)", "Compat(p=0.5)", "Compat(p=0.8,normalize=False)",
        "nDCG@100", "nDCG@3", "nDCG", "Bpref", "Bpref(rel=2)", "P@5", "P(rel=2)@3", "R@5", "Success@1",
        "Success@50", "RR", "RR(rel=2)", "AP", "AP@3")


@pytest.mark.parametrize("backend", ["ir_measures", "numpy", "auto"])
def test_hand_arithmetic(backend):
    m = per_query_matrix({"r": RUN}, QRELS, [*DEFAULT_MEASURES, "P@2", "RR", "AP"], backend=backend)
    q1 = {k: v.loc["q1", "r"] for k, v in m.items()}
    # ranking c b a z d; gains (negative -> 0) 0 0 2 0 1 at ranks 1..5; ideal gains 2, 1
    dcg = 2 / math.log2(3 + 1) + 1 / math.log2(5 + 1)
    idcg = 2 / math.log2(1 + 1) + 1 / math.log2(2 + 1)
    assert q1["nDCG@100"] == pytest.approx(dcg / idcg, abs=1e-12)
    # R = 2 (a, d), N = 2 (b, f); c (-1) is skipped; a and d each follow 1 non-relevant
    assert q1["Bpref"] == pytest.approx(((1 - 1 / 2) + (1 - 1 / 2)) / 2, abs=1e-12)
    # c, b, a, d judged among 5 retrieved
    assert q1["Judged@100"] == pytest.approx(4 / 5, abs=1e-12)
    assert q1["P@2"] == 0.0
    assert q1["RR"] == pytest.approx(1 / 3, abs=1e-12)
    assert q1["AP"] == pytest.approx((1 / 3 + 2 / 5) / 2, abs=1e-12)
    # Compat p=0.95: ideal [a, d]; ranking [c, b, a, z, d]; depth 5; overlap at depth 1..5: 0 0 1 1 2
    w = [0.95 ** i for i in range(5)]
    rbo = (w[2] * 1 / 3 + w[3] * 1 / 4 + w[4] * 2 / 5) / sum(w)
    best = (w[0] * 1 / 1 + w[1] * 2 / 2 + w[2] * 2 / 3 + w[3] * 2 / 4 + w[4] * 2 / 5) / sum(w)
    assert q1["Compat"] == pytest.approx(rbo / best, abs=1e-12)
    # q2: no relevant document; y unjudged, a judged: Judged = 1/2, the rest 0
    assert m["Judged@100"].loc["q2", "r"] == pytest.approx(1 / 2, abs=1e-12)
    assert [m[k].loc["q2", "r"] for k in ("nDCG@100", "Bpref", "Compat")] == [0.0, 0.0, 0.0]
    # q3 is not ranked by the run: 0 everywhere; q9 is not judged: not in the index
    assert list(m["Bpref"].index) == ["q1", "q2", "q3"]
    assert all(m[k].loc["q3", "r"] == 0.0 for k in m)


@pytest.mark.parametrize("backend", ["ir_measures", "numpy"])
def test_compat_and_judged_by_hand(backend):
    qrels = read_qrels("u 0 a 1\nu 0 b 1\nu 0 x 0\n")
    run = resolve_ties(read_run("u Q0 x 1 2 t\nu Q0 a 2 1 t\n"))
    m = per_query_matrix({"r": run}, qrels, ["Compat(p=0.5)", "Judged@10"], backend=backend)
    # ranking [x, a], ideal [a, b] (b unretrieved), depth 2, p = 0.5, weights 1, 0.5:
    # rbo = (1 * 0/1 + 0.5 * 1/2) / 1.5; best = (1 * 1/1 + 0.5 * 2/2) / 1.5
    assert m["Compat(p=0.5)"].loc["u", "r"] == pytest.approx((0.5 * 1 / 2) / (1 + 0.5 * 2 / 2), abs=1e-12)
    # two judged of a two-document run: the cutoff 10 beyond the run length divides by 2
    assert m["Judged@10"].loc["u", "r"] == 1.0


# ------------------------------------------------------------------------ randomised equality

def _random_case(seed: int, n_queries: int = 40, n_runs: int = 4):
    rng = np.random.default_rng(seed)
    docs = np.array([f"d{i}" for i in range(60)])
    rows = []
    for qi in range(n_queries):
        n_judged = int(rng.integers(1, 30))
        judged = rng.choice(docs, n_judged, replace=False)
        kind = qi % 5
        if kind == 0:  # no relevant document
            labels = rng.choice([0, -1, 0], n_judged)
        elif kind == 1:  # only negative labels
            labels = rng.choice([-1, -2], n_judged)
        else:  # graded, with 0 and negatives
            labels = rng.choice([-1, 0, 0, 1, 1, 2, 3, 4], n_judged)
        rows += [(f"q{qi}", d, int(lab)) for d, lab in zip(judged, labels)]
    rng.shuffle(rows)  # qrels row order matters to Compat's ideal list; keep it arbitrary
    qrels = Qrels.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "label"]))
    runs = {}
    for r in range(n_runs):
        rrows = []
        for qi in range(n_queries + 3):  # three queries the qrels lack
            if rng.random() < 0.15:
                continue  # the run misses this query
            n = int(rng.integers(1, 45))
            ranked = rng.choice(docs, n, replace=False)
            scores = rng.choice(np.arange(-3, 8, 0.5), n)  # many exact ties, negative and zero scores
            rrows += [(f"q{qi}", d, float(s)) for d, s in zip(ranked, scores)]
        frame = pd.DataFrame(rrows, columns=["qid", "docid", "score"])
        runs[f"run{r}"] = resolve_ties(Run.from_frame(frame, f"run{r}"), "hash", seed + r)
    return qrels, runs


def _signed_scores(run: Run, rng) -> Run:
    """Keep the order, rewrite scores to distinct values spanning negative, 0.0 and positive."""
    f = run.frame.copy()
    pos = f.groupby("qid", sort=False).cumcount().to_numpy()
    zero_at = {q: int(rng.integers(0, n)) for q, n in f.groupby("qid", sort=False).size().items()}
    f["score"] = (zero_at_f := np.array([zero_at[q] for q in f.qid])) - pos.astype(float)
    assert (f.score[pos == zero_at_f] == 0).all()
    f = f.sample(frac=1.0, random_state=int(rng.integers(1 << 31))).reset_index(drop=True)  # rows shuffled
    return Run(run.name, f, tie_policy=run.tie_policy, seed=run.seed)


def _assert_equal(a: dict, b: dict, tol: float = 1e-9):
    assert a.keys() == b.keys()
    for k in a:
        pd.testing.assert_index_equal(a[k].index, b[k].index)
        pd.testing.assert_index_equal(a[k].columns, b[k].columns)
        diff = float(np.abs(a[k].to_numpy() - b[k].to_numpy()).max())
        assert diff <= tol, f"{k}: max abs diff {diff}"


@pytest.mark.parametrize("seed", range(6))
def test_numpy_equals_ir_measures(seed):
    qrels, runs = _random_case(seed)
    fast = per_query_matrix(runs, qrels, FAST, backend="numpy")
    ref = per_query_matrix(runs, qrels, FAST, backend="ir_measures")
    _assert_equal(fast, ref)
    # the fixture exercises what it claims to
    assert (ref["nDCG@100"] == 0).all(axis=1).any() and (ref["Judged@100"] > 0).any().any()
    assert (ref["Compat"] > 0).any().any() and (ref["Bpref"].to_numpy() % 1 != 0).any()


@pytest.mark.parametrize("seed", range(3))
def test_negative_and_zero_scores_and_unsorted_rows(seed):
    rng = np.random.default_rng(100 + seed)
    qrels, runs = _random_case(seed + 50)
    runs = {k: _signed_scores(v, rng) for k, v in runs.items()}
    measures = ["Compat(p=0.9)", "Compat(p=0.7,normalize=False)", "nDCG@10", "Bpref", "Judged@5", "AP"]
    _assert_equal(per_query_matrix(runs, qrels, measures, backend="numpy"),
                  per_query_matrix(runs, qrels, measures, backend="ir_measures"))


def test_reference_backend_matches_plain_ir_measures():
    qrels, runs = _random_case(7, n_runs=2)
    m = per_query_matrix(runs, qrels, DEFAULT_MEASURES, backend="auto")
    # pytrec_eval has undefined behaviour (hangs, crashes) on a query whose labels are all negative
    qrels_dict = {q: labels for q, labels in qrels.to_dict().items() if max(labels.values()) >= 0}
    for name, run in runs.items():
        run_dict: dict = {}
        for row in run:
            run_dict.setdefault(row.qid, {})[row.docid] = row.score
        for metric in ir_measures.iter_calc(parse_measures(DEFAULT_MEASURES), qrels_dict, run_dict):
            got = m[measure_key(metric.measure)].loc[metric.query_id, name]
            assert abs(got - metric.value) <= 1e-9, (metric, got)


def test_a_changed_label_changes_the_matrix():
    qrels, runs = _random_case(3, n_runs=1)
    before = per_query_matrix(runs, qrels, ["nDCG@100"], backend="numpy")["nDCG@100"]
    f = qrels.frame.copy()
    retrieved = set(zip(runs["run0"].frame.qid, runs["run0"].frame.docid))
    i = next(i for i, (q, d, lab) in enumerate(zip(f.qid, f.docid, f.label)) if (q, d) in retrieved and lab > 0)
    f.loc[i, "label"] = 0
    after = per_query_matrix(runs, Qrels.from_frame(f), ["nDCG@100"], backend="numpy")["nDCG@100"]
    assert after.loc[f.qid[i], "run0"] < before.loc[f.qid[i], "run0"]


# --------------------------------------------------------------------------------- ties, input

def test_unresolved_run_is_resolved_as_trec_eval_does_and_warns():
    qrels, runs = _random_case(11, n_runs=1)
    raw = Run(runs["run0"].name, runs["run0"].frame.assign(score=1.0))  # every score tied
    with pytest.warns(UserWarning, match="resolve_ties"):
        got = per_query_matrix({"r": raw}, qrels, DEFAULT_MEASURES)
    # trec_eval's rule, spelled out: equal scores, so each query's documents by docid descending
    f = raw.frame.sort_values(["qid", "docid"], ascending=[True, False], kind="stable")
    f = f.assign(score=(f.groupby("qid").qid.transform("size") - f.groupby("qid").cumcount()).astype(float))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        want = per_query_matrix({"r": Run("r", f)}, qrels, DEFAULT_MEASURES, backend="ir_measures")
    _assert_equal(got, want)


def test_float32_ties_in_a_resolved_run_are_resolved_again():
    qrels = read_qrels("q 0 a 1\nq 0 b 0\n")
    f = pd.DataFrame({"qid": ["q", "q"], "docid": ["b", "a"], "rank": [1, 2],
                      "score": [1.0 + 1e-12, 1.0], "tag": ["t", "t"]})  # distinct in float64 only
    run = Run("r", f, tie_policy="docid")
    with pytest.warns(UserWarning, match="float32"):
        fast = per_query_matrix({"r": run}, qrels, ["nDCG@10", "Compat"], backend="numpy")
    with pytest.warns(UserWarning, match="float32"):
        ref = per_query_matrix({"r": run}, qrels, ["nDCG@10", "Compat"], backend="ir_measures")
    _assert_equal(fast, ref)


def test_queries_subset_and_columns_order():
    qrels, runs = _random_case(5, n_runs=3)
    order = ["run2", "run0", "run1"]
    m = per_query_matrix({k: runs[k] for k in order}, qrels, ["Bpref"], queries=["q3", "q1", "q10"])
    assert list(m["Bpref"].index) == ["q1", "q10", "q3"]
    assert list(m["Bpref"].columns) == order
    assert m["Bpref"].dtypes.eq(np.float64).all()
    full = per_query_matrix(runs, qrels, ["Bpref"])["Bpref"]
    pd.testing.assert_frame_equal(m["Bpref"], full.loc[["q1", "q10", "q3"], order])


def test_unjudged_query_requested_is_an_error():
    with pytest.raises(ConfigError, match="q9"):
        per_query_matrix({"r": RUN}, QRELS, ["Bpref"], queries=["q1", "q9"])


def test_auto_falls_back_to_ir_measures_and_numpy_refuses():
    measures = ["nDCG@10", "infAP", "nDCG(judged_only=True)@5"]
    with pytest.raises(ConfigError, match="infAP"):
        per_query_matrix({"r": RUN}, QRELS, measures, backend="numpy")
    _assert_equal(per_query_matrix({"r": RUN}, QRELS, measures, backend="auto"),
                  per_query_matrix({"r": RUN}, QRELS, measures, backend="ir_measures"))


def test_parse_measures():
    parsed = parse_measures("Judged@100, Compat(p=0.9,normalize=False),nDCG@100,Bpref")
    assert [measure_key(m) for m in parsed] == ["Judged@100", "Compat(p=0.9,normalize=False)", "nDCG@100", "Bpref"]
    assert [measure_key(m) for m in parse_measures(None)] == ["Judged@100", "Compat", "nDCG@100", "Bpref"]
    with pytest.raises(ConfigError, match="Foo"):
        parse_measures("nDCG@10,Foo")
    with pytest.raises(ConfigError, match="twice"):
        parse_measures("nDCG@10,NDCG@10")
    with pytest.raises(ConfigError, match="no measures"):
        parse_measures(" , ")
    with pytest.raises(ConfigError, match="backend"):
        per_query_matrix({"r": RUN}, QRELS, ["P@1"], backend="fast")


def test_the_bucket_join_finds_exactly_the_judged_rows():
    # Judgments.join against a dict of every (query, document) pair, over queries whose judgment
    # counts span one bucket to many (buckets of up to several documents, empty ones, absent codes)
    from recjudge.evaluation.measures import judgments

    rng = np.random.default_rng(5)
    rows = []
    for q, n in enumerate([1, 2, 3, 7, 64, 300, 1000]):
        docs = rng.choice(5000, n, replace=False)
        rows += [(f"q{q}", f"d{d}", int(rng.integers(0, 3))) for d in docs]
    rng.shuffle(rows)
    qrels = Qrels.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "label"]))
    jd = judgments(qrels, qrels.qids)
    where = {(jd.queries[int(q)], jd.dlookup.keys[int(d)]): i for i, (q, d) in enumerate(zip(jd.qcode, jd.dcode))}
    assert len(where) == len(rows)
    # a run's rows: its own query and document indices, mapped to the judgments' codes (-1: absent)
    qids = np.array(jd.queries + ["unjudged"], dtype=object)
    docids = np.array([f"d{d}" for d in range(5100)], dtype=object)
    qmap, dmap = jd.qlookup(qids), jd.dlookup(docids)
    every = [(jd.queries.index(q), int(d[1:])) for q, d, _ in rows]  # each judged pair once, and random ones
    qidx = np.r_[rng.integers(-1, len(qids), 20000), [q for q, _ in every]]
    didx = np.r_[rng.integers(-1, len(docids), 20000), [d for _, d in every]]
    order = rng.permutation(len(qidx))
    qidx, didx = qidx[order], didx[order]
    got = jd.join(qmap, dmap, qidx, didx)
    want = [(r, where[(qids[q], docids[d])], int(qmap[q])) for r, (q, d) in enumerate(zip(qidx, didx))
            if q >= 0 and d >= 0 and (qids[q], docids[d]) in where]
    assert len(want) >= len(rows)
    assert list(zip(*(a.tolist() for a in got))) == want


@pytest.mark.parametrize("nq", [3, 10**8])  # counting, and the sort used for very wide label ranges
def test_labels_above(nq):
    from recjudge.evaluation.measures.index import labels_above as _labels_above

    qcode = np.array([0, 0, 0, 0, 1, 1, 2])
    label = np.array([2, 0, 2, 1, 5, -1, 1])
    # query 0: labels 2, 0, 2, 1 -> above 0, 3, 0, 2; query 1: 5, -1 -> 0, 1; query 2: 1 -> 0
    assert _labels_above(qcode, label, nq).tolist() == [0, 3, 0, 2, 0, 1, 0]


def test_string_dtype_columns_and_shared_objects():
    # pandas string columns make fresh objects on every to_numpy(); shared objects come from readers
    qrels, runs = _random_case(31, n_runs=3)
    want = per_query_matrix(runs, qrels, FAST, backend="ir_measures")
    as_string = {k: Run(v.name, v.frame.astype({"qid": "string", "docid": "string"}), tie_policy=v.tie_policy)
                 for k, v in runs.items()}
    _assert_equal(per_query_matrix(as_string, qrels, FAST, backend="numpy"), want)
    interned = {}
    shared = {k: Run(v.name, v.frame.assign(docid=[interned.setdefault(d, d) for d in v.frame.docid]),
                     tie_policy=v.tie_policy) for k, v in runs.items()}
    _assert_equal(per_query_matrix(shared, qrels, FAST, backend="numpy"), want)


@pytest.mark.parametrize("seed", [41, 42])
def test_leaving_unjudged_rows_out_changes_no_measure(seed):
    # the engine hands the measures only the judged rows of a ranking (with its whole length);
    # with every row, unjudged ones included, each measure must give the same values (Judged, which
    # counts the rows it is given, against its count of the judged ones)
    import recjudge.evaluation.measures as M

    qrels, runs = _random_case(seed, n_runs=2)
    parsed = M.parse_measures(FAST + ("CompatHM(p=0.9)", "nDCGexp@5"))
    index = qrels.qids
    jd = M.judgments(qrels, index)
    ctx = M.Context(jd)
    for run in runs.values():
        ranked = M.ranked_run(run)
        qmap = jd.qlookup(ranked.qids)
        dmap = jd.dlookup(ranked.docids).astype(np.int32)
        judged = M.judged_rows(ranked, qmap, dmap, jd)
        keep = qmap[ranked.qrank] >= 0  # every row of the evaluated queries
        group = qmap[ranked.qrank][keep]
        j = jd.find(group, dmap[ranked.dcode][keep])
        label = np.where(j >= 0, jd.label[np.maximum(j, 0)], np.int64(np.iinfo(np.int64).min))  # below every label (int64)
        nrows = np.bincount(group, minlength=jd.nq)
        every = M.Rows(group, ranked.pos[keep], ranked.score[keep], j, label, judged.gq, nrows,
                       np.cumsum(nrows) - nrows, nrows)
        assert len(judged.group) < len(every.group)  # the case does leave rows out
        assert np.array_equal(judged.length, every.length)
        for m in parsed:
            a = M.MEASURE_FUNCTIONS[m.NAME](m, judged, ctx)
            if m.NAME == "Judged":  # it counts the rows it is given (judged ones, by contract): by hand here
                k = m.params.get("cutoff", len(j) + 1)
                top = (j >= 0) & (every.pos < k)
                b = M.safe_ratio(np.bincount(group[top], minlength=jd.nq).astype(float),
                                 np.minimum(nrows, k).astype(float))
            else:
                b = M.MEASURE_FUNCTIONS[m.NAME](m, every, ctx)
            np.testing.assert_array_equal(a, b, err_msg=M.measure_key(m))


@pytest.mark.parametrize("backend", ["ir_measures", "numpy"])
def test_bpref_caps_by_hand(backend):
    qrels = read_qrels(
        "few 0 a 1\nfew 0 b 1\nfew 0 c 1\nfew 0 x 0\n"     # R = 3, N = 1
        "many 0 a 1\nmany 0 b 2\nmany 0 x 0\nmany 0 y 0\nmany 0 z 0\n")  # R = 2, N = 3
    run = resolve_ties(read_run(
        "few Q0 a 1 4 t\nfew Q0 x 2 3 t\nfew Q0 b 3 2 t\nfew Q0 c 4 1 t\n"
        "many Q0 x 1 4 t\nmany Q0 a 2 3 t\nmany Q0 u 3 2 t\nmany Q0 b 4 1 t\n"))
    m = per_query_matrix({"r": run}, qrels, ["Bpref"], backend=backend)["Bpref"]
    # few: a (0 non-relevant above) 1; b and c (1 above) 1 - min(1, 3) / min(1, 3) = 0
    assert m.loc["few", "r"] == pytest.approx((1 + 0 + 0) / 3, abs=1e-12)
    # many: a and b each have x above: 1 - min(1, 2) / min(3, 2) = 1/2; u is unjudged
    assert m.loc["many", "r"] == pytest.approx((1 / 2 + 1 / 2) / 2, abs=1e-12)


def test_queries_no_run_ranks_score_zero():
    """Judged queries that no run ranks (e.g. cold users dropped by a time split) must score 0 on
    the numpy path, not crash."""
    import recjudge.evaluation.measures as measures_mod
    from recjudge.data.trec import Qrels, Run
    from recjudge.evaluation.ties.policy import resolve_ties

    qrels = Qrels.from_frame(pd.DataFrame({"qid": [f"u{i:02d}" for i in range(20) for _ in range(2)],
                                           "docid": ["a", "b"] * 20, "label": [1, 0] * 20}), "q")
    run = resolve_ties(Run.from_frame(pd.DataFrame({"qid": ["u00", "u00"], "docid": ["a", "b"],
                                                    "score": [2.0, 1.0]}), "r"))
    got = measures_mod.per_query_matrix({"r": run}, qrels, "Judged@100,Compat(p=0.95),nDCG@100,Bpref")
    ref = measures_mod.per_query_matrix({"r": run}, qrels, "Judged@100,Compat(p=0.95),nDCG@100,Bpref",
                                        backend="ir_measures")
    for key in got:
        assert got[key].loc["u00", "r"] == 1.0  # the relevant item first: every measure is perfect
        assert (got[key].drop(index="u00") == 0).all().all()
        pd.testing.assert_frame_equal(got[key], ref[key])


@pytest.mark.parametrize("backend", ["numpy", "ir_measures"])
def test_compat_zero_score_ties_with_unretrieved_documents(backend):
    # Compat's ideal list: label desc, then run score desc with unretrieved documents at 0.0, then
    # qrels order. b scores exactly 0.0, so it ties with the unretrieved c, which comes first in
    # the qrels: ideal [a, c, b], ranking [a, b]; depth 3.
    run = Run.from_frame(pd.DataFrame({"qid": ["u", "u"], "docid": ["a", "b"], "score": [2.0, 0.0]}), "r")
    run = resolve_ties(run, "docid")
    run = Run("r", run.frame.assign(score=[2.0, 0.0]), tie_policy="docid")  # keep the 0.0 score
    qrels = read_qrels("u 0 a 1\nu 0 c 1\nu 0 b 1\n")
    m = per_query_matrix({"r": run}, qrels, ["Compat(p=0.5)"], backend=backend)
    # overlap at depth 1, 2, 3: 1, 1 ({a,b} ∩ {a,c}), 2; ideal with itself: 1, 2, 3
    expected = (1 + 0.5 * 1 / 2 + 0.25 * 2 / 3) / (1 + 0.5 * 2 / 2 + 0.25 * 3 / 3)
    assert m["Compat(p=0.5)"].loc["u", "r"] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("layout, dtype", [("grouped", np.uint16), ("scattered", np.int32)])
def test_compat_qrels_order_survives_narrow_row_numbers(layout, dtype):
    # As above, with 70,000 filler judgments so that row numbers pass 16 bits: written user by
    # user, the judgments keep their row within the user (16 bits); u's rows 70,000 lines apart
    # keep their absolute rows. Either way c stays ahead of b in the ideal list.
    from recjudge.evaluation.measures import judgments

    filler = "".join(f"f{i // 50} 0 d{i % 50} 1\n" for i in range(70_000))
    u = ["u 0 a 1\n", "u 0 c 1\n", "u 0 b 1\n"]
    text = filler + "".join(u) if layout == "grouped" else u[0] + u[1] + filler + u[2]
    qrels = read_qrels(text)
    assert judgments(qrels, qrels.qids).qrow.dtype == dtype
    run = Run.from_frame(pd.DataFrame({"qid": ["u", "u"], "docid": ["a", "b"], "score": [2.0, 0.0]}), "r")
    run = Run("r", resolve_ties(run, "docid").frame.assign(score=[2.0, 0.0]), tie_policy="docid")
    m = per_query_matrix({"r": run}, qrels, ["Compat(p=0.5)"], queries=["u"], backend="numpy")
    expected = (1 + 0.5 * 1 / 2 + 0.25 * 2 / 3) / (1 + 0.5 * 2 / 2 + 0.25 * 3 / 3)
    assert m["Compat(p=0.5)"].loc["u", "r"] == pytest.approx(expected, abs=1e-12)


MIXED_NDCG = r"""
import json, sys
from recjudge.evaluation.measures import per_query_matrix
from recjudge.data.trec import read_qrels, read_run
from recjudge.evaluation.ties.policy import resolve_ties
qrels = read_qrels("u 0 a 2\nu 0 b 1\nu 0 c 0\nv 0 a 1\nv 0 d 2\n")
run = resolve_ties(read_run("u Q0 b 1 3 t\nu Q0 a 2 2 t\nu Q0 c 3 1 t\nv Q0 a 1 2 t\nv Q0 d 2 1 t\n"), "docid")
m = per_query_matrix({"r": run}, qrels, sys.argv[1].split(";"), backend=sys.argv[2])
print(json.dumps({k: v["r"].tolist() for k, v in m.items()}))
"""


@pytest.mark.parametrize("backend", ["auto", "ir_measures"])
def test_measure_variants_asked_together_keep_their_own_settings(backend):
    # nDCG@10 (linear gain) and nDCG with exponential gains 2^rel - 1 in one call: each must get its
    # own evaluator whatever Python's hash seed (one shared evaluator mixed their settings).
    import json
    import subprocess
    import sys

    spec = "nDCG@10;nDCG(gains={0:0,1:1,2:3})@10;nDCG(judged_only=True)@10"
    # u: ranking b(1) a(2) c(0); ideal a(2) b(1). v: ranking a(1) d(2); ideal d(2) a(1).
    d2 = 1 / math.log2(3)
    linear = {"u": (1 + 2 * d2) / (2 + 1 * d2), "v": (1 + 2 * d2) / (2 + d2)}
    exp = {"u": (1 + 3 * d2) / (3 + 1 * d2), "v": (1 + 3 * d2) / (3 + d2)}
    for seed in range(6):
        out = subprocess.run([sys.executable, "-c", MIXED_NDCG, spec, backend], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": str(seed)}, check=True)
        got = json.loads(out.stdout)
        assert got["nDCG@10"] == pytest.approx([linear["u"], linear["v"]], abs=1e-12), seed
        gains_key = next(k for k in got if "gains" in k)
        assert got[gains_key] == pytest.approx([exp["u"], exp["v"]], abs=1e-12), seed
        assert got["nDCG(judged_only=True)@10"] == pytest.approx([linear["u"], linear["v"]], abs=1e-12), seed


def test_a_tie_free_run_without_a_policy_is_used_as_is_and_a_false_claim_is_not_trusted():
    qrels = read_qrels("q 0 a 1\nq 0 b 2\n")
    raw = read_run("q Q0 a 1 0.5 t\nq Q0 b 2 -0.5 t\n")  # distinct scores: nothing to resolve, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = per_query_matrix({"r": raw}, qrels, ["nDCG@10"], backend="numpy")["nDCG@10"].loc["q", "r"]
    assert got == pytest.approx((1 / 1 + 2 / math.log2(3)) / (2 / 1 + 1 / math.log2(3)), rel=1e-12)
    tied = Run("r", raw.frame.assign(score=1.0), tie_policy="hash", seed=0)  # claims a policy, ties anyway
    with pytest.warns(UserWarning, match="equal scores"):
        per_query_matrix({"r": tied}, qrels, ["nDCG@10"], backend="numpy")


# ------------------------------------------------------------------ the paper's measures (issue 11)

def _one(qrels: str, run: str, measures, backend="auto") -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tied example runs are resolved with the hash policy
        m = per_query_matrix({"r": read_run(run)}, read_qrels(qrels), measures, backend=backend)
    return {k: v["r"] for k, v in m.items()}


def test_ndcg_exp_alias_is_ir_measures_exp_log2_ndcg():
    (alias,) = parse_measures(["nDCGexp@100"])
    (written,) = parse_measures(["nDCG(dcg='exp-log2')@100"])
    assert alias == written and alias.params == {"dcg": "exp-log2", "cutoff": 100}
    assert parse_measures(["nDCGexp"])[0].params == {"dcg": "exp-log2"}  # no cutoff
    assert measure_key(parse_measures(["nDCG@100"])[0]) == "nDCG@100"  # linear gain keeps its name
    with pytest.raises(ConfigError, match="given twice"):
        parse_measures(["nDCGexp@10", "nDCG(dcg='exp-log2')@10"])
    # the gains map 2^rel - 1 on 0-7 is another measure (it differs above 7), with the same values on 0-7
    assert len(parse_measures(["nDCGexp@10", "nDCG(gains={0:0,1:1,2:3,3:7,4:15,5:31,6:63,7:127})@10"])) == 2
    assert EXP_GAINS == {r: 2**r - 1 for r in range(8)}


@pytest.mark.parametrize("backend", ["numpy", "ir_measures"])
def test_ndcg_exp_by_hand(backend):
    # ranking b (label 1), a (label 3), c (label 0); exponential gains 1, 7, 0; ideal a, b
    got = _one("u 0 a 3\nu 0 b 1\nu 0 c 0\n", "u Q0 b 1 3 t\nu Q0 a 2 2 t\nu Q0 c 3 1 t\n",
               ["nDCGexp@10", "nDCG@10"], backend)
    exp_key = "nDCG(dcg='exp-log2')@10"
    dcg = (2**1 - 1) / math.log2(2) + (2**3 - 1) / math.log2(3)
    idcg = (2**3 - 1) / math.log2(2) + (2**1 - 1) / math.log2(3)
    assert got[exp_key]["u"] == pytest.approx(dcg / idcg, abs=1e-12)  # 0.5876...
    linear = (1 / math.log2(2) + 3 / math.log2(3)) / (3 / math.log2(2) + 1 / math.log2(3))
    assert got["nDCG@10"]["u"] == pytest.approx(linear, abs=1e-12)
    # gains (and the cutoff) reach the ideal list: @1 keeps only the top item on each side
    got1 = _one("u 0 a 3\nu 0 b 1\nu 0 c 0\n", "u Q0 b 1 3 t\nu Q0 a 2 2 t\nu Q0 c 3 1 t\n", ["nDCGexp@1"], backend)
    assert next(iter(got1.values()))["u"] == pytest.approx(1 / 7, abs=1e-12)


RUN_7 = "u Q0 low 1 2 sys\nu Q0 top 2 1 sys\n"  # the label-1 item ranked above the high one


def test_a_label_of_seven_has_gain_127():
    from recjudge.evaluation.metaeval import evaluate

    qrels = read_qrels("u 0 top 7\nu 0 low 1\n")
    table = evaluate({"sys": read_run(RUN_7)}, qrels, ["nDCGexp@10"]).table
    # DCG = 1/log2(2) + 127/log2(3); ideal = 127/log2(2) + 1/log2(3)
    want = (1 + 127 / math.log2(3)) / (127 + 1 / math.log2(3))
    got = float(table.means(table.measures[0])["sys"])
    assert got == pytest.approx(want, abs=1e-12)
    ref = ir_measures.calc_aggregate([ir_measures.parse_measure("nDCG(gains={0:0,1:1,7:127})@10")],
                                     [ir_measures.Qrel("u", "top", 7), ir_measures.Qrel("u", "low", 1)],
                                     [ir_measures.ScoredDoc("u", "low", 2), ir_measures.ScoredDoc("u", "top", 1)])
    assert got == pytest.approx(list(ref.values())[0], abs=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "ir_measures"])
def test_ndcg_exp_gains_every_label_and_other_gains_follow_trec_eval(backend):
    # exponential gain is defined for every label: an 8 gains 2^8 - 1 = 255 (refused before, when the
    # alias was the 0-7 gains map, under which trec_eval would give it the linear gain 8)
    got = _one("u 0 top 8\nu 0 low 1\n", RUN_7, ["nDCGexp@10"], backend)["nDCG(dcg='exp-log2')@10"]["u"]
    assert got == pytest.approx((1 + 255 / math.log2(3)) / (255 + 1 / math.log2(3)), abs=1e-12)
    # an explicit map leaves unlisted labels at their own value (ir-measures' rule): a 9 gains 9
    spec = "nDCG(gains={0:0,1:1,2:3})@10"
    qrels, run = "u 0 a 9\nu 0 b 2\nu 0 e 1\n", "u Q0 e 1 3 t\nu Q0 b 2 2 t\nu Q0 a 3 1 t\n"
    want = (1 + 3 / math.log2(3) + 9 / math.log2(4)) / (9 + 3 / math.log2(3) + 1 / math.log2(4))
    assert next(iter(_one(qrels, run, [spec], backend).values()))["u"] == pytest.approx(want, abs=1e-12)


def test_describe_measure_states_the_gain_function_and_variant():
    assert describe_measure("nDCG@100") == "nDCG@100, linear gain (trec_eval)"
    assert describe_measure("nDCGexp@100") == "nDCGexp@100: nDCG@100, exponential gain 2^rel − 1"
    assert describe_measure("nDCG(dcg='exp-log2')@5") == "nDCGexp@5: nDCG@5, exponential gain 2^rel − 1"
    assert describe_measure(parse_measures(["nDCG(gains={0:0,1:1,2:3,3:7,4:15,5:31,6:63,7:127})@5"])[0]) \
        .startswith("nDCG@5, gains 2^rel − 1 for labels 0–7 (trec_eval; a label above 7 gains its own value")
    assert describe_measure("Compat(p=0.95)") == "Compat(p=0.95), ir-measures / claclark"
    assert describe_measure("CompatHM").startswith(
        "CompatHM(p=0.95), Compatibility as computed by the trec-health-misinfo/Compatibility script")
    assert "gains {0:0,1:1,2:3}" in describe_measure("nDCG(gains={0:0,1:1,2:3})@10")


P95 = 0.95
S95 = -math.log(1 - P95) / P95  # sum_i p^i / (i + 1) to infinity = 3.1534...; depth 1000 leaves < 1e-20


@pytest.mark.parametrize("qrels, run, hm, ir", [
    # ideal [b]; b at rank 2: RBO loses only the first term of S
    ("u 0 b 1\n", "u Q0 a 1 2.0 t\nu Q0 b 2 1.0 t\n", (S95 - 1) / S95, 0.322034),
    # a tie: whatever order it is resolved in, the ideal list follows the run's order
    ("u 0 b 1\nu 0 a 1\n", "u Q0 a 1 1.0 t\nu Q0 b 2 1.0 t\n", 1.0, None),
    # ideal [a, c] (c unretrieved, after the retrieved a); ranking [a, b]: overlap 1 at every depth,
    # the ideal list with itself 1 then 2
    ("u 0 a 2\nu 0 c 2\n", "u Q0 a 1 -1 t\nu Q0 b 2 -2 t\n", S95 / (2 * S95 - 1), 0.243590),
])
@pytest.mark.parametrize("backend", ["numpy", "ir_measures"])
def test_compat_hm_worked_examples(qrels, run, hm, ir, backend):
    got = _one(qrels, run, ["CompatHM(p=0.95)", "Compat(p=0.95)"], backend)
    assert got["CompatHM"]["u"] == pytest.approx(hm, abs=1e-12)
    if ir is not None:  # ir-measures' Compat differs: depth max(len), unretrieved ideal items at score 0
        assert got["Compat"]["u"] == pytest.approx(ir, abs=1e-6)


def test_compat_hm_graded_by_hand():
    # labels 0-7: a 7, e 5 (not retrieved), b 3, c 3, d 0; ranking b x a c (x unjudged)
    # ideal: a (7), e (5), then the 3s by run rank: b (rank 0) before c (rank 3) -> [a, e, b, c]
    # overlap at depth i+1: i=0 {}, i=1 {}, i=2 {a, b}, i>=3 {a, b, c}; the ideal with itself 1, 2, 3, 4, 4, ...
    qrels = "u 0 a 7\nu 0 e 5\nu 0 b 3\nu 0 c 3\nu 0 d 0\n"
    run = "u Q0 b 1 4 t\nu Q0 x 2 3 t\nu Q0 a 3 2 t\nu Q0 c 4 1 t\n"
    p = 0.9

    def tail(k):  # sum_{k <= i < 1000} p^i / (i + 1)
        return sum(p**i / (i + 1) for i in range(k, 1000))

    num = 2 * p**2 / 3 + 3 * tail(3)
    best = tail(0) + tail(1) + tail(2) + tail(3)
    got = _one(qrels, run, ["CompatHM(p=0.9)"])["CompatHM(p=0.9)"]["u"]
    assert got == pytest.approx(num / best, abs=1e-12)


def test_compat_hm_leaves_out_users_as_the_script_does():
    # u: relevant item retrieved at rank 1 -> 1.0; v: no label > 0 -> no value; w: the run lacks it -> no value
    qrels = read_qrels("u 0 a 1\nv 0 a 0\nw 0 a 1\n")
    run = read_run("u Q0 a 1 2 t\nv Q0 a 1 2 t\n")
    m = per_query_matrix({"r": run}, qrels, ["CompatHM", "Compat"])
    assert m["CompatHM"]["r"].to_dict() == pytest.approx({"u": 1.0, "v": math.nan, "w": math.nan}, nan_ok=True)
    assert system_means(m["CompatHM"])["r"] == 1.0  # the script's mean: u alone
    assert system_means(m["Compat"])["r"] == pytest.approx(1 / 3)  # ir-measures: 0.0 for v and w


def test_compat_hm_depth_is_1000():
    # the relevant item at rank 1001 is beyond the script's depth: nothing overlaps
    rows = "".join(f"u Q0 x{i} {i + 1} {2000 - i} t\n" for i in range(1000)) + "u Q0 a 1001 1 t\n"
    assert _one("u 0 a 1\n", rows, ["CompatHM"])["CompatHM"]["u"] == 0.0
    with pytest.raises(ConfigError, match="CompatHM takes one parameter"):
        parse_measures(["CompatHM(q=1)"])
    with pytest.raises(ConfigError, match="strictly between 0 and 1"):
        parse_measures(["CompatHM(p=1.5)"])


# ------------------------------------------------------------------ one pass over the runs (issue 14)

def test_score_runs_equals_per_query_matrix_and_reads_files_one_at_a_time(tmp_path):
    from recjudge.data.trec import run_paths, write_run
    from recjudge.evaluation.ties.policy import ensure_tie_free, tied_user_share
    from recjudge.evaluation.measures import score_runs

    tied = read_run("q1 Q0 a 1 1 t\nq1 Q0 b 2 1 t\nq1 Q0 d 3 0.5 t\nq2 Q0 a 1 2 t\n")  # q1: a and b tie
    write_run(tied, tmp_path / "tied.run")
    write_run(RUN, tmp_path / "plain.run")
    other = read_qrels("q1 0 b 3\nq1 0 d 1\nq2 0 a 0\n")
    measures = [*DEFAULT_MEASURES, "CompatHM", "nDCGexp@10", "nDCG(judged_only=True)@10"]  # the last: ir-measures
    scored = score_runs(run_paths(tmp_path), {"ref": QRELS, "other": (other, ["q1"])}, measures,
                        tie_policy="hash", seed=3, k=10)
    runs = {"plain": RUN, "tied": ensure_tie_free(tied, "hash", 3)}
    for label, qrels, queries in (("ref", QRELS, None), ("other", other, ["q1"])):
        want = per_query_matrix(runs, qrels, measures, queries=queries)
        assert want.keys() == scored.matrices[label].keys()
        for key, frame in want.items():
            pd.testing.assert_frame_equal(scored.matrices[label][key], frame, check_exact=True)
    assert scored.tied_user_share == {"plain": tied_user_share(RUN, 10), "tied": 0.5}
    assert scored.users_ranked == {"ref": {"plain": 2, "tied": 2}, "other": {"plain": 1, "tied": 1}}


def test_label_sets_sharing_judged_pairs_share_one_join_with_the_same_scores(tmp_path):
    # the candidate labels part of the reference's pool (its rows come from the reference's join),
    # a third label set judges other pairs (joined alone); each equals per_query_matrix on its own
    from recjudge.data.trec import run_paths, write_run
    from recjudge.evaluation.measures import judgments, score_runs
    from recjudge.evaluation.measures.shared import SharedJoin as _SharedJoin
    from recjudge.evaluation.ties.policy import ensure_tie_free

    qrels, runs = _random_case(4, n_runs=3)
    f = qrels.frame
    rng = np.random.default_rng(2)
    part = f[rng.random(len(f)) < 0.7].assign(label=lambda x: rng.integers(-1, 4, len(x)))
    sub = Qrels.from_frame(part.sample(frac=1.0, random_state=1), "sub")   # other row order, other codes
    other = Qrels.from_frame(f.assign(docid=f.docid + "x"), "other")       # no pair in common
    for name, run in runs.items():
        write_run(run, tmp_path / f"{name}.run")
    sets = {"ref": qrels, "sub": sub, "other": other}
    shared = _SharedJoin([judgments(q, q.qids) for q in sets.values()])
    assert shared.of_first[1] is not None and shared.of_first[2] is None
    scored = score_runs(run_paths(tmp_path), sets, FAST)
    for label, q in sets.items():
        want = per_query_matrix({n: ensure_tie_free(r) for n, r in runs.items()}, q, FAST)
        for key, frame in want.items():
            pd.testing.assert_frame_equal(scored.matrices[label][key], frame, check_exact=True)


def test_score_runs_adds_seconds_per_stage_without_changing_the_scores(tmp_path):
    from recjudge.data.trec import run_paths, write_run
    from recjudge.evaluation.measures import score_runs

    write_run(RUN, tmp_path / "a.run")
    write_run(RUN, tmp_path / "b.run")
    timings = {"read runs": 1.0}  # added to, not replaced
    timed = score_runs(run_paths(tmp_path), {"ref": QRELS}, ["nDCG@10"], timings=timings)
    plain = score_runs(run_paths(tmp_path), {"ref": QRELS}, ["nDCG@10"])
    assert set(timings) == {"judgments", "read runs", "tie share", "ensure_tie_free", "docid lookup", "matrices, ref"}
    assert timings["read runs"] > 1.0 and all(v >= 0 for v in timings.values())
    pd.testing.assert_frame_equal(timed.matrices["ref"]["nDCG@10"], plain.matrices["ref"]["nDCG@10"], check_exact=True)
