"""System registry, run export (masking, ties, cut), native Pop/Random, cache and CLI — no training."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from recjudge.cli import main
from recjudge.data.collections import Collection
from recjudge.data.splits import global_time_split, user_ratio_split
from recjudge.data.trec import Run, read_run
from recjudge.evaluation.ties.policy import resolve_ties
from recjudge.errors import ConfigError, MissingExtraError
from recjudge.systems import (
    FAMILIES,
    GRIDS,
    SYSTEMS,
    SystemConfig,
    _compat,
    baselines,
    export_run,
    register_grid,
    register_system,
    resolve_systems,
    train_systems,
)


class Scores:
    """A scorer with fixed scores per user."""

    def __init__(self, items, table):
        self.items = np.array(items, dtype=object)
        self.table = table

    def score(self, users):
        return np.array([self.table[u] for u in users], dtype=np.float64)


ITEMS = ["a", "b", "c", "d", "e"]
TABLE = {"u1": [5.0, 3.0, 3.0, 3.0, 1.0], "u2": [1.0, 2.0, 3.0, 4.0, 5.0]}
HISTORY = pd.DataFrame({"user": ["u1"], "item": ["a"], "rating": [4.0], "timestamp": [1]})


def ranking(run: Run, user: str) -> list[str]:
    f = run.frame[run.frame.qid == user].sort_values("rank")
    return f.docid.tolist()


def test_registry_sizes_and_grids():
    assert len(FAMILIES) == 18
    assert len(GRIDS["all18"]) == 18 and {SYSTEMS[n].model for n in GRIDS["all18"]} == set(FAMILIES)
    assert len(GRIDS["paper52"]) == 52
    assert {SYSTEMS[n].model for n in GRIDS["paper52"]} == set(FAMILIES)
    assert set(GRIDS["quick"]) <= set(GRIDS["paper52"])
    assert len({SYSTEMS[n].key() for n in GRIDS["paper52"]}) == 52  # no two configurations identical


def test_registry_refuses_duplicates_and_bad_configs():
    with pytest.raises(ConfigError, match="already registered"):
        register_system(SystemConfig.make("BPR", "BPR"))
    with pytest.raises(ConfigError, match="already registered"):
        register_grid("quick", ["Pop"])
    with pytest.raises(ConfigError, match="unknown model"):
        SystemConfig.make("X", "LightGCN")
    with pytest.raises(ConfigError, match="file name"):
        SystemConfig.make("a/b", "Pop")
    with pytest.raises(ConfigError, match="unknown system"):
        resolve_systems(systems=["Nope"])
    with pytest.raises(ConfigError, match="unknown grid"):
        resolve_systems("huge")
    assert [c.name for c in resolve_systems(systems=["Pop", SystemConfig.make("Mine", "Random", seed=9)])] == [
        "Pop", "Mine"]


def test_config_key_ignores_description_and_orders_params():
    a = SystemConfig.make("A", "BPR", embedding_size=8, epochs=2, description="x")
    b = SystemConfig("B", "BPR", (("epochs", 2), ("embedding_size", 8)))
    assert a.key() == SystemConfig.make("A", "BPR", epochs=2, embedding_size=8).key()
    assert a.params == b.params


def test_export_masks_history_and_resolves_boundary_ties():
    model = Scores(ITEMS, TABLE)
    run, share = export_run(model, ["u1", "u2"], HISTORY, k=2, name="s", tie_policy="hash", tie_seed=0)
    # u1: 'a' (score 5) is history; b, c, d tie at 3 across the cut at k=2 → ties; u2 has none: 1 of 2 users
    assert share == 1 / 2
    assert "a" not in ranking(run, "u1") and len(ranking(run, "u1")) == 2
    assert ranking(run, "u2") == ["e", "d"]
    # reference: the tie policy applied to u1's whole unmasked list, then cut to 2
    full = Run.from_frame(pd.DataFrame({"qid": "u1", "docid": ["b", "c", "d", "e"], "score": [3.0, 3.0, 3.0, 1.0]}))
    assert ranking(run, "u1") == ranking(resolve_ties(full, "hash", 0, depth=2), "u1")
    assert run.frame.score.tolist() == [2.0, 1.0, 2.0, 1.0] and run.tie_policy == "hash"


@pytest.mark.parametrize("policy,expected", [("trec_eval", ["d", "c"]), ("docid", ["b", "c"])])
def test_export_tie_policies(policy, expected):
    run, _ = export_run(Scores(ITEMS, TABLE), ["u1"], HISTORY, k=2, name="s", tie_policy=policy)
    assert ranking(run, "u1") == expected  # trec_eval: docid descending; docid: ascending


def test_export_short_catalogue_and_batches():
    # k larger than the unseen catalogue: every unseen item, nothing masked leaks in
    run, _ = export_run(Scores(ITEMS, TABLE), ["u1", "u2"], HISTORY, k=10, name="s", batch_users=1)
    assert sorted(ranking(run, "u1")) == ["b", "c", "d", "e"] and len(ranking(run, "u2")) == 5


def tiny_collection() -> Collection:
    rows = [("u1", "a", 5, 1), ("u1", "b", 4, 2), ("u2", "a", 3, 3), ("u2", "c", 4, 4), ("u3", "a", 1, 5),
            ("u1", "c", 5, 6), ("u2", "b", 2, 7), ("u3", "d", 4, 8)]
    inter = pd.DataFrame(rows, columns=["user", "item", "rating", "timestamp"]).astype(
        {"rating": "float64", "timestamp": "int64"})
    return Collection("tiny", inter, pd.DataFrame(index=pd.Index(list("abcd"), name="item")))


def _atomic_folder(folder):
    """``tiny_collection()`` written as RecBole atomic files in ``folder``."""
    folder.mkdir()
    with open(folder / "tiny.inter", "w") as fh:
        fh.write("user_id:token\titem_id:token\trating:float\ttimestamp:float\n")
        for u, i, r, t in tiny_collection().interactions.itertuples(index=False):
            fh.write(f"{u}\t{i}\t{r}\t{t}\n")
    return folder


def test_native_pop_counts_true_interactions():
    sp = user_ratio_split(tiny_collection(), ratio=0.5)
    # train (first ceil(n/2) per user): u1 a,b; u2 a,c; u3 a → a:3, b:1, c:1, d:0
    model = baselines.train(SYSTEMS["Pop"], sp)
    assert list(model.items) == ["a", "b", "c", "d"]
    assert model.score(["u1"]).tolist() == [[3.0, 1.0, 1.0, 0.0]]


def test_native_random_is_per_user_and_batch_independent():
    sp = user_ratio_split(tiny_collection(), ratio=0.5)
    model = baselines.train(SYSTEMS["Random"], sp)
    both = model.score(["u1", "u2"])
    assert both[0].tolist() == model.score(["u1"])[0].tolist()
    assert both[1].tolist() == model.score(["u2"])[0].tolist()
    assert sorted(both[0]) == [1.0, 2.0, 3.0, 4.0]  # a permutation: no ties
    other = baselines.train(SYSTEMS["Random-s1"], sp)
    users = [f"user{i}" for i in range(20)]
    assert not np.array_equal(model.score(users), other.score(users))  # the seed matters


def test_train_systems_writes_runs_and_caches(tmp_path):
    sp = global_time_split(tiny_collection(), timestamp=6)
    messages = []
    res = train_systems(sp, systems=["Pop", "Random"], out_dir=tmp_path, k=3, progress=messages.append)
    assert [r.status for r in res] == ["trained", "trained"]
    pop = read_run(tmp_path / "Pop.run")
    # test users with history: u1 (c at 6), u2 (b at 7), u3 (d at 8). Train counts: a:3, b:1, c:1.
    # u1 saw a, b → candidates c:1, d:0 → ranking [c, d]
    assert ranking(pop, "u1") == ["c", "d"]
    assert ranking(pop, "u3") == ["b", "c", "d"] or ranking(pop, "u3") == ["c", "b", "d"]
    assert any("[1/2] Pop" in m for m in messages)
    again = train_systems(sp, systems=["Pop", "Random"], out_dir=tmp_path, k=3, progress=messages.append)
    assert [r.status for r in again] == ["cached", "cached"]
    assert train_systems(sp, systems=["Pop"], out_dir=tmp_path, k=2)[0].status == "trained"  # k is in the key
    assert train_systems(sp, systems=["Pop"], out_dir=tmp_path, k=2, force=True)[0].status == "trained"
    assert not (tmp_path / ".work").exists()


def test_a_failing_system_does_not_stop_the_rest(tmp_path, monkeypatch):
    real = baselines.train

    def flaky(config, split):
        if config.name == "Random":
            raise RuntimeError("boom")
        return real(config, split)

    monkeypatch.setattr(baselines, "train", flaky)
    sp = global_time_split(tiny_collection(), timestamp=6)
    res = train_systems(sp, systems=["Random", "Pop"], out_dir=tmp_path, progress=lambda m: None)
    assert [(r.system, r.status) for r in res] == [("Random", "failed"), ("Pop", "trained")]
    assert "boom" in res[0].error and not (tmp_path / "Random.run").exists()


def test_missing_train_extra_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MissingExtraError, match=r"recjudge\[train\]"):
        _compat.import_recbole()


def test_numpy_alias_shim_restores_missing_names(monkeypatch):
    import numpy as np

    for name in ("float_", "unicode_"):
        if hasattr(np, name):
            monkeypatch.delattr(np, name)
    restored = _compat.numpy_alias_shim()
    assert {"float_", "unicode_"} <= set(restored)
    assert np.float_ is np.float64 and np.unicode_ is np.str_


def test_clean_argv_hides_our_command_line(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["recjudge", "train", "--epochs=3"])
    with _compat.clean_argv():
        assert sys.argv == ["recjudge"]
    assert sys.argv[1:] == ["train", "--epochs=3"]


def test_cli_train_native_systems(tmp_path, capsys):
    folder = _atomic_folder(tmp_path / "c")
    out = tmp_path / "runs"
    code = main(["train", "--collection", str(folder), "--systems", "Pop,Random", "--out", str(out), "--k", "2",
                 "--cut", "6"])
    assert code == 0
    assert (out / "Pop.run").exists() and (out / "Random.json").exists()
    assert "Pop" in capsys.readouterr().out
    assert main(["train", "--collection", str(folder), "--systems", "Pop", "--split", "user_ratio",
                 "--cut", "6", "--out", str(out)]) == 2
    assert "--cut does not apply" in capsys.readouterr().err


def test_cache_key_covers_device_for_neural_systems_only():
    from recjudge.systems.train import cache_key

    bpr, pop = SYSTEMS["BPR"], SYSTEMS["Pop"]
    assert cache_key("f", bpr, 100, "hash", 0, None, 1, "cpu") != cache_key("f", bpr, 100, "hash", 0, None, 1, "cuda")
    assert cache_key("f", pop, 100, "hash", 0, None, 1, "cpu") == cache_key("f", pop, 100, "hash", 0, None, 1, "cuda")


def test_a_failed_retrain_leaves_no_stale_run(tmp_path, monkeypatch):
    inter = pd.DataFrame({"user": ["u1", "u1", "u2", "u2", "u1", "u2"], "item": ["a", "b", "a", "c", "c", "b"],
                          "rating": 4.0, "timestamp": [1, 2, 3, 4, 10, 11]})
    coll = Collection("t", inter, pd.DataFrame(index=pd.Index(["a", "b", "c"], name="item")))
    split = global_time_split(coll, timestamp=10)
    first = train_systems(split, systems=["Pop"], out_dir=tmp_path, k=3)
    assert first[0].status == "trained" and (tmp_path / "Pop.run").exists()

    def boom(config, split):
        raise RuntimeError("diverged")

    monkeypatch.setattr(baselines, "train", boom)
    again = train_systems(split, systems=["Pop"], out_dir=tmp_path, k=2)  # another key: retrain
    assert again[0].status == "failed" and "diverged" in again[0].error
    assert not (tmp_path / "Pop.run").exists() and not (tmp_path / "Pop.json").exists()


def test_ract_stages_take_the_finetune_learning_rate_only_in_finetune():
    from recjudge.systems._recbole import _stages

    cfg = SystemConfig.make("RaCT-t", "RaCT", learning_rate=0.002, actor_epochs=50, critic_epochs=10, epochs=10,
                            finetune_learning_rate=1e-4)
    (actor, _), (critic, _), (finetune, pretrain) = _stages(cfg, None)
    assert (actor["pretrain_epochs"], critic["pretrain_epochs"]) == (50, 10)
    # the pretraining stages keep the configuration's 0.002 (no override); the finetune gets 1e-4
    assert "learning_rate" not in actor and "learning_rate" not in critic
    assert finetune == {"train_stage": "finetune", "learning_rate": 1e-4} and pretrain is False
    assert _stages(SystemConfig.make("RaCT-u", "RaCT"), None)[2][0] == {"train_stage": "finetune"}



def test_grid_files_are_data(tmp_path):
    from recjudge.errors import InputError
    from recjudge.systems import resolve_systems
    from recjudge.systems.registry import grid_names, load_grid_file

    shipped = resolve_systems("penha2025-defaults")
    assert "penha2025-defaults" in grid_names()
    assert len(shipped) == 18 and {c.group for c in shipped} == {"non-pooled"}
    by_model = {c.model: c for c in shipped}
    assert by_model["BPR"].param_dict == {"epochs": 10} and by_model["EASE"].param_dict == {}
    assert by_model["RaCT"].param_dict == {"epochs": 10, "actor_epochs": 10, "critic_epochs": 10}
    # the group names the system's role in the pool, not the model: the cache key ignores it
    import dataclasses

    assert dataclasses.replace(by_model["BPR"], group="pooled").key() == by_model["BPR"].key()

    mine = tmp_path / "appendix.toml"
    mine.write_text('[[system]]\nname = "BPR-a"\nmodel = "BPR"\nseed = 7\nparams = { embedding_size = 32, epochs = 10 }\n'
                    'group = "pooled"\n\n[[system]]\nname = "EASE-a"\nmodel = "EASE"\n')
    a, b = resolve_systems(str(mine))
    assert (a.name, a.seed, a.param_dict, a.group) == ("BPR-a", 7, {"embedding_size": 32, "epochs": 10}, "pooled")
    assert (b.seed, b.group) == (2020, "")

    for body, why in [('[[system]]\nname = "x"\n', "name and model are required"),
                      ('[[system]]\nname = "x"\nmodel = "Nope"\n', "unknown model"),
                      ('[[system]]\nname = "x"\nmodel = "BPR"\nseed = true\n', "seed must be"),
                      ('[[system]]\nname = "x"\nmodel = "BPR"\nparams = 3\n', "params must be a table"),
                      ('[[system]]\nname = "x"\nmodel = "BPR"\nepochs = 3\n', "unknown keys"),
                      ('[[system]]\nname = "x"\nmodel = "BPR"\n[[system]]\nname = "x"\nmodel = "EASE"\n', "used twice"),
                      ('grid = 3\n', "unknown top-level keys"), ('name = "empty"\n', r"no \[\[system\]\] tables")]:
        bad = tmp_path / "bad.toml"
        bad.write_text(body)
        with pytest.raises(InputError, match=why):
            load_grid_file(bad)


def test_cli_train_from_a_grid_file(tmp_path):
    import json

    folder = _atomic_folder(tmp_path / "c")
    grid = tmp_path / "appendix.toml"
    grid.write_text('[[system]]\nname = "Pop-pooled"\nmodel = "Pop"\ngroup = "pooled"\n\n'
                    '[[system]]\nname = "Random-7"\nmodel = "Random"\nseed = 7\ngroup = "non-pooled"\n')
    out = tmp_path / "runs"
    assert main(["train", "--collection", str(folder), "--grid", str(grid), "--out", str(out), "--k", "2",
                 "--cut", "6"]) == 0
    assert sorted(p.name for p in out.glob("*.run")) == ["Pop-pooled.run", "Random-7.run"]
    side = json.loads((out / "Random-7.json").read_text())
    assert (side["seed"], side["group"]) == (7, "non-pooled")


@pytest.mark.parametrize("mapping, labels", [("rating", ["5", "2", "4"]), ("half_stars", ["10", "4", "8"]),
                                             ("threshold:4", ["1", "0", "1"])])
def test_cli_train_writes_historical_qrels_of_its_own_split(tmp_path, mapping, labels):
    folder = _atomic_folder(tmp_path / "c")
    hist = tmp_path / "hist.qrels"
    assert main(["train", "--collection", str(folder), "--systems", "Pop", "--out", str(tmp_path / "runs"),
                 "--k", "2", "--cut", "6", "--historical-qrels", str(hist), "--historical-mapping", mapping]) == 0
    # cut 6: held out are u1 c (5 stars, t=6), u2 b (2 stars, t=7), u3 d (4 stars, t=8)
    assert [line.split() for line in hist.read_text().splitlines()] == [
        ["u1", "0", "c", labels[0]], ["u2", "0", "b", labels[1]], ["u3", "0", "d", labels[2]]]


def test_cli_train_refuses_a_bad_mapping_before_training(tmp_path, capsys):
    folder = _atomic_folder(tmp_path / "c")
    assert main(["train", "--collection", str(folder), "--systems", "Pop", "--out", str(tmp_path / "runs"),
                 "--cut", "6", "--historical-qrels", str(tmp_path / "h.qrels"), "--historical-mapping", "stars"]) == 2
    assert "unknown rating mapping 'stars'" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "h.qrels").exists()


def test_min_interactions_is_iterated_to_a_fixed_point():
    # n = 2. Users u1 ab, u2 ab, u3 ae, u5 db, u4 f; items a 3, b 3, e 1, d 1, f 1.
    # Round 1 drops u3-e, u5-d, u4-f; then u3 (a) and u5 (b) hold one rating each, so round 2 drops
    # them; round 3 finds u1, u2, a, b all at 2. One pass alone would have kept u3-a and u5-b.
    rows = [("u1", "a"), ("u1", "b"), ("u2", "a"), ("u2", "b"), ("u3", "a"), ("u3", "e"), ("u5", "d"),
            ("u5", "b"), ("u4", "f")]
    inter = pd.DataFrame([(u, i, 4.0, t) for t, (u, i) in enumerate(rows)],
                         columns=["user", "item", "rating", "timestamp"])
    c = Collection("t", inter, pd.DataFrame(index=pd.Index(sorted(set(inter.item)), name="item")))
    out = c.min_interactions(2)
    assert sorted(map(tuple, out.interactions[["user", "item"]].to_numpy())) == [
        ("u1", "a"), ("u1", "b"), ("u2", "a"), ("u2", "b")]
    assert out.info["min_interactions"] == {"n": 2, "iterated": True, "rounds": 3, "dropped_interactions": 5}
    assert sorted(out.items.index) == ["a", "b"]


def test_sample_users_keeps_every_judged_user():
    from recjudge.data.trec import read_qrels

    inter = pd.DataFrame([(f"u{i}", "a", 4.0, i) for i in range(50)], columns=["user", "item", "rating", "timestamp"])
    c = Collection("t", inter, pd.DataFrame(index=pd.Index(["a"], name="item")),
                   qrels=read_qrels("u7 0 a 1\nu42 0 a 0\n"))
    out = c.sample_users(5, seed=3)
    users = set(out.interactions.user)
    assert {"u7", "u42"} <= users and len(users) == 5 + 2
    assert out.info["sample_users"] == {"n": 5, "seed": 3, "kept_judged": 2}
    assert set(out.qrels.frame.qid) == {"u7", "u42"}


def test_cli_train_records_the_training_sample_in_the_sidecar(tmp_path):
    import json

    folder = tmp_path / "c"
    folder.mkdir()
    with open(folder / "tiny.inter", "w") as fh:
        fh.write("user_id:token\titem_id:token\trating:float\ttimestamp:float\n")
        for u in range(20):  # each user rates 5 of 12 items
            for k in range(5):
                fh.write(f"u{u}\ti{(u + 2 * k) % 12}\t4\t{100 * u + k}\n")
    out = tmp_path / "runs"
    assert main(["train", "--collection", str(folder), "--systems", "Pop", "--out", str(out), "--k", "2",
                 "--split", "user_ratio", "--sample-users", "8", "--sample-seed", "1", "--min-interactions", "3"]) == 0
    side = json.loads((out / "Pop.json").read_text())
    assert side["collection_filters"]["sample_users"] == {"n": 8, "seed": 1, "kept_judged": 0}
    assert side["collection_filters"]["min_interactions"]["n"] == 3
    assert side["users"] <= 8
    assert side["collection_filters"]["min_interactions"]["iterated"] is True
