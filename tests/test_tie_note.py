"""The tie note of compare and evaluate: when it is printed, and that its numbers are the other
orders' own numbers (the hash policy scored outright; the exact expectation of the tie audit)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from recjudge.cli import main
from recjudge.data.trec import Qrels, Run, read_qrels, read_run, write_run
from recjudge.evaluation.ties.policy import resolve_ties
from recjudge.evaluation.metaeval import compare, evaluate
from recjudge.evaluation.ties import expected_metrics

MEASURES = ["nDCG@10", "nDCG@20", "Compat(p=0.95)", "Bpref", "Judged@10"]


def _case(seed=0, users=30, systems=5, depth=20, items=60, tie_levels=(3, 4, 6, 50, 1000)):
    """Systems whose scores take few values (many ties) to many (almost none), graded qrels."""
    rng = np.random.default_rng(seed)
    runs = {}
    for s in range(systems):
        rows = []
        for u in range(users):
            docs = rng.choice(items, depth, replace=False)
            scores = np.sort(rng.integers(0, tie_levels[s % len(tie_levels)], depth))[::-1].astype(float)
            rows += [(f"u{u}", f"d{d}", float(x)) for d, x in zip(docs, scores)]
        runs[f"sys{s}"] = Run.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "score"]), f"sys{s}")
    human, llm = [], []
    for u in range(users):
        for d in rng.choice(items, 30, replace=False):
            h = int(rng.integers(0, 4))
            human.append((f"u{u}", f"d{d}", h))
            llm.append((f"u{u}", f"d{d}", int(np.clip(h + rng.integers(-1, 2), 0, 3))))
    return (runs, Qrels.from_frame(pd.DataFrame(human, columns=["qid", "docid", "label"]), "human"),
            Qrels.from_frame(pd.DataFrame(llm, columns=["qid", "docid", "label"]), "llm"))


def _write_qrels(qrels: Qrels, path) -> None:
    f = qrels.frame
    path.write_text("".join(f"{q} 0 {d} {lab}\n" for q, d, lab in zip(f.qid, f.docid, f.label)))


def _sensitive_by_hand(run: Run, qrels: Qrels) -> int:
    """Users with a block of equal scores holding two differently judged items (whole lists)."""
    judged = {(q, d): lab for q, d, lab in zip(qrels.frame.qid, qrels.frame.docid, qrels.frame.label)}
    users = set(qrels.frame.qid)
    n = 0
    for q, g in run.frame.groupby("qid"):
        if q not in users:
            continue
        for _, block in g.groupby("score"):
            if len({judged.get((q, d), "unjudged") for d in block.docid}) > 1:
                n += 1
                break
    return n


def test_evaluate_note_equals_the_hash_policy_and_the_exact_expectation():
    runs, human, _ = _case()
    res = evaluate(runs, human, MEASURES, tie_note=0.01)
    hashed = evaluate(runs, human, MEASURES, tie_policy="hash").table
    t = res.tie_sensitivity
    assert t["shown"] and t["policy"] == "trec_eval" and "hash" in t["alternatives"]
    # the share: tie-sensitive lists counted by hand, over systems × the qrels' 30 users
    by_hand = {name: _sensitive_by_hand(run, human) for name, run in runs.items()}
    assert t["lists"] == sum(by_hand.values())
    assert t["lists_share"] == pytest.approx(sum(by_hand.values()) / (5 * 30))
    assert t["largest_run_share"] == pytest.approx(max(by_hand.values()) / 30)
    # hash: the means evaluate gives under tie_policy="hash"
    for m in MEASURES:
        for name in runs:
            assert t["alternatives"]["hash"]["means"]["human"][m][name] == pytest.approx(
                hashed.means(m)[name], abs=1e-9), (m, name)
        want = max(abs(hashed.means(m)[n] - res.table.means(m)[n]) for n in runs)
        assert t["alternatives"]["hash"]["max_abs_mean_change"][m] == pytest.approx(want, abs=1e-9)
    # the expected value of nDCG (closed form): the tie audit's exact expectation
    exp = t["alternatives"]["expected"]
    assert exp["method"]["nDCG@10"] == "exact" and exp["method"]["Bpref"].startswith("Monte Carlo")
    for name, run in runs.items():
        want = expected_metrics(run, human, ["nDCG@10", "nDCG@20"]).mean()
        for m in ("nDCG@10", "nDCG@20"):
            assert exp["means"]["human"][m][name] == pytest.approx(want[m], abs=1e-9), (m, name)
    # the line, once, in the printed table
    from dataclasses import replace

    text = replace(res, source="human").format()
    assert sum(line.startswith("ties: ") for line in text.splitlines()) == 1
    assert "tie-sensitive" in text and "`recjudge ties`" in text


def test_compare_note_recomputes_tau_from_the_hash_means():
    runs, human, llm = _case(seed=1)
    res = compare(runs, human, [llm], measures="nDCG@10", bootstrap=0, tie_note=0.01)
    hashed = compare(runs, human, [llm], measures="nDCG@10", bootstrap=0, tie_policy="hash")
    t = res.tie_sensitivity["alternatives"]["hash"]
    tau = lambda r: r.agreement["llm"]["nDCG@10"].kendall_tau  # noqa: E731
    assert t["tau_change"]["nDCG@10"] == pytest.approx(abs(tau(hashed) - tau(res)), abs=1e-12)
    for name in runs:
        assert t["means"]["candidate llm"]["nDCG@10"][name] == pytest.approx(
            hashed.candidates["llm"].means("nDCG@10")[name], abs=1e-9)


def test_a_hash_evaluation_is_compared_with_trec_eval_order():
    runs, human, _ = _case(seed=2)
    res = evaluate(runs, human, "nDCG@10", tie_policy="hash", tie_note=0.01)
    trec = evaluate(runs, human, "nDCG@10").table
    alt = res.tie_sensitivity["alternatives"]["trec_eval"]["means"]["human"]["nDCG@10"]
    for name in runs:
        assert alt[name] == pytest.approx(trec.means("nDCG@10")[name], abs=1e-9)


def test_ties_among_equally_judged_items_or_past_the_cutoffs_change_nothing_and_print_nothing():
    # u1: a b tie, both unjudged; u2: c d tie, both labelled 2; u3: ties only below rank 2
    run = read_run("u1 Q0 a 1 3 t\nu1 Q0 b 2 3 t\nu1 Q0 x 3 1 t\n"
                   "u2 Q0 c 1 3 t\nu2 Q0 d 2 3 t\nu2 Q0 y 3 1 t\n"
                   "u3 Q0 e 1 3 t\nu3 Q0 f 2 2 t\nu3 Q0 g 3 1 t\nu3 Q0 h 4 1 t\n", name="r")
    qrels = read_qrels("u1 0 x 1\nu2 0 c 2\nu2 0 d 2\nu3 0 e 1\nu3 0 g 1\n")
    other = read_run("u1 Q0 x 1 3 t\nu2 Q0 c 1 3 t\nu3 Q0 e 1 3 t\n", name="s")
    res = evaluate({"r": run, "s": other}, qrels, ["nDCG@2", "P@2"], tie_note=0.0)
    assert res.tie_sensitivity["lists"] == 0 and not res.tie_sensitivity["shown"]
    # u3's tie g h crosses into the depth an uncut measure reads: tie-sensitive (g judged, h not)
    res = evaluate({"r": run, "s": other}, qrels, ["nDCG@2", "AP"], tie_note=0.0)
    assert res.tie_sensitivity["lists"] == 1 and res.tie_sensitivity["shown"]


def test_tie_free_runs_show_no_line_and_the_same_numbers(tmp_path, capsys):
    runs, human, llm = _case(seed=3)
    folder = tmp_path / "runs"
    folder.mkdir()
    for name, run in runs.items():
        write_run(resolve_ties(run, "hash", 0), folder / f"{name}.run")  # as recjudge exports them
    _write_qrels(human, tmp_path / "h.qrels")
    _write_qrels(llm, tmp_path / "l.qrels")
    args = ["compare", "--runs", str(folder), "--reference", str(tmp_path / "h.qrels"), "--candidate",
            str(tmp_path / "l.qrels"), "--bootstrap", "20"]
    assert main([*args, "--json", str(tmp_path / "a.json")]) == 0
    on = capsys.readouterr().out
    assert main([*args, "--json", str(tmp_path / "b.json"), "--tie-note", "1"]) == 0
    off = capsys.readouterr().out
    assert "ties:" not in on and on.replace(str(tmp_path / "a.json"), "") == off.replace(str(tmp_path / "b.json"), "")
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert a["tie_sensitivity"]["lists"] == 0 and a["tie_sensitivity"]["note"] is None
    a.pop("tie_sensitivity"), b.pop("tie_sensitivity")
    for d in (a, b):
        d["settings"].pop("tie_note", None)
    assert a["systems"] == b["systems"] and a["measures"] == b["measures"]


def test_the_threshold_is_a_share_of_some_run_and_shown_in_the_cli(tmp_path, capsys):
    runs, human, _ = _case(seed=4)
    shares = evaluate(runs, human, MEASURES, tie_note=0.01).tie_sensitivity["largest_run_share"]
    assert evaluate(runs, human, MEASURES, tie_note=shares).tie_sensitivity["shown"] is False  # not above
    assert evaluate(runs, human, MEASURES, tie_note=shares - 1e-9).tie_sensitivity["shown"] is True
    assert "computed" in evaluate(runs, human, MEASURES, tie_note=1.0).tie_sensitivity  # off
    folder = tmp_path / "runs"
    folder.mkdir()
    for name, run in runs.items():
        write_run(run, folder / f"{name}.run")
    _write_qrels(human, tmp_path / "h.qrels")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["evaluate", "--runs", str(folder), "--qrels", str(tmp_path / "h.qrels"), "--report",
                     str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out
    assert sum(line.startswith("ties: ") for line in out.splitlines()) == 1
    assert "ties: " in (tmp_path / "rep" / "report.md").read_text()
    assert main(["evaluate", "--runs", str(folder), "--qrels", str(tmp_path / "h.qrels"), "--tie-note", "2"]) == 2
    assert "--tie-note" in capsys.readouterr().err


def test_fill_prints_the_note_of_the_human_labels(tmp_path, capsys):
    from pathlib import Path

    from recjudge.data.trec import read_runs

    repo = Path(__file__).resolve().parent.parent
    runs, human = repo / "runs" / "example", repo / "qrels" / "example-human.qrels"
    args = ["fill", "--human", str(human), "--llm", str(repo / "qrels" / "example-llm.qrels"), "--runs", str(runs),
            "--out", str(tmp_path / "f.qrels"), "--min-overlap", "5", "--json", str(tmp_path / "f.json")]
    assert main(args) == 0
    out = capsys.readouterr().out
    want = evaluate(read_runs([runs]), read_qrels(human), ["Judged@100", "Compat(p=0.95)", "nDCG@100"],
                    tie_note=0.01).tie_sensitivity
    assert want["shown"]  # the example runs tie
    # the note is one paragraph, wrapped to 100 columns
    para = [p for p in out.split("\n\n") if p.startswith("ties: ")]
    assert [" ".join(p.split()) for p in para] == [" ".join(f"{want['note']} (under the human labels)".split())]
    assert json.loads((tmp_path / "f.json").read_text())["scenarios"]["tie_sensitivity"]["note"] == want["note"]
    assert main([*args[:-2], "--tie-note", "1"]) == 0
    assert "ties: " not in capsys.readouterr().out
