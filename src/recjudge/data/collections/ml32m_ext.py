"""ML-32M-ext (Smucker & Chamani 2025) as published: the release folder before and after its ``make.sh``.

Before ``make.sh``: ``p2-movielens-profiles.csv`` (participant_id, dataset_id = participant_id +
200948, movie_id, movielens_rating — no timestamps), ``p2-ratings.csv`` (the participants' interest
in the judged movies), ``database-movies.csv`` (the TMDB export; its column names are not
published, so common names are tried and a collection config can map them) and ``qrels/*.qrels``
(topic = dataset_id). After ``make.sh`` over ML-32M: ``explicit-ratings.csv`` (ML-32M with the
participants appended, each of their ratings at timestamp 1697216400), ``implicit-ratings.csv``
(ratings >= 4, users with >= 5 ratings) and ``filtered-movies.csv``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from ...errors import ConfigError, InputError
from ..trec import Qrels, read_qrels
from . import HALF_STARS, INTEREST, Collection, register_collection
from ._read import (
    MULTI_VALUED,
    check_ids,
    interaction_frame,
    is_missing,
    items_frame,
    numeric_column,
    pick_column,
    read_csv,
    to_int,
    to_list,
    to_text,
    to_year,
)
from .movielens import movie_fields

__all__ = ["load_ml32m_ext", "p2_interest_qrels", "MovieColumns", "ML32M_EXT_USER_OFFSET", "PARTICIPANT_TIMESTAMP",
           "INTEREST_LEVELS", "RANK_LABELS"]

# p2-movielens-profiles.csv and p2-ratings.csv: dataset_id = participant_id + 200948
ML32M_EXT_USER_OFFSET = 200948
# make.sh appends every participant rating at this one time (2023-10-13 17:00 UTC): it orders nothing
PARTICIPANT_TIMESTAMP = 1697216400


@dataclass(frozen=True)
class MovieColumns:
    """Where each canonical field is in ``database-movies.csv`` (its column names are not public).

    Each entry lists candidate column names; the first one present in the file is used. Pass
    ``MovieColumns(title=("my_title",))`` or a mapping ``{"title": "my_title"}`` to override.
    """

    item: tuple[str, ...] = ("movie_id", "movieId", "movielens_id", "ml_id", "id")
    title: tuple[str, ...] = ("title", "movie_title", "name")
    year: tuple[str, ...] = ("release_year", "year", "release_date")
    genres: tuple[str, ...] = ("genres", "genre")
    directors: tuple[str, ...] = ("directors", "director")
    cast: tuple[str, ...] = ("cast", "actors", "stars")
    overview: tuple[str, ...] = ("overview", "plot_summary", "plot", "summary", "description")
    runtime: tuple[str, ...] = ("runtime", "running_time", "run_time")
    languages: tuple[str, ...] = ("languages", "language", "spoken_languages", "original_language")
    poster: tuple[str, ...] = ("poster", "poster_path", "poster_url")

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, str | Iterable[str]]) -> MovieColumns:
        if not isinstance(mapping, Mapping):
            raise ConfigError(f"movie_columns must be a table of field = column name, not {mapping!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise ConfigError(f"unknown movie metadata field(s) {unknown}; known: {sorted(known)}")
        values = {}
        for k, v in mapping.items():
            names = (v,) if isinstance(v, str) else tuple(v) if isinstance(v, (list, tuple)) else None
            if not names or not all(isinstance(n, str) and n for n in names):
                raise ConfigError(f"movie_columns: {k} must be a column name or a list of names, not {v!r}")
            values[k] = names
        return cls(**values)



def _database_movies(path: Path, columns: MovieColumns) -> pd.DataFrame:
    frame = read_csv(path, "database-movies.csv")
    item_col = pick_column(frame, columns.item)
    if item_col is None:
        raise InputError(str(path), f"no movie id column among {list(columns.item)}; found {list(frame.columns)}",
                         "map it in a collection config (--collection-config FILE with [movie_columns] item = \"<column>\")", line=1)
    out: dict[str, list] = {}
    for f in fields(columns):
        if f.name == "item":
            continue
        col = pick_column(frame, getattr(columns, f.name))
        if col is None:
            continue
        values = frame[col]
        if f.name == "year":
            out["year"] = [to_year(v) for v in values]
        elif f.name == "runtime":
            out["runtime"] = [to_int(v) for v in values]
        elif f.name in MULTI_VALUED:
            out[f.name] = [to_list(v, "|,") for v in values]
        else:
            out[f.name] = [to_text(v) for v in values]
    return items_frame(check_ids(frame[item_col], "movie id", str(path), item_col), out)


# p2-ratings.csv interest_level → label; rank_p2 1/2/3 → 7/6/5
INTEREST_LEVELS = {
    "not interested": 0,
    "somewhat interested": 1,
    "interested": 2,
    "very interested": 3,
    "extremely interested": 4,
}
RANK_LABELS = {1: 7, 2: 6, 3: 5}


def _interest_label(value, path: Path, line: int) -> int | None:
    if is_missing(value):
        return None
    text = str(value).strip().lower().replace("_", " ")
    if text in INTEREST_LEVELS:
        return INTEREST_LEVELS[text]
    # short forms some exports use: "somewhat", "very", "extremely", "not"
    for full, label in INTEREST_LEVELS.items():
        if text == full.split()[0]:
            return label
    if re.fullmatch(r"[0-4](\.0)?", text):
        return int(float(text))
    raise InputError(str(path), f"interest_level {value!r} is not a known level",
                     f"use one of {list(INTEREST_LEVELS)} or 0–4", line=line)


def _participants(frame: pd.DataFrame, path: Path, id_columns: tuple[str, ...], strict: bool = True) -> pd.Series:
    """Participant ids as dataset ids: an id column when present, else participant_id + 200948.

    ``strict``: every row needs an id (profiles); otherwise rows are checked by the caller."""
    column = pick_column(frame, id_columns)
    if column is not None and not strict:
        return frame[column]
    if column is not None:
        return pd.Series(check_ids(frame[column], "participant id", str(path), column), dtype=object)
    if "participant_id" in frame.columns:
        pid = numeric_column(frame, "participant_id", path, integer=True).astype(np.int64)
        return pd.Series([str(p) for p in pid + ML32M_EXT_USER_OFFSET], dtype=object)
    raise InputError(str(path), f"no {', '.join(id_columns)} or participant_id column",
                     "name the participant column", line=1)


def p2_interest_qrels(path: str | os.PathLike, name: str = "interest") -> Qrels:
    """Convert ML-32M-ext ``p2-ratings.csv`` into the 0–7 interest qrels (topic = dataset_id).

    interest_level: Not interested 0, Somewhat 1, Interested 2, Very 3, Extremely interested 4;
    a movie the participant ranked (``rank_p2`` 3/2/1) gets 5/6/7 whatever its interest level.
    Rows without an interest level and without a rank (unseen, not asked) are not judged.
    """
    path = Path(path)
    frame = read_csv(path, "p2-ratings.csv", ["movie_id", "interest_level"])
    qids = _participants(frame, path, ("dataset_id",), strict=False)
    ranks = frame["rank_p2"] if "rank_p2" in frame.columns else pd.Series([None] * len(frame))
    rows = []
    for i, (q, d, level, rank) in enumerate(zip(qids, frame.movie_id, frame.interest_level, ranks)):
        line = i + 2
        label = _interest_label(level, path, line)
        if not is_missing(rank):
            r = int(float(rank)) if re.fullmatch(r"\s*[123](\.0+)?\s*", str(rank)) else None
            if r not in RANK_LABELS:
                raise InputError(str(path), f"rank_p2 {rank!r} is not 1, 2 or 3", "leave rank_p2 empty or use 1–3",
                                 line=line)
            label = RANK_LABELS[r]
        if label is None:
            continue
        if is_missing(q) or is_missing(d):
            raise InputError(str(path), "row without a participant or movie id", "fill both columns", line=line)
        rows.append((str(q).strip(), str(d).strip(), label))
    if not rows:
        raise InputError(str(path), "no row has an interest level or a rank", "check the file is p2-ratings.csv")
    qf = pd.DataFrame(rows, columns=["qid", "docid", "label"])
    dup = qf.duplicated(["qid", "docid"]).to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise InputError(str(path), f"movie {qf.docid[i]} is judged twice for participant {qf.qid[i]}",
                         "keep one row per (participant, movie)")
    return Qrels.from_frame(qf, name)



def _timestamps(frame: pd.DataFrame, col: str | None, path: Path) -> tuple[np.ndarray, bool]:
    """Unix seconds from numbers or ISO 8601 dates; without a column, PARTICIPANT_TIMESTAMP for every row.

    Returns (times, dated): ``dated`` is False when the file holds no timestamps."""
    if col is None:
        return np.full(len(frame), PARTICIPANT_TIMESTAMP, dtype=np.int64), False
    times = pd.to_numeric(frame[col], errors="coerce")
    dated = times.isna().to_numpy()
    if dated.any():
        # ISO dates → Unix seconds; numbers stay as they are
        parsed = pd.to_datetime(frame[col][dated], errors="coerce", utc=True, format="ISO8601")
        if parsed.isna().any():
            i = int(np.flatnonzero(dated)[int(np.flatnonzero(parsed.isna().to_numpy())[0])])
            raise InputError(str(path), f"timestamp {frame[col].iloc[i]!r} is neither a number nor a date",
                             "write Unix seconds or ISO 8601 dates", line=i + 2)
        seconds = (parsed - pd.Timestamp("1970-01-01", tz="UTC")) // pd.Timedelta(seconds=1)
        times = times.astype("float64")
        times[dated] = seconds.to_numpy(dtype=np.float64)
    return times.to_numpy(), True


def _check_dataset_ids(frame: pd.DataFrame, path: Path) -> None:
    """dataset_id must be participant_id + 200948 where a file gives both."""
    if "participant_id" not in frame.columns or "dataset_id" not in frame.columns:
        return
    pid = pd.to_numeric(frame["participant_id"], errors="coerce").to_numpy()
    did = pd.to_numeric(frame["dataset_id"], errors="coerce").to_numpy()
    bad = ~np.isnan(pid) & ~np.isnan(did) & (did != pid + ML32M_EXT_USER_OFFSET)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(str(path), f"dataset_id {frame['dataset_id'].iloc[i]} is not participant_id "
                                    f"{frame['participant_id'].iloc[i]} + {ML32M_EXT_USER_OFFSET}",
                         "check the participant columns (the release sets dataset_id = participant_id + 200948)",
                         line=i + 2)


def _profiles(path: Path) -> tuple[pd.DataFrame, bool]:
    """The participants' own MovieLens ratings (user = dataset_id); the release gives no timestamps."""
    frame = read_csv(path, "p2-movielens-profiles.csv")
    _check_dataset_ids(frame, path)
    users = _participants(frame, path, ("dataset_id", "userId", "user_id"))
    item = pick_column(frame, ("movie_id", "movieId", "item_id"))
    rating = pick_column(frame, ("movielens_rating", "rating"))
    for label, col in (("movie id", item), ("rating", rating)):
        if col is None:
            raise InputError(str(path), f"no {label} column; found {list(frame.columns)}",
                             "profiles need movie_id and movielens_rating columns", line=1)
    times, dated = _timestamps(frame, pick_column(frame, ("timestamp", "rated_at", "time")), path)
    return pd.DataFrame({"user": users.to_numpy(), "item": check_ids(frame[item], "movie id", str(path), item),
                         "rating": numeric_column(frame, rating, path), "timestamp": times}), dated


