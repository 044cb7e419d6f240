"""Collections: the ``Collection`` record, the registry of collection families and ``load_collection``.

One module per family registers what it declares — its loader, metadata fields, rating scale and
timestamp unit: ``movielens`` (MovieLens-100K from the ``recbole`` wheel, MovieLens CSV),
``ml32m_ext`` (the ML-32M-ext release), ``amazon`` (Amazon Reviews 2023) and ``recbole_atomic``.
The family modules are imported on first use of the registry, so importing this package stays
light. Metadata fields use canonical names so the judge's field sets work across collections:
``title``, ``year``, ``genres``, ``directors``, ``cast``, ``overview``, ``runtime``, ``languages``
for films; a family may declare others (Amazon: ``description``, ``features``, …).

Nothing here imports torch or RecBole: MovieLens-100K is read from the installed ``recbole``
wheel's data folder, found with ``importlib.util.find_spec`` without importing the package.
"""

from __future__ import annotations

import importlib
import inspect
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping

import numpy as np
import pandas as pd

from ...errors import ConfigError, InputError
from ..trec import Qrels
from ._read import check_utf8

__all__ = [
    "Collection",
    "RatingScale",
    "STARS",
    "HALF_STARS",
    "INTEREST",
    "CollectionFamily",
    "CollectionLoader",
    "COLLECTIONS",
    "INTERACTION_COLUMNS",
    "METADATA_FIELDS",
    "register_collection",
    "load_collection",
    "read_collection_config",
    "collection_fields",
    "item_rating_stats",
    # from the family modules, imported on first use
    "MovieColumns",
    "load_ml100k",
    "load_movielens_csv",
    "load_ml32m_ext",
    "load_amazon_reviews",
    "load_recbole_atomic",
    "p2_interest_qrels",
    "ML32M_EXT_USER_OFFSET",
]

INTERACTION_COLUMNS = ("user", "item", "rating", "timestamp")
METADATA_FIELDS = ("title", "year", "genres", "directors", "cast", "overview", "runtime", "languages")

