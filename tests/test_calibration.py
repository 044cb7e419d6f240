"""Calibrated gap filling: hand-computed calibration, fill, scenarios, validation, CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from recjudge.cli import main
from recjudge.data.trec import Qrels, Run, read_qrels, read_run
from recjudge.errors import ConfigError
from recjudge.evaluation.calibration import calibrate, fill_gaps, hide_labels, scenarios, validate_fill

HUMAN = (
    "u1 0 a 3\n"
    "u1 0 b 1\n"
    "u1 0 c 0\n"
    "u2 0 d 2\n"
    "u2 0 e 0\n"
)
LLM = (
    "u1 0 a 5\n"   # grade 5 over a (human 3) and d (human 2): mean 2.5 → 3 (half up)
    "u1 0 b 2\n"   # grade 2 over b (human 1): 1, one pair only → flagged at min_overlap 2
    "u1 0 c 0\n"   # grade 0 over c and e (human 0, 0): 0
    "u1 0 x 5\n"   # unjudged by humans → filled with 3
    "u2 0 d 5\n"
    "u2 0 e 0\n"
    "u2 0 y 2\n"   # unjudged by humans → filled with 1
    "u3 0 q 7\n"   # grade 7: no overlap, borrows the nearest grade (5) → 3, flagged
)
RUN1 = "u1 Q0 a 1 3 r1\nu1 Q0 x 2 2 r1\nu1 Q0 b 3 1 r1\nu2 Q0 y 1 2 r1\nu2 Q0 d 2 1 r1\n"
RUN2 = "u1 Q0 z 1 2 r2\nu1 Q0 c 2 1 r2\nu2 Q0 e 1 1 r2\nu3 Q0 q 1 1 r2\n"


def test_calibration_by_hand():
    cal = calibrate(read_qrels(HUMAN), read_qrels(LLM), min_overlap=2)
    rows = {g.llm_grade: g for g in cal.grades}
    assert rows[5].mean_reference == pytest.approx((3 + 2) / 2) and rows[5].label == 3 and not rows[5].flagged
    assert rows[2].label == 1 and rows[2].n_overlap == 1 and rows[2].flagged
    assert rows[0].label == 0 and rows[0].n_overlap == 2
    assert rows[7].n_overlap == 0 and math.isnan(rows[7].mean_reference) and rows[7].label == 3 and rows[7].flagged
    assert cal.mapping == {0: 0, 2: 1, 5: 3, 7: 3}


def test_fill_takes_human_first_then_calibrated_llm_for_topk_gaps():
    human, llm = read_qrels(HUMAN), read_qrels(LLM)
    runs = {"r1": read_run(RUN1, "r1"), "r2": read_run(RUN2, "r2")}
    # five shared pairs cannot calibrate (see the refusal test below): allowed here to test the fill itself
    res = fill_gaps(human, llm, runs, calibrate(human, llm, 2), k=100, allow_weak=True)
    got = {(q, d): (lab, src) for q, d, lab, src in zip(res.sources.qid, res.sources.docid, res.sources.label,
                                                        res.sources.source)}
    assert got[("u1", "x")] == (3, "llm-calibrated-weak")
    assert got[("u2", "y")] == (1, "llm-calibrated-weak")
    assert got[("u1", "a")] == (3, "human")            # human label kept, not the LLM's 5
    assert ("u1", "z") not in got                       # in the pool but labelled by neither
    assert ("u3", "q") not in got                       # u3 has no human labels: not filled
    assert (res.n_human, res.n_filled, res.n_unfilled) == (5, 2, 1)
    # k=1: only each run's first item per user counts: u1 a (human), z (none); u2 y (fill), e (human)
    res1 = fill_gaps(human, llm, runs, calibrate(human, llm, 2), k=1, allow_weak=True)
    assert (res1.n_filled, res1.n_unfilled) == (1, 1)


def test_calibrate_without_overlap_is_an_error():
    with pytest.raises(ConfigError, match="share no"):
        calibrate(read_qrels("u1 0 a 1\n"), read_qrels("u2 0 b 1\n"))


def test_hide_labels_is_seeded_and_partitions():
    human = Qrels.from_frame(pd.DataFrame({"qid": ["u"] * 200, "docid": [f"d{i}" for i in range(200)],
                                           "label": np.arange(200) % 4}), "h")
    vis, hidden = hide_labels(human, 0.25, seed=1)
    vis2, hidden2 = hide_labels(human, 0.25, seed=1)
    assert hidden.docid.tolist() == hidden2.docid.tolist()
    assert len(vis) + len(hidden) == 200 and 30 < len(hidden) < 70
    assert not set(vis.frame.docid) & set(hidden.docid)
    with pytest.raises(ConfigError):
        hide_labels(human, 1.5)


def _synthetic(seed=0, users=40, systems=5, items=120):
    rng = np.random.default_rng(seed)
    truth = {(f"u{u}", f"d{d}"): int(rng.integers(0, 5)) for u in range(users) for d in range(items)}
    runs = {}
    for s in range(systems):
        rows = []
        for u in range(users):
            docs = rng.choice(items, 30, replace=False)
            rows += [(f"u{u}", f"d{d}", r + 1, float(30 - r)) for r, d in enumerate(docs)]
        runs[f"s{s}"] = Run.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "rank", "score"]), f"s{s}")
    keys = list(truth)
    human_keys = [keys[i] for i in rng.choice(len(keys), len(keys) // 4, replace=False)]
    human = Qrels.from_frame(pd.DataFrame([(q, d, truth[q, d]) for q, d in human_keys],
                                          columns=["qid", "docid", "label"]), "human")
    # the LLM sees the truth on a stretched, noisy scale: 0–7
    llm = Qrels.from_frame(pd.DataFrame([(q, d, int(np.clip(truth[q, d] * 1.6 + rng.integers(-1, 2), 0, 7)))
                                         for q, d in keys], columns=["qid", "docid", "label"]), "llm")
    return runs, human, llm


def test_scenarios_and_validation():
    runs, human, llm = _synthetic()
    filled = fill_gaps(human, llm, runs, k=30).qrels
    rep = scenarios(runs, {"Human-only": human, "LLM fills gaps": filled, "Full LLM": llm}, k=30)
    # filling can only add judged items
    assert rep.judged["Human-only"] < rep.judged["LLM fills gaps"] <= rep.judged["Full LLM"] + 1e-12
    assert rep.judged["Full LLM"] == pytest.approx(1.0)
    tau = rep.tau["Compat(p=0.95)"]
    assert tau.loc["Human-only", "Human-only"] == pytest.approx(1.0)
    assert tau.loc["LLM fills gaps", "Full LLM"] == pytest.approx(tau.loc["Full LLM", "LLM fills gaps"])
    val = validate_fill(human, llm, runs, 0.3, k=30, min_overlap=5, seed=2)
    assert val.n_hidden_filled == val.n_hidden  # the LLM labels every pair here
    # the LLM is a monotone transform of the truth plus noise: calibrated labels agree well
    assert val.agreement["krippendorff_alpha_ordinal"] > 0.5


def test_fill_cli(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "r1.run").write_text(RUN1)
    (tmp_path / "runs" / "r2.run").write_text(RUN2)
    (tmp_path / "human.qrels").write_text(HUMAN)
    (tmp_path / "llm.qrels").write_text(LLM)
    out = tmp_path / "out" / "filled.qrels"
    argv = ["fill", "--human", str(tmp_path / "human.qrels"), "--llm", str(tmp_path / "llm.qrels"),
            "--runs", str(tmp_path / "runs"), "--out", str(out), "--min-overlap", "2",
            "--json", str(tmp_path / "fill.json")]
    # five shared pairs cannot calibrate: refused, nothing written
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "cannot calibrate" in err and "--allow-weak-calibration" in err
    assert not out.exists() and not (tmp_path / "fill.json").exists()
    assert main([*argv, "--allow-weak-calibration"]) == 0
    filled = read_qrels(out)
    assert len(filled) == 7
    side = pd.read_csv(str(out) + ".sources.tsv", sep="\t", dtype=str)
    assert side.source.value_counts().to_dict() == {"human": 5, "llm-calibrated-weak": 2}
    data = json.loads((tmp_path / "fill.json").read_text())
    assert data["filled"]["n_filled"] == 2
    assert data["filled"]["weak_calibration"] and data["calibration"]["problems"]
    assert set(data["scenarios"]["judged"]) == {"Human-only", "LLM fills gaps", "Full LLM"}
    printed = capsys.readouterr().out
    assert "calibration" in printed and printed.startswith("WARNING: filled with a calibration that cannot")


# ------------------------------------------------------------------ rules a mutation could change

def _pairs(rows):
    """Qrels text from (user, item, label) rows."""
    return "".join(f"{q} 0 {d} {label}\n" for q, d, label in rows)


def test_calibrated_label_rounds_the_mean_half_up():
    # LLM grade → human labels of the pairs both judge, and the mean by hand:
    #   4 → 1, 1, 1, 2: 5/4 = 1.25 → 1 (ceil would give 2)
    #   5 → 1, 2:       3/2 = 1.5  → 2 (floor would give 1)
    #   6 → 2, 3:       5/2 = 2.5  → 3 (round half to even, Python's round, would give 2)
    #   7 → 2, 2, 3:    7/3 = 2.33 → 2 (ceil would give 3)
    groups = {4: [1, 1, 1, 2], 5: [1, 2], 6: [2, 3], 7: [2, 2, 3]}
    human, llm = [], []
    for grade, labels in groups.items():
        for n, label in enumerate(labels):
            human.append(("u", f"g{grade}-{n}", label))
            llm.append(("u", f"g{grade}-{n}", grade))
    cal = calibrate(read_qrels(_pairs(human)), read_qrels(_pairs(llm)), min_overlap=1)
    means = {g.llm_grade: g.mean_reference for g in cal.grades}
    assert means == pytest.approx({4: 5 / 4, 5: 3 / 2, 6: 5 / 2, 7: 7 / 3})
    assert cal.mapping == {4: 1, 5: 2, 6: 3, 7: 2}


def test_grade_without_overlap_borrows_the_nearest_grade_and_the_lower_one_on_a_tie():
    # grades with overlap: 2 (human 1, 1 → 1) and 4 (human 3, 3 → 3)
    # grades without: 3 is 1 from both 2 and 4 → the lower, 2 → label 1 (the higher would give 3)
    #                 5 is 1 from 4 and 3 from 2 → 4 → label 3; 0 is 2 from 2 → label 1
    human = [("u", "a", 1), ("u", "b", 1), ("u", "c", 3), ("u", "d", 3)]
    llm = [("u", "a", 2), ("u", "b", 2), ("u", "c", 4), ("u", "d", 4),
           ("u", "x", 3), ("u", "y", 5), ("u", "z", 0)]   # x, y, z: no human label
    cal = calibrate(read_qrels(_pairs(human)), read_qrels(_pairs(llm)), min_overlap=1)
    rows = {g.llm_grade: g for g in cal.grades}
    assert cal.mapping == {0: 1, 2: 1, 3: 1, 4: 3, 5: 3}
    assert rows[3].note == "no overlap; borrows grade 2" and rows[3].flagged and rows[3].n_overlap == 0
    assert rows[5].note == "no overlap; borrows grade 4"
    assert not rows[2].flagged and not rows[4].flagged


def _three_systems():
    """The one-user, three-system example below: full human labels and the filled ones."""
    full = read_qrels(_pairs([("u", "a", 2), ("u", "b", 1), ("u", "b2", 1), ("u", "c", 0), ("u", "d", 2),
                              ("u", "e", 0)]))
    filled = read_qrels(_pairs([("u", "a", 1), ("u", "b", 1), ("u", "b2", 1), ("u", "c", 0), ("u", "d", 2),
                                ("u", "e", 2)]))
    runs = {name: read_run("".join(f"u Q0 {d} {r} {3 - r} {name}\n" for r, d in enumerate(docs, start=1)), name)
            for name, docs in (("S1", ["a", "c"]), ("S2", ["b", "b2"]), ("S3", ["e", "b"]))}
    return runs, full, filled


def test_validate_fill_tau_with_fill_differs_from_tau_without_by_hand():
    """One user, three systems, top-2. Hidden: a (human 2) and e (human 0); the LLM's grades come back
    through calibration as a = 1 and e = 2, so the filled labels differ from the full ones.

    nDCG@2 uses the label as gain, discount 1/log2(rank + 1); each qrels has one ideal DCG, so the
    systems' order follows their DCG (L = 1/log2(3) ≈ 0.631):
                     full (a=2, e=0)   visible (a, e unjudged)   filled (a=1, e=2)
        S1 [a, c]    2                 0                         1
        S2 [b, b2]   1 + L             1 + L                     1 + L
        S3 [e, b]    L                 L                         2 + L
    Full ranks S1 > S2 > S3; visible S2 > S3 > S1; filled S3 > S2 > S1.
    τ(full, visible): (S1,S2), (S1,S3) discordant, (S2,S3) concordant → (1 - 2) / 3.
    τ(full, filled): all three pairs discordant → (0 - 3) / 3. (τ(visible, filled) would be 1/3.)
    """
    # the LLM's grades, calibrated on the visible labels: grade 1 → b, b2 (1, 1) → 1; grade 0 → c (0) → 0;
    # grade 2 → d (2) → 2, so they are the filled labels as they stand
    runs, human, llm = _three_systems()
    fraction, seed = 1 / 3, 88
    _, hidden = hide_labels(human, fraction, seed)
    assert sorted(hidden.docid) == ["a", "e"]  # the premise of the table above (a seeded draw)
    val = validate_fill(human, llm, runs, fraction, k=2, min_overlap=1, seed=seed, allow_weak=True)
    assert (val.n_hidden, val.n_hidden_filled) == (2, 2)
    assert val.tau_without_fill["nDCG@2"] == pytest.approx((1 - 2) / 3)
    assert val.tau_with_fill["nDCG@2"] == pytest.approx((0 - 3) / 3)


def test_fill_pools_the_top_k_by_score_whatever_the_rank_column_or_the_claimed_policy_says():
    human = read_qrels("u 0 a 1\n")
    llm = read_qrels("u 0 a 2\nu 0 x 2\n")
    frame = pd.DataFrame({"qid": ["u", "u"], "docid": ["a", "x"], "rank": [1, 2], "score": [1.0, 3.0],
                          "tag": ["t", "t"]})  # x scores higher but the rank column says a first
    run = Run("r", frame, tie_policy="hash", seed=0)
    res = fill_gaps(human, llm, {"r": run}, calibrate(human, llm, 1), k=1, allow_weak=True)
    assert (res.n_filled, res.n_unfilled) == (1, 0)  # the pool is x alone (not a): filled from the LLM grade


# ------------------------------------------------------------------ the measure set fill compares on

def test_scenarios_report_every_measure_given_by_hand():
    """P@2 (label ≥ 1 relevant):    full     filled
        S1 [a, c]                  1/2      1/2
        S2 [b, b2]                 1        1
        S3 [e, b]                  1/2      1      (e: 0 → 2)
    τ-b: (S1,S2) concordant; (S1,S3) tied under full; (S2,S3) tied under filled; no discordant pair:
    (1 - 0) / sqrt((3 - 1)(3 - 1)) = 1/2. nDCG@2: τ = -1 (the docstring of the validation test above)."""
    runs, full, filled = _three_systems()
    rep = scenarios(runs, {"full": full, "filled": filled}, k=2, measures="P@2, nDCG@2")
    assert rep.measures == ("P@2", "nDCG@2") and list(rep.tau) == ["P@2", "nDCG@2"]
    assert rep.scores["P@2"].to_dict() == {"full": {"S1": 0.5, "S2": 1.0, "S3": 0.5},
                                           "filled": {"S1": 0.5, "S2": 1.0, "S3": 1.0}}
    assert rep.tau["P@2"].loc["full", "filled"] == pytest.approx(1 / 2)
    assert rep.tau["nDCG@2"].loc["full", "filled"] == pytest.approx(-1.0)
    assert rep.judged.to_dict() == {"full": 1.0, "filled": 1.0}  # Judged@k is reported whatever is compared
    assert rep.warnings == (("nDCG@2 mixes gains from two label sources in one ideal ranking and proved "
                             "unstable on filled qrels (Penha et al. 2025); read Compat first"),)
    assert rep.to_json()["measures"] == ["P@2", "nDCG@2"]
    # Judged@k may be compared too: evaluated once, not refused as a repeated measure
    both = scenarios(runs, {"full": full, "filled": filled}, k=2, measures=["Judged@2", "P@2"])
    # both label sets judge every item the three systems rank at depth 2: Judged@2 = 1 for all, no ranking
    assert list(both.tau) == ["Judged@2", "P@2"]
    assert both.warnings == tuple(f"every system ties under {name} on Judged@2 (all 3 means are 1), so there is no "
                                  "ranking to compare: τ and the rank displacements are undefined"
                                  for name in ("full", "filled"))
    val = validate_fill(full, filled, runs, 1 / 3, k=2, min_overlap=1, seed=88, measures="P@2", allow_weak=True)
    assert set(val.tau_with_fill) == set(val.tau_without_fill) == {"P@2"}


def test_the_default_measure_set_is_unchanged():
    runs, full, filled = _three_systems()
    rep = scenarios(runs, {"full": full, "filled": filled}, k=2)
    assert rep.measures == ("Compat(p=0.95)", "nDCG@2") and list(rep.scores) == ["Compat(p=0.95)", "nDCG@2"]
    val = validate_fill(full, filled, runs, 1 / 3, k=2, min_overlap=1, seed=88, allow_weak=True)
    assert set(val.tau_with_fill) == {"Compat(p=0.95)", "nDCG@2"}


def test_an_unknown_measure_is_refused_before_anything_is_read():
    from recjudge.api import FillSettings
    from recjudge.evaluation.calibration import scenario_measures

    with pytest.raises(ConfigError, match="Bogus@3"):
        scenario_measures("nDCG@10,Bogus@3", 100)
    with pytest.raises(ConfigError, match="Bogus@3"):
        FillSettings(human="missing.qrels", llm="missing.qrels", runs=("missing",), out=None, measures="Bogus@3")
    assert FillSettings(human="h", llm="l", runs=("r",), out=None, k=10).measure_list() == \
        ("Compat(p=0.95)", "nDCG@10")


# ------------------------------------------------------------------ a calibration that cannot calibrate

def _graded(groups: dict[int, list[int]]) -> tuple[Qrels, Qrels]:
    """Human and LLM qrels from judge grade → the human labels of the pairs it was given."""
    human, llm = [], []
    for grade, labels in groups.items():
        for n, label in enumerate(labels):
            human.append(("u", f"g{grade}-{n}", label))
            llm.append(("u", f"g{grade}-{n}", grade))
    return read_qrels(_pairs(human)), read_qrels(_pairs(llm))


def test_the_hand_fixture_is_refused_with_each_reason():
    human, llm = read_qrels(HUMAN), read_qrels(LLM)
    runs = {"r1": read_run(RUN1, "r1"), "r2": read_run(RUN2, "r2")}
    cal = calibrate(human, llm, 2)
    # shared pairs: (LLM, human) = (5, 3), (2, 1), (0, 0), (5, 2), (0, 0); τ-b by hand:
    # LLM ties: (a, d) on 5, (c, e) on 0; human ties: (c, e) on 0; 10 pairs, 8 concordant, 0 discordant
    # τ-b = 8 / sqrt((10 - 2) (10 - 1)) = 0.943, with scipy's p 0.032: a signal, if a thin one
    assert cal.association == pytest.approx(8 / math.sqrt(8 * 9))
    assert cal.association_p == pytest.approx(0.0317, abs=5e-5)
    with pytest.raises(ConfigError) as err:
        fill_gaps(human, llm, runs, cal, k=100)
    msg = str(err.value)
    # grade 2 (1 shared pair) supplies y; grade 5 (2 pairs) supplies x
    assert "too few shared pairs: llm grade(s) 2 (1) rest on fewer than 2 pairs" in msg
    assert "supply 1 of the 2 labels to fill" in msg
    assert "--allow-weak-calibration" in msg
    assert "not monotone" not in msg and "flat" not in msg and "no signal" not in msg


def test_a_flat_calibration_is_refused_as_flat_and_without_signal():
    # every grade's human labels average 2.25–2.75: every calibrated label is 2 or 3 (the demo's case)
    rng = np.random.default_rng(0)
    groups = {g: list(rng.permutation([1, 2, 3, 4] * 10)) for g in range(5)}
    human, llm = _graded(groups)
    cal = calibrate(human, llm, 30)
    assert set(cal.mapping.values()) <= {2, 3}
    problems = cal.problems()
    assert [p.split(":")[0] for p in problems] == ["flat", "no signal"]
    assert "fewer than 3" in problems[0]


def test_a_non_monotone_calibration_is_refused():
    # grade 3 → mean human 3, grade 5 → mean human 1: a higher grade maps to a lower label
    human, llm = _graded({0: [0] * 30, 3: [3] * 30, 5: [1] * 30, 7: [4] * 30})
    problems = calibrate(human, llm, 30).problems()
    assert len(problems) == 1
    assert problems[0] == ("not monotone: llm grade 5 maps to human label 1 but the lower grade 3 to 3, so the "
                           "fill would reverse the judge's order")


def test_a_calibration_with_enough_informative_pairs_has_no_problem():
    runs, human, llm = _synthetic()
    cal = calibrate(human, llm, 30)
    assert cal.problems() == () and cal.association > 0.5
    res = fill_gaps(human, llm, runs, cal, k=30)
    assert res.problems == () and set(res.sources.source) == {"human", "llm-calibrated"}


def test_the_label_sets_are_named_for_what_they_are():
    human, llm = _graded({0: [0] * 30, 3: [2] * 30, 6: [4] * 30})
    cal = calibrate(human, llm, 30, reference="historical", candidate="overlap")
    assert list(cal.to_frame().columns[:2]) == ["n_overlap", "mean_historical"]
    assert cal.to_frame().index.name == "overlap_grade"
    run = read_run("u Q0 x 1 2 r\nu Q0 g0-0 2 1 r\n", "r")
    judge = Qrels.from_frame(pd.concat([llm.frame, pd.DataFrame({"qid": ["u"], "docid": ["x"], "label": [6]})]),
                             "overlap")
    res = fill_gaps(human, judge, {"r": run}, cal, k=2)
    assert dict(zip(res.sources.docid, res.sources.source))["x"] == "overlap-calibrated"
    assert set(res.sources.source) == {"historical", "overlap-calibrated"}
