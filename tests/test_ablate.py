"""Ablation grids: experiment validation, variant expansion, end to end with the offline judge."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from recjudge.cli import main
from recjudge.data.trec import Qrels, Run, write_qrels, write_run
from recjudge.errors import InputError
from recjudge.experiments.ablate import (
    Experiment,
    across_experiments,
    derive_seed,
    load_experiment,
    run_experiment,
    sampled_pairs,
    variants,
)
from recjudge.judging.baselines import _result
from recjudge.judging.registry import JudgeSpec
from recjudge.judging.results import Judgment

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


def _overlap_experiment(tmp_path, users: int, top: str, grid: str):
    """An experiment file: the offline overlap judge on a generated collection and runs of ``users``
    users, K = 6, out = tmp_path/out; ``top`` adds keys, ``grid`` is the [grid] table's body."""
    coll, runs = _movielens(tmp_path, users=users), _runs(tmp_path, users=users)
    return _write(tmp_path, f'''{top}
collection = "{coll}"
reference = "historical:rating"
runs = "{runs}"
out = "{tmp_path / 'out'}"
per_user = 6
split = "user_ratio"

[judge]
judge = "overlap"
fields = "title+genres"
profile_size = 20

[grid]
{grid}
''')


def test_variants_one_at_a_time_and_product():
    exp = Experiment(name="x", collection="c", reference="historical", out=None, judge={"judge": "overlap"},
                     grid={"fields": ("title", "title+genres"), "per_user": (5, 10)}, per_user=10)
    names = [v.name for v in variants(exp)]
    # base, fields=title, per_user=5: per_user=10 equals the base, and so does fields=title+genres, the
    # judge's default field set (a value equal to the default is the variant that leaves it out): dropped
    assert names == ["base", "fields=title", "per_user=5"]
    prod = variants(Experiment(name="x", collection="c", reference="historical", out=None, judge={"judge": "overlap"},
                               grid={"fields": ("title", "all"), "profile_size": (5, 10, 20)}, mode="product"))
    assert len(prod) == 2 * 3
    assert {v.settings["profile_size"] for v in prod} == {5, 10, 20}


@pytest.mark.parametrize("text,match", [
    ('collection = "ml"\nreference = "historical"\ncolour = 1\n', "unknown key"),
    ('reference = "historical"\n', "key 'collection' is required"),
    ('collection = "ml"\nreference = "historical"\n[grid]\nbogus = [1]\n', "unknown key.*grid.bogus"),
    ('collection = "ml"\nreference = "historical"\n[grid]\nfields = "title"\n', "non-empty list"),
    ('collection = "ml"\nreference = "historical"\n[judge]\nprofile_size = 0\n', "profile_size"),
    ('collection = "ml"\nreference = "historical"\nmode = "random"\n', "mode"),
    ('collection = "ml"\nreference = = 3\n', "TOML"),
    ('collection = "ml"\nreference = "historical"\n[grid]\nprofile_size = [10, 0]\n',
     r"grid.profile_size' must be at least 1, not 0 \(item 1\)"),
    ('collection = "ml"\nreference = "historical"\nper_user = "abc"\n', "per_user"),
    ('collection = "ml"\nreference = "historical"\nmeasures = ["Bogus@3"]\n', "measures"),
    ('collection = "ml"\nreference = "historical"\ntie_policy = "alphabetical"\n', "tie_policy"),
])
def test_bad_experiment_files_name_the_problem(tmp_path, text, match):
    with pytest.raises(InputError, match=match) as err:
        load_experiment(_write(tmp_path, text))
    assert "exp.toml" in str(err.value)


def test_ablation_end_to_end_with_overlap_judge(tmp_path, capsys):
    out = tmp_path / "out"
    path = _overlap_experiment(tmp_path, 25, 'name = "fields"\nbootstrap = 100',
                               'fields = ["title+year", "title+genres"]\nprofile_size = [3, 20]')
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


