"""``recjudge reproduce penha2025``: the published numbers as data, the plan, and the run end to end
on a generated ML-32M-ext release with the local fake OpenAI server."""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from fake_openai import Reply
from ml32m_data import release

from recjudge.errors import InputError
from recjudge.experiments.published import NOT_PUBLISHED, load_published
from recjudge.experiments.reproduce import ReproduceSettings, run_reproduce

# ------------------------------------------------------------------------------ published values

def test_published_values_are_as_quoted():
    pub = load_published("penha2025")
    # issue 12's text, number by number
    assert pub.value("table1", "pooled", "Judged@100 historical") == 0.0774
    assert pub.value("table1", "pooled", "Judged@100 Cranfield") == 0.5981
    assert pub.value("table1", "non-pooled", "Judged@100 historical") == 0.0601
    assert pub.value("table1", "non-pooled", "Judged@100 Cranfield") == 0.5503
    assert pub.value("table8", "baseline", "agree") == 51.83
    assert pub.value("table8", "defined scale", "tie") == 34.88
    assert pub.value("table5", "Human-only", "Judged@100") == 0.559
    assert pub.value("table5", "calibration", "pairs") == 13336
    assert pub.value("figure2", "historical vs Cranfield", "Kendall tau") == 0.26
    assert pub.cell("figure2", "historical vs Cranfield", "p-value").shown() == "< 0.01"
    assert pub.value("figure2", "NCEPLRec", "rank Cranfield") == 43
    assert pub.value("cost", "full run", "calls") == 93708
    # a percent cell compares with a share × 100
    assert pub.cell("table8", "baseline", "agree").comparable(0.5) == 50.0


def test_unknown_cells_say_so():
    pub = load_published("penha2025")
    cell = pub.cell("table3", "Title + All metadata", "agree")
    assert cell is not None and cell.value is None and cell.shown() == NOT_PUBLISHED
    assert pub.value("table4", "K=10", "tau Compat") is None
    assert pub.value("table9", "no such row", "x") is None  # absent cells are not invented either
    # no cell of Tables 3, 4 or 9 carries a number: none was quoted
    assert all(c.value is None for t in ("table3", "table4", "table9") for c in pub.table(t))


@pytest.mark.parametrize("cell, problem", [
    ('table = "t"\nrow = "r"\ncolumn = "c"\ncite = "x"\n', "exactly one of value"),
    ('table = "t"\nrow = "r"\ncolumn = "c"\ncite = "x"\nvalue = 2.5\n', "outside [-1, 1]"),
    ('table = "t"\nrow = "r"\ncolumn = "c"\ncite = "x"\nvalue = 1\nunit = "furlongs"\n', "unit"),
    ('table = "t"\nrow = "r"\ncolumn = "c"\nvalue = 0.5\n', "'cite'"),
    ('table = "t"\nrow = "r"\ncolumn = "c"\ncite = "x"\nvalue = "0.5"\n', "not a number"),
])
def test_bad_published_file_names_file_and_line(tmp_path, cell, problem):
    path = tmp_path / "bad.toml"
    good = 'table = "t"\nrow = "ok"\ncolumn = "c"\ncite = "x"\nvalue = 0.5\n'
    path.write_text(f'name = "x"\ntitle = "x"\nquoted_from = "x"\n\n[[cell]]\n{good}\n[[cell]]\n{cell}')
    with pytest.raises(InputError) as exc:
        load_published(path)
    assert problem in str(exc.value) and "bad.toml" in str(exc.value)
    assert "bad.toml:12:" in str(exc.value)  # the line of the second [[cell]] header


# ------------------------------------------------------------------------------ the generated release

PARTICIPANTS = tuple(range(1, 9))
SYSTEMS = {"Oracle-ish": 3.0, "Good": 1.5, "Fair": 0.8, "Weak": 0.3, "Noise": 0.0}  # weight on the human label
REDUCED = {"experiments": 1, "per_user": 6, "k_values": (3, 10), "field_sets": ("title", "all"),
           "profile_size": 20, "permutations": 200, "bootstrap": 50, "concurrency": 4}


