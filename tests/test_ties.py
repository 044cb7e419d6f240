"""Tie handling: closed forms by hand arithmetic, against exhaustive and seeded random tie orders
scored by ir-measures, against ir-measures on tie-free runs; permutation test; sampled candidates;
the ``recjudge ties`` command."""

from __future__ import annotations

import itertools
import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from recjudge import cli
from recjudge.data.trec import Qrels, Run, hash_keys, read_qrels, read_run
from recjudge.evaluation.ties.policy import resolve_ties
from recjudge.errors import ConfigError
from recjudge.evaluation.ties import (
    audit_ties,
    expected_metrics,
    parse_tie_measures,
    permutation_test,
    policy_metrics,
    shuffle_rows,
    tie_prevalence,
)
from recjudge.evaluation.ties.ranked import Ranked
from recjudge.systems.sampled import attribute_overlap_scorer, popularity_scorer, sampled_candidate_run

CLOSED = ["Hit@5", "P@5", "R@5", "nDCG@5", "nDCG@10", "nDCG", "RR", "RR@3", "P(rel=2)@5", "Hit(rel=2)@3"]


def log2d(p: int) -> float:
    """Discount of 1-based position p."""
    return 1.0 / math.log2(p + 1)


# ------------------------------------------------------------------------------------ references

def reference(run: Run, qrels: Qrels, measures: list[str]) -> pd.DataFrame:
    """ir-measures per user over the qrels' users (0 where it reports nothing) for a tie-free run."""
    import ir_measures

    parsed = {m: ir_measures.parse_measure(m.replace("Hit", "Success")) for m in measures}
    users = sorted(qrels.frame.qid.unique())
    qdf = pd.DataFrame({"query_id": qrels.frame.qid, "doc_id": qrels.frame.docid,
                        "relevance": qrels.frame.label.astype(int)})
    rdf = pd.DataFrame({"query_id": run.frame.qid, "doc_id": run.frame.docid, "score": run.frame.score})
    by_key = {str(m): name for name, m in parsed.items()}
    got = [(m.query_id, by_key[str(m.measure)], m.value)
           for m in ir_measures.iter_calc(list(parsed.values()), qdf, rdf)]
    table = pd.DataFrame(got, columns=["qid", "measure", "value"]).pivot(index="qid", columns="measure",
                                                                        values="value")
    return table.reindex(index=users, columns=measures).fillna(0.0)


def tie_free(frame: pd.DataFrame, name: str = "r") -> Run:
    """A run whose rows, in the given order per user, get strictly decreasing scores."""
    f = frame[["qid", "docid"]].reset_index(drop=True).copy()
    pos = f.groupby("qid", sort=False).cumcount().to_numpy()
    f["score"] = 1000.0 - pos
    return Run.from_frame(f, name)


def replicated_reference(frames: list[pd.DataFrame], qrels: Qrels, measures: list[str]) -> np.ndarray:
    """Score many tie-free orders of one run in a single ir-measures call: order i's users become
    "user#i". Returns (orders, measures) means over the qrels' users."""
    users = sorted(qrels.frame.qid.unique())
    g = pd.concat(frames, keys=range(len(frames)), names=["order", None]).reset_index(level=0)
    qid = g.qid.to_numpy(dtype=object) + "#" + g.order.astype(str).to_numpy(dtype=object)
    pos = pd.Series(qid).groupby(qid, sort=False).cumcount().to_numpy()
    big = pd.DataFrame({"qid": qid, "docid": g.docid.to_numpy(), "score": 1000.0 - pos})
    q = qrels.frame
    qbig = pd.DataFrame({
        "qid": np.concatenate([q.qid.to_numpy(dtype=object) + f"#{i}" for i in range(len(frames))]),
        "docid": np.tile(q.docid.to_numpy(), len(frames)),
        "label": np.tile(q.label.to_numpy(), len(frames))})
    values = reference(Run.from_frame(big, "big"), Qrels.from_frame(qbig, "big"), measures)
    order_of = values.index.str.rsplit("#", n=1).str[1].astype(int)
    per_order = values.groupby(order_of).sum() / len(users)
    return per_order.reindex(range(len(frames))).fillna(0.0).to_numpy()


def random_tie_orders(run: Run, n: int, seed: int) -> list[pd.DataFrame]:
    """``n`` orders of ``run``: score descending, equal scores in a uniformly random order."""
    rng = np.random.default_rng(seed)
    f = run.frame
    neg, qid = -f.score.to_numpy(), f.qid.to_numpy()
    return [f.iloc[np.lexsort((rng.random(len(f)), neg, qid))] for _ in range(n)]


def means(df: pd.DataFrame) -> pd.Series:
    return df.mean(axis=0)


# ------------------------------------------------------------------------------------- fixtures

