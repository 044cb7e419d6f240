"""`recjudge demo --reduced` end to end: real runs, qrels, report, figures and the evaluation card."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest

from recjudge.cli import main
from recjudge.demo_report import CARD_FIELDS
from recjudge.trec import read_qrels, read_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    pytest.importorskip("recbole", reason="the demo trains RecBole systems: install the train extra")
    root = tmp_path_factory.mktemp("demo")
    code = main(["demo", "--reduced", "--out", str(root / "out"), "--runs-dir", str(root / "runs"),
                 "--qrels-dir", str(root / "qrels"), "--bootstrap", "100", "--judge", "overlap"])
    assert code == 0
    return root


def test_demo_runs_are_tie_free_top100_without_history(demo_dir):
    from recjudge.collections import load_collection
    from recjudge.splits import make_split

    split = make_split(load_collection("ml-100k").sample_users(200, 0), "global_time", quantile=0.8)
    train = set(zip(split.train.user, split.train.item))
    names = sorted(p.stem for p in (demo_dir / "runs").glob("*.run"))
    assert names == ["EASE", "ItemKNN", "Pop", "Random"]
    for name in names:
        f = read_run(demo_dir / "runs" / f"{name}.run").frame
        sizes = f.groupby("qid").size()
        assert sizes.max() == 100 and set(f.qid) == set(split.test_users)
        assert not train & set(zip(f.qid, f.docid))  # the user's own history is excluded
        # tie-free: strictly decreasing scores within each user
        assert (f.groupby("qid").score.diff().dropna() < 0).all()


def test_demo_qrels_and_sources(demo_dir):
    hist = read_qrels(demo_dir / "qrels" / "ml-100k-historical.qrels").frame
    judge = read_qrels(demo_dir / "qrels" / "ml-100k-overlap.qrels").frame
    filled = read_qrels(demo_dir / "qrels" / "ml-100k-filled.qrels").frame
    assert set(hist.label) <= set(range(5)) and len(set(hist.label)) > 1  # rating − 1
    assert set(judge.label) <= set(range(8))
    side = pd.read_csv(demo_dir / "qrels" / "ml-100k-filled.qrels.sources.tsv", sep="\t", dtype=str)
    assert (side.source == "human").sum() == len(hist)
    assert len(filled) == len(side) > len(hist)
    lines = (demo_dir / "qrels" / "ml-100k-overlap.judgments.jsonl").read_text().splitlines()
    assert len(lines) >= len(judge)
    assert json.loads(lines[0])["provenance"]["kind"] == "baseline"


def test_demo_report_figures_and_card(demo_dir):
    out = demo_dir / "out"
    report = (out / "report.md").read_text()
    assert "not human Cranfield judgments" in report and "ML-32M-ext" in report
    pngs = sorted(p.name for p in out.glob("*.png"))
    for fig in ("fig-agreement-by-distance.png", "fig-agreement-vs-profile-size.png", "fig-judged-at-100.png",
                "fig-system-scores-ndcg-100.png", "fig-system-scores-compat-p-0-95.png"):
        assert fig in pngs and fig in report
        assert (out / fig).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    card = json.loads((out / "card.json").read_text())
    assert list(card) == list(CARD_FIELDS)
    assert "non-LLM baseline" in card["judge"]
    assert card["tie-breaking rule"].startswith("hash")
    assert "Pop 100%" in card["tie prevalence"]  # Pop ties every user's top-100 before the policy
    assert "genre-overlap" in card["permutation check"]
    summary = json.loads((out / "summary.json").read_text())["summary"]
    taus = summary["kendall_tau"]
    assert set(taus) == {"overlap", "filled"}
    assert all(-1 <= v <= 1 for v in taus["filled"].values())
    assert "<img" in (out / "report.html").read_text()
    assert "torch" in sys.modules  # training ran in this process: the demo is the real pipeline


def test_demo_with_an_llm_endpoint(tmp_path, fake_openai, monkeypatch):
    """The same pipeline with the LLM judge, against the local OpenAI-compatible server."""
    pytest.importorskip("recbole", reason="the demo trains RecBole systems: install the train extra")
    secret = "sk-demo-secret-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    fake_openai.labeler = lambda candidate: len(candidate) % 8  # any deterministic label from the prompt
    code = main(["demo", "--reduced", "--systems", "Pop", "Random", "--depth", "3", "--per-user", "5",
                 "--bootstrap", "50", "--base-url", fake_openai.url, "--model", "fake-model",
                 "--out", str(tmp_path / "out"), "--runs-dir", str(tmp_path / "runs"),
                 "--qrels-dir", str(tmp_path / "qrels")])
    assert code == 0
    card = json.loads((tmp_path / "out" / "card.json").read_text())
    assert card["judge"].endswith("LLM") and card["judge model"] == "fake-model"
    assert card["template hash"].startswith("baseline sha256:")
    llm_qrels = read_qrels(tmp_path / "qrels" / "ml-100k-llm-fake-model.qrels")
    assert len(fake_openai.chat_log()) >= len(llm_qrels) > 0  # every label came from a real HTTP call
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