@pytest.mark.parametrize("users", [8, 40])
def test_one_experiment_flags_share_intervals_of_few_users(tmp_path, capsys, users):
    # below 25 users the shares' intervals covered less than 95% in simulation: each row's cells
    # carry the flag and the note follows the table, in the terminal and in ablation.md
    out = tmp_path / "out"
    path = _overlap_experiment(tmp_path, users, "", "profile_size = [3]")
    assert main(["ablate", str(path)]) == 0
    printed = capsys.readouterr().out
    data = json.loads((out / "ablation.json").read_text())
    notes = [row["per_experiment"][0]["ci_note"] for row in data["rows"]]
    assert [row["boot_ci_note"] for row in data["rows"]] == notes and len(notes) == 2
    md = (out / "ablation.md").read_text()
    table = [line for line in md.split("Trivial judges on each")[0].splitlines() if line.startswith("|")]
    if users < 25:
        assert all("coverage" in n or "covered" in n for n in notes), notes
        # agree, tie, disagree flagged in both rows (Markdown escapes the flag)
        assert all(len(re.findall(r"\]\\?\*", line)) == 3 for line in table[2:]), table
        # one short line, the full note in ablation.json only
        summaries = {row["per_experiment"][0]["ci_summary"] for row in data["rows"]}
        from recjudge.evaluation.intervals import SHARE_COVERAGE

        pooled, lowest = SHARE_COVERAGE[5]  # 5–9 users with pairs: the band of the fewest simulated
        assert summaries == {f"may under-cover: {pooled:.0%} in simulation, worst {lowest:.0%} — see docs: statistics"}
        line = f"(*) agree / tie / disagree intervals: {data['rows'][0]['per_experiment'][0]['ci_summary']}"
        for text in (printed, md):
            assert line in text.splitlines() and notes[0] not in text
    else:
        assert notes == ["", ""] and not re.search(r"\]\\?\*", md) and "(*)" not in printed + md


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
model = "fake-model"
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


# ------------------------------------------------------------------ K per user, complete reference, N experiments

ORACLE_LABELS: dict[tuple[str, str], int] = {}   # what the oracle answers: the reference label of a pair
ORACLE_CALLS: list[tuple[int, tuple]] = []       # (history seed, pairs) of every run of the oracle


def _run_oracle(ctx):
    """A judge that returns the reference label: its qrels are the reference cut down to the sampled pairs."""
    import time

    ORACLE_CALLS.append((ctx.config.seed, tuple(ctx.pairs)))
    judgments = [Judgment(p.qid, p.docid, ORACLE_LABELS[p], "ok", None, (ORACLE_LABELS[p],), (None,))
                 for p in ctx.pairs]
    return _result(ctx, judgments, time.perf_counter(), {"method": "test oracle"})


@pytest.fixture(autouse=True)
def _oracle_judge(monkeypatch):
    """The test oracle, registered for this module's tests only (the registry is process-wide)."""
    from recjudge.judging import registry

    monkeypatch.setitem(registry._JUDGES, "test-oracle",
                        JudgeSpec("test-oracle", "baseline", "the reference label (tests only)", _run_oracle))


def _human_qrels(tmp_path, users=8, items=60, per_user=12, seed=3):
    """Graded 0-4 labels on 12 random items per user: the complete reference."""
    rng = np.random.default_rng(seed)
    rows = [(str(u), str(i), int(rng.integers(0, 5)))
            for u in range(1, users + 1) for i in rng.choice(items, per_user, replace=False) + 1]
    qrels = Qrels.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "label"]), "human")
    write_qrels(qrels, tmp_path / "human.qrels")
    ORACLE_LABELS.clear()
    ORACLE_LABELS.update({(q, d): lab for q, d, lab in rows})
    return qrels


def test_k_samples_are_nested_per_user_small_example():
    # two users with six labelled items each; K = 2 must be a subset of K = 4 for every user and seed,
    # K = 6 (and any K above it) every item
    rows = [(u, f"i{j}", j % 3) for u in ("a", "b") for j in range(6)]
    ref = Qrels.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "label"]), "ref")
    first_two = set()
    for seed in range(5):
        by_k = {k: sampled_pairs(ref, k, seed) for k in (2, 4, 6, 10)}
        for user in ("a", "b"):
            items = {k: {d for q, d in pairs if q == user} for k, pairs in by_k.items()}
            assert len(items[2]) == 2 and len(items[4]) == 4
            assert items[2] < items[4] < items[6] == items[10] == {f"i{j}" for j in range(6)}
            first_two.add(frozenset(items[2]))
    assert len(first_two) > 1  # the seed decides which items: not always the same two


