"""Collection families declare fields, rating scale and timestamp unit; the judge takes both from the collection."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from recjudge.data.collections import (
    COLLECTIONS,
    HALF_STARS,
    INTEREST,
    STARS,
    Collection,
    RatingScale,
    load_collection,
    register_collection,
)
from recjudge.errors import ConfigError, InputError
from recjudge.judging.profile import HistoryProfiles, candidates_block, parse_fields
from recjudge.judging.prompts import load_template


def test_each_family_declares_its_scale_fields_and_time_unit():
    assert (COLLECTIONS["ml-100k"].rating_scale, COLLECTIONS["movielens"].rating_scale) == (STARS, HALF_STARS)
    assert COLLECTIONS["amazon"].rating_scale == STARS and COLLECTIONS["amazon"].timestamp_unit == "ms"
    assert {"title", "description", "features"} <= set(COLLECTIONS["amazon"].fields)
    assert COLLECTIONS["ml32m-ext"].label_scale == INTEREST and "overview" in COLLECTIONS["ml32m-ext"].fields
    assert COLLECTIONS["recbole"].rating_scale is None  # atomic files hold any scale: each collection says


def test_family_modules_load_on_first_use_of_the_registry():
    code = ("import sys, recjudge.data.collections as c; "
            "before = sorted(m for m in sys.modules if m.startswith('recjudge.data.collections.') and '_read' not in m); "
            "list(c.COLLECTIONS); "
            "after = sorted(m.rpartition('.')[2] for m in sys.modules if m.startswith('recjudge.data.collections.')); "
            "print(before, after)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] ['_read', 'amazon', 'ml32m_ext', 'movielens', 'recbole_atomic']"


def test_a_new_family_registers_once_and_is_recognised_by_its_layout(tmp_path):
    inter = pd.DataFrame({"user": ["u"], "item": ["i"], "rating": [7.0], "timestamp": [1]})
    toy = RatingScale(1.0, 10.0, 1.0, "points")
    register_collection("toy-family-test", lambda path: Collection("toy", inter, pd.DataFrame(index=["i"]),
                                                                   rating_scale=toy),
                        "a test family", detect=lambda path: (path / "toy.marker").exists(), rating_scale=toy)
    with pytest.raises(ConfigError, match="already registered"):
        register_collection("toy-family-test", lambda path: None, "again")
    (tmp_path / "toy.marker").write_text("")
    assert load_collection(tmp_path).rating_scale == toy


@pytest.mark.parametrize("ratings, scale", [
    ([1.0, 3.0, 5.0], STARS),
    ([0.5, 4.5, 2.0], HALF_STARS),
    ([1.0, 10.0, 6.0], RatingScale(1.0, 10.0, 0.0, "(observed range)")),
])
def test_a_collection_without_a_declared_scale_takes_the_one_its_ratings_fit(ratings, scale):
    inter = pd.DataFrame({"user": ["u"] * 3, "item": ["a", "b", "c"], "rating": ratings, "timestamp": [1, 2, 3]})
    assert Collection("c", inter, pd.DataFrame(index=["a", "b", "c"])).rating_scale == scale


def test_a_rating_off_the_declared_scale_names_the_file(tmp_path):
    folder = tmp_path / "ml"
    folder.mkdir()
    (folder / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,2,3.5,4\n1,3,7,5\n")
    (folder / "movies.csv").write_text("movieId,title,genres\n2,Heat (1995),Action\n3,Up (2009),Animation\n")
    with pytest.raises(InputError, match="rating 7 is not on the 0.5–5 half stars scale") as err:
        load_collection(folder)
    assert "ratings.csv" in str(err.value)


def _amazon(tmp_path):
    tmp_path.mkdir(parents=True, exist_ok=True)

    def jsonl(name, rows):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))

    jsonl("Toys.jsonl", [{"user_id": "U1", "parent_asin": "B1", "rating": 5.0, "timestamp": 1588687728923},
                         {"user_id": "U1", "parent_asin": "B2", "rating": 2.0, "timestamp": 1588687729000}])
    jsonl("meta_Toys.jsonl", [{"parent_asin": "B1", "title": "Kite", "description": ["Flies.", "Red."]},
                              {"parent_asin": "B2", "title": "Ball", "description": []}])
    return load_collection(tmp_path)


def test_amazon_fields_are_judge_fields(tmp_path):
    c = _amazon(tmp_path)
    assert parse_fields("title+description") == ("title", "description")
    with pytest.raises(ConfigError, match="unknown field"):
        parse_fields("title+colour")
    p = HistoryProfiles(c, "title+description", size=5)
    assert p.render_item("B1") == "Title: Kite | Description: Flies. Red."
    assert p.render_item("B2") == "Title: Ball | Description: unknown"
    assert p.profile_text("U1") == ("- Title: Kite | Description: Flies. Red. | Rating: 5\n"
                                    "- Title: Ball | Description: unknown | Rating: 2")
    with pytest.raises(ConfigError, match="no directors"):
        HistoryProfiles(c, "title+directors")


def _prompt(collection, user):
    p = HistoryProfiles(collection, "title", size=5)
    first = str(collection.items.index[0])
    return load_template("baseline").render(p.profile_text(user), candidates_block([p.render_item(first)], None),
                                            None, rating_scale=p.rating_scale).user


def test_the_prompt_states_the_collections_rating_scale(tmp_path):
    assert "(ratings from 1 to 5):" in _prompt(_amazon(tmp_path / "a"), "U1")
    folder = tmp_path / "ml"
    folder.mkdir()
    (folder / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,2,3.5,4\n")
    (folder / "movies.csv").write_text("movieId,title,genres\n2,Heat (1995),Action\n")
    assert "(ratings from 0.5 to 5):" in _prompt(load_collection(folder), "1")
    inter = pd.DataFrame({"user": ["u"] * 2, "item": ["a", "b"], "rating": [2.0, 10.0], "timestamp": [1, 2]})
    ten = Collection("ten", inter, pd.DataFrame({"title": ["A", "B"]}, index=["a", "b"]))
    assert "(ratings from 2 to 10):" in _prompt(ten, "u")
    # an average rating is out of the scale's top (each item has one rating: 2 and 10)
    assert HistoryProfiles(ten, "title+avg_rating").render_item("a") == "Title: A | Average rating: 2.00/10"
    assert HistoryProfiles(ten, "title+avg_rating").render_item("b") == "Title: B | Average rating: 10.00/10"


def test_a_caller_that_names_no_scale_gets_the_one_to_five_wording():
    t = load_template("criteria")
    assert "(ratings from 1 to 5):" in t.render("P", "C", None).user
    assert "(ratings from 0.5 to 5):" in t.render("P", "C", None, rating_scale=HALF_STARS).user


def test_an_observed_range_checks_bounds_only():
    observed = RatingScale.fitting([1.0, 10.0, 6.25])
    assert (observed.low, observed.high, observed.step) == (1.0, 10.0, 0.0)
    observed.check([1.0, 3.3, 10.0], "x")
    with pytest.raises(InputError, match="rating 11 is not on the 1–10"):
        observed.check([11.0], "x")