def _write_run(path: Path, name: str, scores: dict) -> None:
    lines = []
    for q, items in scores.items():
        ranked = sorted(items.items(), key=lambda kv: (-kv[1], kv[0]))[:15]
        lines += [f"{q} Q0 {d} {r} {s:.6f} {name}" for r, (d, s) in enumerate(ranked, 1)]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A release of 8 participants and 40 movies, five Cranfield runs of graded quality plus Pop, and a
    historical setting (runs and qrels) of the same systems, with their groups."""
    root = tmp_path_factory.mktemp("release")
    folder, facts = release(root, participants=PARTICIPANTS, ml_users=tuple(str(i) for i in range(1, 13)),
                            movies=range(1, 41), in_database=range(1, 31), profile_items=12, judged_items=10,
                            ml_items=10, after_make=True)
    human = facts["interest"]
    rng = random.Random(7)
    popularity: dict[str, int] = {}
    for row in facts["ml"]:
        popularity[str(row[1])] = popularity.get(str(row[1]), 0) + 1
    for row in facts["profiles"]:
        popularity[str(row[2])] = popularity.get(str(row[2]), 0) + 1
    users = sorted({q for q, _ in human})
    runs, hist = root / "runs", root / "historical"
    runs.mkdir()
    hist.mkdir()
    hist_users = [str(i) for i in range(1, 13)]
    hist_labels = {(u, str(m)): rng.randint(0, 5) for u in hist_users for m in rng.sample(range(1, 41), 4)}
    for name, w in {**SYSTEMS, "Pop": None}.items():
        scores, hscores = {}, {}
        for q in users:
            scores[q] = {str(m): (popularity.get(str(m), 0) if w is None else w * human.get((q, str(m)), 0))
                         + rng.random() for m in range(1, 41)}
        for u in hist_users:
            hscores[u] = {str(m): rng.random() + (0 if w is None else 0.5 * w * hist_labels.get((u, str(m)), 0))
                          for m in range(1, 41)}
        _write_run(runs / f"{name}.run", name, scores)
        _write_run(hist / f"{name}.run", name, hscores)
    (root / "historical.qrels").write_text("".join(f"{u} 0 {d} {lab}\n" for (u, d), lab in sorted(hist_labels.items())))
    (root / "groups.tsv").write_text("".join(f"{n} {'pooled' if n in ('Good', 'Pop') else 'non-pooled'}\n"
                                             for n in [*SYSTEMS, "Pop"]))
    return {"folder": folder, "human": human, "popularity": popularity, "runs": runs, "hist": hist,
            "hist_qrels": root / "historical.qrels", "groups": root / "groups.tsv", "root": root}


def _settings(data, out, **kw) -> ReproduceSettings:
    return ReproduceSettings(collection=data["folder"], out=out, runs=data["runs"], historical_runs=data["hist"],
                             historical_qrels=data["hist_qrels"], groups=data["groups"],
                             **{**REDUCED, **kw})


_FILM = re.compile(r"Film (\d+)\b")


def _histories(data) -> dict[str, set]:
    from recjudge.api import load_collection

    inter = load_collection(data["folder"]).interactions
    return {q: set(g.item) for q, g in inter[inter.user.isin({q for q, _ in data["human"]})].groupby("user")}


def oracle(fake, data, boost=lambda movie: 0):
    """Answer every candidate with the participant's own label (0 for a movie they did not judge), plus
    ``boost(movie)`` capped at 7: the user is told by the movies of the profile, which differ between
    the fixture's participants."""
    histories = _histories(data)
    assert len({frozenset(h) for h in histories.values()}) == len(histories)  # the fingerprint is unique

    def rule(call):
        profile = call.user.split("Candidate item", 1)[0]
        shown = set(_FILM.findall(profile))
        user = max(histories, key=lambda u: len(shown & histories[u]) - len(shown - histories[u]))
        labels = {}
        for k, text in call.candidates:
            movie = _FILM.search(text).group(1)
            labels[k or "_"] = min(7, data["human"].get((user, movie), 0) + boost(movie))
        return Reply(content=fake._answer(call.body, call.candidates, labels))

    fake.rule = rule


