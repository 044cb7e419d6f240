"""Collections: users' rated histories with exact timestamps, item metadata, optional human qrels.

Loaders are registered by name (``ml-100k``) or recognised by layout when given a path:
MovieLens CSV (``ratings.csv`` + ``movies.csv``), the ML-32M-ext release folder, Amazon Reviews
2023 JSONL (BLaIR layout) and RecBole atomic files. Metadata fields use canonical names so the
judge's field sets work across collections: ``title``, ``year``, ``genres``, ``directors``,
``cast``, ``overview``, ``runtime``, ``languages``.

Nothing here imports torch or RecBole: MovieLens-100K is read from the installed ``recbole``
wheel's data folder, found with ``importlib.util.find_spec`` without importing the package.
"""

from __future__ import annotations

import ast
import csv
import gzip
import importlib.util
import inspect
import json
import os
import re
import warnings
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from ..errors import ConfigError, InputError
from .trec import Qrels, read_qrels

__all__ = [
    "Collection",
    "Split",
    "CollectionLoader",
    "MovieColumns",
    "COLLECTIONS",
    "INTERACTION_COLUMNS",
    "METADATA_FIELDS",
    "register_collection",
    "load_collection",
    "load_ml100k",
    "load_movielens_csv",
    "load_ml32m_ext",
    "load_amazon_reviews",
    "load_recbole_atomic",
    "p2_interest_qrels",
    "item_rating_stats",
    "ML32M_EXT_USER_OFFSET",
]

INTERACTION_COLUMNS = ("user", "item", "rating", "timestamp")
METADATA_FIELDS = ("title", "year", "genres", "directors", "cast", "overview", "runtime", "languages")
MULTI_VALUED = ("genres", "directors", "cast", "languages")

# p2-movielens-profiles.csv and p2-ratings.csv: dataset_id = participant_id + 200948
ML32M_EXT_USER_OFFSET = 200948


@dataclass(frozen=True, eq=False)
class Collection:
    """A recommendation collection.

    - ``interactions``: columns user (str), item (str), rating (float64), timestamp (int64, exact
      seconds — or the unit named in ``info["timestamp_unit"]``), one row per (user, item).
    - ``items``: indexed by item id (str); one column per metadata field (e.g. ``title``,
      ``year``, ``genres``). Multi-valued fields (genres, cast, directors, languages) hold tuples
      of strings; a missing value is None.
    - ``qrels``: optional human judgments (e.g. ML-32M-ext interest qrels, 0–7).
    - ``info``: provenance (source path, loader, options) recorded in outputs.
    """

    name: str
    interactions: pd.DataFrame
    items: pd.DataFrame
    qrels: Qrels | None = None
    info: Mapping[str, object] = field(default_factory=dict)

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(self.items.columns)

    @property
    def users(self) -> list[str]:
        return sorted(self.interactions.user.unique())

    def __repr__(self) -> str:
        i = self.interactions
        return (f"Collection({self.name!r}: {i.user.nunique()} users, {len(self.items)} items, "
                f"{len(i)} interactions, fields={list(self.fields)})")

    def sample_users(self, n: int, seed: int = 0) -> Collection:
        """A smaller collection of ``n`` users drawn by a seeded hash (stable across runs and machines).

        Items keep only those the sampled users rated; human qrels keep only the sampled users.
        """
        from .trec import hash_keys

        users = np.array(self.users, dtype=object)
        if n >= len(users):
            return self
        keys = hash_keys(users, np.full(len(users), "", dtype=object), seed)
        chosen = set(users[np.argsort(keys, kind="stable")[:n]])
        inter = self.interactions[self.interactions.user.isin(chosen)].reset_index(drop=True)
        items = self.items[self.items.index.isin(inter.item.unique())]
        qrels = None
        if self.qrels is not None:
            qf = self.qrels.frame[self.qrels.frame.qid.isin(chosen)]
            qrels = Qrels(self.qrels.name, qf.reset_index(drop=True)) if len(qf) else None
        info = {**self.info, "sample_users": {"n": n, "seed": seed}}
        return Collection(self.name, inter, items, qrels, info)


@dataclass(frozen=True, eq=False)
class Split:
    """A deterministic train/test (and optional validation) split of a collection's interactions.

    ``train``/``valid``/``test`` have the collection's interaction columns. ``info`` records the
    method and every parameter (cut timestamps, ratio, counts) so the split can be reproduced.
    """

    collection: Collection
    train: pd.DataFrame
    test: pd.DataFrame
    valid: pd.DataFrame | None = None
    info: Mapping[str, object] = field(default_factory=dict)

    @property
    def test_users(self) -> list[str]:
        return sorted(self.test.user.unique())

    def history(self) -> pd.DataFrame:
        """Interactions a recommender may see for a test user: train plus validation."""
        if self.valid is None or len(self.valid) == 0:
            return self.train
        return pd.concat([self.train, self.valid], ignore_index=True)


# ---------------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class CollectionLoader:
    name: str
    load: Callable[..., Collection]
    description: str
    # True when the loader takes a path as its first argument
    needs_path: bool


COLLECTIONS: dict[str, CollectionLoader] = {}


def register_collection(name: str, load: Callable[..., Collection], description: str,
                        needs_path: bool = True) -> None:
    """Register a loader under ``name``; a name can be registered once."""
    if name in COLLECTIONS:
        raise ConfigError(f"collection loader {name!r} is already registered")
    COLLECTIONS[name] = CollectionLoader(name, load, description, needs_path)