def test_tau_is_against_the_complete_reference_not_the_sampled_pairs(tmp_path):
    import ir_measures
    from scipy.stats import kendalltau

    coll = _movielens(tmp_path)
    runs = _runs(tmp_path, users=8, systems=6)
    human = _human_qrels(tmp_path)
    path = _write(tmp_path, f'''
collection = "{coll}"
reference = "{tmp_path / 'human.qrels'}"
runs = "{runs}"
out = "{tmp_path / 'out'}"
per_user = 2
seed = 5
measures = ["nDCG@10", "P@10"]
bootstrap = 0
[judge]
judge = "test-oracle"
''')
    [row] = run_experiment(load_experiment(path))
    # the oracle's labels ARE the reference on the K = 2 sampled pairs: against that cut-down
    # reference τ would be 1 by construction; against the complete reference it is scipy's τ-b
    # between the system means under the full and the cut-down qrels (ir-measures scores both)
    sampled = set(sampled_pairs(human, 2, 5))
    cut = human.frame[[(q, d) in sampled for q, d in zip(human.frame.qid, human.frame.docid)]]
    full_q = list(ir_measures.read_trec_qrels(str(tmp_path / "human.qrels")))
    cut_q = [ir_measures.Qrel(q, d, int(lab)) for q, d, lab in zip(cut.qid, cut.docid, cut.label)]
    for name, measure in (("nDCG@10", ir_measures.nDCG @ 10), ("P@10", ir_measures.P @ 10)):
        means = {}
        for label, qrels in (("full", full_q), ("cut", cut_q)):
            means[label] = [ir_measures.calc_aggregate([measure], qrels, list(
                ir_measures.read_trec_run(str(runs / f"s{s}.run"))))[measure] for s in range(6)]
        # ir-measures sums in another order: 0.2125 and 0.21250000000000002 are one tie
        expected = kendalltau(np.round(means["full"], 12), np.round(means["cut"], 12), variant="b").statistic
        assert expected < 0.99  # the data discriminate: the cut-down reference would give 1.0
        assert row.tau[name].mean == pytest.approx(expected, abs=1e-12)
    data = json.loads((tmp_path / "out" / "ablation.json").read_text())
    assert data["experiment"]["tau_reference"] == "complete" and data["experiment"]["nested_samples"] is True
    assert "COMPLETE reference qrels" in (tmp_path / "out" / "ablation.md").read_text()


def test_across_experiments_mean_and_t_interval_by_hand():
    e = across_experiments([0.5, 0.6, 0.7])
    # mean 0.6; s = sqrt(((-0.1)² + 0² + 0.1²) / 2) = 0.1; with 2 degrees of freedom the t quantile
    # has a closed form, t(p) = (2p - 1) / sqrt(2p(1 - p)): t(0.975) = 0.95 / sqrt(0.04875) ≈ 4.3027.
    # On the Fisher-z scale: atanh(0.6) = ½·ln(1.6 / 0.4) = ln 2, and the delta-method SE is
    # s/√3 · 1/(1 − 0.6²) = s/√3 / 0.64; back with tanh(ln 2 ± h) = (4e^{±2h} − 1) / (4e^{±2h} + 1)
    h = 0.95 / 0.04875 ** 0.5 * 0.1 / 3 ** 0.5 / 0.64
    back = [(4 * math.exp(2 * x) - 1) / (4 * math.exp(2 * x) + 1) for x in (-h, h)]
    assert e.mean == pytest.approx(0.6) and e.n == 3
    assert e.ci == pytest.approx(tuple(back), abs=1e-12)
    one = across_experiments([0.4])
    assert one.mean == 0.4 and all(math.isnan(x) for x in one.ci)  # one experiment: no interval
    same = across_experiments([0.25, 0.25, 0.25])
    assert same.ci == (0.25, 0.25)  # identical experiments: ±0.0000, as the paper reports
    gap = across_experiments([0.5, float("nan"), 0.7])  # an undefined value is left out, not taken as 0
    assert gap.n == 2 and gap.mean == pytest.approx(0.6) and len(gap.values) == 3