def _ratings(path: Path) -> tuple[pd.DataFrame, bool, bool]:
    """A MovieLens-style ratings file (explicit-ratings.csv, implicit-ratings.csv, ML-32M's ratings.csv).

    Returns (frame, dated, implicit): a file without a rating column is implicit feedback (every
    rating 1.0); one without timestamps gets PARTICIPANT_TIMESTAMP throughout (no order)."""
    frame = read_csv(path, path.name)
    u = pick_column(frame, ("userId", "user_id", "dataset_id"))
    it = pick_column(frame, ("movieId", "movie_id", "item_id"))
    if u is None or it is None:
        raise InputError(str(path), f"expected userId, movieId[, rating, timestamp]; found {list(frame.columns)}",
                         "use the MovieLens ratings layout", line=1)
    rating = pick_column(frame, ("rating",))
    times, dated = _timestamps(frame, pick_column(frame, ("timestamp",)), path)
    values = np.ones(len(frame)) if rating is None else numeric_column(frame, rating, path)
    return pd.DataFrame({"user": check_ids(frame[u], "user id", str(path), u),
                         "item": check_ids(frame[it], "movie id", str(path), it),
                         "rating": values, "timestamp": times}), dated, rating is None


def _fallback_movies(path: Path) -> pd.DataFrame:
    """Title, year and genres from filtered-movies.csv or a MovieLens movies.csv (movieId, title, genres)."""
    frame = read_csv(path, path.name)
    item = pick_column(frame, ("movieId", "movie_id", "item_id", "id"))
    title = pick_column(frame, ("title", "movie_title", "name"))
    if item is None or title is None:
        raise InputError(str(path), f"expected movieId and title columns; found {list(frame.columns)}",
                         "use the MovieLens movies.csv layout (movieId,title,genres)", line=1)
    return movie_fields(frame, path, item, title, pick_column(frame, ("genres", "genre")))