@pytest.fixture
def one_in_31():
    """One relevant item tied with 30 negatives, written relevant-first (the issue's check)."""
    lines = "u Q0 rel 1 1.0 t\n" + "".join(f"u Q0 n{i} {i + 2} 1.0 t\n" for i in range(30))
    return read_run(lines, name="one"), read_qrels("u 0 rel 1\n")


@pytest.fixture
def straddle():
    """User u: a (3.0), then a block b c d e at 2.0 holding ranks 2-5, then f (1.0).

    Labels: a 0, b 2, c 0, d 1, e unjudged, f 3, and g 2 (never retrieved).
    """
    run = read_run(
        "u Q0 a 1 3.0 t\n"
        "u Q0 b 2 2.0 t\n"
        "u Q0 c 3 2.0 t\n"
        "u Q0 d 4 2.0 t\n"
        "u Q0 e 5 2.0 t\n"
        "u Q0 f 6 1.0 t\n", name="straddle")
    qrels = read_qrels("u 0 a 0\nu 0 b 2\nu 0 c 0\nu 0 d 1\nu 0 f 3\nu 0 g 2\n")
    return run, qrels


@pytest.fixture
def tie_heavy():
    """Six users with integer scores 0-3 (many ties), graded labels, a qrels-only user (u6) and a
    run-only user (x)."""
    rng = np.random.default_rng(7)
    rows, qrows = [], []
    for u in range(6):
        items = rng.choice(40, 12, replace=False)
        for i in items:
            rows.append((f"u{u}", f"i{i}", float(rng.integers(0, 4))))
        for i in rng.choice(40, 15, replace=False):
            qrows.append((f"u{u}", f"i{i}", int(rng.integers(0, 4))))
    qrows.append(("u6", "i1", 2))
    rows += [("x", "i1", 1.0), ("x", "i2", 1.0)]
    run = Run.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "score"]), "heavy")
    qrels = Qrels.from_frame(pd.DataFrame(qrows, columns=["qid", "docid", "label"]), "q")
    return run, qrels


@pytest.fixture
def tie_free_run():
    rng = np.random.default_rng(3)
    rows, qrows = [], []
    for u in range(8):
        items = rng.choice(30, 10, replace=False)
        scores = rng.permutation(10) + rng.random()
        rows += [(f"u{u}", f"i{i}", float(s)) for i, s in zip(items, scores)]
        qrows += [(f"u{u}", f"i{i}", int(rng.integers(-1, 4))) for i in rng.choice(30, 12, replace=False)]
    qrows.append(("u9", "i0", 1))  # judged, never ranked
    run = Run.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "score"]), "free")
    qrels = Qrels.from_frame(pd.DataFrame(qrows, columns=["qid", "docid", "label"]), "q")
    return run, qrels


# --------------------------------------------------------------------------------- hand arithmetic

def test_issue_check_one_relevant_tied_with_30_negatives(one_in_31):
    run, qrels = one_in_31
    measures = ["Hit@10", "P@10", "R@10", "nDCG@10", "nDCG@100", "RR"]
    exp = means(expected_metrics(run, qrels, measures))
    # the relevant item is equally likely at each of positions 1..31; 10 of them are in the top 10
    assert exp["Hit@10"] == pytest.approx(10 / 31, rel=1e-12)
    assert exp["P@10"] == pytest.approx(10 / 31 / 10, rel=1e-12)
    assert exp["R@10"] == pytest.approx(10 / 31 / 1, rel=1e-12)
    # ideal DCG = 1 (one item of gain 1 at rank 1); the run has 31 positions, fewer than 100
    assert exp["nDCG@10"] == pytest.approx(sum(log2d(p) for p in range(1, 11)) / 31, rel=1e-12)
    assert exp["nDCG@100"] == pytest.approx(sum(log2d(p) for p in range(1, 32)) / 31, rel=1e-12)
    assert exp["RR"] == pytest.approx(sum(1 / p for p in range(1, 32)) / 31, rel=1e-12)
    # relevant-first input order wins the tie: every measure is perfect
    inp = means(policy_metrics(run, qrels, measures, policy="input"))
    assert inp["Hit@10"] == 1.0 and inp["nDCG@10"] == 1.0 and inp["RR"] == 1.0
    assert inp["P@10"] == pytest.approx(0.1)


