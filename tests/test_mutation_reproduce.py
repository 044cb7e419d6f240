"""``recjudge reproduce``'s planning and cells where a slip would show: the K each job judges, the
seeds of two experiments, the pool's depth, the measures picked; the published value's scale, the
difference's sign, NaN cells; and a run with a judge whose labels differ from the human ones in a
known way, two experiments and K below the judged items, for what the confusion test of
test_reproduce.py leaves out: κ of Table 3, Figure 4, Table 1, Figure 2's shifts, Table 5's
calibration means and the significance agreement. Expected values by hand, ir-measures or scipy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from test_reproduce import _per_user as _per_user_values
from test_reproduce import (
    CONFUSED_SYSTEMS,
    F_ALL,
    MEASURES,
    _cells,
    _confused,
    _means,
    _settings,
    build_study,
    scripted,
)

from recjudge.data.trec import Qrels
from recjudge.experiments.published import load_published
from recjudge.experiments.reproduce import (
    TABLE9_K,
    Cells,
    ReproduceSettings,
    field_sets,
    pick_measure,
    plan_jobs,
    run_reproduce,
    samples,
    target_measures,
)
from recjudge.judging import JudgeSettings, select_pairs


def _human(study) -> Qrels:
    return Qrels.from_frame(pd.DataFrame([(q, d, lab) for (q, d), lab in study["human"].items()],
                                         columns=["qid", "docid", "label"]), "h")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """8 participants judging 10 of 40 movies, 4 systems ranking 15 each."""
    return build_study(tmp_path_factory.mktemp("plan"), participants=8, candidates=40, judged=10, run_length=15,
                       systems={"A": 2.0, "B": 1.0, "C": 0.0, "Pop": None}, seed=3)


# ------------------------------------------------------------------------------ planning

@pytest.mark.parametrize("only, k", [
    (("table3",), 6),                 # per_user
    (("table3", "table4"), 10),       # the largest K of Table 4 (3, 10) above per_user 6
    (("figure5",), TABLE9_K),         # Figure 5 reads K = 100 without Table 9
    (("table9",), TABLE9_K),
    (("table5",), 6),                 # no sample read: per_user
])
def test_plan_base_k_is_the_largest_sample_read(small, tmp_path, only, k):
    s = ReproduceSettings(collection=small["folder"], out=tmp_path, only=only, per_user=6, experiments=1,
                          k_values=(3, 10))
    assert s.base_k() == k


def test_plan_jobs_judge_each_sample_with_its_k_and_seed(small, tmp_path):
    from recjudge.api import load_collection
    from recjudge.data.trec import read_runs

    collection = load_collection(small["folder"])
    human = _human(small)
    base = JudgeSettings.from_dict({"model": "m", "seed": 0})
    s = ReproduceSettings(collection=small["folder"], out=tmp_path, only=("table3", "table4", "table9", "table5"),
                          per_user=6, experiments=2, k_values=(3, 10), field_sets=("title",), depth=5)
    jobs = plan_jobs(s, human, base, collection, read_runs([str(small["runs"])]))
    by = {(j.group, j.row, j.experiment): j for j in jobs}
    # 8 participants with 10 judged items each: K = 100 takes all 80 pairs, K = 6 takes 48
    assert s.base_k() == 100
    for e in (0, 1):
        assert len(by[("base", "K=100", e)].pairs) == 80
        assert len(by[("fields", "Title", e)].pairs) == 8 * 6
        assert len(by[("prompts", "defined scale", e)].pairs) == 80  # Table 9's K = 100, not per_user
        assert by[("base", "K=100", e)].config.seed == e  # each experiment's judge its own seed
        assert by[("fields", "Title", e)].config.fields == "title"
        assert set(by[("fields", "Title", e)].pairs) == set(select_pairs(reference=human, per_user=6, seed=e))
    assert set(by[("fields", "Title", 0)].pairs) != set(by[("fields", "Title", 1)].pairs)
    # the pool: each run's top 5 for every participant, judged once
    top5 = {(q, d) for by_user in small["scores"].values() for q, items in by_user.items()
            for d in sorted(items, key=lambda d: -items[d])[:5]}
    assert set(by[("pool", "depth 5", 0)].pairs) == top5 and len([j for j in jobs if j.group == "pool"]) == 1


def test_plan_samples_are_nested_and_seeded_per_experiment(small, tmp_path):
    human = _human(small)
    s = ReproduceSettings(collection=small["folder"], out=tmp_path, seed=4)
    for e in (0, 1):
        assert samples(s, human, 6, e) == select_pairs(reference=human, per_user=6, seed=4 + e)
    assert set(samples(s, human, 6, 0)) != set(samples(s, human, 6, 1))
    assert set(samples(s, human, 3, 1)) <= set(samples(s, human, 6, 1))  # nested across K


def test_plan_explicit_field_sets_take_the_papers_row_names(small, tmp_path):
    from recjudge.api import load_collection

    s = ReproduceSettings(collection=small["folder"], out=tmp_path, field_sets=("title", "all", "title+genres"))
    usable, skipped = field_sets(s, load_collection(small["folder"]))
    assert usable == {"Title": "title", "Title + All metadata": "all", "Title + Genres": "title+genres"}
    assert skipped == {}


def test_plan_measures_picked_and_read_from_the_protocol(monkeypatch):
    assert pick_measure(["Judged@100", "nDCG@10", "nDCGexp@100"], "nDCG") == "nDCG@10"  # the first match
    assert pick_measure(["Judged@100", "Bpref"], "nDCG") is None
    assert target_measures() == (["Judged@100", "Compat(p=0.95)", "nDCGexp@100", "Bpref"], "")
    import recjudge.experiments.reproduce.settings as reproduce  # where the study's definitions live

    monkeypatch.setattr(reproduce, "protocol_settings", lambda command: {"measures": "P@5, nDCG@10"})
    assert target_measures() == (["P@5", "nDCG@10"], "")
    monkeypatch.setattr(reproduce, "protocol_settings", lambda command: {"measures": "P@5,Wibble@3"})
    measures, note = target_measures()
    assert measures == list(reproduce.FALLBACK_MEASURES) and "P@5,Wibble@3" in note


# ------------------------------------------------------------------------------ cells

def test_cells_on_the_published_scale_with_the_difference_and_inside():
    cells = Cells(load_published("penha2025"))
    cells.add("table8", "baseline", "agree", 0.5)           # printed in percent: 51.83
    cells.add("table3", "Title", "agree", 0.5479 + 0.001)   # 0.5479 ± 0.0019
    cells.add("table3", "Title", "tie", 0.30)               # 0.2607 ± 0.0017
    cells.add("table3", "Title", "disagree", math.nan)
    cells.add("table4", "K=10", "tau Compat", 0.7, published_as=("table4", "K=50", "tau Compat"))  # .802
    f = cells.frame().set_index(["target", "row", "column"])
    r = f.loc[("table8", "baseline", "agree")]
    assert r.ours == 50.0 and r.published_value == 51.83 and r.difference == pytest.approx(50.0 - 51.83)
    r = f.loc[("table3", "Title", "agree")]
    assert r.difference == pytest.approx(0.001) and r.inside is True
    r = f.loc[("table3", "Title", "tie")]
    assert r.difference == pytest.approx(0.30 - 0.2607) and r.inside is False
    r = cells.rows[3]
    assert r["column"] == "disagree" and r["ours"] is None and r["difference"] is None  # NaN: no number
    assert r["inside"] is None and r["published_value"] == 0.1914  # no value: neither inside nor out
    assert f.loc[("table4", "K=10", "tau Compat")].difference == pytest.approx(0.7 - 0.802)


# ------------------------------------------------------------------------------ a known confusion

@pytest.fixture(scope="module")
def confusion(tmp_path_factory):
    """10 participants judging 60 of 100 movies (K = 50 samples some of them)."""
    return build_study(tmp_path_factory.mktemp("confusion2"), participants=10, candidates=100, judged=60,
                       run_length=40, systems=CONFUSED_SYSTEMS, seed=11)


def _by_distance(human: dict, pairs, label) -> dict[int, tuple[float, float, float]]:
    """Agree / tie / disagree over pairs of one participant's items with distinct human labels, by
    label distance, pooled over participants."""
    by_user: dict[str, list[int]] = {}
    for q, d in pairs:
        by_user.setdefault(q, []).append(human[(q, d)])
    n: dict[int, list[int]] = {}
    for labels in by_user.values():
        for x, y in itertools.combinations(labels, 2):
            if x == y:
                continue
            lo, hi = min(x, y), max(x, y)
            slot = n.setdefault(hi - lo, [0, 0, 0])
            a, b = label(lo), label(hi)
            slot[0 if b > a else 1 if b == a else 2] += 1
    return {d: tuple(v / sum(c) for v in c) for d, c in n.items() for c in [c]}


def _per_user(scores: dict, qrels: dict, users, measure: str) -> pd.DataFrame:
    """ir-measures' per-user values, users × systems (a user without a value: 0)."""
    return pd.DataFrame(_per_user_values(scores, qrels, list(users), measure), index=list(users))