def popularity_judge(fake, data):
    """The participant's label raised by up to 4 for the most rated movies: a bias calibration cannot
    absorb, since one LLM grade then means a lower human label for a popular movie than for a rare one."""
    top = max(data["popularity"].values())
    oracle(fake, data, boost=lambda movie: round(4 * data["popularity"].get(movie, 0) / top))


def _cells(result) -> dict:
    return {(r.target, r.row, r.column): r.ours for r in result.cells.itertuples()}


def test_dry_run_prices_every_prompt_once_without_a_call(data, tmp_path, fake_openai, capsys):
    from recjudge.cli import main
    from recjudge.data.trec import Qrels, read_runs
    from recjudge.judge import select_pairs

    out = tmp_path / "out"
    code = main(["reproduce", "penha2025", "--collection", str(data["folder"]), "--out", str(out),
                 "--model", "gpt-4o-mini", "--base-url", fake_openai.url, "--runs", str(data["runs"]),
                 "--experiments", "1", "--per-user", "6", "--k-values", "3,10", "--field-sets", "title,all",
                 "--profile-size", "20", "--concurrency", "4", "--call-seconds", "2", "--dry-run"])
    printed = capsys.readouterr().out
    assert code == 0 and fake_openai.chat_log() == [] and not out.exists()
    for title in ("Tables 4, 9", "Table 3", "Table 8", "Table 5"):
        assert title in printed
    # distinct prompts by hand: the base judge (fields all, baseline prompt) over K = 10 per user
    # serves Table 4, Table 3's "all" row, Table 8's baseline row and the human pairs of the pool;
    # Table 3's "title" row and Table 8's defined scale ask K = 6 per user anew
    human = Qrels.from_frame(pd.DataFrame([(q, d, lab) for (q, d), lab in data["human"].items()],
                                          columns=["qid", "docid", "label"]), "h")
    k10 = set(select_pairs(reference=human, per_user=10, seed=0))
    k6 = set(select_pairs(reference=human, per_user=6, seed=0))
    pool = set(select_pairs(read_runs([str(data["runs"])]), depth=100, seed=0)) | set(data["human"])
    expected = len(k10) + 2 * len(k6) + len(pool - k10)
    total = int(re.search(r"total: ([\d,]+) calls", printed).group(1).replace(",", ""))
    assert total == expected
    assert "93,708" in printed and "~170,000" in printed  # the paper's figures beside ours
    # wall time: ceil(calls / 4) × 2 s
    assert f"about {(-(-expected // 4)) * 2 / 60:.0f} min" in printed or f"about {(-(-expected // 4)) * 2} s" in printed


def test_oracle_judge_gives_tau_one_and_full_agreement(data, tmp_path, fake_openai):
    from recjudge.experiments.reproduce import TARGETS
    from recjudge.report.reproduce import TARGET_TITLES

    oracle(fake_openai, data)
    out = tmp_path / "out"
    result = run_reproduce(_settings(data, out, model="gpt-4o-mini", base_url=fake_openai.url), progress=lambda m: None)
    assert result.complete and result.stopped is None
    c = _cells(result)
    # every table and figure is there: cells, a section of the report, a PNG for each figure
    report = (out / "report.md").read_text()
    assert {t for t in TARGETS if t != "figure3"} <= set(result.cells.target)
    for t in TARGETS:
        assert TARGET_TITLES[t] in report
    for f in ("figure2", "figure3", "figure4", "figure5"):
        assert (out / "figures" / f"{f}.png").stat().st_size > 0 and f"figures/{f}.png" in report
    assert "<table>" in (out / "report.html").read_text()
    saved = json.loads((out / "reproduce.json").read_text())
    assert saved["complete"] and len(saved["cells"]) == len(result.cells)
    # K = 10 covers each participant's 10 judged movies: the LLM's qrels are the human ones
    for m in ("Compat", "nDCG", "Bpref"):
        assert c[("table4", "K=10", f"tau {m}")] == pytest.approx(1.0)
    # Table 5: the oracle's Full-LLM qrels add only label-0 pool items, which move neither measure
    assert c[("table5", "Human-only vs Full LLM", "tau Compat")] == pytest.approx(1.0)
    assert c[("table5", "Human-only vs Full LLM", "tau nDCG")] == pytest.approx(1.0)
    assert c[("table5", "calibration", "mean LLM label")] == pytest.approx(c[("table5", "calibration",
                                                                                "mean human label")])
    assert c[("section5.2", "LLM vs Cranfield", "median |Δrank|")] == 0
    assert c[("figure5", "Full LLM vs human", "Kendall tau")] == pytest.approx(1.0)
    # item-level agreement 1 in every row (Table 8's percent cells compare share × 100)
    for row in ("title", "Title + All metadata"):
        assert (c[("table3", row, "agree")], c[("table3", row, "tie")]) == (pytest.approx(1.0), 0.0)
        assert c[("table3", row, "kappa")] == pytest.approx(1.0)
    for row in ("baseline", "defined scale"):
        assert c[("table8", row, "agree")] == pytest.approx(100.0)
    sig = [k for k in c if k[0] == "significance" and k[1].startswith("Compat")]
    assert {k[2]: c[k] for k in sig if k[2] in ("agreement", "tau_ap", "top5_overlap")} == \
        {"agreement": 1.0, "tau_ap": pytest.approx(1.0), "top5_overlap": 1.0}
    assert c[("audit", "popularity", "Spearman rho(popularity, residual)")] == 0.0
    # each cell beside its published value and the difference
    row = result.cells.set_index(["target", "row", "column"]).loc[("table8", "baseline", "agree")]
    assert row.published == "51.83%" and row.difference == pytest.approx(100.0 - 51.83)
    assert "| judge model | gpt-5-2025-08-07 | gpt-4o-mini |" in report


