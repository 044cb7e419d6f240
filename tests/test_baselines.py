"""Trivial judges (constant, random, popularity) beside a judge's τ and agreement, and the warning
for a label set of one label."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from recjudge.cli import main
from recjudge.data.trec import Qrels, Run, write_qrels, write_run
from recjudge.evaluation.agreement import agreement
from recjudge.evaluation.baselines import (DEFAULT_DRAWS, agreement_baselines, constant_label, single_label,
                                           trivial_judges)
from recjudge.evaluation.metaeval import compare


def _qrels(rows, name="cand"):
    return Qrels.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "label"]), name)


def _pairs(q: Qrels) -> dict[tuple[str, str], int]:
    return {(r.qid, r.docid): r.label for r in q}


def _fixture(seed=0, users=25, systems=6, depth=15):
    """Runs that differ in how many judged items they retrieve; human and LLM labels on a pool."""
    rng = np.random.default_rng(seed)
    runs = {}
    for s in range(systems):
        rows = []
        for u in range(users):
            docs = rng.permutation(20 + 8 * s)[:depth]  # later systems retrieve more unjudged items
            rows += [(f"u{u}", f"d{d}", r + 1, float(depth - r)) for r, d in enumerate(docs)]
        runs[f"sys{s}"] = Run.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "rank", "score"]), f"sys{s}")
    human, llm = [], []
    for u in range(users):
        for d in range(0, 30):
            h = int(rng.choice(4, p=[0.3, 0.2, 0.3, 0.2]))
            human.append((f"u{u}", f"d{d}", h))
            llm.append((f"u{u}", f"d{d}", int(rng.choice(4, p=[0.2, 0.2, 0.4, 0.2])) if d % 3 == 0 else h))
    return runs, _qrels(human, "human"), _qrels(llm, "llm")


# ------------------------------------------------------------------------------- the label sets

def test_popularity_judge_by_hand():
    # item a is in 3 users' pairs, b in 2, c in 1; the candidate's labels sorted: 0 0 1 1 2 2
    cand = _qrels([("u1", "a", 0), ("u1", "b", 1), ("u2", "a", 2), ("u2", "c", 0), ("u3", "a", 1), ("u3", "b", 2)])
    pop = trivial_judges(cand, draws=1)["popularity"][0]
    # order: popularity, then item id, then user id → (u2,c) (u1,b) (u3,b) (u1,a) (u2,a) (u3,a)
    assert _pairs(pop) == {("u2", "c"): 0, ("u1", "b"): 0, ("u3", "b"): 1, ("u1", "a"): 1, ("u2", "a"): 2,
                           ("u3", "a"): 2}


def test_constant_judge_is_the_most_frequent_label_and_of_a_constant_candidate_the_candidate():
    cand = _qrels([("u1", "a", 1), ("u1", "b", 2), ("u2", "a", 2), ("u2", "c", 0)])
    assert constant_label(cand) == 2
    assert set(_pairs(trivial_judges(cand, 1)["constant"][0]).values()) == {2}
    assert constant_label(_qrels([("u1", "a", 3), ("u1", "b", 1)])) == 1  # a tie: the lowest
    # 0 is the mode, but a judge that calls every pair non-relevant ranks nothing: the most frequent label above 0
    assert constant_label(_qrels([("u1", "a", 0), ("u1", "b", 0), ("u1", "c", 0), ("u2", "a", 2), ("u2", "b", 3),
                                  ("u2", "c", 3)])) == 3
    assert constant_label(_qrels([("u1", "a", 0), ("u2", "b", 0)])) == 0
    three = _qrels([("u1", "a", 3), ("u1", "b", 3), ("u2", "a", 3)])
    assert _pairs(trivial_judges(three, 1)["constant"][0]) == _pairs(three)


def test_random_judge_keeps_the_histogram_and_is_seeded():
    _, _, llm = _fixture()
    draws = trivial_judges(llm, draws=3, seed=7)["random"]
    assert len(draws) == 3
    for q in draws:
        assert Counter(q.labels.tolist()) == Counter(llm.labels.tolist())
        assert set(_pairs(q)) == set(_pairs(llm))
    again = trivial_judges(llm, draws=3, seed=7)["random"]
    assert [list(q.labels) for q in again] == [list(q.labels) for q in draws]
    reversed_rows = Qrels.from_frame(llm.frame.iloc[::-1], "llm")  # the row order does not change a draw
    assert [_pairs(q) for q in trivial_judges(reversed_rows, 3, seed=7)["random"]] == [_pairs(q) for q in draws]
    other = trivial_judges(llm, draws=1, seed=8)["random"][0]
    assert list(other.labels) != list(draws[0].labels)
    assert list(draws[0].labels) != list(draws[1].labels)


def test_single_label():
    assert single_label(_qrels([("u1", "a", 3), ("u2", "b", 3)])) == 3
    assert single_label(_qrels([("u1", "a", 3), ("u2", "b", 0)])) is None


# ------------------------------------------------------------------------------------- compare

def test_compare_trivial_taus_are_compares_own_taus_for_those_label_sets():
    runs, human, llm = _fixture()
    result = compare(runs, human, {"llm": llm}, bootstrap=0, baselines=4, seed=3)
    judges = trivial_judges(llm, draws=4, seed=3)
    given = {f"{judge}{r}": q for judge, sets in judges.items() for r, q in enumerate(sets)}
    direct = compare(runs, human, given, bootstrap=0, seed=3).agreement
    for m, by_judge in result.baselines["llm"].items():
        assert by_judge["constant"]["kendall_tau"].mean == direct["constant0"][m].kendall_tau
        assert by_judge["popularity"]["weighted_tau"].mean == direct["popularity0"][m].weighted_tau
        taus = [direct[f"random{r}"][m].kendall_tau for r in range(4)]
        assert by_judge["random"]["kendall_tau"].values == pytest.approx(taus, abs=0)
        assert by_judge["random"]["kendall_tau"].mean == pytest.approx(np.mean(taus), abs=1e-12)
        assert by_judge["random"]["kendall_tau"].sd == pytest.approx(np.std(taus, ddof=1), abs=1e-12)


def test_constant_candidate_scores_exactly_its_constant_judge():
    runs, human, llm = _fixture()
    three = _qrels([(q, d, 3) for (q, d) in _pairs(llm)], "three")
    result = compare(runs, human, {"three": three}, bootstrap=0, baselines=2)
    for m, ra in result.agreement["three"].items():
        for judge in ("constant", "random", "popularity"):  # one label: every trivial judge is the candidate
            assert result.baselines["three"][m][judge]["kendall_tau"].mean == ra.kendall_tau
    assert result.warnings == ("label set 'three' gives every pair the same label (3): its τ reflects the runs "
                               "(which systems retrieve judged items), not the judge",)
    assert compare(runs, human, {"llm": llm}, bootstrap=0).warnings == ()
    assert compare(runs, human, {"llm": llm}, bootstrap=0).baselines == {}


def _write(tmp_path, runs, *qrels):
    for name, run in runs.items():
        write_run(run, tmp_path / "runs" / f"{name}.run")
    for q in qrels:
        write_qrels(q, tmp_path / f"{q.name}.qrels")
    return tmp_path / "runs"


def test_compare_cli_shows_trivial_judges_and_warns_of_one_label(tmp_path, capsys):
    runs, human, llm = _fixture()
    three = _qrels([(q, d, 3) for (q, d) in _pairs(llm)], "three")
    run_dir = _write(tmp_path, runs, human, llm, three)
    out = tmp_path / "c.json"
    assert main(["compare", "--runs", str(run_dir), "--reference", str(tmp_path / "human.qrels"), "--candidate",
                 str(tmp_path / "llm.qrels"), "--candidate", str(tmp_path / "three.qrels"), "--bootstrap", "0",
                 "--json", str(out), "--report", str(tmp_path / "rep")]) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    expected = compare(runs, human, {"llm": llm}, bootstrap=0, baselines=DEFAULT_DRAWS).baselines["llm"]
    nd = expected["nDCG@100"]
    line = (f"  nDCG@100: constant τ {nd['constant']['kendall_tau'].mean:.2f}, random τ "
            f"{nd['random']['kendall_tau'].mean:.2f} ± {nd['random']['kendall_tau'].sd:.2f}, popularity τ "
            f"{nd['popularity']['kendall_tau'].mean:.2f}")
    assert line in text
    assert "warning: label set 'three' gives every pair the same label (3)" in text
    assert data["warnings"] == [w for w in data["warnings"] if "'three'" in w] and len(data["warnings"]) == 1
    assert data["baselines"]["llm"]["Bpref"]["random"]["kendall_tau"]["mean"] == pytest.approx(
        expected["Bpref"]["random"]["kendall_tau"].mean)
    assert len(data["baselines"]["llm"]["Bpref"]["random"]["kendall_tau"]["values"]) == DEFAULT_DRAWS
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "**Warning:** label set 'three' gives every pair the same label (3)" in report
    assert "| measure | constant τ-b | random τ-b | popularity τ-b |" in report
    # --baselines 0: none
    assert main(["compare", "--runs", str(run_dir), "--reference", str(tmp_path / "human.qrels"), "--candidate",
                 str(tmp_path / "llm.qrels"), "--bootstrap", "0", "--baselines", "0"]) == 0
    assert "constant τ" not in capsys.readouterr().out


# ----------------------------------------------------------------------------------- agreement

def test_constant_judge_kappa_is_zero_as_sklearn():
    _, human, llm = _fixture()
    base = agreement_baselines(human, llm, "zero", draws=2)
    const = trivial_judges(llm, 1)["constant"][0]
    expected = cohen_kappa_score(human.labels, np.full(len(human), constant_label(llm)))
    assert expected == 0.0
    assert base["constant"]["cohen_kappa"].mean == expected
    assert agreement(human, const, "zero", bootstrap=0).cohen_kappa == expected
    assert base["constant"]["tie"].mean == 1.0  # one label: every pair of differently labelled items ties
    # the random draws are agreement() of the shuffled label sets
    shuffled = trivial_judges(llm, 2)["random"]
    kappas = [cohen_kappa_score(human.labels, np.array([_pairs(q)[(r.qid, r.docid)] for r in human]))
              for q in shuffled]
    assert base["random"]["cohen_kappa"].values == pytest.approx(kappas, abs=1e-12)


def test_agreement_cli_rows_legend_and_warning(tmp_path, capsys):
    _, human, llm = _fixture()
    three = _qrels([(q, d, 3) for (q, d) in _pairs(llm)], "three")
    for q in (human, llm, three):
        write_qrels(q, tmp_path / f"{q.name}.qrels")
    out = tmp_path / "a.json"
    assert main(["agreement", "--reference", str(tmp_path / "human.qrels"), "--candidate",
                 str(tmp_path / "llm.qrels"), str(tmp_path / "three.qrels"), "--bootstrap", "0",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    # the table's first block, below its header (the reference line above it wraps with the path's length;
    # wider tables go on in a second block under the same row names)
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["pairs", "missing"])
    rows = [line.split() for line in lines[head - 2:]]
    assert [r[0] for r in rows[3:11]] == ["llm", "constant", "random", "popularity", "three", "constant", "random",
                                         "popularity"]
    expected = agreement_baselines(human, llm, "zero", draws=DEFAULT_DRAWS)
    assert rows[5][4] == f"{expected['random']['cohen_kappa'].mean:.4f}"
    assert rows[4][1] == "0.0000"  # constant κ
    assert "columns: pairs = reference pairs compared" in text
    assert "kappa_lin = κ with linear weights |i − j|" in text
    assert "cand-only = pairs the candidate labels and the reference does not" in text
    assert "rel>non agree/tie = pairs of a" in text
    assert "warning: label set 'three' gives every pair the same label (3)" in text
    data = json.loads(out.read_text())
    assert data["three"]["warnings"] and not data["llm"]["warnings"]
    assert data["llm"]["baselines"]["constant"]["cohen_kappa"]["mean"] == 0.0
    assert main(["agreement", "--reference", str(tmp_path / "human.qrels"), "--candidate",
                 str(tmp_path / "llm.qrels"), "--bootstrap", "0", "--baselines", "0"]) == 0
    assert "popularity" not in capsys.readouterr().out


# -------------------------------------------------------------------------------------- ablate

def _run_three(ctx):
    """A judge that labels every pair 3 (tests only)."""
    import time

    from recjudge.judging.baselines import _result
    from recjudge.judging.results import Judgment

    judgments = [Judgment(p.qid, p.docid, 3, "ok", None, (3,), (None,)) for p in ctx.pairs]
    return _result(ctx, judgments, time.perf_counter(), {"method": "three"})


def test_ablate_shows_trivial_judges_and_warns_of_a_constant_variant(tmp_path, capsys, monkeypatch):
    from test_ablate import _human_qrels, _movielens, _runs
    from test_ablate import _write as write_experiment

    from recjudge.judging import registry
    from recjudge.judging.registry import JudgeSpec

    monkeypatch.setitem(registry._JUDGES, "test-three", JudgeSpec("test-three", "baseline", "3 (tests only)",
                                                                  _run_three))
    coll, runs = _movielens(tmp_path), _runs(tmp_path, users=8, systems=5)
    human = _human_qrels(tmp_path)
    path = write_experiment(tmp_path, f'''
collection = "{coll}"
reference = "{tmp_path / 'human.qrels'}"
runs = "{runs}"
out = "{tmp_path / 'out'}"
per_user = 6
measures = ["nDCG@10", "Bpref"]
bootstrap = 0
baselines = 3
[judge]
judge = "test-three"
''')
    assert main(["ablate", str(path)]) == 0
    text = capsys.readouterr().out
    data = json.loads((tmp_path / "out" / "ablation.json").read_text())
    [row] = data["rows"]
    base = row["per_experiment"][0]["baselines"]
    assert list(base) == ["constant", "random", "popularity"]
    # one label: every trivial judge is the variant itself, so each gets the variant's κ and τ exactly
    for judge in base.values():
        assert judge["kappa"] == row["kappa"] == 0.0
        assert judge["tau nDCG@10"] == row["tau nDCG@10"] and judge["tau Bpref"] == row["tau Bpref"]
    # and the τ is compare's own for that label set
    from recjudge.data.trec import read_runs
    from recjudge.judging import select_pairs

    pairs = select_pairs(reference=human, per_user=6, seed=0)
    three = _qrels([(q, d, 3) for q, d in pairs], "three")
    direct = compare(read_runs([runs]), human, {"three": three}, measures=["nDCG@10", "Bpref"], bootstrap=0)
    assert row["tau Bpref"] == direct.agreement["three"]["Bpref"].kendall_tau
    assert data["warnings"] and "gives every pair the same label (3)" in data["warnings"][0]
    assert "warning: variant 'base' gives every pair the same label (3)" in text and "gives every pair the same label (3)" in text
    assert "trivial judge" in text and "popularity" in text
    md = (tmp_path / "out" / "ablation.md").read_text()
    assert "**Warning:** variant 'base'" in md and "| variant | trivial judge |" in md


def test_trivial_judgments_share_the_candidates_arrays_and_equal_judgments_built_alone():
    from recjudge.evaluation.measures import judgments, relabelled

    _, _, llm = _fixture()
    index = llm.qids
    jd = judgments(llm, index)
    for q in [t for sets in trivial_judges(llm, 2, seed=1).values() for t in sets]:
        alone, shared = judgments(q, index), relabelled(jd, q)
        assert shared.qcode is jd.qcode and shared.dcode is jd.dcode
        for name in ("qcode", "dcode", "label", "qrow", "above", "starts", "bstart"):
            assert np.array_equal(getattr(shared, name), getattr(alone, name)), name
            assert getattr(shared, name).dtype == getattr(alone, name).dtype, name


def test_shared_queries_trivial_taus_are_compares_own():
    runs, human, llm = _fixture()
    few = _qrels([(q, d, lab) for (q, d), lab in _pairs(llm).items() if int(q[1:]) < 18], "few")
    result = compare(runs, human, {"few": few}, queries="shared", bootstrap=0, baselines=2)
    given = {f"{judge}{r}": q for judge, sets in trivial_judges(few, 2).items() for r, q in enumerate(sets)}
    direct = compare(runs, human, given, queries="shared", bootstrap=0).agreement
    for m, by_judge in result.baselines["few"].items():
        assert by_judge["popularity"]["kendall_tau"].mean == direct["popularity0"][m].kendall_tau
        assert by_judge["random"]["kendall_tau"].values == tuple(direct[f"random{r}"][m].kendall_tau for r in range(2))
