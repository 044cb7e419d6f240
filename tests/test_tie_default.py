"""The default tie policy is trec_eval's rule: score descending, then docid descending as strings.

Expected values come from trec_eval's comparison (``strcmp(docno2, docno1)`` after the score) spelled
out by hand, and from ir-measures 0.4.3, whose pytrec_eval provider is trec_eval itself.
"""

from __future__ import annotations

import inspect
import warnings

import ir_measures
import numpy as np
import pandas as pd
import pytest

from recjudge.data.trec import Qrels, Run, read_qrels, read_run
from recjudge.evaluation.ties.policy import resolve_ties
from recjudge.evaluation.metaeval import evaluate

# served by ir-measures' pytrec_eval provider (trec_eval): its values are trec_eval's
TREC_EVAL_MEASURES = ["nDCG@10", "nDCG@100", "AP", "P@5", "R@10", "Bpref", "RR", "Success@10"]


def test_default_order_is_score_then_docid_descending_as_strings():
    # as strings "d9" > "d2" > "d10" > "a"; numerically 10 > 9 > 2: the string order must win
    run = read_run("q 0 d10 1 1.0 t\nq 0 d2 2 1.0 t\nq 0 d9 3 1.0 t\nq 0 a 4 2.0 t\nq 0 z 5 0.5 t\n", name="r")
    out = resolve_ties(run)
    assert out.frame.docid.tolist() == ["a", "d9", "d2", "d10", "z"]
    assert out.tie_policy == "trec_eval"


def test_every_evaluation_default_is_trec_eval():
    from recjudge.api.settings import (CompareSettings, SettingsComparisonSettings, EvaluateSettings, FillSettings,
                                       JudgeCommandSettings)
    from recjudge.evaluation import calibration, measures, metaeval, settings_comparison
    from recjudge.evaluation.ties import policy
    from recjudge.experiments.ablate import Experiment
    from recjudge.judging import bias, select

    for model in (CompareSettings, EvaluateSettings, FillSettings, SettingsComparisonSettings, JudgeCommandSettings,
                  Experiment):
        assert model.model_fields["tie_policy"].default == "trec_eval", model.__name__
    for fn in (measures.score_runs, metaeval.evaluate, metaeval.compare, calibration.fill_gaps,
               calibration.validate_fill, calibration.scenarios, settings_comparison.compare_settings,
               select.select_pairs, bias.popularity_rank_effect, policy.resolve_ties, policy.ensure_tie_free):
        params = inspect.signature(fn).parameters
        name = "tie_policy" if "tie_policy" in params else "policy"
        assert params[name].default == "trec_eval", fn.__qualname__


def _tied_case(seed: int, users: int = 25, items: int = 60, depth: int = 40):
    rng = np.random.default_rng(seed)
    rows, qrows = [], []
    for u in range(users):
        docs = rng.choice(items, depth, replace=False)
        scores = rng.integers(0, 6, depth).astype(float)  # a handful of values: ties everywhere
        rows += [(f"u{u}", f"d{d}", float(s)) for d, s in zip(docs, scores)]
        for d in rng.choice(items, 30, replace=False):
            qrows.append((f"u{u}", f"d{d}", int(rng.integers(0, 4))))
    run = Run.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "score"]), "tied")
    qrels = Qrels.from_frame(pd.DataFrame(qrows, columns=["qid", "docid", "label"]), "q")
    return run, qrels


def _ir_measures(run: Run, qrels: Qrels, names) -> dict:
    scored = [ir_measures.ScoredDoc(q, d, float(s)) for q, d, s in zip(run.frame.qid, run.frame.docid, run.frame.score)]
    qr = [ir_measures.Qrel(q, d, int(lab)) for q, d, lab in zip(qrels.frame.qid, qrels.frame.docid, qrels.frame.label)]
    got = ir_measures.calc_aggregate([ir_measures.parse_measure(m) for m in names], qr, scored)
    return {m: got[ir_measures.parse_measure(m)] for m in names}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_scores_of_a_tied_run_equal_ir_measures(seed):
    run, qrels = _tied_case(seed)
    want = _ir_measures(run, qrels, TREC_EVAL_MEASURES)  # the raw tied run: trec_eval breaks the ties
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = evaluate({"tied": run}, qrels, TREC_EVAL_MEASURES).table
    for m in TREC_EVAL_MEASURES:
        assert table.means(m)["tied"] == pytest.approx(want[m], abs=1e-12), m
    # the ties matter here: the hash policy gives other numbers
    hashed = evaluate({"tied": run}, qrels, "nDCG@10", tie_policy="hash").table.means("nDCG@10")["tied"]
    assert hashed != pytest.approx(want["nDCG@10"], abs=1e-6)


def test_docid_policy_is_what_ir_measures_python_providers_do():
    # ir-measures' judged provider sorts by (-score, docid): ascending ids. (Its compat provider does
    # too, but builds the ideal list from the raw tied scores, which a resolved run no longer has.)
    run, qrels = _tied_case(3)
    names = ["Judged@5", "Judged@10"]
    want = _ir_measures(run, qrels, names)
    table = evaluate({"tied": run}, qrels, names, tie_policy="docid").table
    for m in names:
        assert table.means(m)["tied"] == pytest.approx(want[m], abs=1e-12), m


def test_real_trec_dl_run_scores_as_trec_eval(shared_data):
    """NLE_P_v1 (TREC DL 2021, 27 NIST-judged queries) ties; the default gives ir-measures' nDCG@10."""
    base = shared_data / "trec-dl-2021-half"
    path = base / "runs" / "NLE_P_v1.gz"
    if not path.is_file():
        pytest.skip(f"{path} not available")
    qrels = read_qrels(base / "qrels.nist.txt")
    run = read_run(path, name="NLE_P_v1")
    want = _ir_measures(run, qrels, ["nDCG@10", "nDCG@100", "AP"])
    table = evaluate({"NLE_P_v1": run}, qrels, ["nDCG@10", "nDCG@100", "AP"]).table
    for m, v in want.items():
        assert table.means(m)["NLE_P_v1"] == pytest.approx(v, abs=1e-12), m
    assert round(table.means("nDCG@10")["NLE_P_v1"], 4) == 0.7448


def test_trec_eval_order_of_runs_sharing_a_growing_dictionary_is_strcmp_order():
    """Runs read with one shared dictionary, which grows run by run: each run's ties are put in
    docid-descending string order (code points = strcmp on UTF-8), checked against Python's sort."""
    from recjudge.data.trec import IdDictionary
    from recjudge.evaluation.ties.policy import score_order, tie_order

    rng = np.random.default_rng(0)
    d = IdDictionary()
    for step in range(40):
        docs = sorted({f"d{x}" for x in rng.integers(0, 3000, int(rng.integers(2, 60)))} | {"é", "Z", "€", "d"})
        scores = rng.integers(0, 3, len(docs))  # three scores: most rows tie
        text = "".join(f"q{i % 2} Q0 {doc} {i + 1} {s} t\n" for i, (doc, s) in enumerate(zip(docs, scores)))
        run = read_run(text, dictionary=d)
        assert run.table.ids is d and d.issued(run.codes.docids)
        f = run.frame
        got = f.iloc[tie_order(run, score_order(run), "trec_eval")]
        rows = sorted(zip(f.qid, f.score, f.docid), key=lambda r: (r[0], -r[1], [-ord(c) for c in r[2]] + [1]))
        assert list(zip(got.qid, got.score, got.docid)) == rows, step