def test_confusion_every_other_cell_by_hand(confusion, tmp_path, fake_openai):
    from sklearn.metrics import cohen_kappa_score

    from recjudge.data.trec import read_runs
    from recjudge.evaluation.significance import pairwise_tests, significance_agreement

    scripted(fake_openai, confusion, _confused)
    result = run_reproduce(_settings(confusion, tmp_path / "out", model="gpt-4o-mini", base_url=fake_openai.url,
                                     experiments=2, field_sets=("title", "all"), profile_size=12, permutations=200,
                                     bootstrap=50, concurrency=8,
                                     only=("table1", "figure2", "table3", "figure4", "table5", "figure5")),
                           progress=lambda m: None)
    assert result.complete and "judge_failures" not in result.extras
    c = _cells(result)
    human = confusion["human"]
    hq = _human(confusion)
    sample = {e: select_pairs(reference=hq, per_user=50, seed=e) for e in (0, 1)}
    assert all(len(sample[e]) < len(human) for e in (0, 1))

    # Table 3's κ (unweighted, sklearn) on the K = 50 sample, mean of two experiments
    def kappa(label):
        return sum(cohen_kappa_score([human[p] for p in sample[e]], [label(human[p]) for p in sample[e]])
                   for e in (0, 1)) / 2

    assert c[("table3 kappa", "Title + All metadata", "Cohen's kappa")] == pytest.approx(kappa(F_ALL.get))
    assert c[("table3 kappa", "Title", "Cohen's kappa")] == pytest.approx(1.0)

    # Figure 4: the base judge (every field: F_ALL) on the K = 50 sample, by label distance
    per = [_by_distance(human, sample[e], F_ALL.get) for e in (0, 1)]
    distances = sorted(set(per[0]) | set(per[1]))
    assert {k[1] for k in c if k[0] == "figure4"} == {f"label distance {d}" for d in distances}
    for d in distances:
        want = [sum(p[d][i] for p in per if d in p) / sum(d in p for p in per) for i in range(3)]
        got = [c[("figure4", f"label distance {d}", col)] for col in ("agree", "tie", "disagree")]
        assert got == pytest.approx(want), d
    assert any(p[d][1] > 0 for p in per for d in p) and any(p[d][2] > 0 for p in per for d in p)

    # Table 5's calibration set: pool pairs both label; the LLM's mean is F_ALL's, not the human one
    scores, users = confusion["scores"], confusion["users"]
    pool = {(q, d) for by_user in scores.values() for q, items in by_user.items() for d in items}
    both = pool & set(human)
    assert c[("table5", "calibration", "mean human label")] == pytest.approx(np.mean([human[p] for p in both]))
    assert c[("table5", "calibration", "mean LLM label")] == pytest.approx(np.mean([F_ALL[human[p]] for p in both]))

    # significance: sign-flip tests (themselves checked against scipy in test_significance.py) on
    # ir-measures' per-user Compat under the human qrels and under the LLM's labels of the pool
    full = {(q, d): (F_ALL[human[(q, d)]] if (q, d) in human else (3 if int(d) % 3 == 0 else 0)) for q, d in pool}
    compat = MEASURES["Compat"]
    h_mat, l_mat = _per_user(scores, human, users, compat), _per_user(scores, full, users, compat)
    h = pairwise_tests(h_mat, "human", compat, 0.05, 200, 0)
    llm = pairwise_tests(l_mat, "Full LLM", compat, 0.05, 200, 0)
    want = significance_agreement(h, llm, h_mat.mean(), l_mat.mean())
    assert want.reference_significant > 0  # 10 users, exact: Holm over 15 pairs can reach alpha
    sig = result.extras["significance"]["Compat(p=0.95)"]
    for side, tests in (("human", h), ("llm", llm)):  # each side's tests on its own scores
        got_pairs = {(t["a"], t["b"]): t for t in sig[side]["pairs"]}
        assert len(got_pairs) == 15
        for t in tests.tests:
            g = got_pairs[(t.a, t.b)]
            assert (g["mean_difference"], g["p"], g["p_holm"], g["decision"]) == pytest.approx(
                (t.mean_difference, t.p, t.p_holm, t.decision)), (side, t.a, t.b)
    assert any(x.mean_difference != pytest.approx(y.mean_difference) for x, y in zip(h.tests, llm.tests))
    got = sig["agreement"]
    assert (got["reference_significant"], got["candidate_significant"], got["both_same_direction"]) == (
        want.reference_significant, want.candidate_significant, want.both_same_direction)
    assert c[("significance", "Compat(p=0.95)", "agreement")] == pytest.approx(want.agreement)
    # the share of the 15 system pairs both label sets call significant in the same direction
    assert want.n_pairs == 15 and want.both_same_direction > 0
    assert c[("significance", "Compat(p=0.95)", "both significant, same direction")] == pytest.approx(
        want.both_same_direction / 15)

    # Table 1: Judged@100 per group, mean over the group's systems of the mean over users
    groups = {n: "pooled" if i % 3 == 0 else "non-pooled" for i, n in enumerate(CONFUSED_SYSTEMS)}
    judged = _means(scores, human, users, "Judged@100")
    for g in ("pooled", "non-pooled"):
        want_g = np.mean([judged[n] for n in judged if groups[n] == g])
        assert c[("table1", g, "Judged@100 Cranfield")] == pytest.approx(want_g), g

    # Figure 2: historical runs under their held-out interactions (label 1) vs Cranfield under the
    # human qrels, on nDCG@100; ranks by scipy; NCEPLRec named for its drop, SimpleX and DGCF gains
    hist_runs = read_runs([str(confusion["hist"])])
    held = {(u, d): 1 for u, _, d, _ in (line.split() for line in confusion["hist_qrels"].read_text().splitlines())}
    hist_users = sorted({u for u, _ in held})
    hist_scores = {n: {q: dict(zip(f.docid, f.score)) for q, f in run.frame.groupby("qid")}
                   for n, run in hist_runs.items()}
    a = _means(hist_scores, held, hist_users, MEASURES["nDCG"])
    b = _means(scores, human, users, MEASURES["nDCG"])
    names = sorted(a)
    rank_a = dict(zip(names, stats.rankdata([-a[n] for n in names])))
    rank_b = dict(zip(names, stats.rankdata([-b[n] for n in names])))
    assert c[("figure2", "historical vs Cranfield", "Kendall tau")] == pytest.approx(
        stats.kendalltau([a[n] for n in names], [b[n] for n in names]).statistic)
    shifts = {"NCEPLRec": rank_b["NCEPLRec-1"] - rank_a["NCEPLRec-1"],
              "SimpleX": rank_a["SimpleX-1"] - rank_b["SimpleX-1"],
              "DGCF": rank_a["DGCF-1"] - rank_b["DGCF-1"]}
    assert any(v != 0 for v in shifts.values())
    for family, shift in shifts.items():
        assert c[("figure2", family, "rank shift")] == shift, family
        if family != "DGCF":  # Section 4 gives DGCF's shift only
            assert c[("figure2", family, "rank historical")] == rank_a[f"{family}-1"]
            assert c[("figure2", family, "rank Cranfield")] == rank_b[f"{family}-1"]

    # the release: 12 ML-32M users
    assert c[("dataset", "ML-32M", "users")] == 12


