"""Ablation grids: experiment validation, variant expansion, end to end with the offline judge."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from recjudge.cli import main
from recjudge.data.trec import Run, write_run
from recjudge.errors import InputError
from recjudge.experiments.ablate import Experiment, load_experiment, run_experiment, variants

GENRES = ["Drama", "Comedy", "Action", "Horror", "Romance", "Sci-Fi"]


def _movielens(tmp_path, users=25, items=60, seed=0):
    """A MovieLens-layout collection whose users like two genres each (so the overlap judge has signal)."""
    rng = np.random.default_rng(seed)
    folder = tmp_path / "ml"
    folder.mkdir()
    genres = {i: tuple(rng.choice(GENRES, 2, replace=False)) for i in range(1, items + 1)}
    pd.DataFrame({"movieId": list(genres), "title": [f"Movie {i} (199{i % 10})" for i in genres],
                  "genres": ["|".join(g) for g in genres.values()]}).to_csv(folder / "movies.csv", index=False)
    rows = []
    for u in range(1, users + 1):
        liked = set(rng.choice(GENRES, 2, replace=False))
        for t, i in enumerate(rng.choice(items, 30, replace=False) + 1):
            rating = 5 if liked & set(genres[int(i)]) else int(rng.integers(1, 3))
            rows.append((u, int(i), rating, 1_000_000 + 1000 * t + u))
    pd.DataFrame(rows, columns=["userId", "movieId", "rating", "timestamp"]).to_csv(folder / "ratings.csv", index=False)
    return folder


def _runs(tmp_path, users=25, items=60, systems=4, seed=1):
    rng = np.random.default_rng(seed)
    folder = tmp_path / "runs"
    for s in range(systems):
        rows = [(str(u), str(i), r + 1, float(40 - r)) for u in range(1, users + 1)
                for r, i in enumerate(rng.choice(items, 40, replace=False) + 1)]
        write_run(Run.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "rank", "score"]), f"s{s}"),
                  folder / f"s{s}.run")
    return folder


def _write(tmp_path, text):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path


def test_variants_one_at_a_time_and_product():
    exp = Experiment(name="x", collection="c", reference="r", out=None, judge={"judge": "overlap"},
                     grid={"fields": ("title", "title+genres"), "per_user": (5, 10)}, per_user=10)
    names = [v.name for v in variants(exp)]
    # base, fields=title, fields=title+genres, per_user=5 (per_user=10 equals the base: dropped)
    assert names == ["base", "fields=title", "fields=title+genres", "per_user=5"]
    prod = variants(Experiment(name="x", collection="c", reference="r", out=None, judge={"judge": "overlap"},
                               grid={"fields": ("title", "all"), "profile_size": (5, 10, 20)}, mode="product"))
    assert len(prod) == 2 * 3
    assert {v.settings["profile_size"] for v in prod} == {5, 10, 20}


@pytest.mark.parametrize("text,match", [
    ('collection = "ml"\nreference = "historical"\ncolour = 1\n', "unknown key"),
    ('reference = "historical"\n', "missing key 'collection'"),
    ('collection = "ml"\nreference = "historical"\n[grid]\nbogus = [1]\n', "unknown key.*grid.bogus"),
    ('collection = "ml"\nreference = "historical"\n[grid]\nfields = "title"\n', "non-empty list"),
    ('collection = "ml"\nreference = "historical"\n[judge]\nprofile_size = 0\n', "profile_size"),
    ('collection = "ml"\nreference = "historical"\nmode = "random"\n', "mode"),
    ('collection = "ml"\nreference = = 3\n', "TOML"),
    ('collection = "ml"\nreference = "historical"\n[grid]\nprofile_size = [10, 0]\n', "grid.profile_size.*found 0"),
    ('collection = "ml"\nreference = "historical"\nper_user = "abc"\n', "per_user"),
    ('collection = "ml"\nreference = "historical"\nmeasures = ["Bogus@3"]\n', "measures"),
    ('collection = "ml"\nreference = "historical"\ntie_policy = "alphabetical"\n', "tie_policy"),
])
def test_bad_experiment_files_name_the_problem(tmp_path, text, match):
    with pytest.raises(InputError, match=match) as err:
        load_experiment(_write(tmp_path, text))
    assert "exp.toml" in str(err.value)


def test_ablation_end_to_end_with_overlap_judge(tmp_path, capsys):
    coll = _movielens(tmp_path)
    runs = _runs(tmp_path)
    out = tmp_path / "out"
    path = _write(tmp_path, f'''
name = "fields"
collection = "{coll}"
reference = "historical:rating"
runs = "{runs}"
out = "{out}"
per_user = 6
bootstrap = 100
split = "user_ratio"

[judge]
judge = "overlap"
fields = "title+genres"
profile_size = 20

[grid]
fields = ["title+year", "title+genres"]
profile_size = [3, 20]
''')
    code = main(["ablate", str(path), "--dry-run"])
    assert code == 0
    assert "dry run" in capsys.readouterr().out
    assert not (out / "ablation.csv").exists()
    code = main(["ablate", str(path)])
    assert code == 0
    data = json.loads((out / "ablation.json").read_text())
    rows = {r["variant"]: r for r in data["rows"]}
    # base = fields=title+genres (dropped as duplicate), profile_size=20 likewise
    assert list(rows) == ["base", "fields=title+year", "profile_size=3"]
    base = rows["base"]
    assert base["judged"] == base["pairs"] > 0
    assert abs(base["agree"] + base["tie"] + base["disagree"] - 1) < 1e-9
    # one experiment: the pairwise shares carry their user-bootstrap CI; there is no interval across experiments
    assert base["agree_boot_lo"] <= base["agree"] <= base["agree_boot_hi"]
    assert base["experiments"] == 1 and base["agree_ci_lo"] is None and base["per_experiment"][0]["pairs_seed"] == 0
    assert data["experiment"]["tau_reference"] == "complete"
    # users' liked genres decide their 5-star ratings: a genre-aware judge agrees more than a
    # year-only one, whose release years are unrelated to the ratings here
    assert base["agree"] > rows["fields=title+year"]["agree"]
    assert "tau Compat(p=0.95)" in base and "wtau nDCG@100" in base
    md = (out / "ablation.md").read_text()
    assert "fields=title+year" in md and "κ" in md
    # identical prompts are judged once: a second run is answered from the cache (offline judge: no calls)
    again = run_experiment(load_experiment(path))
    assert [r.agree.mean for r in again] == [rows[v]["agree"] for v in rows]


def test_llm_ablation_judges_identical_prompts_once(tmp_path, fake_openai, monkeypatch):
    """Variants that share prompts (repeat 0 of `repeats = 2` equals the base) reuse the cache."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-ablate")
    fake_openai.labeler = lambda candidate: len(candidate) % 5
    coll = _movielens(tmp_path, users=6, items=30)
    path = _write(tmp_path, f'''
collection = "{coll}"
reference = "historical:rating"
out = "{tmp_path / 'out'}"
per_user = 4
bootstrap = 20
split = "user_ratio"

[judge]
judge = "openai"
model = "fake"
base_url = "{fake_openai.url}"
profile_size = 5

[grid]
repeats = [2]
''')
    dry = run_experiment(load_experiment(path), dry_run=True)
    assert len(fake_openai.chat_log()) == 0  # the dry run calls nothing
    pairs = dry[0].pairs
    assert [r.calls for r in dry] == [pairs, 2 * pairs]  # planned calls per variant
    rows = run_experiment(load_experiment(path))
    # base asks each pair once; repeats=2 finds repeat 0 in the cache and asks only repeat 1
    assert len(fake_openai.chat_log()) == 2 * pairs
    assert rows[1].cache_hits == pairs
    assert all(r.judged == r.pairs for r in rows)
