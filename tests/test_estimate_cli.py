"""``recjudge estimate`` and ``recjudge.estimate``: end to end against ppi_py and ir-measures, the
output, the plan, and every refusal."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

import recjudge as rj
from recjudge.cli import main
from recjudge.errors import ConfigError
from recjudge.estimation.planner import Pilot, users_for_width, users_to_separate

ppi_py = pytest.importorskip("ppi_py")
ir_measures = pytest.importorskip("ir_measures")

USERS = [f"u{i:02d}" for i in range(40)]
SYSTEMS = ("sysA", "sysB", "sysC")
ITEMS = [f"d{j}" for j in range(6)]


def _write(tmp_path, n_human=12, drop_pair=False, extra_human_user=False, nothing_relevant=False):
    rng = np.random.default_rng(3)
    runs = tmp_path / "runs"
    runs.mkdir()
    for k, name in enumerate(SYSTEMS):
        lines = []
        for u in USERS:
            scores = rng.permutation(len(ITEMS)) + k * 0.1
            lines += [f"{u} Q0 {d} {r + 1} {s:.3f} {name}" for r, (d, s) in
                      enumerate(sorted(zip(ITEMS, scores), key=lambda x: -x[1]))]
        (runs / name).write_text("\n".join(lines) + "\n")
    human, llm = [], []
    for i, u in enumerate(USERS):
        grades = rng.integers(0, 3, size=len(ITEMS))
        guess = np.clip(grades + rng.integers(0, 2, size=len(ITEMS)), 0, 2)
        if nothing_relevant and i == len(USERS) - 1:  # a user CompatHM has no value for
            guess = np.zeros_like(guess)
        llm += [f"{u} 0 {d} {g}" for d, g in zip(ITEMS, guess)]
        if i < n_human:
            human += [f"{u} 0 {d} {g}" for j, (d, g) in enumerate(zip(ITEMS, grades)) if not (drop_pair and j == 0)]
    if extra_human_user:
        human.append("stranger 0 d0 1")
    (tmp_path / "human.qrels").write_text("\n".join(human) + "\n")
    (tmp_path / "llm.qrels").write_text("\n".join(llm) + "\n")
    return runs, tmp_path / "human.qrels", tmp_path / "llm.qrels"


def _per_user(runs, qrels, measure):
    run = {}
    for f in sorted(runs.iterdir()):
        for line in f.read_text().splitlines():
            q, _, d, _, s, name = line.split()
            run.setdefault(name, {}).setdefault(q, {})[d] = float(s)
    qrel = {}
    for line in qrels.read_text().splitlines():
        q, _, d, g = line.split()
        qrel.setdefault(q, {})[d] = int(g)
    m = ir_measures.parse_measure(measure)
    out = {}
    for name in SYSTEMS:
        out[name] = {r.query_id: r.value for r in ir_measures.iter_calc([m], qrel, run[name])}
    return out


def test_estimate_equals_ppi_py_on_ir_measures_per_user_scores(tmp_path):
    runs, human, llm = _write(tmp_path)
    out = tmp_path / "e.json"
    code = main(["estimate", "--runs", str(runs), "--human", str(human), "--llm", str(llm), "--measures", "P@3",
                 "--population", "sampled", "--json", str(out), "-q"])
    assert code == 0
    data = json.loads(out.read_text())
    y, f = _per_user(runs, human, "P@3"), _per_user(runs, llm, "P@3")
    hu = sorted(USERS[:12])
    rest = [u for u in USERS if u not in hu]
    t_over_z = stats.t.ppf(0.975, 11) / stats.norm.ppf(0.975)
    for name in SYSTEMS:
        yy = np.array([y[name].get(u, 0.0) for u in hu])
        fh = np.array([f[name].get(u, 0.0) for u in hu])
        fu = np.array([f[name].get(u, 0.0) for u in rest])
        got = data["measures"]["P@3"]["systems"][name]
        want = float(np.ravel(ppi_py.ppi_mean_pointestimate(yy, fh, fu, lam=None))[0])
        lo, hi = np.ravel(ppi_py.ppi_mean_ci(yy, fh, fu, alpha=0.05))
        assert got["estimate"] == pytest.approx(want, abs=1e-9)
        assert (got["ci"][1] - got["ci"][0]) / 2 == pytest.approx((hi - lo) / 2 * t_over_z, abs=1e-9)
        assert got["human_only"]["estimate"] == pytest.approx(yy.mean(), abs=1e-12)
        assert got["llm_only"]["estimate"] == pytest.approx(np.mean([f[name].get(u, 0.0) for u in USERS]))
    assert data["n_human_users"] == 12 and data["n_llm_users"] == 40
    assert set(data["rank_sets"]["P@3"]) == set(SYSTEMS)
    assert "P@3" in data["effective_human_users"]
    # 12 human users: the per-system intervals are flagged, as the benchmark's coverage below 200 says
    assert any("12 human users (< 200)" in w and "approximate" in w for w in data["warnings"])
    assert any("pairwise intervals cover less" in w for w in data["warnings"])


def test_verb_text_fits_the_terminal_and_states_assumptions(tmp_path):
    runs, human, llm = _write(tmp_path)
    report = rj.estimate([str(runs)], str(human), str(llm), measures="P@3,nDCG@5", target_width=0.05,
                         separate="sysA,sysC", cost_human=0.25)
    text = report.format()
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "Assumptions:" in text and "uniform random sample" in text and "LLM only*" in text
    assert "Plan (from this pilot):" in text and "cost" in text
    assert "warning: with 12 human users" in text
    plan = report.to_json()["plan"]["items"]
    assert {i["measure"] for i in plan} == {"P@3", "nDCG@5"}
    assert all(i["human_users"] is None or i["human_users"] >= 2 for i in plan)
    # priced per label: the 6-pair pools of the users still to judge, at 0.25 each; per user: 0.25 each
    assert all(i["cost"] == pytest.approx(i["more_human_users"] * 6 * 0.25) for i in plan if i["human_users"])
    per_user = rj.estimate([str(runs)], str(human), str(llm), measures="P@3", target_width=0.05, cost_human=2.0,
                           cost_per="user").to_json()["plan"]["items"]
    assert all(i["cost"] == pytest.approx(i["more_human_users"] * 2.0) for i in per_user if i["human_users"])


def test_planner_gives_the_least_n_reaching_the_width():
    p = Pilot(residual_var=0.04, imputed_var=0.0, n_all=None)
    n = users_for_width(p, 0.05, 0.05)
    half = lambda m: stats.t.ppf(0.975, m - 1) * math.sqrt(0.04 / m)  # noqa: E731
    assert half(n) <= 0.05 < half(n - 1)
    finite = Pilot(0.04, 0.0, 200)
    nf = users_for_width(finite, 0.05, 0.05)
    half_f = lambda m: stats.t.ppf(0.975, m - 1) * math.sqrt((1 / m - 1 / 200) * 0.04)  # noqa: E731
    assert half_f(nf) <= 0.05 < half_f(nf - 1) and nf < n
    ns = users_to_separate(p, 0.05, 0.05, 0.8)
    need = lambda m: (stats.t.ppf(0.975, m - 1) + stats.norm.ppf(0.8)) * math.sqrt(0.04 / m)  # noqa: E731
    assert need(ns) <= 0.05 < need(ns - 1)
    assert users_to_separate(p, 0.0, 0.05, 0.8) is None
    assert users_for_width(Pilot(0.04, 0.01, None), 0.1, 0.05) is None  # the LLM part alone is wider


def _refused(tmp_path, options=(), **files):
    runs, human, llm = _write(tmp_path, **files)
    with pytest.raises(ConfigError) as err:
        rj.estimate([str(runs)], str(human), str(llm), **{"measures": "P@3", **dict(options)})
    return str(err.value)


def test_refuses_too_few_human_users_naming_the_threshold(tmp_path):
    msg = _refused(tmp_path, n_human=9)
    assert "9 human user(s) is too few" in msg and "at least 10" in msg and "benchmark" in msg


def test_refuses_human_users_the_llm_did_not_judge(tmp_path):
    msg = _refused(tmp_path, extra_human_user=True)
    assert "stranger" in msg and "the LLM labels do not" in msg and "N = 40" in msg


def test_refuses_partly_judged_users_for_measures_not_linear_in_the_labels(tmp_path):
    msg = _refused(tmp_path, [("measures", "nDCG@3,Bpref")], drop_pair=True)
    assert "12 of the 12 human users are judged by hand on part of the pool" in msg and "5 of its 6" in msg
    assert "nDCG@3, Bpref are not a sum of per-pair gains" in msg and "P@10,Judged@100" in msg


def test_partly_judged_users_estimate_p_and_refuse_the_rest(tmp_path):
    runs, human, llm = _write(tmp_path, drop_pair=True)
    report = rj.estimate([str(runs)], str(human), str(llm), measures="P@3,nDCG@3", target_width=0.05)
    data = report.to_json()
    assert data["plan"]["pairs_per_user"] == 5  # a further human user costs the 5 pairs these had, not 6
    assert any(w.startswith("partly judged users: in the benchmark") for w in data["warnings"])
    assert list(data["measures"]) == ["P@3"] and "not a sum of per-pair gains" in data["refused"]["nDCG@3"]
    assert data["partly_judged_users"] == 12 and "Horvitz-Thompson" in data["methods"]["P@3"]
    assert any("uniform random sample of the pairs the LLM judged" in a for a in data["assumptions"])
    assert "not estimated: nDCG@3" in report.format()


def _mixed(human, llm):
    """The LLM labels with the human label in place on every pair judged by hand."""
    out = {}
    for path in (llm, human):
        for line in open(path).read().splitlines():
            q, _, d, g = line.split()
            out.setdefault(q, {})[d] = int(g)
    return out


def test_example_data_partly_judged_gives_p_at_10_by_ht(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    runs, human, llm = root / "runs" / "example", root / "qrels" / "example-human.qrels", root / "qrels" / "example-llm.qrels"
    report = rj.estimate([str(runs)], str(human), str(llm), measures="P@10,Judged@100,nDCG@100", seed=0)
    data = report.to_json()
    assert data["partly_judged_users"] == 40 and set(data["refused"]) == {"nDCG@100"}
    # reference: ir-measures per user; n = N = 40, so the estimate is the mean of Ŷ = f + (120/30)(P_mixed − f)
    run = {}
    for f in sorted(runs.iterdir()):
        for line in f.read_text().splitlines():
            q, _, d, _, sc, tag = line.split()
            run.setdefault(tag, {}).setdefault(q, {})[d] = float(sc)
    m = ir_measures.parse_measure("P@10")
    llm_q, mixed = _mixed(llm, "/dev/null"), _mixed(human, llm)
    for name, sys in data["measures"]["P@10"]["systems"].items():
        f = {r.query_id: r.value for r in ir_measures.iter_calc([m], llm_q, run[name])}
        g = {r.query_id: r.value for r in ir_measures.iter_calc([m], mixed, run[name])}
        want = np.mean([f[q] + 4 * (g[q] - f[q]) for q in f])
        assert sys["estimate"] == pytest.approx(want, abs=1e-9)
    assert all(s["estimate"] == 1.0 for s in data["measures"]["Judged@100"]["systems"].values())


def test_refuses_bad_inclusion_probabilities(tmp_path):
    (tmp_path / "pi.txt").write_text("".join(f"{u} 0.3\n" for u in USERS[:11]))
    assert "no inclusion probability for human user(s) u11" in _refused(tmp_path, [("inclusion", str(tmp_path / "pi.txt"))])


def test_refuses_inclusion_above_one_and_with_a_superpopulation(tmp_path):
    (tmp_path / "pi.txt").write_text("".join(f"{u} {1.5 if u == 'u03' else 0.3}\n" for u in USERS[:12]))
    assert "user u03 has 1.5" in _refused(tmp_path, [("inclusion", str(tmp_path / "pi.txt"))])


def test_refuses_inclusion_with_population_sampled(tmp_path):
    runs, human, llm = _write(tmp_path)
    (tmp_path / "pi.txt").write_text("".join(f"{u} 0.3\n" for u in USERS[:12]))
    with pytest.raises(ConfigError, match="go with population 'judged'"):
        rj.estimate([str(runs)], str(human), str(llm), measures="P@3", population="sampled",
                    inclusion=str(tmp_path / "pi.txt"))


def test_refuses_an_unknown_system_to_separate_before_scoring(tmp_path):
    runs, human, llm = _write(tmp_path)
    code = main(["estimate", "--runs", str(runs), "--human", str(human), "--llm", str(llm), "--separate",
                 "sysA,nosuch", "-q"])
    assert code != 0


def test_refuses_a_measure_without_a_value_per_user(tmp_path):
    msg = _refused(tmp_path, [("measures", "CompatHM(p=0.95)")], nothing_relevant=True)
    assert "leaves some users without a value" in msg and "no per-user mean" in msg


def test_inclusion_weights_change_the_estimate_end_to_end(tmp_path):
    runs, human, llm = _write(tmp_path)
    (tmp_path / "pi.txt").write_text("".join(f"{u} {0.2 if i % 2 else 0.5}\n" for i, u in enumerate(USERS[:12])))
    plain = rj.estimate([str(runs)], str(human), str(llm), measures="P@3").to_json()
    weighted = rj.estimate([str(runs)], str(human), str(llm), measures="P@3",
                           inclusion=str(tmp_path / "pi.txt")).to_json()
    a = plain["measures"]["P@3"]["systems"]["sysA"]["human_only"]["estimate"]
    b = weighted["measures"]["P@3"]["systems"]["sysA"]["human_only"]["estimate"]
    y = _per_user(runs, human, "P@3")["sysA"]
    w = np.array([1 / (0.2 if i % 2 else 0.5) for i in range(12)])
    vals = np.array([y.get(u, 0.0) for u in USERS[:12]])
    assert a == pytest.approx(vals.mean()) and b == pytest.approx((w * vals).sum() / w.sum())
    assert "inclusion probabilities given" in " ".join(weighted["assumptions"])


def _summary(tmp_path, cost=0.6, calls=30):
    from recjudge.judging.cache import Usage
    from recjudge.judging.results import Summary

    s = Summary(judge="fake", kind="llm", pairs=240, judged=240, failures={}, planned_calls=40, calls=calls,
                attempts=calls, cache_hits=40 - calls, skipped_calls=0, stopped=None, usage=Usage(1000, 0, 100, 0),
                cost=cost, estimated_input_tokens=0, estimated_cost=None, dry_run=False, elapsed=1.0)
    path = tmp_path / "llm.summary.json"
    path.write_text(json.dumps({"summary": s.as_dict()}))
    return str(path)


def test_plan_prices_the_llm_labels_from_the_judge_summary(tmp_path):
    runs, human, llm = _write(tmp_path)
    data = rj.estimate([str(runs)], str(human), str(llm), measures="P@3", judge_summary=_summary(tmp_path),
                       cost_human=0.5).to_json()
    price, worth = data["plan"]["items"][0], data["plan"]["items"][1]
    # 0.6 paid for the 30 calls not from the cache: 0.02 a call, 40 calls for the labels = 0.8
    assert price["cost_per_call"] == pytest.approx(0.02) and price["cost"] == pytest.approx(0.8)
    # worth: the median effective human users, each 6 labels at 0.5
    assert worth["worth_cost"] == pytest.approx(data["effective_human_users"]["P@3"] * 6 * 0.5)


def test_refuses_a_judge_summary_without_a_price(tmp_path):
    msg = _refused(tmp_path, [("judge_summary", _summary(tmp_path, cost=None))])
    assert "llm.summary.json: no price per call" in msg and "no price in prices.json" in msg