def _fives(system, text, user, movie, human):
    """Every fifth movie a participant judged gets 7; the others their own label (unjudged: 3 or 0,
    as the confusion judge): enough to move systems under nDCG and not under Compat."""
    if human is None:
        return 3 if movie % 3 == 0 else 0
    return 7 if movie % 5 == 0 else human


def test_confusion_a_judge_that_moves_systems(confusion, tmp_path, fake_openai):
    scripted(fake_openai, confusion, _fives)
    result = run_reproduce(_settings(confusion, tmp_path / "out", model="gpt-4o-mini", base_url=fake_openai.url,
                                     experiments=1, profile_size=12, permutations=200, bootstrap=50, concurrency=8,
                                     only=("table5", "figure5")), progress=lambda m: None)
    assert result.complete
    c = _cells(result)
    human, scores, users = confusion["human"], confusion["scores"], confusion["users"]
    names = sorted(scores)
    # Figure 5: K = 100 covers every judged item; nDCG@100 ranks by scipy
    truth = _means(scores, human, users, MEASURES["nDCG"])
    llm = _means(scores, {(q, d): 7 if int(d) % 5 == 0 else lab for (q, d), lab in human.items()}, users,
                 MEASURES["nDCG"])
    h_rank = dict(zip(names, stats.rankdata([-truth[n] for n in names])))
    l_rank = dict(zip(names, stats.rankdata([-llm[n] for n in names])))
    displacement = pd.Series({n: abs(l_rank[n] - h_rank[n]) for n in names})
    assert displacement.median() != displacement.mean()  # so that the one cannot pass for the other
    assert c[("figure5", "LLM vs Cranfield", "median |rank displacement|")] == displacement.median()
    moved = [f for f in ("SimpleX", "DGCF", "NCEPLRec") if l_rank[f"{f}-1"] != h_rank[f"{f}-1"]]
    assert moved
    for family in ("SimpleX", "DGCF", "NCEPLRec"):
        assert c[("figure5", family, "rank LLM")] == l_rank[f"{family}-1"], family
        if family != "DGCF":  # Section 4 gives no Cranfield rank for DGCF
            assert c[("figure5", family, "rank Cranfield")] == h_rank[f"{family}-1"], family
    assert c[("figure5", "K=100", "Kendall tau nDCGexp@100")] == pytest.approx(
        stats.kendalltau([truth[n] for n in names], [llm[n] for n in names]).statistic)
    # Table 5: τ on Compat between the human qrels and the LLM's labels of the pool (not on nDCG)
    pool = {(q, d) for by_user in scores.values() for q, items in by_user.items() for d in items}
    full = {(q, d): (7 if int(d) % 5 == 0 else human[(q, d)]) if (q, d) in human else (3 if int(d) % 3 == 0 else 0)
            for q, d in pool}
    tau = {m: stats.kendalltau([_means(scores, human, users, MEASURES[m])[n] for n in names],
                               [_means(scores, full, users, MEASURES[m])[n] for n in names]).statistic
           for m in ("Compat", "nDCG")}
    assert tau["Compat"] != pytest.approx(tau["nDCG"])
    assert c[("table5", "vs. Human-only", "Full LLM")] == pytest.approx(tau["Compat"])
    assert c[("table5", "vs. Full LLM", "Human-only")] == pytest.approx(tau["Compat"])