def test_across_experiments_interval_stays_in_the_metrics_range():
    # three τ like the ablation that printed 0.837 [0.559, 1.115] with a plain t-interval
    taus = [0.72, 0.83, 0.961]
    plain_half = 0.95 / 0.04875 ** 0.5 * float(np.std(taus, ddof=1)) / 3 ** 0.5
    assert float(np.mean(taus)) + plain_half > 1  # the construction this replaces left [−1, 1]
    e = across_experiments(taus)
    assert -1 <= e.ci[0] <= e.mean <= e.ci[1] <= 1
    assert e.ci[1] < 1  # bent away from the bound, not clipped onto it
    # shares in [0, 1]: the same on the half-logit scale
    shares = across_experiments([0.02, 0.15, 0.01], bounds=(0.0, 1.0))
    assert 0 < shares.ci[0] <= shares.mean <= shares.ci[1] < 1
    # a value outside the declared range gets no interval rather than a wrong one
    assert all(math.isnan(x) for x in across_experiments([0.5, 1.2], bounds=(0.0, 1.0)).ci)
    for seed in range(200):  # any three values in range: inside the range, around the mean
        x = np.random.default_rng(seed).uniform(-1, 1, 3) ** 3
        lo, hi = across_experiments(x).ci
        assert -1 <= lo <= x.mean() <= hi <= 1


def test_experiment_seeds_are_derived_not_drawn():
    assert derive_seed(7, 0, "pairs") == 7  # experiment 1 is the single run
    later = [derive_seed(7, i, "pairs") for i in (1, 2)]
    assert later == [derive_seed(7, i, "pairs") for i in (1, 2)] and len(set(later + [7])) == 3
    assert derive_seed(7, 1, "pairs") != derive_seed(7, 1, "history")
    assert all(0 <= s < 2**63 for s in later)


def test_three_experiments_each_sample_items_and_histories_and_average(tmp_path):
    from scipy import stats

    coll = _movielens(tmp_path)
    runs = _runs(tmp_path, users=8, systems=6)
    human = _human_qrels(tmp_path)
    out = tmp_path / "out"
    path = _write(tmp_path, f'''
collection = "{coll}"
reference = "{tmp_path / 'human.qrels'}"
runs = "{runs}"
out = "{out}"
per_user = 3
experiments = 3
seed = 7
measures = ["nDCG@10"]
bootstrap = 0
[judge]
judge = "test-oracle"
seed = 11
''')
    ORACLE_CALLS.clear()
    [row] = run_experiment(load_experiment(path))
    pair_seeds = [7, derive_seed(7, 1, "pairs"), derive_seed(7, 2, "pairs")]
    history_seeds = [11, derive_seed(11, 1, "history"), derive_seed(11, 2, "history")]
    assert [o.pairs_seed for o in row.outcomes] == pair_seeds
    assert [o.history_seed for o in row.outcomes] == history_seeds
    # each experiment judged its own sample of items, with its own history seed
    assert ORACLE_CALLS == [(h, sampled_pairs(human, 3, p)) for h, p in zip(history_seeds, pair_seeds)]
    assert len({pairs for _, pairs in ORACLE_CALLS}) == 3
    taus = [o.tau["nDCG@10"] for o in row.outcomes]
    assert len(set(taus)) > 1
    est = row.tau["nDCG@10"]
    assert est.values == tuple(taus) and est.mean == pytest.approx(np.mean(taus))
    # Student t on the Fisher-z scale, delta-method SE, back through tanh
    m = np.mean(taus)
    z_ci = stats.t.interval(0.95, 2, loc=np.arctanh(m), scale=stats.sem(taus) / (1 - m * m))
    assert est.ci == pytest.approx(tuple(np.tanh(z_ci)), abs=1e-12)
    assert row.pairs == sum(o.pairs for o in row.outcomes) == 3 * 8 * 3
    data = json.loads((out / "ablation.json").read_text())
    assert data["experiment"]["experiments"] == 3 and data["experiment"]["pairs_seeds"] == pair_seeds
    assert "t-interval across experiments" in data["experiment"]["interval"]
    rec = data["rows"][0]
    assert rec["tau nDCG@10_ci_lo"] == pytest.approx(est.ci[0]) and rec["experiments"] == 3
    assert [e["tau"]["nDCG@10"] for e in rec["per_experiment"]] == pytest.approx(taus)
    md = (out / "ablation.md").read_text()
    assert "Mean of 3 independent experiments" in md and "not a user bootstrap" in md and "`repeats`" in md