def test_straddling_block_with_graded_labels_and_several_relevant(straddle):
    run, qrels = straddle
    measures = ["Hit@3", "P@3", "R@3", "nDCG@3", "nDCG", "RR", "RR@2"]
    exp = means(expected_metrics(run, qrels, measures))
    # block b c d e holds ranks 2-5; 2 of its 4 items are relevant (b: 2, d: 1); 2 of its ranks are
    # in the top 3. Miss both slots: C(2,2)/C(4,2) = 1/6.
    assert exp["Hit@3"] == pytest.approx(1 - 1 / 6, rel=1e-12)
    # E[#relevant in top 3] = 2 relevant * 2 slots / 4 items = 1
    assert exp["P@3"] == pytest.approx(1 / 3, rel=1e-12)
    # relevant in qrels: b, d, f, g = 4
    assert exp["R@3"] == pytest.approx(1 / 4, rel=1e-12)
    # the block's gain 2 + 1 = 3 spreads evenly over its 4 ranks; ranks 2 and 3 are inside the cut.
    # ideal gains 3, 2, 2 (then 1)
    idcg3 = 3 * log2d(1) + 2 * log2d(2) + 2 * log2d(3)
    assert exp["nDCG@3"] == pytest.approx(3 / 4 * (log2d(2) + log2d(3)) / idcg3, rel=1e-12)
    dcg = 3 / 4 * (log2d(2) + log2d(3) + log2d(4) + log2d(5)) + 3 * log2d(6)
    idcg = idcg3 + 1 * log2d(4)
    assert exp["nDCG"] == pytest.approx(dcg / idcg, rel=1e-12)
    # first relevant at block offset j with P = C(3 - j, 1) / C(4, 2): 3/6, 2/6, 1/6 at ranks 2, 3, 4
    assert exp["RR"] == pytest.approx(3 / 6 * 1 / 2 + 2 / 6 * 1 / 3 + 1 / 6 * 1 / 4, rel=1e-12)
    assert exp["RR@2"] == pytest.approx(3 / 6 * 1 / 2, rel=1e-12)


def test_closed_forms_equal_the_mean_over_every_order_of_the_block(straddle):
    run, qrels = straddle
    measures = ["Hit@3", "P@3", "R@3", "nDCG@3", "nDCG", "RR", "RR@2", "nDCG@1"]
    f = run.frame
    orders = []
    for perm in itertools.permutations([1, 2, 3, 4]):  # rows b c d e
        orders.append(f.iloc[[0, *perm, 5]])
    mean = replicated_reference(orders, qrels, measures).mean(axis=0)
    exp = means(expected_metrics(run, qrels, measures))
    np.testing.assert_allclose(exp.to_numpy(), mean, rtol=0, atol=1e-12)


def test_closed_forms_match_the_mean_of_2000_random_tie_orders(tie_heavy):
    """2,000 seeded random tie orders, each made tie-free and scored by ir-measures."""
    run, qrels = tie_heavy
    n = 2000
    values = replicated_reference(random_tie_orders(run, n, seed=11), qrels, CLOSED)
    mc, se = values.mean(axis=0), values.std(axis=0, ddof=1) / math.sqrt(n)
    exp = means(expected_metrics(run, qrels, CLOSED)).to_numpy()
    assert (se > 0).sum() >= 8  # the fixture really is tie-sensitive
    assert np.all(np.abs(exp - mc) <= 4 * se + 1e-12), (exp, mc, se)


def test_mean_over_hash_seeds_approaches_the_exact_expectation(one_in_31):
    run, qrels = one_in_31
    audit = audit_ties([run], qrels, "Hit@10", seeds=400, permutations=1)
    m = audit.runs[0].measures[0]
    se = math.sqrt(10 / 31 * 21 / 31 / 400)  # binomial standard error of a mean of 400 hits
    assert m.expected == pytest.approx(10 / 31, rel=1e-12)
    assert abs(m.hash_seeds_mean - 10 / 31) <= 4 * se
    assert m.hash_seeds_sd == pytest.approx(math.sqrt(m.hash_seeds_mean * (1 - m.hash_seeds_mean) * 400 / 399))


# ------------------------------------------------------------------------- orders and ir-measures

