"""Ids that pandas would read as missing (NA, null, None, nan) stay ids, end to end; empty ids are errors.

Also the pandas-3 class of defects (its "str" dtype turns None into NaN) and file-system errors
in the loaders.
"""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from recjudge.data.collections import load_collection, read_collection_config
from recjudge.data.splits import global_time_split
from recjudge.data.trec import read_run
from recjudge.errors import ConfigError, InputError
from recjudge.systems import train_systems

MISSING_LOOKING = ["NA", "null", "None", "nan"]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


@pytest.fixture
def na_movielens(tmp_path):
    """Users NA, null, None, nan and items NA, null, nan, 7: pandas' default reading drops all of them."""
    d = tmp_path / "na-ids"
    write(d / "ratings.csv", """
        userId,movieId,rating,timestamp
        NA,null,4.0,100
        NA,7,3.0,200
        null,NA,5.0,110
        null,7,2.0,210
        None,nan,4.5,120
        None,null,1.0,300
        nan,7,4.0,130
        nan,NA,3.5,310
        """)
    write(d / "movies.csv", """
        movieId,title,genres
        NA,Not Applicable (1999),Drama
        null,Null Island (2001),Comedy
        nan,Not a Number (2003),Horror
        7,Seven (1995),Thriller
        """)
    write(d / "links.csv", "movieId,imdbId,tmdbId\nNA,0000001,\n7,0114369,807\n")
    return d


def test_missing_looking_ids_are_read_verbatim(na_movielens):
    c = load_collection(na_movielens)
    assert sorted(c.users) == sorted(MISSING_LOOKING)
    assert set(c.interactions.item) == {"NA", "null", "nan", "7"}
    assert len(c.interactions) == 8 and c.interactions.user.notna().all() and c.interactions.item.notna().all()
    assert c.items.loc["NA", "title"] == "Not Applicable" and c.items.loc["nan", "year"] == 2003
    # pandas 3 infers its "str" dtype for a list of str/None and turns None into NaN: must stay None
    assert c.items.loc["NA", "tmdb_id"] is None and c.items.loc["null", "imdb_id"] is None
    assert c.items.loc["7", "tmdb_id"] == "807"


def test_missing_looking_ids_survive_training_and_the_run_file(na_movielens, tmp_path):
    split = global_time_split(load_collection(na_movielens), timestamp=200)
    # train: NA→null, null→NA, None→nan, nan→7; test: NA→7, null→7, None→null, nan→NA (t >= 200)
    res = train_systems(split, systems=["Pop"], out_dir=tmp_path, k=10, progress=lambda m: None)[0]
    assert res.status == "trained", res.error
    run = read_run(res.run_path)
    assert set(run.frame.qid) == set(MISSING_LOOKING)
    # Pop over the training items null, NA, nan, 7 (one count each) minus each user's own item
    got = {q: sorted(run.frame[run.frame.qid == q].docid) for q in MISSING_LOOKING}
    assert got == {"NA": ["7", "NA", "nan"], "null": ["7", "nan", "null"], "None": ["7", "NA", "null"],
                   "nan": ["NA", "nan", "null"]}


@pytest.mark.parametrize("row,where", [
    ("u3,,4.0,400", "movie id (movieId) is empty"),
    (",9,4.0,400", "user id (userId) is empty"),
    ("u3,9 9,4.0,400", "holds whitespace"),
])
def test_an_empty_or_spaced_id_names_file_and_line(tmp_path, row, where):
    d = tmp_path / "bad"
    write(d / "ratings.csv", f"userId,movieId,rating,timestamp\nu1,9,4.0,100\nu2,9,3.0,200\n{row}\n")
    write(d / "movies.csv", "movieId,title,genres\n9,Nine (2009),Drama\n")
    with pytest.raises(InputError) as err:
        load_collection(d)
    assert err.value.line == 4 and err.value.source.endswith("ratings.csv")
    assert where in str(err.value)


def test_an_empty_movie_id_in_movies_csv_names_the_line(tmp_path):
    d = tmp_path / "bad"
    write(d / "ratings.csv", "userId,movieId,rating,timestamp\nu1,9,4.0,100\n")
    write(d / "movies.csv", "movieId,title,genres\n9,Nine (2009),Drama\n,Nobody (2000),Drama\n")
    with pytest.raises(InputError) as err:
        load_collection(d)
    assert err.value.line == 3 and err.value.source.endswith("movies.csv") and "is empty" in str(err.value)