def _items(folder: Path, columns: MovieColumns, base: Path | None) -> tuple[pd.DataFrame | None, dict[str, int]]:
    """database-movies.csv, completed by filtered-movies.csv / movies.csv for the movies it lacks."""
    items = None
    used: dict[str, int] = {}
    if (folder / "database-movies.csv").exists():
        items = _database_movies(folder / "database-movies.csv", columns)
        used["database-movies.csv"] = len(items)
    candidates = [folder / "filtered-movies.csv", folder / "movies.csv"]
    if base is not None:
        candidates.append(base.parent / "movies.csv")
    seen: set[Path] = set()
    for path in candidates:
        if not path.exists() or path.resolve() in seen:
            continue
        seen.add(path.resolve())
        extra = _fallback_movies(path)
        if items is not None:
            extra = extra[~extra.index.isin(items.index)]
        if len(extra):
            frame = extra if items is None else pd.concat([items, extra.astype(object)])
            items = frame.astype(object).where(pd.notna(frame), None)
        used[path.name] = len(extra)
    return items, used


def _choose_qrels(folder: Path, qrels: str) -> tuple[Path | None, list[Path]]:
    """``qrels/<qrels>.qrels``, else the one file whose name holds ``qrels`` (``*interest*``)."""
    qdir = folder / "qrels"
    files = sorted(qdir.glob("*.qrels")) if qdir.is_dir() else []
    exact = [f for f in files if f.stem == qrels]
    matching = exact or [f for f in files if qrels.lower() in f.stem.lower()]
    if len(matching) > 1:
        raise InputError(str(qdir), f"{len(matching)} qrels files match *{qrels}*: {[f.name for f in matching]}",
                         f"choose one with qrels= its name ({', '.join(f.stem for f in matching)})")
    return (matching[0] if matching else None), files


