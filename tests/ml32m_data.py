"""A generated ML-32M-ext release folder: the file names and columns of its README, random data.

The real files' licence forbids sharing them. ``release`` writes the folder as published (and, with
``after_make``, what the release's make.sh writes) and returns the facts it wrote, so tests compute
expected values from the rows by plain Python, independently of the loader. The default size is
tiny; tests that train systems or judge at depth ask for more participants, users and movies.
"""

from __future__ import annotations

import csv
import random

from recjudge.data.collections.ml32m_ext import (
    ML32M_EXT_USER_OFFSET,
    PARTICIPANT_TIMESTAMP,
)

PARTICIPANTS = (3, 8, 21)          # participant_id; dataset_id = participant_id + 200948
ML_USERS = ("1", "2", "3", "4")    # ML-32M users (ids below 200949)
MOVIES = range(1, 31)              # ML movie ids 1..30
IN_DATABASE = range(1, 21)         # database-movies.csv covers 1..20; 21..30 only in filtered-movies.csv
LEVELS = ("Not interested", "Somewhat interested", "Interested", "Very interested", "Extremely interested")
HALVES = [h / 2 for h in range(1, 11)]  # 0.5 .. 5.0

P2_RATINGS_COLUMNS = ["participant_id", "dataset_id", "movie_id", "seen_status", "familiarity", "p1_check",
                      "p2_check", "interest_level", "rating", "rank_p2", "movielens_rating"]
PROFILE_COLUMNS = ["participant_id", "dataset_id", "movie_id", "movielens_rating"]


def _write(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def _title(m: int) -> str:
    return f"Film {m} ({1950 + m})"


def release(root, seed=0, after_make=False, qrels_files=("p2-interest.qrels", "p2-rating.qrels"),
            participants=PARTICIPANTS, ml_users=ML_USERS, movies=MOVIES, in_database=IN_DATABASE,
            profile_items=6, judged_items=7, ml_items=5):
    """A release folder; with ``after_make``, also what make.sh writes. Returns (folder, facts)."""
    rng = random.Random(seed)
    folder = root / "ml-32m-ext"
    profiles, p2, interest = [], [], {}
    for pid in participants:
        did = pid + ML32M_EXT_USER_OFFSET
        for m in rng.sample(list(movies), profile_items):
            profiles.append([pid, did, m, rng.choice(HALVES)])
        judged = rng.sample(list(movies), judged_items)
        ranked = dict(zip(judged[:3], ("1", "2", "3")))
        for m in judged:
            seen = rng.random() < 0.4
            level = rng.choice(LEVELS)
            p2.append([pid, did, m, "t" if seen else "f", rng.choice(("none", "some", "lots")), "t", "t",
                       level, rng.choice(HALVES) if seen else "", ranked.get(m, ""), ""])
            # the 0-7 interest label by the release's definition: ranked 1st/2nd/3rd → 7/6/5, else level 0-4
            interest[(str(did), str(m))] = {"1": 7, "2": 6, "3": 5}.get(ranked.get(m), LEVELS.index(level))
    p2[0][4] = p2[5][4] = ""  # familiarity is empty in two rows of the published file
    _write(folder / "p2-movielens-profiles.csv", PROFILE_COLUMNS, profiles)
    _write(folder / "p2-ratings.csv", P2_RATINGS_COLUMNS, p2)
    _write(folder / "database-movies.csv", ["movie_id", "title", "release_date", "genres", "director", "overview"],
           [[m, f"Film {m}", f"{1950 + m}-05-01", "Drama|Crime", f"Director {m}", f"Plot {m}."] for m in in_database])
    for name in qrels_files:
        path = folder / "qrels" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        labels = interest if "interest" in name else {k: 1 for k in interest}
        path.write_text("".join(f"{q} 0 {d} {lab}\n" for (q, d), lab in sorted(labels.items())))
    ml = [[u, m, rng.choice(HALVES), 1_000_000 + 10 * i] for i, (u, m) in
          enumerate((u, m) for u in ml_users for m in rng.sample(list(movies), ml_items))]
    if after_make:
        appended = [[did, m, r, PARTICIPANT_TIMESTAMP] for _, did, m, r in profiles]
        _write(folder / "explicit-ratings.csv", ["userId", "movieId", "rating", "timestamp"], ml + appended)
        explicit = ml + appended
        counts = {}
        for u, *_ in explicit:
            counts[u] = counts.get(u, 0) + 1
        _write(folder / "implicit-ratings.csv", ["userId", "movieId", "rating", "timestamp"],
               [row for row in explicit if row[2] >= 4 and counts[row[0]] >= 5])
        _write(folder / "filtered-movies.csv", ["movieId", "title", "genres"],
               [[m, _title(m), "Comedy|Romance"] for m in movies])
    return folder, {"profiles": profiles, "interest": interest, "ml": ml}