def test_recbole_atomic_keeps_missing_looking_ids(tmp_path):
    write(tmp_path / "a.inter", "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
                                "None\tNA\t4\t1\nnull\tnan\t3\t2\n")
    c = load_collection(tmp_path / "a.inter")
    assert c.interactions[["user", "item"]].values.tolist() == [["None", "NA"], ["null", "nan"]]
    write(tmp_path / "b" / "b.inter", "user_id:token\titem_id:token\ttimestamp:float\nu\tx\t1\n\ty\t2\n")
    with pytest.raises(InputError) as err:
        load_collection(tmp_path / "b")
    assert err.value.line == 3 and "user id (user_id) is empty" in str(err.value)


def test_amazon_null_id_names_the_line_and_numbers_become_strings(tmp_path):
    reviews = tmp_path / "Toys.jsonl"
    rows = [{"user_id": "NA", "parent_asin": "null", "rating": 5, "timestamp": 1_700_000_000_000},
            {"user_id": 17, "parent_asin": "B1", "rating": 4, "timestamp": 1_700_000_000_001}]
    reviews.write_text("".join(json.dumps(r) + "\n" for r in rows))
    c = load_collection(reviews)
    assert sorted(c.interactions.user) == ["17", "NA"] and "null" in set(c.interactions.item)
    rows.append({"user_id": None, "parent_asin": "B1", "rating": 4, "timestamp": 1})
    reviews.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError) as err:
        load_collection(reviews)
    assert err.value.line == 3 and "user id (user_id) is empty" in str(err.value)
    rows[2] = {"user_id": "u", "parent_asin": "B1", "rating": 4, "timestamp": 1.5}
    reviews.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match="whole number") as err:
        load_collection(reviews)
    assert err.value.line == 3


def test_ml32m_ext_profiles_keep_missing_looking_movie_ids(tmp_path):
    d = tmp_path / "ext"
    write(d / "p2-movielens-profiles.csv", "participant_id,movie_id,rating,timestamp\n1,NA,4,10\n1,None,3,20\n")
    write(d / "database-movies.csv", "movie_id,title\nNA,Not Applicable\nNone,Nobody\n")
    c = load_collection(d)
    assert sorted(c.interactions.item) == ["NA", "None"] and c.users == [str(1 + 200948)]
    assert c.items.loc["None", "title"] == "Nobody"
    write(d / "p2-movielens-profiles.csv", "participant_id,movie_id,rating,timestamp\n1,NA,4,10\n1,,3,20\n")
    with pytest.raises(InputError) as err:
        load_collection(d)
    assert err.value.line == 3 and "p2-movielens-profiles.csv" in err.value.source


# ------------------------------------------------------------------------------ file-system errors

def test_a_file_in_place_of_ratings_csv_folder_entry_is_an_input_error(tmp_path):
    d = tmp_path / "ml"
    (d / "ratings.csv").mkdir(parents=True)  # a folder where the file should be
    write(d / "movies.csv", "movieId,title,genres\n")
    with pytest.raises(InputError) as err:
        load_collection(d)
    assert "ratings.csv" in err.value.source and "folder" in str(err.value)


def test_an_unreadable_folder_is_an_input_error_naming_it(tmp_path, monkeypatch):
    d = tmp_path / "locked"
    d.mkdir()
    real = Path.iterdir

    def denied(self):
        if self == d:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    # chmod cannot lock root out, and tests may run as root: fake the refusal
    monkeypatch.setattr(Path, "iterdir", denied)
    with pytest.raises(InputError) as err:
        load_collection(d)
    assert err.value.source == str(d) and "Permission denied" in str(err.value)


def test_a_non_utf8_ratings_file_names_the_line(tmp_path):
    d = tmp_path / "latin"
    d.mkdir()
    (d / "ratings.csv").write_bytes(b"userId,movieId,rating,timestamp\nu1,9,4.0,100\nJos\xe9,9,3.0,200\n")
    write(d / "movies.csv", "movieId,title,genres\n9,Nine (2009),Drama\n")
    with pytest.raises(InputError) as err:
        load_collection(d)
    assert err.value.source.endswith("ratings.csv") and err.value.line == 3 and "UTF-8" in str(err.value)


def test_a_non_utf8_atomic_header_is_an_input_error(tmp_path):
    (tmp_path / "x.inter").write_bytes(b"user_id:token\titem\xff_id:token\ttimestamp:float\n")
    with pytest.raises(InputError) as err:
        load_collection(tmp_path / "x.inter")
    assert err.value.line == 1 and "UTF-8" in str(err.value)