@pytest.mark.parametrize("policy,seed", [("input", 0), ("hash", 0), ("hash", 5)])
def test_each_policy_equals_ir_measures_on_the_resolved_run(tie_heavy, policy, seed):
    run, qrels = tie_heavy
    measures = CLOSED + ["Bpref", "Compat(p=0.95)", "AP"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resolve_ties warns about 'input'
        resolved = resolve_ties(run, policy, seed)
    ours = policy_metrics(run, qrels, measures, policy=policy, seed=seed)
    ref = reference(resolved, qrels, measures)
    pd.testing.assert_frame_equal(ours, ref, check_names=False, check_index_type=False, atol=1e-12, rtol=0)


def test_hash_key_is_the_disclosed_trec_hash(tie_heavy):
    run, _ = tie_heavy
    r = Ranked(run)
    rows = np.arange(len(run))
    for seed in (0, 1, 2**40 + 3):
        expected = hash_keys(r.users[r.u_s], r.docids[r.dcode_s], seed)
        np.testing.assert_array_equal(r.hash_key(rows, seed), expected)


def test_tie_free_run_is_the_same_under_every_treatment_and_equals_ir_measures(tie_free_run):
    run, qrels = tie_free_run
    measures = ["Hit@5", "P@5", "R@5", "nDCG@5", "nDCG", "RR", "Bpref", "Compat(p=0.95)"]
    audit = audit_ties([run], qrels, measures, seeds=3, permutations=3, mc_samples=3)
    ref = means(reference(run, qrels, measures))
    res = audit.runs[0]
    assert res.prevalence.tied == 0.0
    for m in res.measures:
        values = [m.input_order, m.hash, m.expected, m.hash_seeds_mean]
        assert values == pytest.approx([ref[m.measure]] * 4, abs=1e-12), m.measure
        assert m.hash_seeds_sd == 0.0
        assert m.permutation == 0.0 and m.permutation_hash == 0.0
        if m.expected_ci is not None:
            assert m.expected_ci[0] == pytest.approx(m.expected_ci[1], abs=1e-15)
    # the mean is over the qrels' 9 users: u9 has no ranking and scores 0
    assert audit.counted_users == 9


def test_users_missing_from_the_run_score_zero_and_run_only_users_are_ignored(tie_heavy):
    run, qrels = tie_heavy
    exp = expected_metrics(run, qrels, ["Hit@5", "nDCG@5"])
    assert list(exp.index) == [f"u{i}" for i in range(7)]
    assert (exp.loc["u6"] == 0).all()
    assert "x" not in exp.index


# ---------------------------------------------------------------------------- permutation test

def test_permutation_test_is_the_literal_shuffle_of_the_rows(tie_heavy):
    run, qrels = tie_heavy
    measures = ["Hit@5", "nDCG@5", "RR", "Bpref"]
    res = permutation_test(run, qrels, measures, permutations=4, seed=9, policy="input")
    base = means(policy_metrics(run, qrels, measures, policy="input"))
    changes = []
    for p in range(4):
        shuffled = shuffle_rows(run, seed=[9, p])
        assert sorted(map(tuple, shuffled.frame.to_numpy().tolist())) == sorted(
            map(tuple, run.frame.to_numpy().tolist()))  # the same rows
        assert (shuffled.frame.qid.to_numpy() == run.frame.qid.to_numpy()).all()  # users keep their lines
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            resolved = resolve_ties(shuffled, "input")
        changes.append((means(reference(resolved, qrels, measures)) - base).abs())
    largest = pd.concat(changes, axis=1).max(axis=1)
    for m in measures:
        assert res.max_abs_change[m] == pytest.approx(largest[m], abs=1e-12)
    assert max(res.max_abs_change.values()) > 0


def test_input_order_fails_the_permutation_test_and_hash_passes(one_in_31):
    run, qrels = one_in_31
    measures = ["Hit@10", "nDCG@10", "Compat(p=0.95)"]
    inp = permutation_test(run, qrels, measures, permutations=10, seed=0, policy="input")
    hsh = permutation_test(run, qrels, measures, permutations=10, seed=0, policy="hash")
    # relevant-first scores 1 on nDCG@10; a shuffle that moves a negative first scores at most
    # 1/log2(3) there, so the change is at least 1 - 1/log2(3)
    assert inp.max_abs_change["nDCG@10"] >= 1 - log2d(2)
    assert inp.max_abs_change["Compat(p=0.95)"] > 0
    assert inp.users_changed["nDCG@10"] == 1.0
    assert hsh.max_abs_change == {m: 0.0 for m in measures}


# ----------------------------------------------------------------------------------- prevalence

def test_prevalence_by_hand():
    run = read_run(
        "u1 Q0 a 1 5 t\nu1 Q0 b 2 4 t\nu1 Q0 c 3 4 t\nu1 Q0 d 4 3 t\n"  # block b c at ranks 2-3
        "u2 Q0 a 1 3 t\nu2 Q0 b 2 2 t\nu2 Q0 c 3 1 t\n"  # no tie
        "u3 Q0 a 1 2 t\nu3 Q0 b 2 2 t\nu3 Q0 c 3 1 t\nu3 Q0 d 4 1 t\n"  # blocks at ranks 1-2 and 3-4
        "u4 Q0 a 1 1.000000000001 t\nu4 Q0 b 2 1 t\n", name="p")  # tied only as float32
    qrels = read_qrels("u1 0 c 1\nu3 0 d 2\nu3 0 a 0\n")
    p = tie_prevalence(run, qrels, cutoffs=(2, 3)).as_dict()
    assert p["users"] == 4 and p["rows"] == 13
    assert p["tied"] == 2 / 4  # u1, u3
    assert p["tied_top2"] == 2 / 4  # u1 (block starts at rank 2), u3
    assert p["crossing_top2"] == 1 / 4  # u1: ranks 2 and 3
    assert p["inside_top2"] == 1 / 4  # u3: ranks 1-2
    assert p["crossing_top3"] == 1 / 4  # u3: ranks 3 and 4
    assert p["inside_top3"] == 2 / 4  # u1 ranks 2-3, u3 ranks 1-2
    # relevant shares are of the users the qrels judge (u1, u3): the others cannot hold a labelled item
    assert p["judged_users"] == 2
    assert p["relevant_tied"] == 2 / 2  # u1's c, u3's d
    assert p["relevant_tied_top2"] == 1 / 2  # u3's d sits in the block at ranks 3-4
    assert p["relevant_tied_top3"] == 2 / 2
    assert p["tied_rows"] == 6 / 13
    assert p["largest_block"] == 2
    assert p["float32_tied"] == 3 / 4  # u4 too: trec_eval would see a tie
    assert tie_prevalence(run).relevant_tied is None


# --------------------------------------------------------------------------------- Monte Carlo

def test_monte_carlo_for_compat_and_bpref_brackets_the_exact_mean():
    run = read_run("u Q0 a 1 1 t\nu Q0 b 2 1 t\nu Q0 c 3 1 t\nu Q0 d 4 1 t\nu Q0 e 5 0.5 t\n", name="mc")
    qrels = read_qrels("u 0 a 2\nu 0 b 1\nu 0 c 0\nu 0 e 1\nu 0 z 0\n")
    measures = ["Compat(p=0.95)", "Bpref"]
    orders = [run.frame.iloc[[*perm, 4]] for perm in itertools.permutations(range(4))]
    exact = replicated_reference(orders, qrels, measures).mean(axis=0)
    audit = audit_ties([run], qrels, measures, seeds=2, permutations=1, mc_samples=400, seed=1)
    from scipy import stats

    t = stats.t.ppf(0.975, 399)
    for m, ex in zip(audit.runs[0].measures, exact):
        assert m.expected_method == "monte_carlo"
        lo, hi = m.expected_ci
        se = (hi - lo) / 2 / t
        assert se > 0
        assert abs(m.expected - ex) <= 4 * se, (m.measure, m.expected, ex, se)
    # relevant-first input order beats the average order on Compat
    compat = audit.runs[0].measures[0]
    assert compat.input_order > compat.expected_ci[1]


# -------------------------------------------------------------------------------------- parsing

def test_parse_measures_hit_alias_and_families():
    specs = {s.name: s for s in parse_tie_measures("Hit@10,P(rel=2)@5,nDCG@10,RR,Compat(p=0.9),R@100")}
    assert specs["Hit@10"].key == "Success@10" and specs["Hit@10"].family == "hit"
    assert specs["P(rel=2)@5"].rel == 2 and specs["P(rel=2)@5"].family == "p"
    assert specs["nDCG@10"].family == "ndcg" and specs["RR"].cutoff is None
    assert specs["Compat(p=0.9)"].family == "general"
    assert parse_tie_measures("nDCG(dcg='exp-log2')@10")[0].family == "general"
    with pytest.raises(ConfigError, match="twice"):
        parse_tie_measures("Hit@10,Success@10")
    with pytest.raises(ConfigError, match="unknown measure"):
        parse_tie_measures("Foo@10")


def test_settings_are_validated(one_in_31):
    run, qrels = one_in_31
    with pytest.raises(ConfigError, match="seeds"):
        audit_ties([run], qrels, seeds=1)
    with pytest.raises(ConfigError, match="qrels"):
        audit_ties([run], None, measures="Hit@10")
    with pytest.raises(ConfigError, match="cutoffs"):
        audit_ties([run], qrels, cutoffs=(0,))


# ---------------------------------------------------------------------- sampled-candidate protocol

@pytest.fixture
def catalogue():
    """400 items, each with a genre (8) and a decade (5); users like two genres."""
    rng = np.random.default_rng(5)
    items = pd.DataFrame({"genre": [f"g{x}" for x in rng.integers(0, 8, 400)],
                          "decade": [f"d{x}" for x in rng.integers(0, 5, 400)]},
                         index=[f"i{j}" for j in range(400)])
    hist, held = [], {}
    for u in range(300):
        liked = rng.choice(8, 2, replace=False)
        pool = items.index[items.genre.isin([f"g{x}" for x in liked])].to_numpy()
        picks = rng.choice(pool, 6, replace=False)
        hist += [(f"u{u}", i) for i in picks[:5]]
        held[f"u{u}"] = picks[5]
    return items, pd.DataFrame(hist, columns=["user", "item"]), held


def test_sampled_candidates_are_relevant_first_seeded_and_exclude_history(catalogue):
    items, hist, held = catalogue
    def zero(user, cand):
        return np.zeros(len(cand))

    s = sampled_candidate_run(held, items.index, zero, n_negatives=30, seed=4, exclude=hist)
    f = s.run.frame
    assert len(f) == 300 * 31
    for user, g in f.groupby("qid", sort=False):
        assert g.docid.iloc[0] == held[user]
        negs = set(g.docid.iloc[1:])
        assert len(negs) == 30 and held[user] not in negs
        assert not negs & set(hist.item[hist.user == user])
        assert list(g["rank"]) == list(range(1, 32))
    assert len(s.qrels) == 300 and (s.qrels.frame.label == 1).all()
    again = sampled_candidate_run(held, items.index, zero, n_negatives=30, seed=4, exclude=hist)
    pd.testing.assert_frame_equal(again.run.frame, f)
    other = sampled_candidate_run(held, items.index, zero, n_negatives=30, seed=5, exclude=hist)
    assert not other.run.frame.docid.equals(f.docid)
    # a user's sample depends on (seed, user) only, not on who else is sampled
    alone = sampled_candidate_run({"u7": held["u7"]}, items.index, zero, n_negatives=30, seed=4, exclude=hist)
    assert list(alone.run.frame.docid) == list(f.docid[f.qid == "u7"])


def test_full_catalogue_candidates(catalogue):
    items, hist, held = catalogue
    s = sampled_candidate_run({"u0": held["u0"]}, items.index, lambda u, c: np.arange(len(c)),
                              n_negatives=None, exclude=hist)
    banned = set(hist.item[hist.user == "u0"]) | {held["u0"]}
    assert len(s.run) == 1 + 400 - len(banned)


def test_sampled_candidates_reject_bad_scorers_and_requests(catalogue):
    items, hist, held = catalogue
    with pytest.raises(ConfigError, match="one score per item"):
        sampled_candidate_run(held, items.index, lambda u, c: np.zeros(3))
    with pytest.raises(ConfigError, match="non-finite"):
        sampled_candidate_run(held, items.index, lambda u, c: np.full(len(c), np.nan))
    with pytest.raises(ConfigError, match="lower n_negatives"):
        sampled_candidate_run(held, items.index[:20], lambda u, c: np.zeros(len(c)), n_negatives=30)
    with pytest.raises(ConfigError, match="exactly one"):
        sampled_candidate_run(pd.DataFrame({"user": ["a", "a"], "item": ["i1", "i2"]}), items.index,
                              lambda u, c: np.zeros(len(c)))


def test_stable_sort_bias_on_a_tie_heavy_scorer(catalogue):
    items, hist, held = catalogue
    scorer = attribute_overlap_scorer(hist, items, ["genre", "decade"])  # scores 0, 1, 2: tie-heavy
    s = sampled_candidate_run(held, items.index, scorer, n_negatives=30, seed=0, exclude=hist)
    measures = ["Hit@10", "nDCG@10", "RR"]
    inp = policy_metrics(s.run, s.qrels, measures, policy="input")
    exp = expected_metrics(s.run, s.qrels, measures)
    # relevant-first input order puts the relevant item at the top of its tie block: it can never
    # do worse than the average order, and does strictly better whenever that block is tied
    assert (inp >= exp - 1e-12).all().all()
    r = Ranked(s.run, s.qrels)
    rel_tied = r.b_size[r.block[r.lab]] > 1
    assert rel_tied.mean() > 0.9
    assert (inp["RR"].to_numpy()[rel_tied] > exp["RR"].to_numpy()[rel_tied]).all()
    audit = audit_ties([s.run], s.qrels, measures, seeds=30, permutations=3)
    for m in audit.runs[0].measures:
        assert m.input_order - m.expected > 0.2, m  # the bias is large, not rounding noise
        assert abs(m.hash_seeds_mean - m.expected) < 4 * m.hash_seeds_sd / math.sqrt(30) + 1e-9
        assert m.permutation > 0.1 and m.permutation_hash == 0.0
    # popularity on the same candidates, and a tie-free scorer: no input-order advantage at all
    rng = np.random.default_rng(0)
    noisy = sampled_candidate_run(held, items.index, lambda u, c: rng.random(len(c)), seed=0, exclude=hist)
    audit = audit_ties([noisy.run], noisy.qrels, measures, seeds=3, permutations=2)
    for m in audit.runs[0].measures:
        assert m.input_order == m.expected == m.hash and m.permutation == 0.0
    pop = popularity_scorer(hist)
    assert list(pop("u0", np.array([hist.item.iloc[0], "nope"]))) == [
        float((hist.item == hist.item.iloc[0]).sum()), 0.0]


# ------------------------------------------------------------------------------------------- CLI

@pytest.fixture
def ties_cli(monkeypatch):
    assert "recjudge.cli.ties" in cli.COMMAND_MODULES
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("recjudge.cli.ties",))
    return cli.main