def test_cli_experiments_and_per_user_replace_the_files_keys(tmp_path, capsys):
    coll = _movielens(tmp_path)
    runs = _runs(tmp_path, users=8, systems=3)
    _human_qrels(tmp_path)
    body = (f'collection = "{coll}"\nreference = "{tmp_path / "human.qrels"}"\nruns = "{runs}"\n'
            f'measures = ["nDCG@10"]\nbootstrap = 0\nexperiments = 1\n[judge]\njudge = "test-oracle"\n')
    unset = tmp_path / "unset.toml"
    unset.write_text(f'out = "{tmp_path / "o1"}"\n' + body)
    assert main(["ablate", str(unset), "--experiments", "2", "--per-user", "4"]) == 0
    head = json.loads((tmp_path / "o1" / "ablation.json").read_text())["experiment"]
    assert (head["experiments"], head["experiments_from"]) == (2, "--experiments")
    assert (head["per_user"], head["per_user_from"]) == (4, "--per-user")
    printed = capsys.readouterr().out
    assert "COMPLETE reference qrels" in printed and "95% t-interval across the 2 experiments" in printed
    fixed = tmp_path / "fixed.toml"
    fixed.write_text(f'out = "{tmp_path / "o2"}"\nper_user = 2\n' + body)
    assert main(["ablate", str(fixed)]) == 0
    head = json.loads((tmp_path / "o2" / "ablation.json").read_text())["experiment"]
    assert (head["per_user"], head["per_user_from"], head["experiments"]) == (2, "file", 1)
    # the command line over the file, as for every other option: the file's K = 2 gives way to 4
    assert main(["ablate", str(fixed), "--per-user", "4"]) == 0
    head = json.loads((tmp_path / "o2" / "ablation.json").read_text())["experiment"]
    assert (head["per_user"], head["per_user_from"], head["experiments"]) == (4, "--per-user", 1)
    assert "K = 4 items per user (from --per-user;" in (tmp_path / "o2" / "ablation.md").read_text()


def test_a_protocols_values_fill_only_what_the_file_leaves_out_and_the_command_line_beats_both(tmp_path):
    coll = _movielens(tmp_path)
    runs = _runs(tmp_path, users=8, systems=3)
    _human_qrels(tmp_path)
    protocol = tmp_path / "study.toml"
    protocol.write_text('name = "study"\ntitle = "a study"\n[ablate]\nexperiments = 2\nper_user = 3\n')
    body = (f'collection = "{coll}"\nreference = "{tmp_path / "human.qrels"}"\nruns = "{runs}"\n'
            f'measures = ["nDCG@10"]\nbootstrap = 0\nbaselines = 0\n[judge]\njudge = "test-oracle"\n')

    def head(name: str, file_keys: str, *flags: str) -> dict:
        path = tmp_path / f"{name}.toml"
        path.write_text(f'out = "{tmp_path / name}"\n{file_keys}' + body)
        assert main(["ablate", "--protocol", str(protocol), str(path), *flags]) == 0
        data = json.loads((tmp_path / name / "ablation.json").read_text())
        return {k: data["experiment"][k] for k in ("per_user", "per_user_from", "experiments", "experiments_from")}

    # a file without the keys: the protocol's values, recorded as the protocol's (not as --per-user)
    assert head("unset", "") == {"per_user": 3, "per_user_from": "protocol study", "experiments": 2,
                                 "experiments_from": "protocol study"}
    # the file's own keys beat the protocol's defaults ...
    assert head("own", "per_user = 5\nexperiments = 1\n") == {"per_user": 5, "per_user_from": "file",
                                                               "experiments": 1, "experiments_from": "file"}
    # ... and the command line beats the file, even with the protocol's own value
    assert head("flags", "per_user = 5\nexperiments = 1\n", "--per-user", "3", "--experiments", "2") == {
        "per_user": 3, "per_user_from": "--per-user", "experiments": 2, "experiments_from": "--experiments"}