def load_ml32m_ext(path: Path, *, qrels: str = "interest", movie_columns=None,
                   ratings: str | os.PathLike | None = None, name: str | None = None) -> Collection:
    """The ML-32M-ext release folder, before or after its ``make.sh``.

    Interactions: ``ratings=`` (a path, or a file name in the folder such as
    ``implicit-ratings.csv``), else ``explicit-ratings.csv``, else ``ratings.csv`` (ML-32M), plus
    the participants' ``p2-movielens-profiles.csv`` (user = dataset_id) for participants the
    ratings file does not already hold — ``explicit-ratings.csv`` holds them all, so nobody is
    counted twice. Without timestamps every profile rating gets PARTICIPANT_TIMESTAMP: one
    constant time, no order. Items: ``database-movies.csv`` mapped by :class:`MovieColumns`
    (``movie_columns=`` overrides), completed from ``filtered-movies.csv`` / ``movies.csv`` for the
    movies it lacks. Human qrels: ``qrels/<qrels>.qrels``, else the one ``qrels/*<qrels>*.qrels``,
    else (for ``interest``) the 0–7 interest qrels converted from ``p2-ratings.csv``.
    """
    folder = Path(path)
    base = _base_ratings(folder, ratings)
    parts, sources, dated_any, implicit, counted_once = _rating_parts(folder, base)
    allr = pd.concat(parts, ignore_index=True)
    HALF_STARS.check(allr.rating, " + ".join(sources))
    inter, dropped = interaction_frame(allr.user, allr.item, allr.rating, allr.timestamp, " + ".join(sources))

    if movie_columns is not None and not isinstance(movie_columns, MovieColumns):
        movie_columns = MovieColumns.from_mapping(movie_columns)
    items, metadata_from = _items(folder, movie_columns or MovieColumns(), base)
    if items is None:
        items = items_frame(sorted(inter.item.unique()), {})

    human, qrels_files = _human_qrels(folder, qrels)
    judged = set(human.frame.docid) if human is not None else set()
    info = {"loader": "ml32m-ext", "source": str(folder), "interactions_from": sources,
            "qrels": human.name if human is not None else None, "qrels_files": [f.name for f in qrels_files],
            "duplicates_dropped": dropped, "timestamp_unit": "s" if dated_any else None,
            # one timestamp for all: the order of ratings means nothing (profiles have no times)
            "ordered": bool(inter.timestamp.nunique() > 1),
            "participants_counted_once": counted_once, "implicit": implicit, "metadata_from": metadata_from,
            "items_without_metadata": len((set(inter.item) | judged) - set(items.index)),
            "present": sorted(p.name for p in folder.iterdir())}
    return Collection(name or "ml-32m-ext", inter, items, human, info, HALF_STARS)


