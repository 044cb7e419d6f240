"""ML-32M-ext as published, on a generated release folder: the file names and columns of its README, random data.

The real files' licence forbids sharing them; every expected value here is computed from the
generated rows by plain Python, independently of the loader.
"""

from __future__ import annotations

import pytest
from ml32m_data import (
    IN_DATABASE,
    MOVIES,
    PARTICIPANTS,
    PROFILE_COLUMNS,
    _title,
    _write,
    release,
)

from recjudge.data.collections import HALF_STARS, INTEREST, load_collection
from recjudge.errors import InputError


def test_before_make_sh_profiles_without_timestamps_are_one_unordered_time(tmp_path):
    folder, facts = release(tmp_path)
    c = load_collection(folder)
    assert c.info["loader"] == "ml32m-ext"
    want = {(str(did), str(m)): float(r) for _, did, m, r in facts["profiles"]}
    got = {(u, i): r for u, i, r in zip(c.interactions.user, c.interactions.item, c.interactions.rating)}
    assert got == want
    assert set(c.interactions.user) == {str(p + 200948) for p in PARTICIPANTS}
    # no timestamps were given: one constant time, which orders nothing
    assert set(c.interactions.timestamp) == {1697216400}
    assert c.info["ordered"] is False and c.info["timestamp_unit"] is None
    assert c.rating_scale == HALF_STARS


def test_interest_qrels_found_by_pattern_with_the_label_definition(tmp_path):
    folder, facts = release(tmp_path)
    c = load_collection(folder)
    assert c.qrels.name == "p2-interest"
    assert {(r.qid, r.docid): r.label for r in c.qrels} == facts["interest"]
    assert c.info["qrels_files"] == ["p2-interest.qrels", "p2-rating.qrels"]
    assert set(load_collection(folder, qrels="rating").qrels.frame.label) == {1}
    assert max(facts["interest"].values()) <= INTEREST.high


def test_without_qrels_files_the_interest_qrels_come_from_p2_ratings(tmp_path):
    folder, facts = release(tmp_path, qrels_files=())
    c = load_collection(folder)
    assert {(r.qid, r.docid): r.label for r in c.qrels} == facts["interest"]


def test_two_interest_files_are_refused_by_name(tmp_path):
    folder, _ = release(tmp_path, qrels_files=("p2-interest.qrels", "p2-interest-seen.qrels"))
    with pytest.raises(InputError, match="2 qrels files match") as err:
        load_collection(folder)
    assert "p2-interest-seen" in str(err.value)
    assert load_collection(folder, qrels="p2-interest-seen").qrels.name == "p2-interest-seen"


def test_after_make_sh_participants_are_counted_once(tmp_path):
    folder, facts = release(tmp_path, after_make=True)
    c = load_collection(folder)
    expected = len(facts["ml"]) + len(facts["profiles"])  # explicit-ratings.csv already holds the participants
    assert len(c.interactions) == expected
    assert c.info["participants_counted_once"] == len(PARTICIPANTS)
    assert c.info["interactions_from"] == [str(folder / "explicit-ratings.csv")]
    per_user = c.interactions.groupby("user").size()
    assert all(per_user[str(p + 200948)] == 6 for p in PARTICIPANTS)
    part = c.interactions[c.interactions.user.isin({str(p + 200948) for p in PARTICIPANTS})]
    assert set(part.timestamp) == {1697216400} and c.info["ordered"] is True  # ML-32M users carry real times


def test_movies_missing_from_the_database_take_titles_from_filtered_movies(tmp_path):
    folder, _ = release(tmp_path, after_make=True)
    c = load_collection(folder)
    assert set(c.items.index) == {str(m) for m in MOVIES}
    assert c.info["metadata_from"] == {"database-movies.csv": 20, "filtered-movies.csv": 10}
    assert c.info["items_without_metadata"] == 0  # every rated or judged movie can be shown to the judge
    database, fallback = c.items.loc["20"], c.items.loc["25"]
    assert (database.title, database.year, database.directors) == ("Film 20", 1970, ("Director 20",))
    assert (fallback.title, fallback.year, fallback.genres) == ("Film 25", 1975, ("Comedy", "Romance"))
    assert fallback.directors is None and fallback.overview is None


def test_before_make_sh_movies_outside_the_database_are_counted(tmp_path):
    folder, facts = release(tmp_path)
    c = load_collection(folder)
    judged = {d for _, d in facts["interest"]}
    rated = {str(m) for *_, m, _ in facts["profiles"]}
    assert c.info["items_without_metadata"] == len((judged | rated) - {str(m) for m in IN_DATABASE})


