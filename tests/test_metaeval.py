"""System-ranking meta-evaluation: τ variants, bootstrap, displacement, compare/evaluate end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import ir_measures
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from recjudge.cli import main
from recjudge.data.trec import Qrels, Run, read_qrels, write_qrels, write_run
from recjudge.evaluation.ties.policy import resolve_ties
from recjudge.errors import ConfigError
from recjudge.evaluation.metaeval import (
    compare,
    evaluate,
    kendall_tau,
    kendall_tau_interval,
    system_ranks,
    tau_ap,
    weighted_tau,
)
from recjudge.evaluation.metaeval.kendall import _tau_b_rows


def test_kendall_tau_by_hand():
    # 4 systems, one discordant pair of 6: τ = (5 − 1) / 6
    assert kendall_tau([4, 3, 2, 1], [3, 4, 2, 1]) == pytest.approx(4 / 6)
    # τ-b with a tie in the candidate: pairs 6, concordant 5, tied-in-y 1:
    # τ_b = (5 − 0) / sqrt(6 · 5)
    assert kendall_tau([4, 3, 2, 1], [4, 3, 3, 1]) == pytest.approx(5 / np.sqrt(30))


def test_weighted_tau_is_scipy_hyperbolic():
    # the value scipy documents for this example
    assert weighted_tau([12, 2, 1, 12, 2], [1, 4, 7, 1, 0]) == pytest.approx(-0.5669496815368272, abs=1e-15)


def test_tau_ap_yilmaz_examples():
    ref = list(range(10, 0, -1))                 # systems 0..9, best first
    top_swap = [9, 10, 8, 7, 6, 5, 4, 3, 2, 1]
    # only C(2) = 0; the other eight terms are 1: τ_AP = 2/9 · 8 − 1 = 7/9
    assert tau_ap(ref, top_swap) == pytest.approx(7 / 9)
    bottom_swap = [10, 9, 8, 7, 6, 5, 4, 3, 1, 2]
    # terms i = 2..9 are 1, the last is 8/9: τ_AP = 2/9 · (8 + 8/9) − 1 = 79/81
    assert tau_ap(ref, bottom_swap) == pytest.approx(79 / 81)
    assert tau_ap(ref, ref) == pytest.approx(1.0)
    assert tau_ap(ref, ref[::-1]) == pytest.approx(-1.0)
    # a swap at the top costs more than one at the bottom; plain τ sees them as equal
    assert kendall_tau(ref, top_swap) == kendall_tau(ref, bottom_swap)


def test_vectorised_tau_b_equals_scipy_with_ties():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 6, size=(50, 12)).astype(float)
    y = rng.integers(0, 6, size=(50, 12)).astype(float)
    got = _tau_b_rows(x, y)
    want = [stats.kendalltau(a, b).statistic for a, b in zip(x, y)]
    np.testing.assert_allclose(got, want, atol=1e-15)


def _matrix(rng, users, systems, noise):
    base = np.linspace(0.2, 0.8, systems)
    return pd.DataFrame(base + noise * rng.standard_normal((users, systems)),
                        index=[f"u{i}" for i in range(users)], columns=[f"s{j}" for j in range(systems)])


def test_bootstrap_ci_is_seeded_and_tightens_with_more_users():
    rng = np.random.default_rng(0)
    small_ref, small_cand = _matrix(rng, 40, 8, 0.8), _matrix(rng, 40, 8, 0.8)
    big_ref, big_cand = _matrix(rng, 4000, 8, 0.8), _matrix(rng, 4000, 8, 0.8)
    a = kendall_tau_interval(small_ref, small_cand, 400, seed=3).bounds
    assert a == kendall_tau_interval(small_ref, small_cand, 400, seed=3).bounds
    b = kendall_tau_interval(big_ref, big_cand, 400, seed=3).bounds
    assert b[1] - b[0] < a[1] - a[0]
    point = kendall_tau(big_ref.mean().to_numpy(), big_cand.mean().to_numpy())
    assert b[0] <= point <= b[1]


def test_bootstrap_single_resample_matches_direct_computation():
    # With one user the only resample is that user: the CI collapses onto τ of that user's row
    ref = pd.DataFrame([[0.1, 0.5, 0.3]], index=["u"], columns=list("abc"))
    cand = pd.DataFrame([[0.2, 0.1, 0.3]], index=["u"], columns=list("abc"))
    lo, hi = kendall_tau_interval(ref, cand, 10, seed=0).bounds
    want = stats.kendalltau(ref.iloc[0], cand.iloc[0]).statistic
    assert lo == pytest.approx(want) and hi == pytest.approx(want)


def test_system_ranks_share_average_rank_on_ties():
    r = system_ranks(pd.Series([0.5, 0.9, 0.5, 0.1], index=list("abcd")))
    assert r.to_dict() == {"a": 2.5, "b": 1.0, "c": 2.5, "d": 4.0}


# ------------------------------------------------------------------------------ end to end

def _fixture(seed=0, users=30, systems=6, depth=20, items=80):
    rng = np.random.default_rng(seed)
    runs = {}
    for s in range(systems):
        rows = []
        for u in range(users):
            docs = rng.choice(items, depth, replace=False)
            scores = np.sort(rng.integers(0, 8, depth))[::-1]  # many exact ties
            rows += [(f"u{u}", f"d{d}", r + 1, float(x)) for r, (d, x) in enumerate(zip(docs, scores))]
        runs[f"sys{s}"] = Run.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "rank", "score"]), f"sys{s}")
    human = []
    llm = []
    for u in range(users):
        for d in rng.choice(items, 25, replace=False):
            h = int(rng.integers(0, 5))
            human.append((f"u{u}", f"d{d}", h))
            if u < max(1, users - 5):  # the LLM judges fewer users
                llm.append((f"u{u}", f"d{d}", int(np.clip(h + rng.integers(-1, 2), 0, 7))))
    return (runs, Qrels.from_frame(pd.DataFrame(human, columns=["qid", "docid", "label"]), "human"),
            Qrels.from_frame(pd.DataFrame(llm, columns=["qid", "docid", "label"]), "llm"))


def test_compare_system_scores_equal_ir_measures_on_tie_resolved_runs():
    runs, human, llm = _fixture()
    res = compare(runs, human, [llm], bootstrap=100, tie_policy="hash", seed=5)
    measures = ["nDCG@10", "Bpref", "Judged@10", "Compat(p=0.95)"]
    res2 = compare(runs, human, [llm], measures=",".join(measures), bootstrap=0, tie_policy="hash", seed=5)
    for name, run in runs.items():
        tiefree = resolve_ties(run, "hash", 5)
        rows = [ir_measures.ScoredDoc(q, d, s) for q, d, s in zip(tiefree.frame.qid, tiefree.frame.docid,
                                                                  tiefree.frame.score)]
        for label_set, table in (("human", res2.reference), ("llm", res2.candidates["llm"])):
            qrels = human if label_set == "human" else llm
            qr = [ir_measures.Qrel(q, d, int(lab)) for q, d, lab in zip(qrels.frame.qid, qrels.frame.docid,
                                                                        qrels.frame.label)]
            want = ir_measures.calc_aggregate([ir_measures.parse_measure(m) for m in measures], qr, rows)
            for m in measures:
                got = table.means(m)[name]
                assert got == pytest.approx(want[ir_measures.parse_measure(m)], abs=1e-9), (label_set, m, name)
    ra = res.agreement["llm"]["nDCG@100"]
    ref_means = res.reference.means("nDCG@100")
    cand_means = res.candidates["llm"].means("nDCG@100")
    assert ra.kendall_tau == pytest.approx(stats.kendalltau(ref_means, cand_means).statistic)
    assert ra.n_users_reference == 30 and ra.n_users_candidate == 25
    disp = (system_ranks(cand_means) - system_ranks(ref_means)).abs()
    assert ra.median_abs_rank_displacement == disp.median()


def test_shared_queries_restrict_both_label_sets():
    runs, human, llm = _fixture(seed=1)
    res = compare(runs, human, [llm], measures="nDCG@10", queries="shared", bootstrap=0)
    ra = res.agreement["llm"]["nDCG@10"]
    assert ra.n_users_reference == ra.n_users_candidate == 25
    own = compare(runs, human, [llm], measures="nDCG@10", queries="own", bootstrap=0)
    assert own.agreement["llm"]["nDCG@10"].n_users_reference == 30


def test_tie_policy_changes_scores_of_tie_heavy_runs_only_through_declared_rule():
    runs, human, llm = _fixture(seed=2)
    a = compare(runs, human, [llm], measures="nDCG@10", tie_policy="hash", seed=0, bootstrap=0)
    b = compare(runs, human, [llm], measures="nDCG@10", tie_policy="hash", seed=0, bootstrap=0)
    c = compare(runs, human, [llm], measures="nDCG@10", tie_policy="trec_eval", bootstrap=0)
    pd.testing.assert_series_equal(a.reference.means("nDCG@10"), b.reference.means("nDCG@10"))
    assert not np.allclose(a.reference.means("nDCG@10"), c.reference.means("nDCG@10"))
    assert all(0 < v <= 1 for v in a.tie_share.values())  # every fixture run has ties in its top-k
    assert a.settings["tie_policy"] == "hash" and c.settings["tie_policy"] == "trec_eval"


def test_trec_eval_policy_reproduces_trec_eval_on_raw_tied_run():
    runs, human, _ = _fixture(seed=3)
    res = evaluate(runs, human, "nDCG@10,Bpref", tie_policy="trec_eval")
    qr = [ir_measures.Qrel(q, d, int(lab)) for q, d, lab in zip(human.frame.qid, human.frame.docid, human.frame.label)]
    for name, run in runs.items():
        raw = [ir_measures.ScoredDoc(q, d, s) for q, d, s in zip(run.frame.qid, run.frame.docid, run.frame.score)]
        # pytrec_eval breaks ties on the raw scores by docid descending: the trec_eval policy
        want = ir_measures.calc_aggregate([ir_measures.nDCG @ 10, ir_measures.Bpref], qr, raw)
        assert res.table.means("nDCG@10")[name] == pytest.approx(want[ir_measures.nDCG @ 10], abs=1e-9)
        assert res.table.means("Bpref")[name] == pytest.approx(want[ir_measures.Bpref], abs=1e-9)


def test_compare_rejects_bad_options():
    runs, human, llm = _fixture(seed=4, users=5, systems=2)
    with pytest.raises(ConfigError, match="queries"):
        compare(runs, human, [llm], queries="everything")
    with pytest.raises(ConfigError, match="at least 2 runs"):
        compare({"sys0": runs["sys0"]}, human, [llm])
    with pytest.raises(ConfigError, match="unknown measure"):
        compare(runs, human, [llm], measures="nDCG@10,Fancy@3")
    with pytest.raises(ConfigError, match="tie policy"):
        compare(runs, human, [llm], tie_policy="alphabetical")


def _write_fixture(tmp_path, **kw):
    """The fixture's runs in tmp_path/runs and its qrels as tmp_path/human.qrels, llm.qrels."""
    runs, human, llm = _fixture(**kw)
    run_dir = tmp_path / "runs"
    for name, run in runs.items():
        write_run(run, run_dir / f"{name}.run")
    write_qrels(human, tmp_path / "human.qrels")
    write_qrels(llm, tmp_path / "llm.qrels")
    return run_dir