def test_collection_config_that_is_a_folder_or_not_utf8(tmp_path):
    (tmp_path / "cfg.toml").mkdir()
    with pytest.raises(InputError) as err:
        read_collection_config(tmp_path / "cfg.toml")
    assert err.value.source == str(tmp_path / "cfg.toml") and "folder" in str(err.value)
    bad = tmp_path / "latin.toml"
    bad.write_bytes(b"[movie_columns]\ntitle = \"t\xedtulo\"\n")
    with pytest.raises(InputError) as err:
        read_collection_config(bad)
    assert err.value.line == 2 and "UTF-8" in str(err.value)


@pytest.mark.parametrize("text,match", [
    ('movie_columns = "title"', "movie_columns must be a table"),
    ("[movie_columns]\ntitle = 5", "title"),
    ("format = 3", "format must be"),
    ('min_rating = "4"', "min_rating must be a number"),
    ("name = 5", "name must be a string"),
])
def test_collection_config_value_types_are_checked(tmp_path, text, match):
    cfg = tmp_path / "c.toml"
    cfg.write_text(text + "\n")
    write(tmp_path / "data" / "d.inter", "user_id:token\titem_id:token\ttimestamp:float\nu\tx\t1\n")
    with pytest.raises((ConfigError, InputError), match=match):
        load_collection(tmp_path / "data", **read_collection_config(cfg))


# ------------------------------------------------------------------------------ RecBole sees every id

HAVE_TRAIN = all(importlib.util.find_spec(m) is not None for m in ("torch", "recbole"))


@pytest.mark.train
@pytest.mark.skipif(not HAVE_TRAIN, reason='needs the train extra (torch, recbole): pip install "recjudge[train]"')
def test_recbole_sees_every_missing_looking_id(na_movielens, tmp_path):
    from recjudge.systems import SystemConfig
    from recjudge.systems._recbole import Tokens

    split = global_time_split(load_collection(na_movielens), timestamp=200)
    tokens = Tokens.of(split)
    assert sorted(tokens.items) == sorted(["NA", "null", "nan", "7"])
    res = train_systems(split, systems=[SystemConfig.make("BPR-na", "BPR", embedding_size=4)], out_dir=tmp_path,
                        k=10, epochs=1, progress=lambda m: None)[0]
    assert res.status == "trained", res.error
    meta = json.loads((tmp_path / "BPR-na.json").read_text())
    assert meta["catalogue_items"] == 4  # RecBole's catalogue is the split's: nothing vanished
    run = read_run(res.run_path)
    assert set(run.frame.qid) == set(MISSING_LOOKING)
    # every unseen item is ranked for every user: 4 items minus the user's one training item
    assert run.frame.groupby("qid").size().tolist() == [3, 3, 3, 3]
    assert set(run.frame.docid) == {"NA", "null", "nan", "7"}


@pytest.mark.train
@pytest.mark.skipif(not HAVE_TRAIN, reason='needs the train extra (torch, recbole): pip install "recjudge[train]"')
def test_a_lost_item_in_recbole_is_a_clear_error(na_movielens, tmp_path, monkeypatch):
    from recjudge.systems import SystemConfig, _recbole

    real = _recbole.write_benchmark_files

    def lossy(split, folder, tokens=None):
        counts = real(split, folder, tokens)
        # item 'nan' is only in training (user None's row): write it raw, as the adapter once did;
        # RecBole's pandas then reads it as missing
        train = folder / f"{_recbole.DATASET}.train.inter"
        token = tokens.items["nan"] + "\n"
        train.write_text(train.read_text().replace("\t" + token, "\tnan\n"))
        return counts

    monkeypatch.setattr(_recbole, "write_benchmark_files", lossy)
    split = global_time_split(load_collection(na_movielens), timestamp=200)
    res = train_systems(split, systems=[SystemConfig.make("BPR-na", "BPR", embedding_size=4)], out_dir=tmp_path,
                        k=10, epochs=1, progress=lambda m: None)[0]
    assert res.status == "failed" and "RecBole read" in res.error and "items" in res.error


def test_pandas_default_reading_would_have_lost_these_ids(na_movielens):
    # the hazard this file guards against, shown on the fixture itself
    assert pd.read_csv(na_movielens / "ratings.csv").userId.isna().sum() == 8