def test_ml32m_ratings_beside_the_release_get_the_participants_appended(tmp_path):
    folder, facts = release(tmp_path)
    ml32m = tmp_path / "ml-32m"
    _write(ml32m / "ratings.csv", ["userId", "movieId", "rating", "timestamp"], facts["ml"])
    _write(ml32m / "movies.csv", ["movieId", "title", "genres"], [[m, _title(m), "Western"] for m in MOVIES])
    c = load_collection(folder, ratings=ml32m / "ratings.csv")
    assert len(c.interactions) == len(facts["ml"]) + len(facts["profiles"])
    assert c.info["participants_counted_once"] == 0
    assert c.items.loc["30"].title == "Film 30" and c.info["items_without_metadata"] == 0


def test_implicit_ratings_by_file_name(tmp_path):
    folder, _ = release(tmp_path, after_make=True)
    c = load_collection(folder, ratings="implicit-ratings.csv")
    assert (c.interactions.rating >= 4).all()
    with open(folder / "implicit-ratings.csv", newline="") as fh:
        assert len(c.interactions) == sum(1 for _ in fh) - 1


def test_dataset_id_that_is_not_participant_plus_offset_names_the_line(tmp_path):
    folder, _ = release(tmp_path)
    _write(folder / "p2-movielens-profiles.csv", PROFILE_COLUMNS, [[3, 200951, 1, 4.0], [3, 200950, 2, 3.5]])
    with pytest.raises(InputError, match="participant_id 3 \\+ 200948") as err:
        load_collection(folder)
    assert err.value.line == 3  # header, then 3 + 200948 = 200951 (right), then 200950 (wrong)


def test_a_rating_off_the_half_star_scale_is_refused(tmp_path):
    folder, _ = release(tmp_path)
    _write(folder / "p2-movielens-profiles.csv", PROFILE_COLUMNS, [[3, 200951, 1, 4.25]])
    with pytest.raises(InputError, match="4.25 is not on the 0.5–5 half stars scale"):
        load_collection(folder)


def test_the_judge_shows_half_stars_and_says_so(tmp_path):
    from recjudge.judging.profile import HistoryProfiles, candidates_block
    from recjudge.judging.prompts import load_template

    folder, facts = release(tmp_path, after_make=True)
    c = load_collection(folder)
    user = str(PARTICIPANTS[0] + 200948)
    p = HistoryProfiles(c, "title+directors", size=100)
    own = {(str(m), r) for _, did, m, r in facts["profiles"] if str(did) == user}
    assert set(p.sample(user)) == own
    msg = load_template("baseline").render(p.profile_text(user), candidates_block([p.render_item("1")], None), None,
                                           rating_scale=p.rating_scale)
    assert "(ratings from 0.5 to 5):" in msg.user
    assert p.provenance()["rating_scale"] == {"low": 0.5, "high": 5.0, "step": 0.5, "name": "half stars"}


@pytest.mark.parametrize("method", ["global_time", "user_ratio", "leave_one_out", "timestamp"])
def test_time_splits_refuse_ratings_without_order(tmp_path, method):
    from recjudge.data.splits import make_split
    from recjudge.errors import ConfigError

    folder, facts = release(tmp_path)
    c = load_collection(folder)
    with pytest.raises(ConfigError, match="no order"):
        make_split(c, method)
    full = make_split(c, "full")  # the Cranfield setting: histories as they are, human qrels as the targets
    assert len(full.train) == len(facts["profiles"])


def test_the_interest_qrels_have_one_name_everywhere(tmp_path):
    """The docs, the demo report and the loader name the human qrels by the loader's rule: the one
    ``qrels/*interest*.qrels`` of the release (the paper calls it interest.qrels; a release may prefix it)."""
    import glob
    import re
    from pathlib import Path

    import recjudge.report.demo as demo

    root = Path(__file__).resolve().parents[1]
    named = re.compile(r"qrels/[\w*.-]*interest[\w*.-]*\.qrels")
    template = Path(demo.__file__).parent / "templates" / "demo.md.j2"  # the demo report's prose
    for text in ((root / "docs" / "reproducing-penha2025.md").read_text(), template.read_text()):
        found = set(named.findall(text))
        assert found == {"qrels/*interest*.qrels"}, found
    for name in ("p2-interest.qrels", "interest.qrels"):
        folder, _ = release(tmp_path / name, qrels_files=(name, "p2-rating.qrels"))
        (match,) = glob.glob(str(folder / "qrels" / "*interest*.qrels"))  # what a shell gives the docs' command
        assert load_collection(folder).qrels.name == Path(match).stem