def read_collection_config(path: str | os.PathLike) -> dict:
    """Loader options from a TOML file, e.g. for ML-32M-ext's unpublished column names::

        [movie_columns]
        item = "ml_movie_id"
        title = "name_shown"

    A folder, an unreadable file or one that is not UTF-8 is an InputError naming the path (and
    the line of the first bad byte); ``format`` and ``movie_columns`` are checked for type here.
    """
    from .._io import read_toml

    src = os.fspath(path)
    p = Path(path)
    if p.is_dir():
        raise InputError(src, "collection config is a folder, not a TOML file", "name the .toml file")
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError(src, "collection config not found", "check the path") from None
    except OSError as exc:
        raise InputError(src, f"cannot read the collection config: {exc.strerror}", "check permissions") from None
    _check_utf8(raw, src, "collection config")
    options = read_toml(p, "collection config")
    if "format" in options and (not isinstance(options["format"], str) or options["format"] not in COLLECTIONS):
        raise InputError(src, f"format must be one of {', '.join(COLLECTIONS)}, not {options['format']!r}",
                         "fix the format key or leave it out")
    if "movie_columns" in options:
        try:
            MovieColumns.from_mapping(options["movie_columns"])
        except ConfigError as exc:
            raise InputError(src, str(exc), "[movie_columns] maps a field to a column name or a list of names") from None
    return options


def _check_utf8(raw: bytes, source: str, what: str) -> None:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(raw, exc, source, what) from None


def _not_utf8(raw: bytes, exc: UnicodeDecodeError, source: str, what: str) -> InputError:
    line = raw.count(b"\n", 0, exc.start) + 1
    return InputError(source, f"{what} is not UTF-8 text (byte 0x{raw[exc.start]:02x})", "save it as UTF-8", line=line)


def _utf8_error(path: Path, what: str) -> InputError:
    """The InputError for a file that failed to decode, with the line of its first bad byte."""
    try:
        raw = path.read_bytes()
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _not_utf8(raw, exc, str(path), what)
    except OSError:
        pass
    return InputError(str(path), f"{what} is not UTF-8 text", "save it as UTF-8")


def load_collection(name_or_path: str | os.PathLike, **options) -> Collection:
    """Load a collection by registered name (``ml-100k``) or from a path whose layout is detected.

    ``format=`` forces a loader for a path (one of the registered names). Unknown options raise
    :class:`~recjudge.errors.ConfigError` naming the options the loader accepts.
    """
    fmt = options.pop("format", None)
    key = os.fspath(name_or_path)
    if fmt is not None and not isinstance(fmt, str):
        raise ConfigError(f"format must be one of {', '.join(COLLECTIONS)}, not {fmt!r}")
    try:
        return _load(key, fmt, options)
    except OSError as exc:
        # a folder that cannot be listed, a file in place of a folder, a vanished file …
        where = exc.filename if exc.filename is not None else key
        raise InputError(os.fspath(where), f"cannot read: {exc.strerror or exc}",
                         "check that the path exists, is readable and is the kind (file or folder) expected") from None


def _load(key: str, fmt: str | None, options: dict) -> Collection:
    if fmt is None and key in COLLECTIONS and not COLLECTIONS[key].needs_path:
        return _call(COLLECTIONS[key], None, options)
    path = Path(key)
    if fmt is not None:
        if fmt not in COLLECTIONS:
            raise ConfigError(f"unknown collection format {fmt!r}; choose one of {', '.join(COLLECTIONS)}")
        loader = COLLECTIONS[fmt]
        return _call(loader, path if loader.needs_path else None, options)
    if not path.exists():
        named = ", ".join(n for n, l in COLLECTIONS.items() if not l.needs_path)
        raise InputError(key, "no such collection name or path",
                         f"use a registered name ({named}) or a folder/file that exists")
    return _call(COLLECTIONS[_detect_format(path)], path, options)


# options whose type a TOML collection config could get wrong (movie_columns is checked by MovieColumns)
_OPTION_TYPES = {
    "min_rating": ((int, float), "a number"),
    "name": (str, "a string"),
    "qrels": (str, "a qrels name (string)"),
    "ratings": ((str, os.PathLike), "a path"),
    "meta": ((str, os.PathLike), "a path"),
}