def test_a_popularity_biased_judge_shows_in_the_report(data, tmp_path, fake_openai):
    popularity_judge(fake_openai, data)
    out = tmp_path / "out"
    result = run_reproduce(_settings(data, out, model="gpt-4o-mini", base_url=fake_openai.url, only=("table5",)),
                           progress=lambda m: None)
    rho = _cells(result)[("audit", "popularity", "Spearman rho(popularity, residual)")]
    assert rho > 0.3
    report = (out / "report.md").read_text()
    assert "Judge audit: popularity bias" in report and f"{rho:.4f}" in report


def _chat_shas(fake) -> list:
    return [r.prompt_sha for r in fake.chat_log() if r.status == 200]


def test_max_cost_stops_cleanly_and_a_second_run_resumes(data, tmp_path, fake_openai):
    out = tmp_path / "out"
    first = run_reproduce(_settings(data, out, model="gpt-4o-mini", base_url=fake_openai.url, only=("table8",),
                                    max_cost=0.001), progress=lambda m: None)
    asked = _chat_shas(fake_openai)
    assert not first.complete and "--max-cost" in first.stopped and 0 < len(asked) < 96
    report = (out / "report.md").read_text()
    assert "**Incomplete**" in report and "Not computed: judging stopped" in report
    # the plan now counts what the cache holds as done
    plan = run_reproduce(_settings(data, out, model="gpt-4o-mini", base_url=fake_openai.url, only=("table8",),
                                   dry_run=True), progress=lambda m: None).plan
    assert sum(r.cache_hits for r in plan) == len(asked) and sum(r.calls for r in plan) == 96 - len(asked)
    second = run_reproduce(_settings(data, out, model="gpt-4o-mini", base_url=fake_openai.url, only=("table8",)),
                           progress=lambda m: None)
    shas = _chat_shas(fake_openai)
    assert second.complete and len(shas) == len(set(shas)) == 96  # 2 prompts × 8 participants × 6 movies


def test_kill_and_resume_makes_no_repeated_call(data, tmp_path, fake_openai):
    fake_openai.latency = 0.03
    out = tmp_path / "out"
    args = ["reproduce", "penha2025", "--collection", str(data["folder"]), "--out", str(out), "--model",
            "gpt-4o-mini", "--base-url", fake_openai.url, "--only", "table8", "--experiments", "1", "--per-user", "6",
            "--profile-size", "20", "--concurrency", "2"]
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from recjudge.cli import main; sys.exit(main())",
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while len(fake_openai.chat_log()) < 20 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err.decode()[-2000:]
    before = _chat_shas(fake_openai)
    assert 20 <= len(before) < 96
    fake_openai.latency = 0.0
    from recjudge.cli import main

    assert main(args) == 0
    shas = _chat_shas(fake_openai)
    assert len(shas) == len(set(shas)) == 96  # nothing asked before the kill is asked again
    assert "**Incomplete**" not in (out / "report.md").read_text()