# the family modules, in the order layouts are recognised (ML-32M-ext before plain MovieLens)
_FAMILY_MODULES = ("ml32m_ext", "movielens", "recbole_atomic", "amazon")
# names the family modules define, re-exported here lazily
_LAZY = {
    "load_ml100k": "movielens", "load_movielens_csv": "movielens",
    "load_ml32m_ext": "ml32m_ext", "MovieColumns": "ml32m_ext", "p2_interest_qrels": "ml32m_ext",
    "ML32M_EXT_USER_OFFSET": "ml32m_ext",
    "load_amazon_reviews": "amazon", "load_recbole_atomic": "recbole_atomic",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


@dataclass(frozen=True)
class RatingScale:
    """The scale of a collection's ratings, as the judge's prompt states it (``ratings from 1 to 5``).

    ``step`` is the finest difference between two ratings (1 for stars, 0.5 for half stars; 0 for
    an observed range, which has none).
    """

    low: float
    high: float
    step: float
    name: str

    @property
    def low_text(self) -> str:
        return f"{self.low:g}"

    @property
    def high_text(self) -> str:
        return f"{self.high:g}"

    def describe(self) -> str:
        return f"{self.low_text}–{self.high_text} {self.name}"

    def check(self, ratings, source: str) -> None:
        """An InputError naming ``source`` when a rating lies outside the scale or off its steps."""
        values = np.asarray(ratings, dtype=np.float64)
        off = (values < self.low) | (values > self.high)
        if self.step > 0:  # an observed range (step 0) has no steps
            off |= np.abs(values / self.step - np.round(values / self.step)) > 1e-9
        if off.any():
            raise InputError(source, f"rating {values[np.flatnonzero(off)[0]]:g} is not on the {self.describe()} "
                                     f"scale this collection declares",
                             "check the file, or load it with a loader whose scale fits (format=recbole infers it)")

    @classmethod
    def fitting(cls, ratings) -> RatingScale:
        """The declared scale that holds every rating (1–5 stars, then 0.5–5 half stars), else the observed range."""
        values = np.asarray(ratings, dtype=np.float64)
        if len(values) == 0:
            return STARS
        for scale in (STARS, HALF_STARS):
            try:
                scale.check(values, "")
            except InputError:
                continue
            return scale
        return cls(float(values.min()), float(values.max()), 0.0, "(observed range)")

    def as_dict(self) -> dict:
        return {"low": self.low, "high": self.high, "step": self.step, "name": self.name}


STARS = RatingScale(1.0, 5.0, 1.0, "stars")
HALF_STARS = RatingScale(0.5, 5.0, 0.5, "half stars")
# ML-32M-ext interest qrels: 0 not interested … 4 extremely, 5/6/7 the movies ranked 3rd/2nd/1st
INTEREST = RatingScale(0.0, 7.0, 1.0, "interest")


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
    - ``rating_scale``: the scale of ``interactions.rating``, declared by the collection's family.
    """

    name: str
    interactions: pd.DataFrame
    items: pd.DataFrame
    qrels: Qrels | None = None
    info: Mapping[str, object] = field(default_factory=dict)
    # None: the standard scale the ratings fit (1–5 stars, 0.5–5 half stars), else their range
    rating_scale: RatingScale | None = None

    def __post_init__(self):
        if self.rating_scale is None:
            object.__setattr__(self, "rating_scale", RatingScale.fitting(self.interactions["rating"]))

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

    def sample_users(self, n: int, seed: int = 0, keep_judged: bool = True) -> Collection:
        """A smaller collection of ``n`` users drawn by a seeded hash (stable across runs and machines).

        With ``keep_judged`` the users the human qrels judge are always kept, on top of the ``n``
        drawn (Penha et al. 2025: 10,000 sampled ML-32M users plus the 51 participants), and the
        human qrels stay whole. Items keep only those the kept users rated.
        """
        from ..trec import hash_keys

        users = np.array(self.users, dtype=object)
        judged = set(self.qrels.frame.qid) if keep_judged and self.qrels is not None else set()
        others = np.array([u for u in users if u not in judged], dtype=object)
        if n >= len(others):
            return self
        keys = hash_keys(others, np.full(len(others), "", dtype=object), seed)
        chosen = set(others[np.argsort(keys, kind="stable")[:n]]) | (judged & set(users))
        info = {**self.info, "sample_users": {"n": n, "seed": seed, "kept_judged": len(judged & set(users))}}
        return self._restricted(self.interactions.user.isin(chosen), info, keep_qrels=keep_judged)

    def min_rating(self, threshold: float) -> Collection:
        """Only the ratings at or above ``threshold``: the positives an implicit-feedback recommender
        trains on (the ML-32M-ext release's ``implicit-ratings.csv`` keeps ratings >= 4). The human
        qrels stay whole, so a judged user left with no rating stays visible as one no system ranks."""
        keep = self.interactions.rating >= threshold
        info = {**self.info, "min_rating": {"threshold": float(threshold), "kept": int(keep.sum()),
                                            "dropped_interactions": int((~keep).sum())}}
        return self._restricted(keep, info, keep_qrels=True)

    def min_interactions(self, n: int, keep_judged: bool = True) -> Collection:
        """Users and items with at least ``n`` interactions, iterated to a fixed point (an n-core):
        dropping a rare item can leave a user below ``n``, and the other way round.

        With ``keep_judged`` the users the human qrels judge are exempt from the user threshold
        (their ratings of the items that stay are kept) and listed in ``info`` when they hold fewer
        than ``n``; a judged user left with no rating at all is an error naming them, never a user
        silently dropped from the evaluation.
        """
        from ...errors import ConfigError

        inter = self.interactions
        judged = set(self.qrels.frame.qid) if keep_judged and self.qrels is not None else set()
        exempt = inter.user.isin(judged).to_numpy()
        keep = np.ones(len(inter), dtype=bool)
        rounds = 0
        while True:
            rounds += 1
            sub = inter[keep]
            ucount = sub.user.map(sub.user.value_counts())
            icount = sub.item.map(sub.item.value_counts())
            drop = ((ucount < n) & ~exempt[keep]) | (icount < n)
            if not drop.any():
                break
            keep[np.flatnonzero(keep)[drop.to_numpy()]] = False
        kept_counts = inter[keep].user.value_counts()
        had = set(inter.user[exempt])
        lost = sorted(had - set(kept_counts.index))
        if lost:
            raise ConfigError(f"--min-interactions {n} removes every rating of {len(lost)} user(s) the human qrels "
                              f"judge ({', '.join(lost[:10])}{' …' if len(lost) > 10 else ''}): their movies all have "
                              f"fewer than {n} ratings, so no system could rank them; lower --min-interactions")
        below = sorted(u for u in had if kept_counts.get(u, 0) < n)
        info = {**self.info, "min_interactions": {"n": n, "iterated": True, "rounds": rounds,
                                                   "dropped_interactions": int((~keep).sum()),
                                                   **({"judged_kept_below_n": below} if judged else {})}}
        return self._restricted(pd.Series(keep, index=inter.index), info, keep_qrels=keep_judged)

    def _restricted(self, mask: pd.Series, info: Mapping[str, object], keep_qrels: bool = False) -> Collection:
        """The interactions under ``mask``; the human qrels whole (``keep_qrels``: a judged user who
        has no rating left stays visible, so the split can say it is not ranked) or cut to the users kept."""
        inter = self.interactions[mask.to_numpy()].reset_index(drop=True)
        items = self.items[self.items.index.isin(inter.item.unique())]
        qrels = self.qrels
        if self.qrels is not None and not keep_qrels:
            qf = self.qrels.frame[self.qrels.frame.qid.isin(set(inter.user))]
            qrels = Qrels(self.qrels.name, qf.reset_index(drop=True)) if len(qf) else None
        return Collection(self.name, inter, items, qrels, info, self.rating_scale)


# ---------------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class CollectionFamily:
    """A registered collection family: its loader and what its collections declare."""

    name: str
    load: Callable[..., Collection]
    description: str
    # True when the loader takes a path as its first argument
    needs_path: bool = True
    # metadata fields its items can carry (the judge's field vocabulary)
    fields: tuple[str, ...] = ()
    # None: each collection declares the scale its ratings fit (RecBole atomic files hold any scale)
    rating_scale: RatingScale | None = None
    timestamp_unit: str = "s"
    # the scale of its human qrels, when it ships some
    label_scale: RatingScale | None = None
    # recognises a path in this family's layout (load_collection(path) without format=)
    detect: Callable[[Path], bool] | None = None


CollectionLoader = CollectionFamily  # the earlier name


class _Registry(Mapping[str, CollectionFamily]):
    """The registered families; the family modules register themselves on first use."""

    def __init__(self) -> None:
        self._families: dict[str, CollectionFamily] = {}
        self._loaded = False

    def _load(self) -> dict[str, CollectionFamily]:
        if not self._loaded:
            self._loaded = True
            for module in _FAMILY_MODULES:
                importlib.import_module(f"{__name__}.{module}")
        return self._families

    def add(self, family: CollectionFamily) -> None:
        if family.name in self._families:
            raise ConfigError(f"collection loader {family.name!r} is already registered")
        self._families[family.name] = family

    def __getitem__(self, name: str) -> CollectionFamily:
        return self._load()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())


COLLECTIONS: Mapping[str, CollectionFamily] = _Registry()


def register_collection(name: str, load: Callable[..., Collection], description: str,
                        needs_path: bool = True, *, fields: tuple[str, ...] = (),
                        rating_scale: RatingScale | None = None, timestamp_unit: str = "s",
                        label_scale: RatingScale | None = None,
                        detect: Callable[[Path], bool] | None = None) -> CollectionFamily:
    """Register a family under ``name``; a name can be registered once."""
    family = CollectionFamily(name, load, description, needs_path, tuple(fields), rating_scale, timestamp_unit,
                              label_scale, detect)
    COLLECTIONS._load()  # type: ignore[attr-defined]  # the shipped families first: a clash is the newcomer's
    COLLECTIONS.add(family)  # type: ignore[attr-defined]
    return family


def collection_fields() -> tuple[str, ...]:
    """Every metadata field some registered family declares, canonical film fields first."""
    out = list(METADATA_FIELDS)
    for family in COLLECTIONS.values():
        out += [f for f in family.fields if f not in out]
    return tuple(out)


def read_collection_config(path: str | os.PathLike) -> dict:
    """Loader options from a TOML file, e.g. for ML-32M-ext's unpublished column names::

        [movie_columns]
        item = "ml_movie_id"
        title = "name_shown"

    A folder, an unreadable file or one that is not UTF-8 is an InputError naming the path (and
    the line of the first bad byte); ``format`` and ``movie_columns`` are checked for type here.
    """
    from ..._io import read_toml

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
    check_utf8(raw, src, "collection config")
    options = read_toml(p, "collection config")
    if "format" in options and (not isinstance(options["format"], str) or options["format"] not in COLLECTIONS):
        raise InputError(src, f"format must be one of {', '.join(COLLECTIONS)}, not {options['format']!r}",
                         "fix the format key or leave it out")
    if "movie_columns" in options:
        from .ml32m_ext import MovieColumns

        try:
            MovieColumns.from_mapping(options["movie_columns"])
        except ConfigError as exc:
            raise InputError(src, str(exc), "[movie_columns] maps a field to a column name or a list of names") from None
    return options


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


def _call(loader: CollectionFamily, path: Path | None, options: dict) -> Collection:
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
    def rank(family: CollectionFamily) -> int:
        # the shipped families in _FAMILY_MODULES order (ML-32M-ext holds a ratings.csv too), then the others
        module = family.load.__module__.rpartition(".")[2]
        return _FAMILY_MODULES.index(module) if module in _FAMILY_MODULES else len(_FAMILY_MODULES)

    for family in sorted(COLLECTIONS.values(), key=rank):
        if family.detect is not None and family.detect(path):
            return family.name
    if path.is_file():
        raise InputError(str(path), "cannot tell the collection layout from this file name",
                         "point at a folder, a .jsonl(.gz) reviews file or a .inter file, or pass format=")
    raise InputError(str(path), "folder holds no recognised collection layout",
                     "expected ratings.csv + movies.csv (MovieLens), p2-ratings.csv (ML-32M-ext), "
                     "*.inter (RecBole atomic) or *.jsonl[.gz] (Amazon Reviews 2023)")


# ---------------------------------------------------------------------------------- derived fields

def item_rating_stats(interactions: pd.DataFrame) -> pd.DataFrame:
    """``avg_rating`` and ``num_ratings`` per item from the given (training) interactions only."""
    g = interactions.groupby("item").rating
    return pd.DataFrame({"avg_rating": g.mean(), "num_ratings": g.size().astype(np.int64)})
