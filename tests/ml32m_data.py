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
            profile_items=6, judged_items=7, ml_items=5, profile_movies=None, ratings=HALVES):
    """A release folder; with ``after_make``, also what make.sh writes. Returns (folder, facts).

    ``profile_movies(pid)``: the movies participant ``pid`` rated (default: ``profile_items`` drawn
    from ``movies``); movies of their own make a participant recognisable from any prompt.
    ``ratings``: the star ratings profiles and ML-32M rows are drawn from (default every half star)."""
    rng = random.Random(seed)
    folder = root / "ml-32m-ext"
    profiles, p2, interest = [], [], {}
    for pid in participants:
        did = pid + ML32M_EXT_USER_OFFSET
        rated = list(profile_movies(pid)) if profile_movies is not None else rng.sample(list(movies), profile_items)
        for m in rated:
            profiles.append([pid, did, m, rng.choice(ratings)])
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
    ml = [[u, m, rng.choice(ratings), 1_000_000 + 10 * i] for i, (u, m) in
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


def paper_size(root, seed=0, participants=51, systems=52):
    """A release of the paper's size for pricing ``reproduce penha2025 --dry-run`` (no test reads it:
    it takes about a minute to write). Section 3 and 5.1's statistics: 51 participants, 31,236
    judgments (612 or 613 each), profiles of 1,425 movies on average (one of 8,496), every
    metadata field with a ~45-word overview (about 120 tokens per movie shown); 2,000 other users
    with 50 ratings each. ``systems`` top-100 runs per participant, each drawing 56 of its 100
    movies from 261 judged ones and 44 from 450 unjudged ones: Judged@100 ≈ 0.56 (Table 5) and
    ≈ 13,336 pool items the participants judged (the calibration set of Section 5.2).
    Returns (folder, runs folder)."""
    rng = random.Random(seed)
    folder = root / "ml-32m-ext"
    n_movies = 30_000
    words = ["story", "family", "war", "love", "city", "secret", "journey", "night", "friend", "past", "truth",
             "young", "world", "life", "murder", "dream", "lost", "home", "power", "escape"]
    genres = ["Drama", "Comedy", "Thriller", "Romance", "Action", "Crime", "Horror", "Documentary", "Animation"]
    _write(folder / "database-movies.csv",
           ["movie_id", "title", "release_date", "genres", "directors", "cast", "overview", "runtime", "languages"],
           [[m, f"Film {m}", f"{1930 + m % 94}-05-01", "|".join(rng.sample(genres, 2)),
             f"Director {m % 4000}", "|".join(f"Actor {rng.randrange(50_000)}" for _ in range(5)),
             " ".join(rng.choice(words) for _ in range(45)) + ".", 80 + m % 90, "English|French"]
            for m in range(1, n_movies + 1)])
    sizes = [8496] + [rng.randint(600, 2100) for _ in range(participants - 1)]
    sizes[1:] = [max(200, s + (1425 * participants - sum(sizes)) // (participants - 1)) for s in sizes[1:]]
    judged_counts = [612 + (i < 31236 - 612 * participants) for i in range(participants)]
    profiles, p2, qrels, runs = [], [], [], {}
    for i, pid in enumerate(range(1, participants + 1)):
        did = pid + ML32M_EXT_USER_OFFSET
        movies = rng.sample(range(1, n_movies + 1), sizes[i] + judged_counts[i] + 450)
        rated, judged, unjudged = (movies[:sizes[i]], movies[sizes[i]:sizes[i] + judged_counts[i]],
                                   movies[sizes[i] + judged_counts[i]:])
        profiles += [[pid, did, m, rng.choice(HALVES)] for m in rated]
        for m in judged:
            label = rng.choice((0, 0, 0, 1, 1, 2, 3, 4))
            p2.append([pid, did, m, "f", "none", "t", "t", LEVELS[label], "", "", ""])
            qrels.append(f"{did} 0 {m} {label}\n")
        visible = judged[:261]
        for s in range(systems):
            picked = rng.sample(visible, 56) + rng.sample(unjudged, 44)
            runs.setdefault(s, []).extend(f"{did} Q0 {m} {r} {100 - r} sys{s}" for r, m in enumerate(picked, 1))
    _write(folder / "p2-movielens-profiles.csv", PROFILE_COLUMNS, profiles)
    _write(folder / "p2-ratings.csv", P2_RATINGS_COLUMNS, p2)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "qrels" / "p2-interest.qrels").write_text("".join(qrels))
    others = [[u, m, rng.choice(HALVES), 1_000_000 + u] for u in range(1, 2001)
              for m in rng.sample(range(1, n_movies + 1), 50)]
    appended = [[did, m, r, PARTICIPANT_TIMESTAMP] for _, did, m, r in profiles]
    _write(folder / "explicit-ratings.csv", ["userId", "movieId", "rating", "timestamp"], others + appended)
    run_dir = root / "runs"
    run_dir.mkdir(parents=True, exist_ok=True)
    for s, lines in runs.items():
        (run_dir / f"sys{s}.run").write_text("\n".join(lines) + "\n")
    return folder, run_dir
