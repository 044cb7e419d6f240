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
from recjudge.errors import ConfigError
from recjudge.metaeval import (
    _tau_b_rows,
    bootstrap_kendall_tau,
    compare,
    evaluate,
    kendall_tau,
    system_ranks,
    tau_ap,
    weighted_tau,
)
from recjudge.trec import Qrels, Run, read_qrels, resolve_ties, write_qrels, write_run


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
    a = bootstrap_kendall_tau(small_ref, small_cand, 400, seed=3)
    assert a == bootstrap_kendall_tau(small_ref, small_cand, 400, seed=3)
    b = bootstrap_kendall_tau(big_ref, big_cand, 400, seed=3)
    assert b[1] - b[0] < a[1] - a[0]
    point = kendall_tau(big_ref.mean().to_numpy(), big_cand.mean().to_numpy())
    assert b[0] <= point <= b[1]


def test_bootstrap_single_resample_matches_direct_computation():
    # With one user the only resample is that user: the CI collapses onto τ of that user's row
    ref = pd.DataFrame([[0.1, 0.5, 0.3]], index=["u"], columns=list("abc"))
    cand = pd.DataFrame([[0.2, 0.1, 0.3]], index=["u"], columns=list("abc"))
    lo, hi = bootstrap_kendall_tau(ref, cand, 10, seed=0)
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
    res = compare(runs, human, [llm], bootstrap=100, seed=5)
    measures = ["nDCG@10", "Bpref", "Judged@10", "Compat(p=0.95)"]
    res2 = compare(runs, human, [llm], measures=",".join(measures), bootstrap=0, seed=5)
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


def test_compare_cli_json_report_and_no_heavy_imports(tmp_path, capsys):
    runs, human, llm = _fixture(seed=6, users=20, systems=5)
    run_dir = tmp_path / "runs"
    for name, run in runs.items():
        write_run(run, run_dir / f"{name}.run")
    write_qrels(human, tmp_path / "human.qrels")
    write_qrels(llm, tmp_path / "llm.qrels")
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
    assert list(data["candidates"]) == [str(tmp_path / "llm.qrels"), str(tmp_path / "llm2.qrels")]
    # identical candidate label sets give identical verdicts
    c1, c2 = data["candidates"].values()
    assert c1["Bpref"]["kendall_tau"] == c2["Bpref"]["kendall_tau"]
    assert len(data["systems"]) == 5 and data["settings"]["tie_policy"] == "hash"
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
    from recjudge.metaeval import _agreement

    ra = _agreement("m", ref, cand, n_boot=0, seed=0)
    assert dict(ra.most_displaced) == {"c": -2.0, "a": 1.0, "b": 1.0}
    assert ra.median_abs_rank_displacement == 1.0 and ra.max_abs_rank_displacement == 2.0


def test_bootstrap_with_partial_user_coverage_matches_brute_force():
    rng = np.random.default_rng(11)
    users = [f"u{i}" for i in range(12)]
    ref = pd.DataFrame(rng.random((12, 4)), index=users, columns=list("abcd"))
    cand = pd.DataFrame(rng.random((7, 4)), index=users[:7], columns=list("abcd"))  # 5 users unjudged
    lo, hi = bootstrap_kendall_tau(ref, cand, n_resamples=300, seed=4, chunk=300)
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
    from recjudge.metaeval import system_means

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
