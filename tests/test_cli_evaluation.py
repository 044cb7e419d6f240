"""``recjudge compare``, ``agreement`` and ``evaluate`` at the command line: names in outputs, checks
that run before any work, and results that would come from nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import exit_code
from recjudge.cli import main
from recjudge.data.trec import Run, write_run
from recjudge.evaluation.metaeval import label_set_names

HUMAN = (
    "u1 0 d1 2\n"
    "u1 0 d2 0\n"
    "u1 0 d3 1\n"
    "u2 0 d1 0\n"
    "u2 0 d2 3\n"
    "u2 0 d4 1\n"
    "u3 0 d3 2\n"
    "u3 0 d4 0\n"
)
LLM = (
    "u1 0 d1 1\n"
    "u1 0 d2 0\n"
    "u1 0 d3 1\n"
    "u2 0 d1 1\n"
    "u2 0 d2 2\n"
    "u3 0 d3 3\n"
)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """runs/ with three systems over u1–u3, human.qrels, llm.qrels, and two more llm.qrels in
    folders judgeA/ and judgeB/ (same stem, different labels)."""
    rng = np.random.default_rng(0)
    for s in range(3):
        rows = []
        for u in ("u1", "u2", "u3"):
            order = rng.permutation(["d1", "d2", "d3", "d4", "d5"])
            rows += [(u, d, r + 1, float(5 - r)) for r, d in enumerate(order)]
        write_run(Run.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "rank", "score"]), f"sys{s}"),
                  tmp_path / "runs" / f"sys{s}.run")
    (tmp_path / "human.qrels").write_text(HUMAN)
    (tmp_path / "llm.qrels").write_text(LLM)
    for folder, shift in (("judgeA", 0), ("judgeB", 1)):
        (tmp_path / folder).mkdir()
        lines = [f"{q} 0 {d} {min(3, int(lab) + shift)}" for q, _, d, lab in (x.split() for x in LLM.splitlines())]
        (tmp_path / folder / "llm.qrels").write_text("\n".join(lines) + "\n")
    return tmp_path


def _compare(data: Path, *extra: str) -> list[str]:
    return ["compare", "--runs", str(data / "runs"), "--reference", str(data / "human.qrels"),
            "--measures", "nDCG@5", *extra]


# ---------------------------------------------------------------------------------- naming

def test_label_set_names_rule():
    # stems as read_qrels gives them; collisions get the parent folder, then -2, -3
    assert label_set_names(["human", "llm"], ["x/human.qrels", "y/llm.qrels.gz"]) == ["human", "llm"]
    assert label_set_names(["human", "llm", "llm"], ["d/human.qrels", "a/llm.qrels", "b/llm.qrels"]) == [
        "human", "a/llm", "b/llm"]
    # names that would give one figure file name (case, punctuation) collide too
    assert label_set_names(["LLM", "llm"], ["a/LLM.qrels", "b/llm.qrels"]) == ["a/LLM", "b/llm"]
    assert label_set_names(["llm", "llm"], ["a/llm.qrels", "b/a/llm.qrels"]) == ["a/llm", "a/llm-2"]


def test_compare_names_candidates_like_the_reference_in_table_json_and_figures(data, capsys):
    out = data / "out.json"
    code = main(_compare(data, "--candidate", str(data / "llm.qrels"), "--candidate", str(data / "judgeA" / "llm.qrels"),
                         "--candidate", str(data / "judgeB" / "llm.qrels"), "--bootstrap", "20",
                         "--json", str(out), "--report", str(data / "report")))
    assert code == 0
    printed = capsys.readouterr().out
    # llm collides three ways: each gets its parent folder (the tmp folder for the first)
    first = f"{data.name}/llm"
    assert f"candidate: {first}\n" in printed and "candidate: judgeA/llm\n" in printed
    assert str(data) not in printed.replace(f"JSON: {out}", "").replace(f"Report: {data / 'report'}", "")
    js = json.loads(out.read_text())
    assert list(js["candidates"]) == [first, "judgeA/llm", "judgeB/llm"]
    assert js["settings"]["reference"] == "human"
    assert js["settings"]["paths"] == {"human": str(data / "human.qrels"), first: str(data / "llm.qrels"),
                                       "judgeA/llm": str(data / "judgeA" / "llm.qrels"),
                                       "judgeB/llm": str(data / "judgeB" / "llm.qrels")}
    assert set(js["systems"][0]["candidates"]) == set(js["candidates"])
    pngs = sorted(p.name for p in (data / "report").glob("*.png"))
    assert "scatter-judgea-llm-ndcg-5.png" in pngs and "scatter-judgeb-llm-ndcg-5.png" in pngs
    assert len(pngs) == 2 * 3  # scatter + displacement per candidate: no two names share a file
    assert not any("pytest-of" in p for p in pngs)  # no slug of a full path


def test_compare_table_names_the_ci_method_and_reports_the_p_value(data, capsys):
    out = data / "out.json"
    assert main(_compare(data, "--candidate", str(data / "llm.qrels"), "--bootstrap", "30", "--seed", "2",
                         "--bootstrap-seed", "9", "--ci-method", "BCa", "--json", str(out))) == 0
    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if line.lstrip().startswith("measure"))
    assert "95% CI (BCa)" in header and " p " in f"{header} "
    assert "bootstrap seed 9" in printed
    js = json.loads(out.read_text())
    m = js["candidates"]["llm"]["nDCG@5"]
    assert m["kendall_tau_ci_method"] == "BCa" and "kendall_tau_p" in m
    assert (js["settings"]["ci_method"], js["settings"]["seed"], js["settings"]["bootstrap_seed"]) == ("BCa", 2, 9)
    p_cell = printed.split("nDCG@5", 1)[1].split()[1]
    assert p_cell == f"{m['kendall_tau_p']:.2g}"


def test_bootstrap_seed_defaults_to_seed(data):
    out = data / "out.json"
    assert main(_compare(data, "--candidate", str(data / "llm.qrels"), "--bootstrap", "0", "--seed", "7",
                         "--json", str(out))) == 0
    assert json.loads(out.read_text())["settings"]["bootstrap_seed"] == 7


def test_agreement_rows_and_json_keys_are_qrels_names(data, capsys):
    out = data / "ag.json"
    code = main(["agreement", "--reference", str(data / "human.qrels"), "--candidate",
                 str(data / "judgeA" / "llm.qrels"), str(data / "judgeB" / "llm.qrels"), "--bootstrap", "0",
                 "--missing", "zero", "--json", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "judgeA/llm" in printed and str(data / "judgeA") not in printed
    js = json.loads(out.read_text())
    assert list(js) == ["judgeA/llm", "judgeB/llm"]
    assert js["judgeA/llm"]["path"] == str(data / "judgeA" / "llm.qrels")
    assert js["judgeB/llm"]["settings"]["reference_path"] == str(data / "human.qrels")
    assert js["judgeB/llm"]["settings"]["reference"] == "human"


# ---------------------------------------------------------------------- checks before work

@pytest.mark.parametrize("target", ["human.qrels", "llm.qrels", "runs/sys0.run"])
def test_compare_refuses_json_that_is_an_input(data, capsys, target):
    before = (data / target).read_bytes()
    code = main(_compare(data, "--candidate", str(data / "llm.qrels"), "--json", str(data / target)))
    err = capsys.readouterr().err
    assert code == 2 and "would be overwritten" in err
    assert (data / target).read_bytes() == before


def test_agreement_and_evaluate_refuse_json_that_is_an_input(data, capsys):
    before = (data / "llm.qrels").read_bytes()
    code = main(["agreement", "--reference", str(data / "human.qrels"), "--candidate", str(data / "llm.qrels"),
                 "--json", str(data / "llm.qrels")])
    assert code == 2 and "would be overwritten" in capsys.readouterr().err
    code = main(["evaluate", "--runs", str(data / "runs"), "--qrels", str(data / "llm.qrels"),
                 "--json", str(data / "llm.qrels")])
    assert code == 2 and "would be overwritten" in capsys.readouterr().err
    assert (data / "llm.qrels").read_bytes() == before


def test_report_that_is_a_file_or_an_input_folder_is_refused_before_work(data, capsys):
    (data / "note.txt").write_text("x")
    code = main(_compare(data, "--candidate", str(data / "llm.qrels"), "--report", str(data / "note.txt")))
    assert code == 2 and "--report is a file" in capsys.readouterr().err
    code = main(["evaluate", "--runs", str(data / "runs"), "--qrels", str(data / "human.qrels"),
                 "--report", str(data / "runs")])
    assert code == 2 and "input folder" in capsys.readouterr().err
    assert sorted(p.name for p in (data / "runs").iterdir()) == ["sys0.run", "sys1.run", "sys2.run"]


def test_bad_measure_is_refused_before_any_file_is_read(data, capsys):
    missing = str(data / "no-such-runs")
    for argv in (["compare", "--runs", missing, "--reference", str(data / "human.qrels"), "--candidate",
                  str(data / "llm.qrels"), "--measures", "P@0"],
                 ["evaluate", "--runs", missing, "--qrels", str(data / "human.qrels"), "--measures", "Judged@0"]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and "@0" in err and "no-such-runs" not in err


@pytest.mark.parametrize("argv", [
    ["--seed", "-1"], ["--seed", str(2**63)], ["--bootstrap", "-5"], ["--bootstrap", "many"],
    ["--bootstrap-seed", "-1"],
])
def test_compare_numbers_are_range_checked(data, capsys, argv):
    assert exit_code(_compare(data, "--candidate", str(data / "llm.qrels"), *argv)) == 2
    assert argv[0] in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--seed", "-3"], ["--bootstrap", "-1"]])
def test_agreement_numbers_are_range_checked(data, capsys, argv):
    code = exit_code(["agreement", "--reference", str(data / "human.qrels"), "--candidate", str(data / "llm.qrels"),
                      *argv])
    assert code == 2 and argv[0] in capsys.readouterr().err


# --------------------------------------------------------------------- results from nothing

def test_agreement_with_a_candidate_sharing_no_pair_fails_naming_it(data, capsys):
    (data / "offset.qrels").write_text("x1 0 d1 1\nx2 0 d2 0\n")
    out = data / "ag.json"
    code = main(["agreement", "--reference", str(data / "human.qrels"), "--candidate", str(data / "llm.qrels"),
                 str(data / "offset.qrels"), "--missing", "zero", "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 2
    assert "'offset' labels none of the 8 pairs" in captured.err and "same query and item ids" in captured.err
    assert not out.exists()  # nothing half-written for the candidates that did work
    assert "kappa" not in captured.out


def test_compare_with_a_candidate_judging_none_of_the_runs_users_fails_naming_it(data, capsys):
    (data / "strangers.qrels").write_text("x1 0 d1 1\nx2 0 d2 0\n")
    out = data / "out.json"
    code = main(_compare(data, "--candidate", str(data / "llm.qrels"), "--candidate", str(data / "strangers.qrels"),
                         "--json", str(out)))
    err = capsys.readouterr().err
    assert code == 2 and "'strangers'" in err and "same user ids" in err
    assert not out.exists()


@pytest.mark.parametrize("clip, message", [
    ("0..99999999999999999999", "outside the label range"),
    ("3..0", "LO must not exceed HI"),
])
def test_agreement_clip_bounds_are_clear_errors(data, capsys, clip, message):
    code = main(["agreement", "--reference", str(data / "human.qrels"), "--candidate", str(data / "llm.qrels"),
                 "--clip", clip])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


def test_every_output_states_each_measures_gain_function(tmp_path):
    repo = Path(__file__).resolve().parents[1]
    args = ["--runs", str(repo / "runs" / "example"), "--measures", "nDCG@100,nDCGexp@100,CompatHM(p=0.95)"]
    assert main(["compare", *args, "--reference", str(repo / "qrels" / "example-human.qrels"), "--candidate",
                 str(repo / "qrels" / "example-llm.qrels"), "--bootstrap", "0", "--json", str(tmp_path / "c.json"),
                 "--report", str(tmp_path / "rep")]) == 0
    assert main(["evaluate", *args, "--qrels", str(repo / "qrels" / "example-human.qrels"),
                 "--json", str(tmp_path / "e.json"), "--report", str(tmp_path / "erep")]) == 0
    for name in ("c.json", "e.json"):
        defs = json.loads((tmp_path / name).read_text())["settings"]["measure_definitions"]
        assert defs["nDCG@100"] == "nDCG@100, linear gain (trec_eval)"
        assert defs["nDCGexp@100"].startswith("nDCGexp@100: nDCG@100, exponential gain 2^rel − 1")
        assert "trec-health-misinfo" in defs["CompatHM(p=0.95)"]
        settings = json.loads((tmp_path / name).read_text())["settings"]
        assert settings["missing_user_score"] == 0.0
        assert list(settings["missing_user_exceptions"]) == ["CompatHM(p=0.95)"]
    for folder in ("rep", "erep"):
        text = (tmp_path / folder / "report.md").read_text()
        assert "  - nDCG@100, linear gain (trec_eval)" in text and "exponential gain 2^rel − 1" in text


def test_compare_and_evaluate_of_run_files_equal_the_python_verbs_on_runs_in_memory(data):
    import recjudge
    from recjudge.data.trec import read_runs

    # a tie-heavy fourth system, so the tie share and the hash policy show in the outputs
    (data / "runs" / "tied.run").write_text("".join(f"{u} Q0 d{i} {i} {1 if i < 4 else 0} tied\n"
                                                    for u in ("u1", "u2", "u3") for i in range(1, 6)))
    in_memory = read_runs(data / "runs")
    files = ["--runs", str(data / "runs"), "--measures", "nDCG@5,Bpref", "--seed", "3"]
    qrels = {"reference": str(data / "human.qrels"), "candidates": [str(data / "llm.qrels")]}
    assert main(["compare", *files, "--reference", qrels["reference"], "--candidate", *qrels["candidates"],
                 "--queries", "shared", "--bootstrap", "40", "--json", str(data / "cli.json")]) == 0
    recjudge.compare(runs=in_memory, **qrels, measures="nDCG@5,Bpref", seed=3, queries="shared", bootstrap=40,
                     json=data / "api.json")
    cli = json.loads((data / "cli.json").read_text())
    assert cli == json.loads((data / "api.json").read_text())
    assert {s["system"]: s["tied_user_share"] for s in cli["systems"]}["tied"] == 1.0  # d1–d3 tie for every user
    assert main(["evaluate", *files, "--qrels", qrels["reference"], "--json", str(data / "cli-eval.json")]) == 0
    recjudge.evaluate(runs=in_memory, qrels=qrels["reference"], measures="nDCG@5,Bpref", seed=3,
                      json=data / "api-eval.json")
    assert (data / "cli-eval.json").read_text() == (data / "api-eval.json").read_text()


def test_evaluate_ranks_by_the_first_effectiveness_measure_and_says_so(capsys):
    from recjudge.evaluation.metaeval import ranking_measure

    root = Path(__file__).resolve().parents[1]
    out = main(["evaluate", "--runs", str(root / "runs" / "example"), "--qrels",
                str(root / "qrels" / "example-human.qrels")])
    assert out == 0
    printed = capsys.readouterr().out
    # prose is wrapped to the terminal's 100 columns: compared with its line breaks as spaces
    assert ("ranked by Compat(p=0.95) (the first effectiveness measure; Judged@100 measures coverage, not "
            "effectiveness)") in " ".join(printed.split())
    lines = printed.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:1] == ["rank"])
    rows = [line.split() for line in lines[head + 1:head + 9]]
    ranks, compat = [float(r[1]) for r in rows], [float(r[3]) for r in rows]
    judged = [float(r[2]) for r in rows]
    assert ranks == sorted(ranks) and compat == sorted(compat, reverse=True)
    assert judged != sorted(judged, reverse=True)  # the coverage order is another order here
    assert ranking_measure(["Judged@10", "Judged@100", "nDCG@10"]) == (
        "nDCG@10", "the first effectiveness measure; Judged@10, Judged@100 measure coverage, not effectiveness")
    by, note = ranking_measure(["Judged@10"])
    assert by == "Judged@10" and "no effectiveness measure was given" in note


def test_a_label_set_that_ties_every_system_gives_an_undefined_tau_said_once_and_no_displacement(tmp_path, capsys):
    """Under the example LLM labels every system has Judged@100 = 1.0 (it labels every top-100 item):
    there is no ranking, so no τ, no interval and no rank shift — only the reason, everywhere."""
    root = Path(__file__).resolve().parents[1]
    out, report = tmp_path / "c.json", tmp_path / "report"
    assert main(["compare", "--runs", str(root / "runs" / "example"), "--reference",
                 str(root / "qrels" / "example-human.qrels"), "--candidate", str(root / "qrels" / "example-llm.qrels"),
                 "--bootstrap", "50", "--json", str(out), "--report", str(report)]) == 0
    printed = capsys.readouterr().out
    reason = ("every system ties under candidate 'example-llm' on Judged@100 (all 8 means are 1), so there is no "
              "ranking to compare: τ and the rank displacements are undefined")
    assert f"Judged@100: {reason}" in " ".join(printed.split()) and "nan" not in printed
    judged = json.loads(out.read_text())["measures"]["Judged@100"]
    assert judged["undefined"] == reason
    assert judged["kendall_tau"] is None and judged["kendall_tau_ci"] is None
    assert judged["kendall_tau_ci_missing"] == "no interval: τ is undefined"
    assert judged["most_displaced"] == [] and judged["median_abs_rank_displacement"] is None
    # a measure that ranks the systems keeps its numbers and says nothing of the kind
    assert json.loads(out.read_text())["measures"]["nDCG@100"]["undefined"] is None
    md = (report / "report.md").read_text()
    assert f"Judged@100: {reason}." in md and "No rank displacement" in md
    assert not list(report.glob("displacement-*judged*")) and list(report.glob("displacement-*ndcg*"))
    section = md[md.index("### Judged@100"):md.index("### Compat")]
    assert "Most displaced" not in section