def test_cli_prints_tables_and_writes_the_issue_json(ties_cli, tmp_path, one_in_31, capsys):
    run, qrels = one_in_31
    from recjudge.data.trec import write_qrels, write_run

    runs = tmp_path / "runs"
    write_run(run, runs / "one.run")
    write_run(resolve_ties(run, "hash"), runs / "fixed.run")
    write_qrels(qrels, tmp_path / "q.qrels")
    out = tmp_path / "ties.json"
    code = ties_cli(["ties", "--runs", str(runs), "--qrels", str(tmp_path / "q.qrels"), "--seeds", "5",
                     "--permutations", "3", "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "Tie prevalence" in text and "Hit@10" in text and "nDCG@100" in text
    data = json.loads(out.read_text())
    assert set(data["runs"]) == {"one", "fixed"}
    one = data["runs"]["one"]
    assert set(one) >= {"prevalence", "measures", "permutation"}
    assert list(one["measures"]) == ["Hit@10", "nDCG@10", "nDCG@100"]
    for m in one["measures"].values():
        assert set(m) >= {"input_order", "hash", "expected", "hash_seeds_mean", "hash_seeds_sd"}
    assert one["measures"]["Hit@10"]["input_order"] == 1.0
    assert one["measures"]["Hit@10"]["expected"] == pytest.approx(10 / 31, rel=1e-12)
    assert one["permutation"]["Hit@10"] == 1.0  # some shuffle moves the relevant item out of the top 10
    assert data["runs"]["fixed"]["permutation"] == {"Hit@10": 0.0, "nDCG@10": 0.0, "nDCG@100": 0.0}
    assert one["prevalence"]["crossing_top10"] == 1.0


def test_cli_errors_exit_non_zero_and_write_nothing(ties_cli, tmp_path, capsys):
    bad = tmp_path / "bad.run"
    bad.write_text("u Q0 a 1 1.0 t\nu Q0 b 2 high t\n")
    out = tmp_path / "x.json"
    assert ties_cli(["ties", "--runs", str(bad), "--json", str(out)]) == 2
    assert f"{bad}:2" in capsys.readouterr().err
    assert not out.exists()
    good = tmp_path / "good.run"
    good.write_text("u Q0 a 1 1.0 t\n")
    assert ties_cli(["ties", "--runs", str(good), "--measures", "Hit@10"]) == 2
    assert "--qrels" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad_k:  # refused by the option's type, as argparse does
        ties_cli(["ties", "--runs", str(good), "--k", "ten"])
    assert bad_k.value.code == 2 and "--k: expects comma-separated positive integers" in capsys.readouterr().err
    assert ties_cli(["ties", "--runs", str(good)]) == 0  # prevalence only
    assert "Tie prevalence" in capsys.readouterr().out
    import gzip

    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "a.run").write_text("u Q0 a 1 1.0 t\n")
    (folder / "a.run.gz").write_bytes(gzip.compress(b"u Q0 a 1 1.0 t\n"))
    assert ties_cli(["ties", "--runs", str(folder)]) == 2
    assert "also used by" in capsys.readouterr().err


def test_audit_names_runs_by_mapping_key_and_records_settings(one_in_31):
    run, qrels = one_in_31
    audit = audit_ties({"renamed": run}, qrels, "Hit@10", seeds=4, permutations=2, seed=7)
    data = audit.as_dict()
    assert list(data["runs"]) == ["renamed"]
    settings = data["settings"]
    assert settings["hash_seeds"] == {"first": 7, "count": 4} and settings["permutations"] == 2
    assert settings["counted_users"] == 1 and settings["k"] == [10, 100]
    with pytest.raises(ConfigError, match="'input' or 'hash'"):
        permutation_test(run, qrels, "Hit@10", policy="random")
    with pytest.warns(UserWarning, match="none of"):
        audit_ties([run], read_qrels("other 0 rel 1\n"), "Hit@10", seeds=2, permutations=1)


def test_large_block_matches_exact_rational_arithmetic():
    """One block of 500 items, 5 relevant: Hit@100 = 1 − C(495, 100) / C(500, 100) and
    RR = Σ_j C(499 − j, 4) / C(500, 5) / (j + 1), computed with exact fractions."""
    from fractions import Fraction

    n, rel_at = 500, (3, 100, 200, 400, 499)
    run = Run.from_frame(pd.DataFrame({"qid": "u", "docid": [f"d{i}" for i in range(n)], "score": 1.0}))
    qrels = Qrels.from_frame(pd.DataFrame({"qid": "u", "docid": [f"d{i}" for i in rel_at], "label": 1}))
    exp = expected_metrics(run, qrels, ["Hit@100", "RR", "RR@50"]).iloc[0]
    hit = 1 - Fraction(math.comb(495, 100), math.comb(500, 100))
    rr = [Fraction(math.comb(n - 1 - j, 4), math.comb(n, 5)) / (j + 1) for j in range(n - 5 + 1)]
    assert exp["Hit@100"] == pytest.approx(float(hit), rel=1e-13)
    assert exp["RR"] == pytest.approx(float(sum(rr)), rel=1e-12)
    assert exp["RR@50"] == pytest.approx(float(sum(rr[:50])), rel=1e-12)


# ------------------------------------------------------------------------ sampled-candidate CLI

def test_cli_sampled_candidates_scored_by_a_run_by_hand(ties_cli, tmp_path, capsys):
    """Catalogue a..e (the items the run and the qrels name), N = 4: every other item is a negative.

    u1 (held out a): the run scores c 3, d 2; a, b, e are unranked and tie below its lowest score
    (1), at 0. Relevant-first input order puts a at rank 3 (RR 1/3, P@3 1/3); random order puts it
    at rank 3, 4 or 5 (E[RR] = (1/3 + 1/4 + 1/5) / 3, E[P@3] = 1/3 · 1/3).
    u2 (held out b): the run scores b 5 above everything: RR 1 and P@3 1/3 whatever the order.
    """
    (tmp_path / "sys.run").write_text("u1 Q0 c 1 3 s\nu1 Q0 d 2 2 s\nu2 Q0 b 1 5 s\nu2 Q0 e 2 1 s\n")
    (tmp_path / "held.qrels").write_text("u1 0 a 1\nu2 0 b 1\n")
    out = tmp_path / "s.json"
    code = ties_cli(["ties", "--runs", str(tmp_path / "sys.run"), "--qrels", str(tmp_path / "held.qrels"),
                     "--sampled-candidates", "4", "--seed", "3", "--measures", "RR,P@3", "--seeds", "3",
                     "--permutations", "2", "--json", str(out)])
    assert code == 0
    assert "Sampled-candidate protocol" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["sampled_candidates"]["negatives"] == 4 and data["sampled_candidates"]["scorers"] == ["sys"]
    rr, p3 = data["runs"]["sys"]["measures"]["RR"], data["runs"]["sys"]["measures"]["P@3"]
    assert rr["input_order"] == pytest.approx((1 / 3 + 1) / 2, rel=1e-12)
    assert rr["expected"] == pytest.approx(((1 / 3 + 1 / 4 + 1 / 5) / 3 + 1) / 2, rel=1e-12)
    assert p3["input_order"] == pytest.approx((1 / 3 + 1 / 3) / 2, rel=1e-12)
    assert p3["expected"] == pytest.approx((1 / 9 + 1 / 3) / 2, rel=1e-12)


def test_cli_sampled_candidates_without_runs_is_one_tie_the_relevant_item_wins(ties_cli, tmp_path, capsys):
    """No run: every candidate scores 0, so with N = 4 the held-out item is first under input order
    (RR 1) and uniformly at ranks 1..5 otherwise (E[RR] = (1 + 1/2 + 1/3 + 1/4 + 1/5) / 5)."""
    (tmp_path / "held.qrels").write_text("u1 0 a 1\nu2 0 b 1\nu3 0 c 0\n")  # u3 has no positive: skipped
    (tmp_path / "items.txt").write_text("a\nb\nc\nd\ne\n")
    out = tmp_path / "s.json"
    assert ties_cli(["ties", "--qrels", str(tmp_path / "held.qrels"), "--sampled-candidates", "4",
                     "--catalogue", str(tmp_path / "items.txt"), "--measures", "RR", "--seeds", "2",
                     "--permutations", "1", "--json", str(out)]) == 0
    rr = json.loads(out.read_text())["runs"]["constant"]["measures"]["RR"]
    assert rr["input_order"] == 1.0
    assert rr["expected"] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5) / 5, rel=1e-12)
    capsys.readouterr()
    (tmp_path / "two.qrels").write_text("u1 0 a 1\nu1 0 b 2\n")
    assert ties_cli(["ties", "--qrels", str(tmp_path / "two.qrels"), "--sampled-candidates", "4",
                     "--catalogue", str(tmp_path / "items.txt")]) == 2
    assert "'u1' has 2 positives" in capsys.readouterr().err
    assert ties_cli(["ties", "--sampled-candidates", "4"]) == 2
    assert "needs --qrels" in capsys.readouterr().err
    assert ties_cli(["ties", "--qrels", str(tmp_path / "held.qrels")]) == 2
    assert "no runs given" in capsys.readouterr().err


def test_input_order_after_a_shuffle_on_a_run_with_more_blocks_times_rows_than_int32_holds():
    # 70,000 rows in 35,000 tie blocks: block * rows passes 2^31, where an int32 product would wrap
    import pandas as pd

    from recjudge.data.trec import Run
    from recjudge.evaluation.ties.ranked import Ranked, shuffled_file_positions

    users = 700
    frame = pd.DataFrame({"qid": np.repeat([f"u{u:03d}" for u in range(users)], 100),
                          "docid": [f"d{i}" for i in range(users * 100)],
                          "score": np.tile(np.repeat(np.arange(50, 0, -1), 2), users).astype(float)})
    r = Ranked(Run.from_frame(frame, "pairs"))
    assert int(r.block.max()) * r.n_rows > 2**31
    file_pos = shuffled_file_positions(r.qcodes, np.random.default_rng(4))
    got = r.treatment(r.tied_rows, "input", file_pos=file_pos)
    # reference: inside each block, rows by their line after the shuffle
    rows = r.tied_rows
    want = r.pos.copy()
    order = np.lexsort((file_pos[r.order[rows]], r.block[rows]))
    want[rows[order]] = r.pos[rows]
    np.testing.assert_array_equal(got, want)