def _base_ratings(folder: Path, ratings: str | os.PathLike | None) -> Path | None:
    """The ratings file: ``ratings`` (a path, or a name in the folder), else the folder's default one."""
    if ratings is not None:
        base = Path(ratings)
        if not base.exists() and (folder / base).exists():
            base = folder / base
        return base
    return next((folder / f for f in ("explicit-ratings.csv", "ratings.csv") if (folder / f).exists()), None)


def _rating_parts(folder: Path, base: Path | None) -> tuple[list[pd.DataFrame], list[str], bool, bool, int]:
    """The ratings frames (``base``, then the profiles it lacks), their sources, whether any is dated,
    whether ``base`` is implicit, and how many participants ``base`` already held."""
    parts, sources = [], []
    dated_any, implicit = False, False
    if base is not None:
        frame, dated, implicit = _ratings(base)
        parts.append(frame)
        sources.append(str(base))
        dated_any = dated
    profiles = folder / "p2-movielens-profiles.csv"
    counted_once = 0
    if profiles.exists():
        prof, dated = _profiles(profiles)
        if parts:
            # make.sh appends the participants to explicit-ratings.csv: keep one copy of each
            held = prof.user.isin(set(parts[0].user.unique()))
            counted_once = int(prof.user[held].nunique())
            prof = prof[~held]
        if len(prof):
            parts.append(prof)
            sources.append(str(profiles))
        dated_any = dated_any or dated
    if not parts:
        raise InputError(str(folder), "no ratings found", "the folder needs explicit-ratings.csv, ratings.csv "
                                                          "or p2-movielens-profiles.csv")
    return parts, sources, dated_any, implicit, counted_once


def _human_qrels(folder: Path, qrels: str) -> tuple[Qrels | None, list[Path]]:
    """The human qrels named ``qrels`` (a file, else ``p2-ratings.csv`` for interest) and the qrels files seen."""
    chosen, qrels_files = _choose_qrels(folder, qrels)
    human = None
    if chosen is not None:
        human = read_qrels(chosen, name=chosen.stem)
    elif (folder / "p2-ratings.csv").exists() and qrels == "interest":
        human = p2_interest_qrels(folder / "p2-ratings.csv")
    elif qrels_files:
        raise InputError(str(folder / "qrels" / f"{qrels}.qrels"), "qrels file not found",
                         f"choose qrels= one of {[f.stem for f in qrels_files]}")
    return human, qrels_files


def _detect(path: Path) -> bool:
    return path.is_dir() and any((path / f).exists() for f in ("p2-ratings.csv", "p2-movielens-profiles.csv",
                                                                "explicit-ratings.csv"))


register_collection("ml32m-ext", load_ml32m_ext, "ML-32M-ext release folder (before or after its make.sh)",
                    fields=tuple(f.name for f in fields(MovieColumns) if f.name != "item"),
                    rating_scale=HALF_STARS, timestamp_unit="s", label_scale=INTEREST, detect=_detect)