def test_systems_are_trained_when_no_runs_are_given(data, tmp_path, fake_openai):
    pytest.importorskip("recbole")  # ItemKNN trains through RecBole (the [train] extra)
    oracle(fake_openai, data)
    out = tmp_path / "out"
    settings = ReproduceSettings(collection=data["folder"], out=out, model="gpt-4o-mini", base_url=fake_openai.url,
                                 systems="Pop,Random,ItemKNN", min_interactions=1, epochs=1,
                                 only=("table1", "figure2", "table5"), **REDUCED)
    result = run_reproduce(settings, progress=lambda m: None)
    assert sorted(p.name for p in (out / "runs" / "cranfield").glob("*.run")) == ["ItemKNN.run", "Pop.run",
                                                                                 "Random.run"]
    assert (out / "historical.qrels").stat().st_size > 0 and (out / "runs" / "historical" / "Pop.run").exists()
    c = _cells(result)
    # without groups every system is one group; Judged@100 is a share of 100 ranked items
    assert 0 <= c[("table1", "all systems", "Judged@100 Cranfield")] <= 1
    assert -1 <= c[("figure2", "historical vs Cranfield", "Kendall tau")] <= 1
    assert c[("table5", "Human-only vs Full LLM", "tau Compat")] == pytest.approx(1.0)
    assert any(d["setting"] == "historical split" for d in result.differences)


def test_bad_targets_and_unpriced_budgets_are_refused_before_any_work(data, tmp_path, fake_openai):
    from recjudge.errors import ConfigError

    with pytest.raises(ConfigError, match="--only table7: choose among table1, table3"):
        run_reproduce(_settings(data, tmp_path / "a", only=("table7",)), progress=lambda m: None)
    with pytest.raises(ConfigError, match="--max-cost needs a price for model 'my-model'"):
        run_reproduce(_settings(data, tmp_path / "b", model="my-model", base_url=fake_openai.url, max_cost=1.0),
                      progress=lambda m: None)
    assert fake_openai.chat_log() == [] and not (tmp_path / "b" / "judgments.sqlite").exists()


def test_table3_rows_are_the_field_sets_the_collection_can_show(data, tmp_path):
    from recjudge.api import load_collection
    from recjudge.errors import ConfigError
    from recjudge.experiments.reproduce import field_sets

    collection = load_collection(data["folder"])  # database-movies.csv: title, date, genres, director, overview
    usable, skipped = field_sets(ReproduceSettings(collection=data["folder"], out=tmp_path), collection)
    assert {"title", "title+genres", "title+directors", "title+overview", "title+year", "all"} <= set(usable)
    assert skipped == {"title+cast": ["cast"], "title+runtime": ["runtime"], "title+languages": ["languages"]}
    assert len(usable) + len(skipped) == 11  # the paper's 11 rows
    with pytest.raises(ConfigError, match="--field-sets title\\+cast: the collection has no cast field"):
        field_sets(ReproduceSettings(collection=data["folder"], out=tmp_path, field_sets=("title+cast",)), collection)


def test_the_plan_names_users_whose_profile_exceeds_the_context_window(data, tmp_path):
    # 1,000 tokens: prompts are counted at 3 characters per token for OpenAI models (the window check's
    # margin), so some of these profiles fit and some do not
    result = run_reproduce(_settings(data, tmp_path / "out", only=("table8",), dry_run=True, context_tokens=1000),
                           progress=lambda m: None)
    over = [u for r in result.plan for u in r.overflow_users]
    assert over and all(u in {q for q, _ in data["human"]} for u in over)
    assert sum(r.over_context for r in result.plan) > 0 and sum(r.calls for r in result.plan) > 0
    assert f"pairs of {len(set(over))} user(s): " in result.plan_text
    # an overflowing prompt is not a call to make
    assert sum(r.calls for r in result.plan) + sum(r.over_context for r in result.plan) == 96