def test_compare_cli_json_report_and_no_heavy_imports(tmp_path, capsys):
    run_dir = _write_fixture(tmp_path, seed=6, users=20, systems=5)
    write_qrels(read_qrels(tmp_path / "llm.qrels"), tmp_path / "llm2.qrels")
    out_json = tmp_path / "out.json"
    code = main(["compare", "--runs", str(run_dir), "--reference", str(tmp_path / "human.qrels"),
                 "--candidate", str(tmp_path / "llm.qrels"), "--candidate", str(tmp_path / "llm2.qrels"),
                 "--bootstrap", "50", "--json", str(out_json), "--report", str(tmp_path / "report")])
    assert code == 0
    printed = capsys.readouterr().out
    assert "Compat(p=0.95)" in printed and "tau_b" in printed
    data = json.loads(out_json.read_text())
    assert set(data["measures"]) == {"Judged@100", "Compat(p=0.95)", "nDCG@100", "Bpref"}
    m = data["measures"]["nDCG@100"]
    for key in ("kendall_tau", "kendall_tau_ci", "weighted_tau", "tau_ap", "median_abs_rank_displacement"):
        assert key in m
    assert m["kendall_tau_ci"][0] <= m["kendall_tau_ci"][1]
    # named by file stem, like the reference; each path kept in the settings
    assert list(data["candidates"]) == ["llm", "llm2"]
    assert data["settings"]["paths"] == {"human": str(tmp_path / "human.qrels"), "llm": str(tmp_path / "llm.qrels"),
                                         "llm2": str(tmp_path / "llm2.qrels")}
    # identical candidate label sets give identical verdicts
    c1, c2 = data["candidates"].values()
    assert c1["Bpref"]["kendall_tau"] == c2["Bpref"]["kendall_tau"]
    assert len(data["systems"]) == 5 and data["settings"]["tie_policy"] == "trec_eval"
    report = (tmp_path / "report" / "report.md").read_text()
    pngs = sorted(p.name for p in (tmp_path / "report").glob("*.png"))
    assert len(pngs) == 2 * 4 * 2  # scatter + displacement, 4 measures, 2 candidates
    for name in pngs:
        assert name in report
        assert (tmp_path / "report" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_never_imports_torch_or_recbole(tmp_path):
    # a fresh interpreter: other tests in this process may have trained RecBole models
    runs, human, llm = _fixture(seed=8, users=6, systems=3)
    for name, run in runs.items():
        write_run(run, tmp_path / "runs" / f"{name}.run")
    write_qrels(human, tmp_path / "human.qrels")
    write_qrels(llm, tmp_path / "llm.qrels")
    code = (
        "import sys\n"
        "from recjudge.cli import main\n"
        f"rc = main(['compare', '--runs', {str(tmp_path / 'runs')!r}, '--reference', {str(tmp_path / 'human.qrels')!r},"
        f" '--candidate', {str(tmp_path / 'llm.qrels')!r}, '--bootstrap', '10'])\n"
        "print('HEAVY', rc, sorted(m for m in ('torch', 'recbole', 'ray') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY 0 []" in out


def test_evaluate_cli_and_bad_run_exit_code(tmp_path, capsys):
    runs, human, _ = _fixture(seed=7, users=8, systems=3)
    for name, run in runs.items():
        write_run(run, tmp_path / "runs" / f"{name}.run")
    write_qrels(human, tmp_path / "human.qrels")
    code = main(["evaluate", "--runs", str(tmp_path / "runs"), "--qrels", str(tmp_path / "human.qrels"),
                 "--measures", "nDCG@10,P@5", "--json", str(tmp_path / "e.json")])
    assert code == 0
    data = json.loads((tmp_path / "e.json").read_text())
    assert {s["system"] for s in data["systems"]} == set(runs)
    assert "nDCG@10" in capsys.readouterr().out
    (tmp_path / "runs" / "broken.run").write_text("u1 Q0 d1 1 0.5 x\nu1 Q0 d2 2 NaN x\n")
    code = main(["evaluate", "--runs", str(tmp_path / "runs"), "--qrels", str(tmp_path / "human.qrels")])
    err = capsys.readouterr().err
    assert code == 2 and "broken.run:2" in err and "finite" in err


def test_shared_queries_report_the_reference_table_that_was_compared():
    runs, human, llm = _fixture(seed=9)
    res = compare(runs, human, [llm], measures="nDCG@10", queries="shared", bootstrap=0)
    ref_t = res.reference_table("llm")
    assert list(ref_t.matrices["nDCG@10"].index) == sorted(set(llm.qids))  # shared users only
    ra = res.agreement["llm"]["nDCG@10"]
    assert ra.kendall_tau == pytest.approx(kendall_tau(ref_t.means("nDCG@10"), res.candidates["llm"].means("nDCG@10")))
    js = res.to_json()["systems"][0]["candidates"]["llm"]
    assert js["reference_scores"]["nDCG@10"] == pytest.approx(ref_t.means("nDCG@10")[res.to_json()["systems"][0]["system"]])


def test_rank_displacement_signs_by_hand():
    # reference ranks a > b > c; the candidate puts c first: c rises by 2 (−2), a and b drop by 1
    ref = pd.DataFrame([[0.9, 0.5, 0.1]], index=["u"], columns=list("abc"))
    cand = pd.DataFrame([[0.5, 0.3, 0.9]], index=["u"], columns=list("abc"))
    from recjudge.evaluation.metaeval import rank_agreement

    ra = rank_agreement("m", ref, cand, n_boot=0, seed=0)
    assert dict(ra.most_displaced) == {"c": -2.0, "a": 1.0, "b": 1.0}
    assert ra.median_abs_rank_displacement == 1.0 and ra.max_abs_rank_displacement == 2.0


def test_bootstrap_with_partial_user_coverage_matches_brute_force():
    rng = np.random.default_rng(11)
    users = [f"u{i}" for i in range(12)]
    ref = pd.DataFrame(rng.random((12, 4)), index=users, columns=list("abcd"))
    cand = pd.DataFrame(rng.random((7, 4)), index=users[:7], columns=list("abcd"))  # 5 users unjudged
    lo, hi = kendall_tau_interval(ref, cand, n_resamples=300, seed=4, chunk=300, method="percentile").bounds
    # brute force with the same multinomial draws: mean over the resampled users each matrix has
    w = np.random.default_rng(4).multinomial(12, np.full(12, 1 / 12), size=300)
    taus = []
    for row in w:
        idx = np.repeat(np.arange(12), row)
        r = ref.iloc[idx].mean()
        c_idx = [i for i in idx if i < 7]
        c = cand.iloc[c_idx].mean()
        if c_idx:
            taus.append(stats.kendalltau(r, c).statistic)
    want = np.quantile([t for t in taus if t == t], [0.025, 0.975])
    assert (lo, hi) == pytest.approx(tuple(want), abs=1e-12)


def test_equal_means_summed_in_another_order_stay_tied():
    # Judged@10-like values: the same multiset of j/10 in two orders
    vals = np.array([0.1, 0.7, 0.3, 0.9, 0.2, 0.6, 0.4] * 30)
    m = pd.DataFrame({"a": vals, "b": vals[::-1]})
    from recjudge.evaluation.metaeval import system_means

    means = system_means(m)
    assert means["a"] == means["b"]
    assert system_ranks(means).tolist() == [1.5, 1.5]


def test_negative_bootstrap_is_rejected():
    runs, human, llm = _fixture(seed=10, users=5, systems=2)
    with pytest.raises(ConfigError, match="bootstrap"):
        compare(runs, human, [llm], bootstrap=-1)


def test_runs_and_qrels_without_a_common_user_is_an_error():
    runs, human, _ = _fixture(seed=12, users=4, systems=2)
    other = read_qrels("x1 0 d1 1\nx2 0 d2 0\n")
    with pytest.raises(ConfigError, match="same user ids"):
        evaluate(runs, other, "nDCG@10")


# ------------------------------------------------------------------------- bias-corrected CIs

def _scipy_bootstrap(data, statistic, n_resamples, seed, method):
    import inspect

    seed_kw = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"
    return stats.bootstrap(data, statistic, vectorized=False, n_resamples=n_resamples, method=method,
                           confidence_level=0.95, **{seed_kw: np.random.default_rng(seed)})


def test_bca_interval_and_jackknife_equal_scipy_bootstrap_bca():
    from recjudge.evaluation.intervals import bias_corrected
    from recjudge.evaluation.metaeval import jackknife_kendall_tau

    rng = np.random.default_rng(3)
    ref = rng.random((25, 6)) + np.linspace(0, 0.5, 6)
    cand = rng.random((25, 6)) + np.linspace(0, 0.5, 6)

    def tau(idx):  # τ-b of the (rounded) system means over the users in idx
        idx = np.asarray(idx, int)
        return stats.kendalltau(np.round(ref[idx].mean(0), 12), np.round(cand[idx].mean(0), 12)).statistic

    # scipy resamples user indices; its replicates feed our interval, so the resampling is identical
    res = _scipy_bootstrap((np.arange(25),), tau, 999, 1, "BCa")
    jk = jackknife_kendall_tau(ref, cand)
    np.testing.assert_allclose(jk, [tau(np.delete(np.arange(25), i)) for i in range(25)], atol=1e-15)
    got = bias_corrected(res.bootstrap_distribution, tau(np.arange(25)), 0.95, jk)
    want = res.confidence_interval
    assert got == pytest.approx((want.low, want.high), abs=1e-12)
    assert got != pytest.approx(tuple(np.quantile(res.bootstrap_distribution, [0.025, 0.975])))


def test_bias_corrected_percentile_by_hand():
    from statistics import NormalDist

    from recjudge.evaluation.intervals import bias_corrected

    reps = np.arange(1.0, 101.0)  # 1, 2, ..., 100
    # 70 replicates below 70.5: z0 = Φ⁻¹(0.70); BC quantiles at Φ(2·z0 ∓ 1.959964)
    z0, z = NormalDist().inv_cdf(0.70), NormalDist().inv_cdf(0.975)
    p_lo, p_hi = NormalDist().cdf(2 * z0 - z), NormalDist().cdf(2 * z0 + z)
    # numpy's linear quantile of 1..100 at p is 1 + 99·p
    assert bias_corrected(reps, 70.5) == pytest.approx((1 + 99 * p_lo, 1 + 99 * p_hi), abs=1e-9)
    # a replicate equal to the estimate counts half: 69 below + 1/2 → share 0.695
    z0 = NormalDist().inv_cdf(0.695)
    want = (1 + 99 * NormalDist().cdf(2 * z0 - z), 1 + 99 * NormalDist().cdf(2 * z0 + z))
    assert bias_corrected(reps, 70.0) == pytest.approx(want, abs=1e-9)
    # every replicate below the estimate: z0 is infinite and no interval exists
    assert np.isnan(bias_corrected(reps, 101.0)).all()


def test_bca_of_bootstrap_kendall_tau_matches_brute_force_with_partial_coverage():
    from statistics import NormalDist

    rng = np.random.default_rng(11)
    users = [f"u{i}" for i in range(12)]
    ref = pd.DataFrame(rng.random((12, 4)), index=users, columns=list("abcd"))
    cand = pd.DataFrame(rng.random((7, 4)), index=users[:7], columns=list("abcd"))  # 5 users unjudged

    def tau(idx):  # means over the drawn users each matrix judges
        r = ref.iloc[idx].mean()
        c_idx = [i for i in idx if i < 7]
        return stats.kendalltau(r, cand.iloc[c_idx].mean()).statistic if c_idx else np.nan

    w = np.random.default_rng(4).multinomial(12, np.full(12, 1 / 12), size=300)
    reps = np.array([tau(np.repeat(np.arange(12), row)) for row in w])
    reps = reps[~np.isnan(reps)]
    est = tau(np.arange(12))
    jk = np.array([tau([j for j in range(12) if j != i]) for i in range(12)])
    d = jk.mean() - jk
    a = (d ** 3).sum() / (6 * ((d ** 2).sum()) ** 1.5)
    z0 = NormalDist().inv_cdf(((reps < est).sum() + (reps <= est).sum()) / (2 * len(reps)))
    z = NormalDist().inv_cdf(0.025)
    probs = [NormalDist().cdf(z0 + (z0 + zz) / (1 - a * (z0 + zz))) for zz in (z, -z)]
    want = np.quantile(reps, probs)
    got = kendall_tau_interval(ref, cand, n_resamples=300, seed=4, chunk=300, method="BCa").bounds
    assert got == pytest.approx(tuple(want), abs=1e-12)


def test_bias_correction_moves_the_interval_towards_the_downward_bias_of_resampled_tau():
    # 10 systems 1/9 apart, 60 users, independent unit noise per label set: resampling adds noise
    # to both rankings, so resampled τ sits below the estimate and the percentile interval
    # [0.467, 0.867] excludes τ = 0.911. The bias correction moves the interval up, past the
    # estimate: BC and BCa contain the estimate exactly when the percentile interval does
    # (Φ(2·z0 − 1.96) ≤ Φ(z0) ⇔ z0 ≤ 1.96 ⇔ percentile upper ≥ estimate), so here neither does —
    # they bracket the population τ the downward-biased estimate estimates.
    rng = np.random.default_rng(21)
    base = np.linspace(0, 1, 10)
    ref = pd.DataFrame(base + rng.standard_normal((60, 10)))
    cand = pd.DataFrame(base + rng.standard_normal((60, 10)))
    from recjudge.evaluation.metaeval import system_means

    est = kendall_tau(system_means(ref), system_means(cand))
    pct = kendall_tau_interval(ref, cand, 1000, 0, method="percentile").bounds
    bc = kendall_tau_interval(ref, cand, 1000, 0, method="BC").bounds
    bca = kendall_tau_interval(ref, cand, 1000, 0, method="BCa").bounds
    assert pct[1] < est
    assert pct[0] < bc[0] and pct[1] < bc[1] and pct[0] < bca[0] and pct[1] < bca[1]
    assert bc[0] > est and bca[0] > est


def test_bc_contains_the_estimate_exactly_when_the_percentile_interval_does():
    from recjudge.evaluation.metaeval import system_means

    seen = set()
    for seed in (0, 1, 2, 3, 4, 5, 21):
        rng = np.random.default_rng(seed)
        base = np.linspace(0, 1, 10)
        ref = pd.DataFrame(base + rng.standard_normal((60, 10)))
        cand = pd.DataFrame(base + rng.standard_normal((60, 10)))
        est = kendall_tau(system_means(ref), system_means(cand))
        pct = kendall_tau_interval(ref, cand, 400, 0, method="percentile").bounds
        bc = kendall_tau_interval(ref, cand, 400, 0, method="BC").bounds
        inside = pct[0] - 1e-12 <= est <= pct[1] + 1e-12
        assert inside == (bc[0] - 1e-12 <= est <= bc[1] + 1e-12), seed
        # the bias correction shifts upward: resampled τ is biased downward
        assert bc[1] >= pct[1]
        seen.add(inside)
    assert seen == {True, False}  # both situations occur among these seeds


def test_unknown_ci_method_is_refused():
    ref = pd.DataFrame([[0.1, 0.5, 0.3]], index=["u"], columns=list("abc"))
    with pytest.raises(ConfigError, match="CI method"):
        kendall_tau_interval(ref, ref, 10, method="studentized").bounds


def test_compare_reports_the_ci_method_and_kendall_p_value():
    runs, human, llm = _fixture(seed=13)
    res = compare(runs, human, [llm], measures="nDCG@10", bootstrap=200, seed=2)
    ra = res.agreement["llm"]["nDCG@10"]
    want = stats.kendalltau(res.reference.means("nDCG@10"), res.candidates["llm"].means("nDCG@10"))
    assert ra.kendall_tau_p == pytest.approx(want.pvalue, rel=1e-12)
    assert res.settings["ci_method"] == "normal" and ra.ci_method == "normal"  # the default
    direct = kendall_tau_interval(res.reference.matrices["nDCG@10"], res.candidates["llm"].matrices["nDCG@10"],
                                   200, seed=2).bounds
    assert ra.kendall_tau_ci == direct
    js = res.to_json()
    m = js["measures"]["nDCG@10"]
    assert js["settings"]["ci_method"] == "normal" and m["kendall_tau_ci_method"] == "normal"
    assert m["kendall_tau_ci_description"].startswith("τ ± z·max(jackknife SE, bootstrap SE)")
    assert m["kendall_tau_p"] == ra.kendall_tau_p
    assert {"kendall_tau_ci_note", "kendall_tau_ci_coverage", "kendall_tau_bootstrap_bias_sd"} <= set(m)
    bca = compare(runs, human, [llm], measures="nDCG@10", bootstrap=200, seed=2, ci_method="BCa")
    assert bca.settings["ci_method"] == "BCa" and bca.agreement["llm"]["nDCG@10"].ci_method == "BCa"
    assert bca.agreement["llm"]["nDCG@10"].kendall_tau_ci == kendall_tau_interval(
        res.reference.matrices["nDCG@10"], res.candidates["llm"].matrices["nDCG@10"], 200, seed=2, method="BCa").bounds


def test_jackknife_at_ten_thousand_users_stays_vectorised():
    import time

    from recjudge.evaluation.metaeval import jackknife_kendall_tau

    rng = np.random.default_rng(0)
    ref, cand = rng.random((10_000, 63)), rng.random((10_000, 63))
    start = time.perf_counter()
    jk = jackknife_kendall_tau(ref, cand)
    # measured ~0.8 s on 2 shared cores; a per-user Python loop over scipy takes minutes
    assert time.perf_counter() - start < 20
    for i in (0, 4321, 9999):
        keep = np.delete(np.arange(10_000), i)
        want = stats.kendalltau(np.round(ref[keep].mean(0), 12), np.round(cand[keep].mean(0), 12)).statistic
        assert jk[i] == pytest.approx(want, abs=1e-12)


# ------------------------------------------------------------------------- separate bootstrap seed

def test_bootstrap_seed_varies_the_ci_but_never_the_rankings():
    runs, human, llm = _fixture(seed=14, systems=8)
    # percentile: an interval from the resamples alone (the default may take the jackknife's SE,
    # which no seed changes)
    kw = dict(measures="nDCG@10", bootstrap=100, tie_policy="hash", seed=3, ci_method="percentile")
    base = compare(runs, human, [llm], **kw)
    same = compare(runs, human, [llm], **kw, bootstrap_seed=3)
    other = compare(runs, human, [llm], **kw, bootstrap_seed=4)
    a, b, c = (r.agreement["llm"]["nDCG@10"] for r in (base, same, other))
    assert a.kendall_tau_ci == b.kendall_tau_ci  # default: the bootstrap follows --seed
    assert c.kendall_tau_ci != a.kendall_tau_ci
    assert c.kendall_tau == a.kendall_tau
    pd.testing.assert_series_equal(other.reference.means("nDCG@10"), base.reference.means("nDCG@10"))
    pd.testing.assert_series_equal(other.candidates["llm"].ranks("nDCG@10"), base.candidates["llm"].ranks("nDCG@10"))
    assert (base.settings["bootstrap_seed"], other.settings["bootstrap_seed"]) == (3, 4)
    assert other.settings["seed"] == 3
    # a different --seed changes the hash tie-break, and so the scores of these tie-heavy runs
    moved = compare(runs, human, [llm], measures="nDCG@10", bootstrap=0, tie_policy="hash", seed=4)
    assert not np.allclose(moved.reference.means("nDCG@10"), base.reference.means("nDCG@10"))


# ------------------------------------------------------------------------- rounding of means

def test_rounding_keeps_means_of_permuted_users_tied():
    from recjudge.evaluation.metaeval import rank_agreement, system_means
    from recjudge.evaluation.metaeval.kendall import _weighted_means

    # the same three per-user values in two orders: summed left to right they differ in the last bit
    a, b = [0.1, 0.2, 0.3], [0.3, 0.2, 0.1]
    assert (0.1 + 0.2) + 0.3 != (0.3 + 0.2) + 0.1
    ref = pd.DataFrame({"a": a, "b": b, "c": [0.9, 0.9, 0.9]}, index=["u1", "u2", "u3"])
    raw = ref.mean(axis=0)
    assert raw["a"] != raw["b"]  # without rounding the two systems would be ordered
    means = system_means(ref)
    assert means["a"] == means["b"]
    assert system_ranks(means).to_dict() == {"a": 2.5, "b": 2.5, "c": 1.0}
    # the bootstrap's mean path (the estimate BCa compares replicates with) keeps them tied too
    ones = _weighted_means(np.ones((1, 3)), ref.to_numpy())
    assert ones[0, 0] == ones[0, 1]
    # a candidate that ties a and b outright: τ-b = 1 with ties kept; a false order a ≠ b would give
    # 2 concordant pairs of 3 with one pair tied on one side only: 2 / sqrt(3 · 2)
    cand = pd.DataFrame({"a": [0.2] * 3, "b": [0.2] * 3, "c": [0.5] * 3}, index=["u1", "u2", "u3"])
    ra = rank_agreement("m", ref, cand, n_boot=0, seed=0)
    assert ra.kendall_tau == pytest.approx(1.0)
    assert kendall_tau(raw, cand.mean()) == pytest.approx(2 / np.sqrt(6))


# ------------------------------------------------------------------------- --queries shared

SHARED_REF = (
    "u1 0 d3 1\n"  # u1: only the reference judges it
    "u1 0 d4 1\n"
    "u2 0 d1 1\n"
    "u2 0 d3 1\n"
    "u3 0 d2 1\n"
)
SHARED_CAND = (
    "u2 0 d1 1\n"
    "u3 0 d2 1\n"
    "u3 0 d4 1\n"
    "u4 0 d3 1\n"  # u4: only the candidate judges it
    "u4 0 d4 1\n"
)


def _two_system_runs():
    # sysA ranks d1 > d2 for every user, sysB d3 > d4
    rows_a = [(u, d, r + 1, 2.0 - r) for u in ("u1", "u2", "u3", "u4") for r, d in enumerate(("d1", "d2"))]
    rows_b = [(u, d, r + 1, 2.0 - r) for u in ("u1", "u2", "u3", "u4") for r, d in enumerate(("d3", "d4"))]
    cols = ["qid", "docid", "rank", "score"]
    return {"sysA": Run.from_frame(pd.DataFrame(rows_a, columns=cols), "sysA"),
            "sysB": Run.from_frame(pd.DataFrame(rows_b, columns=cols), "sysB")}


def test_shared_queries_with_users_missing_on_both_sides_by_hand():
    runs = _two_system_runs()
    ref, cand = read_qrels(SHARED_REF, name="ref"), read_qrels(SHARED_CAND, name="cand")
    res = compare(runs, ref, {"cand": cand}, measures="P@2", queries="shared", bootstrap=0)
    # shared users: u2 and u3. P@2 per user (relevant among the two ranked):
    #   reference  sysA: u2 {d1} 1/2, u3 {d2} 1/2 → 0.5;   sysB: u2 {d3} 1/2, u3 {} 0 → 0.25
    #   candidate  sysA: u2 {d1} 1/2, u3 {d2} 1/2 → 0.5;   sysB: u2 {} 0, u3 {d4} 1/2 → 0.25
    assert res.reference_table("cand").means("P@2").to_dict() == pytest.approx({"sysA": 0.5, "sysB": 0.25})
    assert res.candidates["cand"].means("P@2").to_dict() == pytest.approx({"sysA": 0.5, "sysB": 0.25})
    ra = res.agreement["cand"]["P@2"]
    assert ra.n_users_reference == ra.n_users_candidate == 2
    own = compare(runs, ref, {"cand": cand}, measures="P@2", queries="own", bootstrap=0)
    # own: reference over u1–u3: sysA (0 + 1/2 + 1/2)/3, sysB (1 + 1/2 + 0)/3
    #      candidate over u2–u4: sysA (1/2 + 1/2 + 0)/3, sysB (0 + 1/2 + 1)/3
    assert own.reference.means("P@2").to_dict() == pytest.approx({"sysA": 1 / 3, "sysB": 1 / 2})
    assert own.candidates["cand"].means("P@2").to_dict() == pytest.approx({"sysA": 1 / 3, "sysB": 1 / 2})


# ------------------------------------------------------------------ run by run (issue 14)

def test_compare_and_evaluate_read_run_files_at_most_two_at_a_time_with_the_results_of_runs_in_memory(tmp_path, monkeypatch):
    import gc
    import weakref

    from recjudge.data import trec

    runs, human, llm = _fixture(seed=3, systems=4)  # tie-heavy: the hash policy reorders them
    for name, run in runs.items():
        write_run(run, tmp_path / f"{name}.run")
    files = trec.run_paths(tmp_path)
    in_memory = trec.read_runs(tmp_path)  # the same runs, every one held at once
    real, alive, live_at_read = trec.read_run, [], []

    def counting(source, name=None, **options):
        gc.collect()
        live_at_read.append(sum(ref() is not None for ref in alive))
        run = real(source, name, **options)
        alive.append(weakref.ref(run))
        return run

    monkeypatch.setattr(trec, "read_run", counting)
    for queries in ("own", "shared"):
        live_at_read.clear()
        got = compare(files, human, [llm], queries=queries, bootstrap=50, seed=4)
        # each file read once; the next is read while the current one is scored, never more
        assert len(live_at_read) == 4 and max(live_at_read) <= 1
        want = compare(in_memory, human, [llm], queries=queries, bootstrap=50, seed=4)
        assert got.to_json() == want.to_json()
        assert got.tie_share == want.tie_share and max(got.tie_share.values()) > 0
    live_at_read.clear()
    assert evaluate(files, human, seed=4).to_json() == evaluate(in_memory, human, seed=4).to_json()
    assert len(live_at_read) == 4 and max(live_at_read) <= 1


def test_input_tie_policy_is_warned_once_for_all_runs():
    import warnings

    runs, human, llm = _fixture(seed=5, systems=3)
    for call in (lambda: compare(runs, human, [llm], measures="nDCG@10", tie_policy="input", bootstrap=0),
                 lambda: evaluate(runs, human, "nDCG@10", tie_policy="input")):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            call()
        said = [str(w.message) for w in got if "tie policy 'input'" in str(w.message)]
        assert len(said) == 1 and "Prefer 'trec_eval' (the default)" in said[0]  # not once per run
        assert got[0].filename == __file__  # points at the caller's line


def test_shared_users_that_no_run_ranks_are_an_error_naming_both_label_sets():
    runs = _two_system_runs()  # ranks u1–u4
    ref = read_qrels("u1 0 d1 1\nx1 0 d1 1\n", name="ref")
    cand = read_qrels("u2 0 d3 1\nx1 0 d1 0\n", name="cand")  # shares only x1 with ref, which no run ranks
    compare(runs, ref, {"cand": cand}, measures="P@2", queries="own", bootstrap=0)  # own users: ranked
    with pytest.raises(ConfigError, match=r"no run ranks any of the 1 users that reference 'ref' and candidate "
                                          r"'cand' both judge.*--queries own"):
        compare(runs, ref, {"cand": cand}, measures="P@2", queries="shared", bootstrap=0)
    strangers = read_qrels("x1 0 d1 1\n", name="strangers")
    with pytest.raises(ConfigError, match="no run ranks any user that 'strangers' judges"):
        compare(runs, ref, {"strangers": strangers}, measures="P@2", bootstrap=0)


def test_shared_bootstrap_weights_give_each_measures_own_interval():
    # compare draws the resamples once per label set and hands them to every measure: the
    # intervals must be those each measure gets drawing its own (same seed, same users)
    from recjudge.errors import ConfigError
    from recjudge.evaluation.metaeval import BootstrapWeights

    rng = np.random.default_rng(3)
    users = [f"u{i}" for i in range(40)]
    ref = pd.DataFrame(rng.random((40, 6)), index=users, columns=list("abcdef"))
    cand = ref + rng.normal(0, 0.2, ref.shape)
    holes = cand.copy()
    holes.iloc[::7, 2] = np.nan  # a user a label set lacks: the weighted path with missing cells
    shared = BootstrapWeights(9, 40, 300)
    for c in (cand, holes, ref * 2):
        assert kendall_tau_interval(ref, c, 300, 9, weights=shared).bounds == kendall_tau_interval(ref, c, 300, 9).bounds
    assert [w.dtype for w in shared.chunks()] == [np.float64] * 2
    assert shared._chunks[0].dtype == np.uint8  # counts stored compactly
    with pytest.raises(ConfigError, match="another seed"):
        kendall_tau_interval(ref, cand, 300, 8, weights=shared).bounds


def test_an_interval_whose_measured_coverage_is_unknown_or_low_says_so_where_it_is_printed(tmp_path, capsys):
    # 12 users per label set: fewer than any simulated case, so the table flags the interval and
    # says so in one line under it (as the report does); the JSON carries that line and the full note
    run_dir = _write_fixture(tmp_path, seed=6, users=12, systems=5)
    out_json = tmp_path / "out.json"
    assert main(["compare", "--runs", str(run_dir), "--reference", str(tmp_path / "human.qrels"),
                 "--candidate", str(tmp_path / "llm.qrels"), "--measures", "nDCG@10", "--bootstrap", "100",
                 "--json", str(out_json), "--report", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr().out
    m = json.loads(out_json.read_text())["measures"]["nDCG@10"]
    assert m["kendall_tau_ci_method"] == "normal" and m["kendall_tau_ci_coverage"] is None
    assert m["kendall_tau_ci_note"].startswith("coverage unknown: fewer than 25 users per label set")
    lo, hi = m["kendall_tau_ci"]
    assert f"[{lo:.3f}, {hi:.3f}]*" in printed
    summary = "coverage unknown: fewer than 25 users per label set, none simulated — see docs: statistics"
    assert m["kendall_tau_ci_summary"] == summary
    assert f"* nDCG@10: {summary}" in printed.splitlines()
    report = (tmp_path / "report" / "report.md").read_text()
    assert f"\\* nDCG@10: {summary}" in report.splitlines()


def test_ci_notes_say_one_short_line_per_flagged_interval():
    from types import SimpleNamespace

    from recjudge.report.evaluation import ci_cell, ci_notes

    low = SimpleNamespace(kendall_tau_ci=(0.1, 0.9), ci_note="few users, at length", ci_summary="few users")
    fine = SimpleNamespace(kendall_tau_ci=(0.5, 0.7), ci_note="", ci_summary="")
    other = SimpleNamespace(kendall_tau_ci=(0.2, 0.4), ci_note="biased, at length", ci_summary="biased")
    by = {"nDCG@10": low, "Bpref": fine, "Compat": low, "P@10": other}
    assert ci_notes(by) == ["* nDCG@10: few users", "* Compat: few users", "* P@10: biased"]
    assert (ci_cell(low), ci_cell(fine)) == ("[0.100, 0.900]*", "[0.500, 0.700]")
