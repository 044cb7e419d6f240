"""The conventions of trec_eval and ir-measures: measure names in both spellings, -l as --rel, per-user
scores, and the run and qrels formats a recommender user writes (CSV/TSV with a header, ranx JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import recjudge as rj
from recjudge.cli import main
from recjudge.data.trec import read_qrels, read_run
from recjudge.errors import ConfigError, InputError
from recjudge.evaluation.measures import measure_names, parse_measures

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "runs" / "example"
HUMAN = REPO / "qrels" / "example-human.qrels"

TREC_NAMES = {"map": "AP", "ndcg_cut_10": "nDCG@10", "P_10": "P@10", "recip_rank": "RR", "bpref": "Bpref",
              "Rprec": "Rprec", "recall_100": "R@100", "success_10": "Success@10", "ndcg": "nDCG",
              "map_cut_100": "AP@100", "P.5": "P@5"}


def _data(seed: int = 5, users: int = 25, runs: int = 3, depth: int = 30):
    """Tie-free runs (distinct scores) and graded qrels 0-3, as TREC text and as ir-measures dicts."""
    rng = np.random.default_rng(seed)
    qrels_lines, qrels = [], {}
    for u in range(users):
        for i in rng.choice(60, 25, replace=False):
            label = int(rng.integers(0, 4))
            qrels_lines.append(f"u{u} 0 i{i} {label}")
            qrels.setdefault(f"u{u}", {})[f"i{i}"] = label
    run_text, run_dicts = {}, {}
    for s in range(runs):
        lines, d = [], {}
        for u in range(users):
            items = rng.choice(60, depth, replace=False)
            scores = np.sort(rng.random(depth))[::-1]
            for r, (i, sc) in enumerate(zip(items, scores)):
                lines.append(f"u{u} Q0 i{i} {r + 1} {sc:.12f} s{s}")
                d.setdefault(f"u{u}", {})[f"i{i}"] = float(f"{sc:.12f}")
        run_text[f"s{s}"], run_dicts[f"s{s}"] = "\n".join(lines) + "\n", d
    return "\n".join(qrels_lines) + "\n", qrels, run_text, run_dicts


@pytest.fixture
def trec_files(tmp_path):
    qrels_text, qrels, run_text, run_dicts = _data()
    (tmp_path / "runs").mkdir()
    for name, text in run_text.items():
        (tmp_path / "runs" / f"{name}.run").write_text(text)
    (tmp_path / "h.qrels").write_text(qrels_text)
    return tmp_path, qrels, run_dicts


# ------------------------------------------------------------------------------ measure names

@pytest.mark.parametrize("trec, ir", sorted(TREC_NAMES.items()))
def test_trec_eval_names_parse_as_ir_measures_parse_them_and_print_in_its_spelling(trec, ir):
    import ir_measures

    assert parse_measures([trec]) == tuple(ir_measures.parse_trec_measure(trec))
    assert measure_names([trec]) == (ir,)


def test_ir_measures_strings_keep_the_spelling_given():
    assert measure_names("Judged@100,Compat(p=0.95),nDCG@100,Bpref") == ("Judged@100", "Compat(p=0.95)",
                                                                         "nDCG@100", "Bpref")


@pytest.mark.parametrize("given, suggestion", [
    ("ndcg@10", "did you mean nDCG@10?"), ("p@10", "did you mean P@10?"), ("NDCG_cut_10", "did you mean ndcg_cut_10 (nDCG@10)?"),
    ("recip_rnk", "did you mean recip_rank (RR)?"), ("hit@10", "did you mean Hit@10?"), ("map@10", "did you mean AP@10?"),
    ("judged@100", "did you mean Judged@100?"), ("P10", "did you mean P@10?"), ("succes@10", "did you mean Success@10?"),
    ("bpref@10", "did you mean Bpref? (Bpref takes rel)"),
])
def test_an_unknown_name_gets_the_nearest_known_one_and_the_accepted_forms(given, suggestion):
    with pytest.raises(ConfigError) as err:
        parse_measures([given])
    text = str(err.value)
    assert text.startswith(f"unknown measure {given!r}") and suggestion in text
    assert "trec_eval names (ndcg_cut_10, P_10, map" in text and "ir-measures names (nDCG@10" in text


def test_a_trec_eval_family_asks_for_one_member():
    with pytest.raises(ConfigError, match=r"'ndcg_cut' is trec_eval's family of 9 measures .*ndcg_cut_10 \(nDCG@10\)"):
        parse_measures(["ndcg_cut"])


def test_the_command_line_takes_trec_eval_names_and_says_did_you_mean(capsys):
    assert main(["evaluate", "--runs", str(RUNS), "--qrels", str(HUMAN), "--measures", "ndcg@10"]) == 2
    assert "--measures: unknown measure 'ndcg@10'" in capsys.readouterr().err
    assert main(["evaluate", "--runs", str(RUNS), "--qrels", str(HUMAN), "--measures", "map,ndcg_cut_10"]) == 0
    header = next(line.split() for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["rank"])
    assert header == ["rank", "AP", "nDCG@10"]


def test_trec_eval_names_score_what_ir_measures_scores(trec_files):
    import ir_measures

    folder, qrels, run_dicts = trec_files
    names = list(TREC_NAMES)
    report = rj.evaluate(folder / "runs", folder / "h.qrels", measures=",".join(names))
    scores = report.table.scores_frame()
    assert list(scores.columns) == [TREC_NAMES[n] for n in names]
    for name in names:
        measure = ir_measures.parse_trec_measure(name)[0]
        for run, d in run_dicts.items():
            expected = ir_measures.calc_aggregate([measure], qrels, d)[measure]
            assert scores.loc[run, TREC_NAMES[name]] == pytest.approx(expected, abs=1e-9), (name, run)


def test_rel_is_trec_eval_l_on_every_measure_with_a_threshold_and_leaves_ndcg(trec_files):
    import ir_measures
    import pytrec_eval

    folder, qrels, run_dicts = trec_files
    report = rj.evaluate(folder / "runs", folder / "h.qrels", measures="map,P_10,recip_rank,bpref,ndcg_cut_10,R@20",
                         rel=2)
    scores = report.table.scores_frame()
    assert list(scores.columns) == ["AP(rel=2)", "P(rel=2)@10", "RR(rel=2)", "Bpref(rel=2)", "nDCG@10", "R(rel=2)@20"]
    trec = {"AP(rel=2)": "map", "P(rel=2)@10": "P_10", "RR(rel=2)": "recip_rank", "Bpref(rel=2)": "bpref",
            "nDCG@10": "ndcg_cut_10", "R(rel=2)@20": "recall_20"}
    for run, d in run_dicts.items():
        # trec_eval -l 2 (pytrec_eval's relevance_level), averaged over the users as trec_eval does
        per_user = pytrec_eval.RelevanceEvaluator(qrels, set(trec.values()), relevance_level=2).evaluate(d)
        for col, t in trec.items():
            expected = np.mean([v[t] for v in per_user.values()])
            assert scores.loc[run, col] == pytest.approx(expected, abs=1e-9), (run, col)
            m = ir_measures.parse_measure(col)
            assert scores.loc[run, col] == pytest.approx(ir_measures.calc_aggregate([m], qrels, d)[m], abs=1e-9)


def test_rel_refuses_a_contradicting_rel_and_a_list_it_does_not_touch(capsys):
    base = ["evaluate", "--runs", str(RUNS), "--qrels", str(HUMAN)]
    assert main([*base, "--measures", "P(rel=3)@10", "--rel", "2"]) == 2
    assert "--rel 2 contradicts rel=3 in --measures item 'P(rel=3)@10'" in capsys.readouterr().err
    assert main([*base, "--measures", "nDCG@10,Compat", "--rel", "2"]) == 2
    assert "--rel 2 sets the relevance threshold of no measure" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"^rel= 2 contradicts rel=3 in measures= item"):
        rj.EvaluateSettings(runs=[str(RUNS)], qrels=str(HUMAN), measures="P(rel=3)@10", rel=2)
    # the same threshold given twice is no contradiction, so validating the settings again changes nothing
    s = rj.EvaluateSettings(runs=[str(RUNS)], qrels=str(HUMAN), measures="P(rel=2)@10,map", rel=2)
    assert s.measures == "P(rel=2)@10,AP(rel=2)" and s.replace(seed=1).measures == s.measures


def test_compare_takes_rel_too():
    s = rj.CompareSettings(runs=[str(RUNS)], reference=str(HUMAN), candidates=[str(HUMAN)], rel=2)
    assert s.measures == "Judged@100,Compat(p=0.95),nDCG@100,Bpref(rel=2)"


# ------------------------------------------------------------------------------ ranks and per-user scores

def test_evaluate_prints_whole_ranks_as_integers(capsys):
    assert main(["evaluate", "--runs", str(RUNS), "--qrels", str(HUMAN)]) == 0
    rows = capsys.readouterr().out.splitlines()[3:11]
    assert [r.split()[1] for r in rows] == [str(k) for k in range(1, 9)]
    frame = rj.evaluate(RUNS, HUMAN).to_frame()
    assert frame["rank"].dtype == np.int64 and frame["rank"].tolist() == list(range(1, 9))


def test_tied_systems_share_the_mean_of_their_ranks_and_the_table_says_so(tmp_path, capsys):
    # a and b are the same ranking: they tie at ranks 1 and 2, so each gets 1.5; c (no relevant item) is 3rd
    (tmp_path / "q.qrels").write_text("u1 0 d1 1\nu1 0 d2 0\n")
    for name, docs in {"a": "d1 d2", "b": "d1 d2", "c": "d2 d3"}.items():
        (tmp_path / f"{name}.run").write_text("".join(f"u1 Q0 {d} {r + 1} {2 - r} {name}\n"
                                                      for r, d in enumerate(docs.split())))
    runs = [str(tmp_path / f"{n}.run") for n in "abc"]
    assert main(["evaluate", "--runs", *runs, "--qrels", str(tmp_path / "q.qrels"), "--measures", "P@1",
                 "--report", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out
    assert [line.split()[:2] for line in out.splitlines()[3:6]] == [["a", "1.5"], ["b", "1.5"], ["c", "3"]]
    assert "rank 1.5: systems with equal P@1 share the mean of their ranks" in out
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| a | 1.5 | 1.0000 |" in md and "| c | 3 | 0.0000 |" in md


def _per_query_data(tmp_path):
    qrels_text, qrels, run_text, run_dicts = _data(users=12, runs=2, depth=15)
    # s1 ranks no item for u3: it scores 0 there (trec_eval -c), a user ir-measures' iter_calc leaves out
    run_text["s1"] = "".join(line + "\n" for line in run_text["s1"].splitlines() if not line.startswith("u3 "))
    del run_dicts["s1"]["u3"]
    for name, text in run_text.items():
        (tmp_path / f"{name}.run").write_text(text)
    (tmp_path / "h.qrels").write_text(qrels_text)
    return qrels, run_dicts


def _check_against_iter_calc(rows, qrels, run_dicts, measures):
    import ir_measures

    got = {(r["run"], r["query"], r["measure"]): float(r["value"]) for r in rows}
    assert len(got) == len(rows) == len(run_dicts) * len(qrels) * len(measures)
    for run, d in run_dicts.items():
        expected = {(run, m.query_id, str(m.measure)): m.value
                    for m in ir_measures.iter_calc([ir_measures.parse_measure(x) for x in measures], qrels, d)}
        for key, value in expected.items():
            assert got[key] == pytest.approx(value, abs=1e-9), key
        for user in set(qrels) - set(d):
            assert all(got[(run, user, m)] == 0.0 for m in measures)


def test_per_query_frame_matches_ir_measures_iter_calc(tmp_path):
    qrels, run_dicts = _per_query_data(tmp_path)
    measures = ["P@10", "nDCG@10", "AP", "RR"]
    report = rj.evaluate([str(tmp_path / "s0.run"), str(tmp_path / "s1.run")], tmp_path / "h.qrels",
                         measures="P_10,ndcg_cut_10,map,recip_rank")
    frame = report.to_frame(per_query=True)
    assert list(frame.columns) == ["run", "query", "measure", "value"]
    assert frame.iloc[:4]["measure"].tolist() == measures  # user by user, measures in their order
    _check_against_iter_calc(frame.to_dict(orient="records"), qrels, run_dicts, measures)
    # each run's mean over its rows is the table's mean (users a run does not rank count as 0)
    means = frame.groupby(["run", "measure"])["value"].mean().unstack()
    scores = report.table.scores_frame()
    for m in measures:
        assert means.loc["s1", m] == pytest.approx(scores.loc["s1", m], abs=1e-12)


def test_evaluate_per_query_writes_tsv_to_stdout_or_a_file_and_json(tmp_path, capsys):
    import csv
    import io

    qrels, run_dicts = _per_query_data(tmp_path)
    base = ["evaluate", "--runs", str(tmp_path / "s0.run"), str(tmp_path / "s1.run"), "--qrels",
            str(tmp_path / "h.qrels"), "--measures", "P@10,Bpref"]
    assert main([*base, "--per-query", "-"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("run\tquery\tmeasure\tvalue\n") and "ranked by P@10" in " ".join(err.split()) and "ranked by" not in out
    rows = list(csv.DictReader(io.StringIO(out), delimiter="\t"))
    _check_against_iter_calc(rows, qrels, run_dicts, ["P@10", "Bpref"])
    tsv, js = tmp_path / "per_user.tsv", tmp_path / "out.json"
    assert main([*base, "--per-query", str(tsv), "--json", str(js)]) == 0
    assert f"Per-user scores: {tsv}" in capsys.readouterr().out
    assert tsv.read_text() == out
    data = json.loads(js.read_text())["per_query"]
    assert [(r["run"], r["query"], r["measure"], str(r["value"])) for r in data] == \
        [(r["run"], r["query"], r["measure"], r["value"]) for r in rows]
    assert main([*base, "--per-query", str(tmp_path / "h.qrels")]) == 2  # never over an input


# ------------------------------------------------------------------------------ run and qrels formats

def _frames(run_dicts, qrels):
    import pandas as pd

    runs = {name: pd.DataFrame([(u, i, s) for u, items in d.items() for i, s in items.items()],
                               columns=["user", "item", "score"]) for name, d in run_dicts.items()}
    labels = pd.DataFrame([(u, i, lab) for u, items in qrels.items() for i, lab in items.items()],
                          columns=["user", "item", "label"])
    return runs, labels


def _scores(runs, qrels):
    return rj.evaluate(runs, qrels, measures="nDCG@10,P@5,AP,Bpref,Compat(p=0.9)").table.scores_frame()


def test_tables_with_a_header_score_as_the_same_trec_files(trec_files):
    folder, qrels, run_dicts = trec_files
    expected = _scores(folder / "runs", folder / "h.qrels")
    runs, labels = _frames(run_dicts, qrels)
    csv_dir, tsv_dir = folder / "csv", folder / "tsv"
    csv_dir.mkdir()
    tsv_dir.mkdir()
    for name, frame in runs.items():
        frame.to_csv(csv_dir / f"{name}.csv", index=True)  # pandas' index column too: ignored
        # RecBole's atomic header, typed columns, other names
        frame.rename(columns={"user": "user_id:token", "item": "item_id:token", "score": "prediction:float"}).to_csv(
            tsv_dir / f"{name}.tsv", sep="\t", index=False)
    labels.to_csv(folder / "h.csv", index=False)
    labels.rename(columns={"user": "query_id", "item": "doc_id", "label": "relevance"}).to_csv(
        folder / "h.tsv", sep="\t", index=False)
    got_csv = _scores(sorted(map(str, csv_dir.iterdir())), folder / "h.csv")
    got_tsv = _scores(sorted(map(str, tsv_dir.iterdir())), folder / "h.tsv")
    assert list(got_csv.index) == list(got_tsv.index) == list(expected.index) == ["s0", "s1", "s2"]
    assert np.array_equal(got_csv.to_numpy(), expected.to_numpy())
    assert np.array_equal(got_tsv.to_numpy(), expected.to_numpy())
    run = read_run(csv_dir / "s0.csv")
    assert run.name == "s0" and run.frame["rank"].tolist()[:3] == [1, 2, 3]  # a user's rows in file order
    assert read_qrels(folder / "h.csv").name == "h"


def test_a_dataframe_with_recommender_column_names_is_a_run(trec_files):
    folder, qrels, run_dicts = trec_files
    expected = _scores(folder / "runs", folder / "h.qrels")
    runs, labels = _frames(run_dicts, qrels)
    runs = {k: v.rename(columns={"user": "user_id", "score": "prediction"}) for k, v in runs.items()}
    got = _scores(runs, labels.rename(columns={"label": "relevance"}))
    assert np.array_equal(got.to_numpy(), expected.to_numpy())
    with pytest.raises(ConfigError, match=r"runs\['s0'\]: a DataFrame holds no run \(no score column among the "
                                          r"columns 'user', 'item', 'label'; it has a label column: is it qrels\?"):
        rj.evaluate({"s0": labels}, labels)


def _check_json_run_and_qrels(folder, run_paths, qrels_path):
    expected = _scores(folder / "runs", folder / "h.qrels")
    got = _scores([str(p) for p in run_paths], qrels_path)
    assert list(got.index) == ["s0", "s1", "s2"]
    assert np.array_equal(got.to_numpy(), expected.to_numpy())


def test_json_runs_and_qrels_written_by_hand_score_as_the_trec_files(trec_files):
    folder, qrels, run_dicts = trec_files
    paths = []
    for name, d in run_dicts.items():
        paths.append(folder / f"{name}.json")
        paths[-1].write_text(json.dumps(d))
    (folder / "h.json").write_text(json.dumps(qrels, indent=1))
    _check_json_run_and_qrels(folder, paths, folder / "h.json")


def test_ranx_runs_and_qrels_read_back_as_ranx_wrote_them(trec_files):
    ranx = pytest.importorskip("ranx")  # the bench extra; the test above covers the format without it
    folder, qrels, run_dicts = trec_files
    paths = []
    for name, d in run_dicts.items():
        paths.append(folder / f"{name}.json")
        ranx.Run(d, name=name).save(str(paths[-1]))
    ranx.Qrels(qrels).save(str(folder / "h.json"))
    _check_json_run_and_qrels(folder, paths, folder / "h.json")


@pytest.mark.parametrize("text, qrels, message", [
    ("user,item,label\nu1,i1,1\n", False,
     r"<inline>:1: no score column among the columns 'user', 'item', 'label'; it has a label column: is it qrels\?.*"
     r"fix: name a score column \(score, prediction, rating\), e\.g\. the header user,item,score"),
    ("uid,iid,pred\nu1,i1,0.5\n", False,
     r"<inline>:1: no user, item or score column among the columns 'uid', 'iid', 'pred'.*fix: name a user column "
     r"\(user, user_id"),
    ("u1,i1,0.5\n", False, r"<inline>:1: no user, item or score column among the columns 'u1', 'i1', '0.5'"),
    ("u1\ti1\t0.5\n", False, r"<inline>:1: expected 6 columns .*found 3 .*or a header line user,item,score first"),
    ("user,item,score\nu1,i1,0.5\n\nu1,i2,high\n", False, r"<inline>:4: score 'high' is not a number"),
    ("user,item,score\nu1,i1,0.5\nu1,i2\n", False, r"<inline>:3: no 'score' value \(the line has fewer fields"),
    ("user,item,score\nu1,i1,0.5\nu1,i2,0.1,7\n", False, r"<inline>:3: 4 fields, the header names 3"),
    ("user,item,score\nu1,the item,0.5\n", False, r"<inline>:2: item id 'the item' is empty or holds a space"),
    ("user,item,score\nu1,i1,0.5\nu1,i1,0.4\n", False,
     r"<inline>:3: document 'i1' appears twice for query 'u1' \(first at line 2\)"),
    ("user,item,score\nu1,i1,nan\n", False, r"<inline>:2: score nan is not a finite number"),
    ("user,item,score\n", False, r"<inline>: holds a header but no run rows"),
    ("user,user_id,item,score\nu1,u1,i1,0.5\n", False, r"columns 'user' and 'user_id' both name the user"),
    ("user,item,label\nu1,i1,2.5\n", True, r"<inline>:2: label '2.5' is not a whole number"),
    ("user,item,score\nu1,i1,1\n", True, r"no label column among .*it has a score column: is it a run\?"),
    ('{"u1": {"i1": 0.5,}}\n', False, r"<inline>:1: not valid JSON \(Expecting property name.*write ranx's JSON run"),
    ('{"u1": [["i1", 0.5]]}\n', False, r"user 'u1' maps to a list, not an object of items"),
    ('{"u1": {"i1": 0.5, "i1": 0.2}}\n', False, r"item 'i1' is given twice for user 'u1'"),
    ('{"u1": {"i1": "0.5"}}\n', False, r"user 'u1', item 'i1': the score '0.5' is not a finite number"),
    ('{"u1": {"i1": 1.5}}\n', True, r"user 'u1', item 'i1': the label 1.5 is not a whole-number label"),
    ('{}\n', False, r"empty run: no user has an item"),
])
def test_a_bad_table_or_json_file_is_refused_naming_the_line_and_the_fix(text, qrels, message):
    with pytest.raises(InputError, match=message):
        (read_qrels if qrels else read_run)(text)


def test_a_json_file_that_is_not_json_and_a_trec_id_with_a_comma(tmp_path):
    (tmp_path / "r.json").write_text("u1 Q0 i1 1 0.5 t\n")
    with pytest.raises(InputError, match=r"r\.json: a \.json run must hold ranx's JSON"):
        read_run(tmp_path / "r.json")
    # a TREC line stays a TREC line, comma or not
    assert read_run("u1 Q0 i,1 1 0.5 t\n").frame["docid"].tolist() == ["i,1"]


def test_the_command_line_reads_csv_runs_and_names_the_bad_line(tmp_path, capsys):
    (tmp_path / "q.csv").write_text("user,item,label\nu1,i1,1\nu1,i2,0\n")
    (tmp_path / "a.csv").write_text("user,item,score\nu1,i1,0.9\nu1,i2,0.1\n")
    (tmp_path / "b.csv").write_text("user,item,score\nu1,i2,0.9\nu1,i1,oops\n")
    assert main(["evaluate", "--runs", str(tmp_path / "a.csv"), "--qrels", str(tmp_path / "q.csv"),
                 "--measures", "P_1"]) == 0
    assert capsys.readouterr().out.splitlines()[3].split() == ["a", "1", "1.0"]
    assert main(["evaluate", "--runs", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--qrels",
                 str(tmp_path / "q.csv")]) == 2
    assert f"{tmp_path / 'b.csv'}:3: score 'oops' is not a number (fix: write a decimal score)" in capsys.readouterr().err


def test_spaces_around_table_fields_are_layout_and_a_spaced_trec_line_stays_trec():
    run = read_run("user, item, score\nu1, i1, 0.5\nu1, i2, 0.25\n")
    assert run.frame[["qid", "docid", "score"]].values.tolist() == [["u1", "i1", 0.5], ["u1", "i2", 0.25]]
    with pytest.raises(InputError, match=r"<inline>:1: expected 6 columns 'qid Q0 docid rank score tag', found 5"):
        read_run("q1 Q0 d,1 1 0.5\n")


def test_a_table_that_is_not_utf8_is_refused_naming_its_line(tmp_path):
    (tmp_path / "r.csv").write_bytes(b"user,item,prediction:float\nu1,i1,0.5\nu1,caf\xe9,0.4\n")
    with pytest.raises(InputError, match=r"r\.csv:3: not UTF-8 text \(byte 0xe9\) \(fix: save the file as UTF-8\)"):
        read_run(tmp_path / "r.csv")
    (tmp_path / "s.csv").write_text("user,item,prediction:float\nu1,i1,high\n")
    with pytest.raises(InputError, match=r"s\.csv:2: prediction 'high' is not a number"):
        read_run(tmp_path / "s.csv")