def _call(loader: CollectionLoader, path: Path | None, options: dict) -> Collection:
    params = inspect.signature(loader.load).parameters
    accepted = [p for p, v in params.items() if v.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(f"collection loader {loader.name!r} does not take option(s) {unknown}; "
                          f"it accepts {accepted or 'no options'}")
    for key, value in options.items():
        expected = _OPTION_TYPES.get(key)
        if expected is not None and value is not None and (isinstance(value, bool) or not isinstance(value, expected[0])):
            raise ConfigError(f"collection option {key} must be {expected[1]}, not {value!r}")
    return loader.load(path, **options) if loader.needs_path else loader.load(**options)


def _detect_format(path: Path) -> str:
    if path.is_file():
        name = path.name.removesuffix(".gz")
        if name.endswith((".jsonl", ".json")):
            return "amazon"
        if name.endswith(".inter"):
            return "recbole"
        raise InputError(str(path), "cannot tell the collection layout from this file name",
                         "point at a folder, a .jsonl(.gz) reviews file or a .inter file, or pass format=")
    names = {p.name for p in path.iterdir()}
    if "p2-ratings.csv" in names or "p2-movielens-profiles.csv" in names:
        return "ml32m-ext"
    if "ratings.csv" in names:
        return "movielens"
    if any(n.endswith(".inter") for n in names):
        return "recbole"
    if any(n.removesuffix(".gz").endswith(".jsonl") for n in names):
        return "amazon"
    raise InputError(str(path), "folder holds no recognised collection layout",
                     "expected ratings.csv + movies.csv (MovieLens), p2-ratings.csv (ML-32M-ext), "
                     "*.inter (RecBole atomic) or *.jsonl[.gz] (Amazon Reviews 2023)")


# ---------------------------------------------------------------------------------- helpers

_WHITESPACE = re.compile(r"\s")


def _id_problem(value) -> str | None:
    """Why ``value`` cannot be a user or item id, or None when it can."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "is empty"
    if isinstance(value, bool) or not isinstance(value, (str, int, np.integer)):
        return f"{value!r} is not a string"
    text = str(value)
    if text == "":
        return "is empty"
    if _WHITESPACE.search(text):
        return f"{text!r} holds whitespace, which TREC run and qrels files cannot keep"
    return None


def _ids(values, what: str, source: str, column: str | None = None, lines=None,
         rows: bool = False) -> np.ndarray:
    """User or item ids as an object array of str, read verbatim: ``NA``, ``null``, ``None`` and
    ``nan`` are ids like any other. A missing, empty or whitespace-holding id is an InputError
    naming the line: ``lines[i]`` for row i, by default i + 2 (a CSV with a header); with
    ``rows`` the message names the data row instead (no file line is known)."""
    arr = np.asarray(values.to_numpy(dtype=object) if isinstance(values, pd.Series) else list(values), dtype=object)
    # check each distinct value once: ids repeat (ML-32M: 32M ratings, ~290k distinct ids)
    uniq = pd.unique(arr)
    problems = {}
    for u in uniq:
        problem = _id_problem(u)
        if problem is not None:
            problems[u] = problem
    if problems:
        i = int(np.flatnonzero(pd.Series(arr).isin(list(problems)).to_numpy())[0])
        value = arr[i]
        named = f"{what} ({column})" if column else what
        problem = f"{named} {problems.get(value) or _id_problem(value)}"
        fix = f"give every row a {what} without spaces"
        if rows:
            raise InputError(source, f"{problem} in data row {i + 1}", fix)
        line = int(lines[i]) if lines is not None else i + 2
        raise InputError(source, problem, fix, line=line)
    if all(isinstance(u, str) for u in uniq):
        return arr
    return np.array([str(v) for v in arr], dtype=object)


def _interactions(user, item, rating, timestamp, source: str) -> tuple[pd.DataFrame, int]:
    """Canonical interaction frame; a repeated (user, item) keeps its latest rating at its first
    timestamp. Returns (frame, dropped). Ids are checked by the loaders (with file lines); the
    check here only guards callers that skip it."""
    df = pd.DataFrame({
        "user": pd.Series(_ids(user, "user id", source, rows=True), dtype=object),
        "item": pd.Series(_ids(item, "item id", source, rows=True), dtype=object),
        "rating": pd.to_numeric(pd.Series(rating), errors="coerce").astype("float64").to_numpy(),
        "timestamp": pd.to_numeric(pd.Series(timestamp), errors="coerce").to_numpy(),
    })
    for col in ("rating", "timestamp"):
        bad = np.flatnonzero(pd.isna(df[col]).to_numpy())
        if len(bad):
            raise InputError(source, f"{col} missing or not a number in data row {int(bad[0]) + 1}",
                             f"give every interaction a numeric {col}")
    ts = df.timestamp.to_numpy(dtype=np.float64)
    if not np.all(ts == np.floor(ts)):
        i = int(np.flatnonzero(ts != np.floor(ts))[0])
        raise InputError(source, f"timestamp {ts[i]!r} in data row {i + 1} is not a whole number",
                         "write timestamps as integer Unix times")
    df["timestamp"] = ts.astype(np.int64)
    n = len(df)
    # A repeated (user, item) keeps its latest rating at its first timestamp: the user met the item
    # then, so a time split must keep it in training (masked), not make it a test target.
    # The stable sort keeps file order among equal timestamps, so "latest" is well defined.
    df = df.sort_values("timestamp", kind="stable")
    first = df.groupby(["user", "item"], sort=False).timestamp.transform("min")
    df = df.assign(timestamp=first.to_numpy()).drop_duplicates(["user", "item"], keep="last")
    df = df.sort_values(["user", "timestamp", "item"], kind="stable").reset_index(drop=True)
    return df, n - len(df)


def _items_frame(index: Iterable[str], columns: Mapping[str, Iterable]) -> pd.DataFrame:
    idx = pd.Index([str(i) for i in index], name="item")
    data = {k: pd.Series(list(v), index=idx, dtype=object) for k, v in columns.items()}
    frame = pd.DataFrame(data, index=idx)
    frame = frame[~frame.index.duplicated(keep="first")]
    return frame.where(pd.notna(frame), None)


def _missing(value) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and np.isnan(value):
        return True
    return isinstance(value, str) and value.strip() == ""


def _to_int(value) -> int | None:
    if _missing(value):
        return None
    m = re.search(r"\d+", str(value))
    return int(m.group()) if m else None


def _to_year(value) -> int | None:
    if _missing(value):
        return None
    m = re.search(r"(1[89]\d\d|20\d\d)", str(value))
    return int(m.group()) if m else None


def _to_list(value, seps: str = "|") -> tuple[str, ...] | None:
    """Multi-valued field from a list, a JSON/Python list literal or a separated string."""
    if isinstance(value, (list, tuple)):
        return tuple(str(v).strip() for v in value if not _missing(v))
    if _missing(value):
        return None
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]"):
        for parse in (json.loads, ast.literal_eval):
            try:
                parsed = parse(text)
            except (ValueError, SyntaxError):
                continue
            if isinstance(parsed, list):
                out = []
                for v in parsed:
                    # TMDB style [{"name": ...}]
                    v = v.get("name") if isinstance(v, dict) else v
                    if not _missing(v):
                        out.append(str(v).strip())
                return tuple(out)
    parts = re.split("[" + re.escape(seps) + "]", text)
    return tuple(p.strip() for p in parts if p.strip())


def _to_text(value) -> str | None:
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v).strip() for v in value if not _missing(v))
    return None if _missing(value) else str(value).strip()


def _first_ragged_line(path: Path) -> int | None:
    # errors="replace": only the field count matters here
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        rows = csv.reader(fh)
        width = len(next(rows, []))
        for number, row in enumerate(rows, start=2):
            if row and len(row) != width:
                return number
    return None


def _read_csv(path: Path, what: str, required: Iterable[str] = ()) -> pd.DataFrame:
    if not path.exists():
        raise InputError(str(path), f"{what} not found", "check the folder holds this file")
    if path.is_dir():
        raise InputError(str(path), f"{what} is a folder, not a file", "put the CSV file there")
    try:
        # index_col=False + warning as error: a row with one field too many must be an error, not a
        # frame shifted by one column or a silently dropped field
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""], index_col=False)
    except pd.errors.ParserWarning:
        raise InputError(str(path), "a row has more fields than the header names",
                         "give every row exactly the header's fields (quote values holding commas)",
                         line=_first_ragged_line(path)) from None
    except UnicodeDecodeError:
        raise _utf8_error(path, what) from None
    except pd.errors.ParserError as exc:
        line = None
        m = re.search(r"line (\d+)", str(exc))
        if m:
            line = int(m.group(1))
        raise InputError(str(path), f"unreadable CSV: {exc}", "check quoting and the column count",
                         line=line) from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(str(path), f"missing column(s) {missing}; found {list(frame.columns)}",
                         f"the header line must name {list(required)}", line=1)
    return frame


def _numeric_column(frame: pd.DataFrame, col: str, path: Path, integer: bool = False) -> np.ndarray:
    values = pd.to_numeric(frame[col], errors="coerce")
    bad = values.isna().to_numpy().copy()  # pandas 3 hands out read-only views
    if integer:
        bad |= ~bad & (values.fillna(0) != np.floor(values.fillna(0))).to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        # header is line 1, data row i is line i + 2
        raise InputError(str(path), f"{col} {frame[col].iloc[i]!r} is not {'an integer' if integer else 'a number'}",
                         f"give every row a numeric {col}", line=i + 2)
    return values.to_numpy()


# ---------------------------------------------------------------------------------- MovieLens-100K

def _recbole_example_dir(name: str) -> Path:
    spec = importlib.util.find_spec("recbole")
    if spec is None or not spec.submodule_search_locations:
        raise InputError(name, "the embedded MovieLens-100K comes from the installed 'recbole' package, "
                               "which is not installed",
                         'pip install "recjudge[train]" (or recbole==1.2.1), or load a MovieLens folder by path')
    return Path(next(iter(spec.submodule_search_locations))) / "dataset_example" / name


def load_ml100k(*, min_rating: float | None = None) -> Collection:
    """MovieLens-100K as shipped in the installed ``recbole`` wheel (``dataset_example/ml-100k``).

    Fields: title, year (release year), genres. ``min_rating`` keeps only ratings >= it.
    """
    folder = _recbole_example_dir("ml-100k")
    c = load_recbole_atomic(folder / "ml-100k.inter", min_rating=min_rating, name="ml-100k")
    info = {**c.info, "loader": "ml-100k", "source": "recbole/dataset_example/ml-100k"}
    return replace(c, info=info)


# ---------------------------------------------------------------------------------- RecBole atomic

# RecBole field name → canonical field; ``class`` is the genre list in RecBole's MovieLens files
_ATOMIC_ITEM_FIELDS = {"movie_title": "title", "title": "title", "release_year": "year", "year": "year",
                       "class": "genres", "genre": "genres", "genres": "genres"}


def _read_atomic(path: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    """An atomic file: tab-separated, header ``name:type``. Returns (frame of str, name → type)."""
    if not path.exists():
        raise InputError(str(path), "atomic file not found", "check the path")
    if path.is_dir():
        raise InputError(str(path), "atomic file is a folder, not a file", "name the .inter/.item file")
    try:
        with open(path, encoding="utf-8") as fh:
            header = fh.readline().rstrip("\n").split("\t")
    except UnicodeDecodeError:
        raise _utf8_error(path, "atomic file") from None
    types = {}
    for col in header:
        if ":" not in col:
            raise InputError(str(path), f"header field {col!r} has no ':type'",
                             "write RecBole headers like user_id:token", line=1)
        name, typ = col.rsplit(":", 1)
        types[name] = typ
    try:
        frame = pd.read_csv(path, sep="\t", dtype=str, header=0, names=list(types), index_col=False,
                            keep_default_na=False, na_values=[""], quoting=csv.QUOTE_NONE, engine="c")
    except UnicodeDecodeError:
        raise _utf8_error(path, "atomic file") from None
    except pd.errors.ParserError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise InputError(str(path), f"unreadable atomic file: {exc}",
                         f"write {len(types)} tab-separated fields per line, as the header names",
                         line=int(m.group(1)) if m else None) from None
    return frame, types


def load_recbole_atomic(path: Path, *, min_rating: float | None = None, name: str | None = None) -> Collection:
    """RecBole atomic files: ``<name>.inter`` (user_id, item_id, rating, timestamp) and optional ``<name>.item``.

    ``path`` is the folder (holding one ``.inter``) or the ``.inter`` file. A file without a rating
    column is implicit feedback: every rating is 1.0 (recorded in ``info``).
    """
    path = Path(path)
    if path.is_dir():
        inters = sorted(path.glob("*.inter"))
        if len(inters) != 1:
            raise InputError(str(path), f"expected one .inter file, found {len(inters)}",
                             "point at the .inter file itself")
        path = inters[0]
    stem = path.name[: -len(".inter")]
    frame, _ = _read_atomic(path)
    cols = {c: c for c in frame.columns}
    for want in ("user_id", "item_id", "timestamp"):
        if want not in cols:
            raise InputError(str(path), f"no {want} column; found {list(frame.columns)}",
                             f"name the column {want}:token (or {want}:float for timestamp)", line=1)
    implicit = "rating" not in frame.columns
    rating = np.ones(len(frame)) if implicit else _numeric_column(frame, "rating", path)
    timestamp = _numeric_column(frame, "timestamp", path)
    users = _ids(frame.user_id, "user id", str(path), "user_id")
    item_ids = _ids(frame.item_id, "item id", str(path), "item_id")
    inter, dropped = _interactions(users, item_ids, rating, timestamp, str(path))
    if min_rating is not None:
        inter = inter[inter.rating >= min_rating].reset_index(drop=True)
    item_path = path.with_name(stem + ".item")
    if item_path.exists():
        iframe, itypes = _read_atomic(item_path)
        if "item_id" not in iframe.columns:
            raise InputError(str(item_path), "no item_id column", "name the column item_id:token", line=1)
        columns = {}
        for col, typ in itypes.items():
            if col == "item_id":
                continue
            canon = _ATOMIC_ITEM_FIELDS.get(col, col)
            values = iframe[col]
            if canon == "year":
                columns[canon] = [_to_year(v) for v in values]
            elif canon == "title":
                columns[canon] = [_to_text(v) for v in values]
            elif typ.endswith("_seq"):
                columns[canon] = [_to_list(v, " ") for v in values]
            else:
                columns[canon] = [_to_text(v) for v in values]
        items = _items_frame(_ids(iframe.item_id, "item id", str(item_path), "item_id"), columns)
    else:
        items = _items_frame(sorted(inter.item.unique()), {})
    info = {"loader": "recbole", "source": str(path), "implicit": implicit, "duplicates_dropped": dropped,
            "min_rating": min_rating, "timestamp_unit": "s"}
    return Collection(name or stem, inter, items, None, info)


# ---------------------------------------------------------------------------------- MovieLens CSV

_TITLE_YEAR = re.compile(r"^(.*?)\s*\((\d{4})(?:[-–]\d{0,4})?\)\s*$")


def _split_title(title) -> tuple[str | None, int | None]:
    if _missing(title):
        return None, None
    text = str(title).strip()
    m = _TITLE_YEAR.match(text)
    if m:
        return m.group(1), int(m.group(2))
    return text, None


def _movielens_items(folder: Path, source_movies: Path) -> pd.DataFrame:
    movies = _read_csv(source_movies, "movies.csv", ["movieId", "title", "genres"])
    titles, years = zip(*(_split_title(t) for t in movies.title)) if len(movies) else ((), ())
    genres = [() if g == "(no genres listed)" else _to_list(g, "|") for g in movies.genres]
    columns: dict[str, list] = {"title": list(titles), "year": list(years), "genres": genres}
    items = _items_frame(_ids(movies.movieId, "movie id", str(source_movies), "movieId"), columns)
    links = folder / "links.csv"
    if links.exists():
        lf = _read_csv(links, "links.csv", ["movieId"])
        lf.index = pd.Index(_ids(lf.movieId, "movie id", str(links), "movieId"))
        lf = lf[~lf.index.duplicated(keep="first")]
        for src, dst in (("imdbId", "imdb_id"), ("tmdbId", "tmdb_id")):
            if src in lf.columns:
                # object dtype: pandas 3 would infer its "str" dtype and turn None into NaN
                items[dst] = pd.Series([None if _missing(v) else str(v) for v in lf[src].reindex(items.index)],
                                       index=items.index, dtype=object)
    tags = folder / "tags.csv"
    if tags.exists():
        tf = _read_csv(tags, "tags.csv", ["movieId", "tag"])
        tf["tag"] = tf["tag"].fillna("").str.strip().str.lower()
        tf = tf[tf.tag != ""]
        counts = tf.groupby(["movieId", "tag"]).size().reset_index(name="n")
        # most used tags first, then alphabetical: deterministic
        counts = counts.sort_values(["movieId", "n", "tag"], ascending=[True, False, True], kind="stable")
        per_item = counts.groupby("movieId").tag.apply(tuple)
        items["tags"] = pd.Series([per_item.get(i) for i in items.index], index=items.index, dtype=object)
    return items.where(pd.notna(items), None)


def load_movielens_csv(path: Path, *, min_rating: float | None = None, name: str | None = None) -> Collection:
    """MovieLens CSV layout (ml-latest, ml-25m, ML-32M): ratings.csv, movies.csv, optional links.csv, tags.csv.

    Titles ``Heat (1995)`` become title ``Heat`` and year 1995; genres split on ``|``.
    """
    folder = Path(path)
    ratings_path = folder / "ratings.csv"
    ratings = _read_csv(ratings_path, "ratings.csv", ["userId", "movieId", "rating", "timestamp"])
    rating = _numeric_column(ratings, "rating", ratings_path)
    ts = _numeric_column(ratings, "timestamp", ratings_path, integer=True)
    users = _ids(ratings.userId, "user id", str(ratings_path), "userId")
    movies = _ids(ratings.movieId, "movie id", str(ratings_path), "movieId")
    inter, dropped = _interactions(users, movies, rating, ts, str(ratings_path))
    if min_rating is not None:
        inter = inter[inter.rating >= min_rating].reset_index(drop=True)
    items = _movielens_items(folder, folder / "movies.csv")
    info = {"loader": "movielens", "source": str(folder), "duplicates_dropped": dropped,
            "min_rating": min_rating, "timestamp_unit": "s"}
    return Collection(name or folder.name, inter, items, None, info)


# ---------------------------------------------------------------------------------- ML-32M-ext

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


def _pick(frame: pd.DataFrame, candidates: tuple[str, ...]) -> str | None:
    lower = {c.lower(): c for c in frame.columns}
    for c in candidates:
        if c in frame.columns:
            return c
        if c.lower() in lower:
            return lower[c.lower()]
    return None


def _database_movies(path: Path, columns: MovieColumns) -> pd.DataFrame:
    frame = _read_csv(path, "database-movies.csv")
    item_col = _pick(frame, columns.item)
    if item_col is None:
        raise InputError(str(path), f"no movie id column among {list(columns.item)}; found {list(frame.columns)}",
                         "map it in a collection config (--collection-config FILE with [movie_columns] item = \"<column>\")", line=1)
    out: dict[str, list] = {}
    for f in fields(columns):
        if f.name == "item":
            continue
        col = _pick(frame, getattr(columns, f.name))
        if col is None:
            continue
        values = frame[col]
        if f.name == "year":
            out["year"] = [_to_year(v) for v in values]
        elif f.name == "runtime":
            out["runtime"] = [_to_int(v) for v in values]
        elif f.name in MULTI_VALUED:
            out[f.name] = [_to_list(v, "|,") for v in values]
        else:
            out[f.name] = [_to_text(v) for v in values]
    return _items_frame(_ids(frame[item_col], "movie id", str(path), item_col), out)


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
    if _missing(value):
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
    column = _pick(frame, id_columns)
    if column is not None and not strict:
        return frame[column]
    if column is not None:
        return pd.Series(_ids(frame[column], "participant id", str(path), column), dtype=object)
    if "participant_id" in frame.columns:
        pid = _numeric_column(frame, "participant_id", path, integer=True).astype(np.int64)
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
    frame = _read_csv(path, "p2-ratings.csv", ["movie_id", "interest_level"])
    qids = _participants(frame, path, ("dataset_id",), strict=False)
    ranks = frame["rank_p2"] if "rank_p2" in frame.columns else pd.Series([None] * len(frame))
    rows = []
    for i, (q, d, level, rank) in enumerate(zip(qids, frame.movie_id, frame.interest_level, ranks)):
        line = i + 2
        label = _interest_label(level, path, line)
        if not _missing(rank):
            r = int(float(rank)) if re.fullmatch(r"\s*[123](\.0+)?\s*", str(rank)) else None
            if r not in RANK_LABELS:
                raise InputError(str(path), f"rank_p2 {rank!r} is not 1, 2 or 3", "leave rank_p2 empty or use 1–3",
                                 line=line)
            label = RANK_LABELS[r]
        if label is None:
            continue
        if _missing(q) or _missing(d):
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


def _profiles(path: Path) -> pd.DataFrame:
    frame = _read_csv(path, "p2-movielens-profiles.csv")
    users = _participants(frame, path, ("dataset_id", "userId", "user_id"))
    item = _pick(frame, ("movie_id", "movieId", "item_id"))
    rating = _pick(frame, ("rating", "movielens_rating"))
    ts = _pick(frame, ("timestamp", "rated_at", "time"))
    for label, col in (("movie id", item), ("rating", rating), ("timestamp", ts)):
        if col is None:
            raise InputError(str(path), f"no {label} column; found {list(frame.columns)}",
                             "profiles need movie_id, rating and timestamp columns", line=1)
    times = pd.to_numeric(frame[ts], errors="coerce")
    dated = times.isna().to_numpy()
    if dated.any():
        # ISO dates → Unix seconds; numbers stay as they are
        parsed = pd.to_datetime(frame[ts][dated], errors="coerce", utc=True, format="ISO8601")
        if parsed.isna().any():
            i = int(np.flatnonzero(dated)[int(np.flatnonzero(parsed.isna().to_numpy())[0])])
            raise InputError(str(path), f"timestamp {frame[ts].iloc[i]!r} is neither a number nor a date",
                             "write Unix seconds or ISO 8601 dates", line=i + 2)
        seconds = (parsed - pd.Timestamp("1970-01-01", tz="UTC")) // pd.Timedelta(seconds=1)
        times = times.astype("float64")
        times[dated] = seconds.to_numpy(dtype=np.float64)
    return pd.DataFrame({"user": users.to_numpy(), "item": _ids(frame[item], "movie id", str(path), item),
                         "rating": _numeric_column(frame, rating, path), "timestamp": times.to_numpy()})


def load_ml32m_ext(path: Path, *, qrels: str = "interest", movie_columns=None,
                   ratings: str | os.PathLike | None = None, name: str | None = None) -> Collection:
    """The ML-32M-ext release folder (Smucker & Chamani 2025).

    Interactions: ``explicit-ratings.csv`` (or ``ratings.csv``, or ``ratings=`` a MovieLens
    ratings.csv) plus ``p2-movielens-profiles.csv`` (participants' own ratings, user = dataset_id).
    Items: ``database-movies.csv`` mapped by :class:`MovieColumns` (``movie_columns=`` overrides),
    falling back to ``movies.csv``. Human qrels: ``qrels/<qrels>.qrels`` when present, else the
    0–7 interest qrels converted from ``p2-ratings.csv``; every ``qrels/*.qrels`` is listed in info.
    """
    folder = Path(path)
    parts = []
    sources = []
    base = Path(ratings) if ratings is not None else next(
        (folder / f for f in ("explicit-ratings.csv", "ratings.csv") if (folder / f).exists()), None)
    if base is not None:
        bf = _read_csv(base, base.name)
        u = _pick(bf, ("userId", "user_id", "dataset_id"))
        it = _pick(bf, ("movieId", "movie_id", "item_id"))
        if u is None or it is None or "rating" not in bf.columns or "timestamp" not in bf.columns:
            raise InputError(str(base), f"expected userId, movieId, rating, timestamp; found {list(bf.columns)}",
                             "use the MovieLens ratings layout", line=1)
        parts.append(pd.DataFrame({"user": _ids(bf[u], "user id", str(base), u),
                                   "item": _ids(bf[it], "movie id", str(base), it),
                                   "rating": _numeric_column(bf, "rating", base),
                                   "timestamp": _numeric_column(bf, "timestamp", base, integer=True)}))
        sources.append(str(base))
    profiles = folder / "p2-movielens-profiles.csv"
    if profiles.exists():
        parts.append(_profiles(profiles))
        sources.append(str(profiles))
    if not parts:
        raise InputError(str(folder), "no ratings found", "the folder needs explicit-ratings.csv, ratings.csv "
                                                          "or p2-movielens-profiles.csv")
    allr = pd.concat(parts, ignore_index=True)
    inter, dropped = _interactions(allr.user, allr.item, allr.rating, allr.timestamp, " + ".join(sources))

    if movie_columns is not None and not isinstance(movie_columns, MovieColumns):
        movie_columns = MovieColumns.from_mapping(movie_columns)
    columns = movie_columns or MovieColumns()
    if (folder / "database-movies.csv").exists():
        items = _database_movies(folder / "database-movies.csv", columns)
    elif (folder / "movies.csv").exists():
        items = _movielens_items(folder, folder / "movies.csv")
    else:
        items = _items_frame(sorted(inter.item.unique()), {})

    qrels_files = sorted((folder / "qrels").glob("*.qrels")) if (folder / "qrels").is_dir() else []
    human = None
    chosen = folder / "qrels" / f"{qrels}.qrels"
    if chosen.exists():
        human = read_qrels(chosen, name=qrels)
    elif (folder / "p2-ratings.csv").exists() and qrels == "interest":
        human = p2_interest_qrels(folder / "p2-ratings.csv")
    elif qrels_files:
        raise InputError(str(chosen), "qrels file not found",
                         f"choose qrels= one of {[f.stem for f in qrels_files]}")
    info = {"loader": "ml32m-ext", "source": str(folder), "interactions_from": sources,
            "qrels": qrels if human is not None else None, "qrels_files": [f.name for f in qrels_files],
            "duplicates_dropped": dropped, "timestamp_unit": "s",
            "present": sorted(p.name for p in folder.iterdir())}
    return Collection(name or "ml-32m-ext", inter, items, human, info)


# ---------------------------------------------------------------------------------- Amazon 2023

def _jsonl(path: Path) -> Iterable[tuple[int, dict]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    if path.is_dir():
        raise InputError(str(path), "expected a JSONL file, found a folder", "name the file")
    try:
        # bytes, decoded line by line: a bad byte is reported on its own line
        with opener(path, "rb") as fh:
            for n, raw in enumerate(fh, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InputError(str(path), f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", "save it as UTF-8",
                                     line=n) from None
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(str(path), f"invalid JSON: {exc.msg}", "write one JSON object per line",
                                     line=n) from None
                if not isinstance(obj, dict):
                    raise InputError(str(path), "line is not a JSON object", "write one object per line", line=n)
                yield n, obj
    except (OSError, EOFError) as exc:
        raise InputError(str(path), f"unreadable file: {exc}", "check the file (and its gzip compression)") from None


def load_amazon_reviews(path: Path, *, meta: str | os.PathLike | None = None, name: str | None = None,
                        min_rating: float | None = None) -> Collection:
    """Amazon Reviews 2023 (BLaIR layout): reviews JSONL (user_id, parent_asin, rating, timestamp) and item meta.

    ``path`` is a reviews file (``<Category>.jsonl[.gz]``) or a folder holding it and
    ``meta_<Category>.jsonl[.gz]``. Timestamps stay exact in the file's unit (milliseconds in the
    2023 release; ``info["timestamp_unit"]``). Repeated reviews of an item keep the latest.
    """
    path = Path(path)
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.name.removesuffix(".gz").endswith(".jsonl"))
        reviews = [p for p in found if not p.name.startswith("meta_")]
        if len(reviews) != 1:
            raise InputError(str(path), f"expected one reviews .jsonl[.gz] file, found {len(reviews)}",
                             "point at the reviews file itself")
        path = reviews[0]
    if meta is None:
        for cand in (path.with_name("meta_" + path.name),
                     path.with_name("meta_" + path.name.removesuffix(".gz")),
                     path.with_name("meta_" + path.name + ".gz")):
            if cand.exists():
                meta = cand
                break
    users, items, ratings, times = [], [], [], []
    for n, obj in _jsonl(path):
        missing = [k for k in ("user_id", "parent_asin", "rating", "timestamp") if k not in obj]
        if missing:
            raise InputError(str(path), f"review lacks {missing}", "each review needs user_id, parent_asin, "
                                                                   "rating and timestamp", line=n)
        for key, what in (("user_id", "user id"), ("parent_asin", "item id")):
            problem = _id_problem(obj[key])
            if problem is not None:
                raise InputError(str(path), f"{what} ({key}) {problem}",
                                 f"give every review a {what} without spaces", line=n)
        try:
            r, t = float(obj["rating"]), float(obj["timestamp"])
            if isinstance(obj["rating"], bool) or isinstance(obj["timestamp"], bool) or not np.isfinite(r) \
                    or not np.isfinite(t) or t != np.floor(t):
                raise ValueError
        except (TypeError, ValueError):
            raise InputError(str(path), f"rating {obj['rating']!r} or timestamp {obj['timestamp']!r} not numeric",
                             "write a number for the rating and a whole number for the timestamp",
                             line=n) from None
        t = int(t)  # exact: Unix milliseconds stay far below 2**53
        users.append(str(obj["user_id"]))
        items.append(str(obj["parent_asin"]))
        ratings.append(r)
        times.append(t)
    if not users:
        raise InputError(str(path), "no reviews", "the file needs at least one review line")
    inter, dropped = _interactions(users, items, ratings, times, str(path))
    if min_rating is not None:
        inter = inter[inter.rating >= min_rating].reset_index(drop=True)
    unit = "ms" if int(inter.timestamp.max()) > 10**11 else "s"
    if meta is not None:
        meta = Path(meta)
        ids, cols = [], {k: [] for k in ("title", "features", "description", "categories", "store", "price")}
        for n, obj in _jsonl(meta):
            if "parent_asin" not in obj:
                raise InputError(str(meta), "item lacks parent_asin", "each meta line needs parent_asin", line=n)
            problem = _id_problem(obj["parent_asin"])
            if problem is not None:
                raise InputError(str(meta), f"item id (parent_asin) {problem}",
                                 "give every item an id without spaces", line=n)
            ids.append(str(obj["parent_asin"]))
            cols["title"].append(_to_text(obj.get("title")))
            cols["features"].append(_to_list(obj.get("features")) or None)
            cols["description"].append(_to_text(obj.get("description")))
            cols["categories"].append(_to_list(obj.get("categories")) or None)
            cols["store"].append(_to_text(obj.get("store")))
            price = obj.get("price")
            cols["price"].append(None if _missing(price) or price == "None" else str(price))
        item_frame = _items_frame(ids, cols)
    else:
        item_frame = _items_frame(sorted(inter.item.unique()), {})
    stem = path.name.removesuffix(".gz").removesuffix(".jsonl")
    info = {"loader": "amazon", "source": str(path), "meta": str(meta) if meta else None,
            "duplicates_dropped": dropped, "timestamp_unit": unit, "min_rating": min_rating}
    return Collection(name or f"amazon-{stem}", inter, item_frame, None, info)


# ---------------------------------------------------------------------------------- derived fields

def item_rating_stats(interactions: pd.DataFrame) -> pd.DataFrame:
    """``avg_rating`` and ``num_ratings`` per item from the given (training) interactions only."""
    g = interactions.groupby("item").rating
    return pd.DataFrame({"avg_rating": g.mean(), "num_ratings": g.size().astype(np.int64)})


register_collection("ml-100k", load_ml100k, "MovieLens-100K from the installed recbole package",
                    needs_path=False)
register_collection("movielens", load_movielens_csv, "MovieLens CSV folder (ratings.csv, movies.csv, …)")
register_collection("ml32m-ext", load_ml32m_ext, "ML-32M-ext release folder")
register_collection("amazon", load_amazon_reviews, "Amazon Reviews 2023 JSONL (reviews + meta)")
register_collection("recbole", load_recbole_atomic, "RecBole atomic files (.inter, .item)")
