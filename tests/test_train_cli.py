"""``recjudge train`` checks its output folder and every number before it loads or trains anything."""

from __future__ import annotations

import pytest

from conftest import exit_code
from recjudge.cli import main


@pytest.fixture
def collection(tmp_path):
    """A RecBole atomic folder: two users, training before t = 6, one test row each after."""
    folder = tmp_path / "c"
    folder.mkdir()
    rows = [("u1", "a", 1), ("u1", "b", 2), ("u2", "a", 3), ("u2", "c", 4), ("u1", "c", 6), ("u2", "b", 7)]
    (folder / "tiny.inter").write_text("user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
                                       + "".join(f"{u}\t{i}\t4\t{t}\n" for u, i, t in rows))
    return folder


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if training starts: the checks must come first."""
    import recjudge.systems as systems

    def refuse(*args, **kwargs):
        raise AssertionError("training started before the outputs were checked")

    monkeypatch.setattr(systems, "train_systems", refuse)


def train(*args):
    return main(["train", "--systems", "Pop", "--cut", "6", *args])


def test_out_that_is_a_file_is_refused_before_training(collection, tmp_path, capsys, no_training):
    out = tmp_path / "runs"
    out.write_text("not a folder\n")
    assert train("--collection", str(collection), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert "--out is a file" in err and str(out) in err
    assert out.read_text() == "not a folder\n"


def test_out_below_a_file_is_refused_before_training(collection, tmp_path, capsys, no_training):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert train("--collection", str(collection), "--out", str(blocker / "runs")) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_out_that_is_the_collection_folder_is_refused(collection, capsys, no_training):
    assert train("--collection", str(collection), "--out", str(collection)) == 2
    assert "input folder" in capsys.readouterr().err


def test_a_collection_config_that_is_a_folder_is_an_input_error(collection, tmp_path, capsys, no_training):
    (tmp_path / "cfg.toml").mkdir()
    code = train("--collection", str(collection), "--collection-config", str(tmp_path / "cfg.toml"),
                 "--out", str(tmp_path / "runs"))
    assert code == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "cfg.toml") in err and "folder" in err and "Traceback" not in err


def test_an_unknown_system_fails_before_loading(tmp_path, capsys, monkeypatch):
    import recjudge.data.collections as collections

    monkeypatch.setattr(collections, "load_collection", lambda *a, **k: pytest.fail("loaded the collection"))
    assert main(["train", "--systems", "Pop,NoSuch", "--out", str(tmp_path / "r")]) == 2
    assert "NoSuch" in capsys.readouterr().err


@pytest.mark.parametrize("option,value", [
    ("--k", "0"), ("--k", "-3"), ("--k", "99999999999"),
    ("--tie-seed", "-1"), ("--tie-seed", str(2**63)),
    ("--epochs", "0"), ("--threads", "0"), ("--threads", "100000"),
    ("--quantile", "0"), ("--quantile", "1.5"), ("--quantile", "nan"),
    ("--ratio", "1"), ("--cut", "soon"),
])
def test_numbers_out_of_range_are_usage_errors(collection, tmp_path, capsys, option, value, no_training):
    assert exit_code(["train", "--collection", str(collection), "--out", str(tmp_path / "r"), option, value]) == 2
    assert option in capsys.readouterr().err


def test_a_good_command_still_trains(collection, tmp_path):
    out = tmp_path / "runs"
    assert train("--collection", str(collection), "--out", str(out), "--k", "2", "--tie-seed", "7") == 0
    assert (out / "Pop.run").read_text().count("\n") == 2  # u1 and u2 each have one unseen item


NATIVE_GRID = """name = "native"
description = "popularity and a seeded random order"

[[system]]
name = "Pop"
model = "Pop"
seed = 2020

[[system]]
name = "Random-1"
model = "Random"
seed = 1
"""


def _release(tmp_path, profile_movies):
    """ML-32M-ext after make.sh: 40 ML-32M users rate 30 of 40 movies each (every movie ≥ 20 ratings)."""
    from ml32m_data import release

    folder, _ = release(tmp_path, seed=3, after_make=True, participants=(1, 2, 3, 4),
                        ml_users=tuple(str(u) for u in range(1, 41)), movies=range(1, 41),
                        in_database=range(1, 41), judged_items=10, ml_items=30, profile_movies=profile_movies)
    (tmp_path / "native.toml").write_text(NATIVE_GRID)
    return folder


def test_the_protocol_filter_keeps_every_judged_user_and_says_so(tmp_path, capsys):
    """Participant 1 rated 8 movies: the ≥ 20 filter used to drop them silently, the sidecar said no
    judged user was unranked, and compare scored them 0 for every system."""
    import json

    from recjudge.data.collections.ml32m_ext import ML32M_EXT_USER_OFFSET

    folder = _release(tmp_path, lambda pid: range(1, 9) if pid == 1 else range(pid, pid + 25))
    out = tmp_path / "runs"
    assert main(["train", "--protocol", "penha2025", "--min-rating", "0", "--collection", str(folder), "--grid",
                 str(tmp_path / "native.toml"), "--out", str(out)]) == 0
    thin = str(1 + ML32M_EXT_USER_OFFSET)
    err = capsys.readouterr().err
    assert f"kept 1 judged user(s) with fewer than 20 ratings after the --min-interactions filter" in err
    assert thin in err
    for system in ("Pop", "Random-1"):
        ranked = {line.split()[0] for line in (out / f"{system}.run").read_text().splitlines()}
        assert ranked == {str(p + ML32M_EXT_USER_OFFSET) for p in (1, 2, 3, 4)}
        meta = json.loads((out / f"{system}.json").read_text())
        assert meta["collection_filters"]["min_interactions"]["judged_kept_below_n"] == [thin]
        assert meta["split"]["unranked_judged_users"] == 0 and meta["split"]["ranked_users"] == 4


def test_a_judged_user_the_filter_would_empty_is_an_error_naming_them(tmp_path, capsys):
    from recjudge.data.collections.ml32m_ext import ML32M_EXT_USER_OFFSET

    # participant 2 rated only movies nobody else rated (ids 500+): each has 1 rating, none survives ≥ 20
    folder = _release(tmp_path, lambda pid: range(500, 525) if pid == 2 else range(pid, pid + 25))
    out = tmp_path / "runs"
    assert main(["train", "--protocol", "penha2025", "--min-rating", "0", "--collection", str(folder), "--grid",
                 str(tmp_path / "native.toml"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--min-interactions 20 removes every rating of 1 user(s) the human qrels judge" in err
    assert str(2 + ML32M_EXT_USER_OFFSET) in err and "lower --min-interactions" in err
    assert not list(out.glob("*.run"))
