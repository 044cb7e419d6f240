"""`recjudge demo --reduced` end to end: real runs, qrels, report, figures and the evaluation card."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_report_html import browser_check, find_browser, screenshot

from recjudge.cli import main
from recjudge.data.trec import read_qrels, read_run
from recjudge.errors import ConfigError
from recjudge.experiments.demo import DemoSettings, _settings_json
from recjudge.report.demo import CARD_FIELDS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    pytest.importorskip("recbole", reason="the demo trains RecBole systems: install the train extra")
    root = tmp_path_factory.mktemp("demo")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["demo", "--reduced", "--out", str(root / "out"), "--runs-dir", str(root / "runs"),
                     "--qrels-dir", str(root / "qrels"), "--bootstrap", "100", "--judge", "overlap"])
    assert code == 0
    (root / "stdout.txt").write_text(printed.getvalue(), encoding="utf-8")
    return root


def test_demo_runs_are_tie_free_top100_without_history(demo_dir):
    from recjudge.data.collections import load_collection
    from recjudge.data.splits import make_split

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
    assert set(hist.label) <= set(range(5)) and len(set(hist.label)) > 1  # rating − 1
    assert set(judge.label) <= set(range(8))
    from recjudge.judging.results import read_judgments

    provenance, rows = read_judgments(demo_dir / "qrels" / "ml-100k-overlap.judgments.jsonl")
    assert len(rows) >= len(judge)
    assert provenance["kind"] == "baseline"


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
    assert card["permutation check"].startswith("trained systems before tie-breaking: ")
    assert "sampled candidates: " in card["permutation check"]
    assert "0.000 under the hash policy" in card["permutation check"]
    summary = json.loads((out / "summary.json").read_text())["summary"]
    taus = summary["kendall_tau"]
    assert set(taus) == {"overlap"}  # not filled: see the calibration test below
    assert re.search(r"bootstrap \(100 resamples, 95% CI \((normal|BCa|percentile)\)\)", card["seeds"])
    page = (out / "report.html").read_text()
    assert "<strong>Read this first.</strong>" in page and "<em>historical</em>" in page
    assert "**" not in page and "<pre><code" in page  # the command block and the tie audit
    assert page.count("<img") == report.count("![")
    assert "torch" in sys.modules  # training ran in this process: the demo is the real pipeline


def test_demo_report_in_a_browser(demo_dir, tmp_path):
    browser = find_browser()
    if browser is None:
        pytest.skip("no headless browser: install Chromium (Debian: apt-get install -y chromium)")
    res = browser_check(demo_dir / "out" / "report.html", browser, tmp_path)
    assert res["inner_width"] == 1280 and res["images"] >= 5
    assert (res["raw_markup"], res["broken_images"], res["overflow"]) == ([], [], [])
    assert res["scroll_width"] <= res["client_width"]


def test_demo_with_an_llm_endpoint(tmp_path, fake_openai, monkeypatch, capsys):
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
    printed = capsys.readouterr().out
    # endpoint, model, calls and cost said before the first call (the dry run makes none)
    announced = printed.index("LLM judge: endpoint " + fake_openai.url)
    assert "model fake-model" in printed[announced:] and "calls" in printed[announced:]
    card = json.loads((tmp_path / "out" / "card.json").read_text())
    assert card["judge"].endswith("LLM") and card["judge model"] == "fake-model"
    assert card["template hash"].startswith("baseline sha256:")
    llm_qrels = read_qrels(tmp_path / "qrels" / "ml-100k-llm-fake-model.qrels")
    assert len(fake_openai.chat_log()) >= len(llm_qrels) > 0  # every label came from a real HTTP call
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


# ------------------------------------------------------------------ refused before anything is trained

@pytest.mark.parametrize("argv", [
    ["--seed", "-1"], ["--seed", str(2**64)], ["--bootstrap", "-1"], ["--depth", "0"], ["--per-user", "0"],
    ["--profile-size", "0"], ["--epochs", "0"], ["--max-users", "0"], ["--max-users", "ten"],
])
def test_demo_numbers_out_of_range_exit_2(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:  # argparse refuses what is no number at all (exit 2); the settings refuse the ranges
        code = main(["demo", "--reduced", *argv])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert argv[0] in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing trained, nothing written


@pytest.mark.parametrize("changes, message", [
    ({"seed": -1}, "seed= must be at least 0, not -1"),
    ({"seed": 2**63}, f"seed= must be at most {2**63 - 1}, not {2**63}"),
    ({"bootstrap": -1}, "bootstrap= must be at least 0, not -1"), ({"depth": 0}, "depth= must be at least 1, not 0"),
    ({"per_user": True}, "per_user= must be a whole number, not True"),
    ({"epochs": 0}, "epochs= must be at least 1, not 0"),
    ({"profile_sizes": (5, 0)}, "profile_sizes= must be at least 1, not 0 (item 1)"),
    ({"max_users": 2.5}, "max_users= must be a whole number, not 2.5"),
    ({"fields": "title+colour"}, "fields=: unknown field(s) ['colour']"),
    ({"judge": "gpt"}, "judge= must be 'overlap', 'popularity' or 'openai', not 'gpt'"),
])
def test_demo_settings_are_range_checked(changes, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        DemoSettings(**{"judge": "overlap", **changes}).resolved()


def test_demo_options_are_named_as_flags_on_the_command_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--depth", "0"]) == 2
    assert "--depth must be at least 1, not 0" in capsys.readouterr().err


def _demo_args(root: Path) -> list[str]:
    return ["demo", "--reduced", "--judge", "overlap", "--out", str(root / "out"), "--runs-dir", str(root / "runs"),
            "--qrels-dir", str(root / "qrels")]


@pytest.mark.parametrize("option, below_a_file", [
    ("--out", False), ("--qrels-dir", False), ("--runs-dir", False),  # a file where a folder goes
    ("--out", True), ("--qrels-dir", True),                            # a folder below a file
])
def test_demo_refuses_unwritable_output_folders_first(option, below_a_file, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f").write_text("a file\n")
    target = tmp_path / "f" / "sub" if below_a_file else tmp_path / "f"
    args = _demo_args(tmp_path)
    args[args.index(option) + 1] = str(target)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert option in err and str(target) in err and "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["f"]  # no report, runs or qrels folder appeared


@pytest.mark.parametrize("output", ["qrels/ml-100k-filled.qrels", "qrels/ml-100k-overlap.judgments.jsonl",
                                    "runs/EASE.run", "out/report.html"])
def test_demo_refuses_an_output_file_that_is_a_folder_before_training(output, tmp_path, capsys):
    pytest.importorskip("recbole", reason="the demo loads MovieLens-100K from the recbole wheel")
    (tmp_path / output).mkdir(parents=True)  # a folder where the demo would write a file
    assert main(_demo_args(tmp_path)) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / output) in err and "is a folder" in err
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == []  # nothing trained, judged or reported


def test_demo_refuses_an_unknown_grid_even_with_systems(tmp_path, capsys):
    assert main([*_demo_args(tmp_path), "--grid", "nogrid"]) == 2
    assert "unknown grid 'nogrid'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_demo_summary_never_records_url_credentials():
    url = "https://alice:s3cret-pw@llm.example.org:8443/v1?api-key=K3Y#frag"
    s = DemoSettings(judge="openai", base_url=url)
    recorded = _settings_json(s.resolved())
    assert recorded["base_url"] == "https://llm.example.org:8443/v1"
    text = json.dumps(recorded)
    assert "alice" not in text and "s3cret-pw" not in text and "K3Y" not in text
    with pytest.raises(ConfigError) as err:  # the refusal names the endpoint without its secrets
        DemoSettings(judge="overlap", base_url=url).resolved()
    assert "llm.example.org" in str(err.value) and "s3cret" not in str(err.value) and "K3Y" not in str(err.value)
    assert _settings_json(DemoSettings(judge="openai", base_url="http://[::1]:8000/v1"))["base_url"] == \
        "http://[::1]:8000/v1"


def test_the_overlap_baseline_cannot_calibrate_so_the_demo_does_not_fill(demo_dir):
    """The overlap judge's grades carry no signal about the held-out ratings: a filled ranking would be
    an artefact of the fill, so the demo writes none and its report, summary and card say why."""
    assert not (demo_dir / "qrels" / "ml-100k-filled.qrels").exists()
    assert not (demo_dir / "qrels" / "ml-100k-filled.qrels.sources.tsv").exists()
    summary = json.loads((demo_dir / "out" / "summary.json").read_text())["summary"]
    reasons = [r.split(":")[0] for r in summary["fill_refused"]]
    assert "no signal" in reasons and set(summary["kendall_tau"]) == {"overlap"}
    report = (demo_dir / "out" / "report.md").read_text()
    assert "filled: **refused**" in report and "fills gaps" not in report
    # the calibration table names the label sets for what they are: historical labels, overlap grades
    assert "| overlap_grade | n_overlap | mean_historical |" in report and "mean_human" not in report
    card = json.loads((demo_dir / "out" / "card.json").read_text())
    assert "gap filling refused" in card["labels compared"]
    # the tie audit's qrels are the held-out positives, not the last scorer's name
    assert "users of `held-out`" in report and "users of `genre-overlap`" not in report


def test_an_api_key_alone_never_selects_the_paid_judge(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-request-to-spend")
    assert DemoSettings().resolved().judge == "overlap"
    assert DemoSettings(base_url="http://127.0.0.1:9/v1").resolved().judge == "openai"
    assert DemoSettings(judge="openai").resolved().judge == "openai"
    with pytest.raises(ConfigError, match="base_url= .* names an LLM endpoint but judge= is 'overlap'"):
        DemoSettings(judge="overlap", base_url="http://127.0.0.1:9/v1").resolved()


# ------------------------------------------------------------------ the story the demo tells

def test_the_refused_fill_is_said_in_plain_words_with_what_would_make_it_work(demo_dir):
    printed = (demo_dir / "stdout.txt").read_text()
    step = printed[printed.index("] calibrate the judge"):printed.index("] compare system rankings")]
    assert "gap filling refused: " in step and "a filled ranking would show the fill, not the judge" in step
    # each failed check of the calibration on its own line, in words, as the report gives them
    summary = json.loads((demo_dir / "out" / "summary.json").read_text())["summary"]
    assert summary["fill_refused"]
    report = (demo_dir / "out" / "report.md").read_text()
    for problem in summary["fill_refused"]:
        assert f"        - {problem}\n" in step
    needs = ("must rest on at least 30 pairs shared with historical labels", "must take at least 3 values",
             "Kendall τ-b > 0 at p < 0.05", "--judge openai", "recjudge fill --allow-weak-calibration")
    assert all(n in step for n in needs)
    assert "  - What would make it work: " in report and "must take at least 3 values" in report


def test_report_is_named_once(demo_dir):
    printed = (demo_dir / "stdout.txt").read_text()
    assert printed.count("Report: ") == 1
    assert printed.rstrip().splitlines()[-1] == (f"Report: {demo_dir / 'out' / 'report.md'}  "
                                                 f"(also {demo_dir / 'out' / 'report.html'})")


def test_printed_steps_are_the_reports_pipeline(demo_dir):
    printed = (demo_dir / "stdout.txt").read_text()
    steps = re.findall(r"^\[(\d)/9\] (.*) …$", printed, re.M)
    assert [int(n) for n, _ in steps] == list(range(1, 10))
    report = (demo_dir / "out" / "report.md").read_text()
    table = report[report.index("## Pipeline"):report.index("Systems trained")]
    for _, step in steps[:-1]:  # the report is written during the last one
        assert f"| {step} |" in table
    assert steps[7][1].startswith("tie audit: the 4 systems' rankings before tie-breaking")


def test_the_tie_audit_covers_the_trained_systems_before_tie_breaking(demo_dir):
    """The exported runs are tie-free; the audit reads each system's own scores, ties kept, and its tie
    shares are those counted here from those files with pandas."""
    raw = demo_dir / "out" / "raw-runs"
    assert sorted(p.stem for p in raw.glob("*.run")) == ["EASE", "ItemKNN", "Pop", "Random"]
    report = (demo_dir / "out" / "report.md").read_text()
    section = report[report.index("## Tie audit"):report.index("### Sampled candidates")]
    for name in ("EASE", "ItemKNN", "Pop", "Random"):
        cols = pd.read_csv(raw / f"{name}.run", sep=" ", header=None, names=["qid", "q0", "doc", "rank", "score", "tag"],
                           dtype={"qid": str, "doc": str})
        # rank follows the score, ties kept in item order, and the run holds at least the top 100
        assert (cols.groupby("qid").score.diff().dropna() <= 0).all()
        assert cols.groupby("qid").size().min() >= 100
        tied = cols.groupby("qid").score.apply(lambda x: x.duplicated().any()).mean()
        row = next(line for line in section.splitlines() if line.startswith(f"| {name} | 27 |"))
        assert row.split(" | ")[2] == f"{tied:.0%}"
    # Pop scores by training count: every user's list holds equal counts
    assert "| Pop | 27 | 100% |" in section
    assert section.count("mean over 27 users of `ml-100k-historical`") == 3  # Hit@10, nDCG@10, nDCG@100
    # the exported runs themselves stay tie-free (checked above in test_demo_runs_are_tie_free...)
    summary = json.loads((demo_dir / "out" / "summary.json").read_text())["summary"]
    assert summary["tie_audit"]["Pop"]["tied_users"] == 1.0


def test_figure_headings_cite_the_paper(demo_dir):
    report = (demo_dir / "out" / "report.md").read_text()
    headings = [line for line in report.splitlines() if line.startswith("#")]
    numbered = [h for h in headings if re.search(r"Figure \d", h)]
    assert numbered and all(re.search(r"Figure \d of Penha et al\. 2025", h) for h in numbered)
    refs = report[report.index("## References"):]
    assert "Penha" in refs and "arXiv 2511.23312" in refs


@pytest.mark.parametrize("width", [1280, 800])
def test_demo_report_fits_common_widths(demo_dir, tmp_path, width):
    """Nothing wider than the window, no box to scroll sideways (the tie audit was a 150-column block),
    every figure loaded."""
    browser = find_browser()
    if browser is None:
        pytest.skip("no headless browser: install Chromium (Debian: apt-get install -y chromium)")
    res = browser_check(demo_dir / "out" / "report.html", browser, tmp_path, width=width)
    assert res["inner_width"] == width
    assert res["scroll_width"] <= res["inner_width"]
    assert (res["broken_images"], res["overflow"], res["scrolled"]) == ([], [], [])
    assert res["images"] == (demo_dir / "out" / "report.md").read_text().count("![")
    png = screenshot(demo_dir / "out" / "report.html", browser, tmp_path, tmp_path / f"demo-{width}.png", width)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_training_keeps_the_ranking_before_the_tie_policy_when_asked(tmp_path):
    """Pop on three users: u1 has seen a and b, so c and d (one training interaction each) tie."""
    from recjudge.data.collections import Collection
    from recjudge.data.splits import global_time_split
    from recjudge.systems import train_systems

    inter = pd.DataFrame({"user": ["u1", "u1", "u2", "u2", "u3", "u3", "u1", "u2", "u3"],
                          "item": ["a", "b", "a", "c", "b", "d", "c", "b", "a"],
                          "rating": 4.0, "timestamp": [1, 2, 3, 4, 5, 6, 10, 11, 12]})
    split = global_time_split(Collection("t", inter, pd.DataFrame(index=pd.Index(list("abcd"), name="item"))),
                              timestamp=10)
    messages: list[str] = []

    def train(**kw):
        return train_systems(split, systems=["Pop"], out_dir=tmp_path / "runs", k=3, progress=messages.append,
                             **kw)[0].status

    assert train(raw_dir=tmp_path / "raw") == "trained"
    raw = (tmp_path / "raw" / "Pop.run").read_text().splitlines()
    u1 = [line.split() for line in raw if line.startswith("u1 ")]
    assert [(d, r, s) for _, _, d, r, s, _ in u1] == [("c", "1", "1"), ("d", "2", "1")]  # the tie, kept
    exported = [line.split() for line in (tmp_path / "runs" / "Pop.run").read_text().splitlines()
                if line.startswith("u1 ")]
    assert len({s for *_, s, _ in exported}) == 2  # the exported run stays tie-free
    assert train(raw_dir=tmp_path / "raw") == "cached"
    (tmp_path / "raw" / "Pop.run").unlink()
    assert train(raw_dir=tmp_path / "raw") == "trained"  # a cached system without its raw ranking retrains
    assert "no ranking before the tie policy" in messages[-2]
    assert train() == "cached"


def test_quiet_demo_says_only_where_the_report_is(demo_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["--quiet", "demo", "--reduced", "--out", str(out), "--runs-dir", str(demo_dir / "runs"),
                 "--qrels-dir", str(tmp_path / "qrels"), "--bootstrap", "20", "--judge", "overlap"])
    assert code == 0
    printed = capsys.readouterr()
    assert printed.out == f"Report: {out / 'report.md'}  (also {out / 'report.html'})\n"
    assert printed.err == ""
