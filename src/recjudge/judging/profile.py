"""Profiles: a user's sampled rated history (or a query's text) and the items rendered with chosen fields.

Field sets are named as in Penha et al. 2025, Table 3 (``title``, ``title+genres``, …, ``all``); any
``+``-joined list of fields works too: the vocabulary is what the collection families declare (films:
title, year, genres, …; Amazon Reviews 2023: title, description, features, …). A field the
collection lacks is an error. ``all`` is every text field the collection holds — canonical film
fields first, then the others in the collection's column order — without posters (an image, not
text) and external ids (``imdb_id``, ``tmdb_id``: keys into other databases, not descriptions),
followed by the derived average rating and number of ratings. Ratings are shown, and averaged, on
the collection's rating scale. Average rating and number of ratings are derived from the
interactions given as history (a split's training part), never from held-out ratings.

The sampled history is shown in one of two orders (``order``): ``chronological``, oldest first, or
``random``, a seeded random order (the seeded hash of user, item and seed that random sampling also
draws by). A user whose ratings share one timestamp — or have none, as ML-32M-ext's participants —
has no chronology: ``chronological`` then breaks the ties by that same hash, so it shows exactly the
``random`` order (same prompts, same cache entries); the provenance counts such users.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol, Sequence

import numpy as np
import pandas as pd

from .._io import read_text
from ..data.collections import METADATA_FIELDS, RatingScale, collection_fields
from ..data.trec import hash_keys
from ..errors import ConfigError, InputError

__all__ = [
    "METADATA_FIELDS",
    "DERIVED_FIELDS",
    "FIELD_SETS",
    "SAMPLINGS",
    "HISTORY_ORDERS",
    "NON_TEXT_FIELDS",
    "parse_fields",
    "collection_text_fields",
    "HistoryProfiles",
    "QueryProfiles",
    "ProfileSource",
    "read_topics",
    "candidates_block",
]

DERIVED_FIELDS = ("avg_rating", "num_ratings")
ALL_FIELDS = METADATA_FIELDS + DERIVED_FIELDS
FIELD_SETS: Mapping[str, tuple[str, ...]] = {
    "title": ("title",),
    "title+genres": ("title", "genres"),
    "title+directors": ("title", "directors"),
    "title+overview": ("title", "overview"),
    "title+cast": ("title", "cast"),
    "title+runtime": ("title", "runtime"),
    "title+num_ratings": ("title", "num_ratings"),
    "title+year": ("title", "year"),
    "title+languages": ("title", "languages"),
    "title+avg_rating": ("title", "avg_rating"),
    "all": ALL_FIELDS,  # the film fields; parse_fields resolves "all" against a collection's own fields
}
SAMPLINGS = ("random", "recent")
HISTORY_ORDERS = ("chronological", "random")
# fields a collection may hold that "all" leaves out: a poster is an image reference, not text; the
# ids are keys into other databases that describe nothing to a reader
NON_TEXT_FIELDS = ("poster", "imdb_id", "tmdb_id")
_LABELS = {
    "title": "Title", "year": "Year", "genres": "Genres", "directors": "Directors", "cast": "Cast",
    "overview": "Overview", "runtime": "Runtime", "languages": "Languages",
    "avg_rating": "Average rating", "num_ratings": "Number of ratings",
}


def parse_fields(spec: str | Sequence[str], vocabulary: Sequence[str] | None = None) -> tuple[str, ...]:
    """A named field set, a ``+``-joined list of fields, or a sequence of field names.

    ``vocabulary``: the metadata fields allowed; by default every field a registered collection
    family declares. The derived fields (average rating, number of ratings) are always allowed.
    ``all`` is the vocabulary's text fields in its order (not :data:`NON_TEXT_FIELDS`), then the
    derived fields."""
    vocab = tuple(dict.fromkeys(collection_fields() if vocabulary is None else vocabulary))
    known = (*vocab, *DERIVED_FIELDS)
    if isinstance(spec, str):
        if spec == "all":
            return (*(f for f in vocab if f not in NON_TEXT_FIELDS and f not in DERIVED_FIELDS), *DERIVED_FIELDS)
        if spec in FIELD_SETS:
            return FIELD_SETS[spec]
        names = tuple(s.strip() for s in spec.split("+"))
    else:
        names = tuple(spec)
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ConfigError(f"unknown field(s) {unknown or [spec]!r}: choose a field set "
                          f"({', '.join(FIELD_SETS)}) or join fields with '+' from {', '.join(dict.fromkeys(known))}")
    if len(set(names)) != len(names):
        raise ConfigError(f"field list {spec!r} names a field twice")
    return names


def _label(field: str) -> str:
    return _LABELS.get(field) or field.replace("_", " ").capitalize()


def _format(field: str, value, rating_max: str = "5") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "unknown"
    if isinstance(value, (tuple, list, np.ndarray)):
        return _quoted(", ".join(str(v) for v in value)) if len(value) else "unknown"
    if field in ("year", "num_ratings"):
        return str(int(value))
    if field == "runtime":
        return f"{int(round(float(value)))} min"
    if field == "avg_rating":
        return f"{float(value):.2f}/{rating_max}"
    return _quoted(str(value))


def _quoted(text: str) -> str:
    """Item text as the prompts quote it: one line per item, and the data markers of the shipped
    templates (<<<DATA ... DATA>>>) defused, so an item cannot close the quotation and speak as the prompt."""
    text = " ".join(text.split())
    return text.replace("<<<", "‹‹‹").replace(">>>", "›››") if "<<<" in text or ">>>" in text else text


def _fmt_rating(r: float) -> str:
    return f"{r:g}"


def candidates_block(lines: Sequence[str], keys: Sequence[str] | None) -> str:
    """The rendered candidates: one without a key, or several as ``[c1] …`` lines."""
    if keys is None:
        (line,) = lines
        return f"Candidate item:\n{line}"
    return "Candidate items:\n" + "\n".join(f"[{k}] {line}" for k, line in zip(keys, lines))


class ProfileSource(Protocol):
    kind: str
    rating_scale: RatingScale

    def has(self, qid: str) -> bool: ...

    def profile_text(self, qid: str, exclude: Sequence[str] = ()) -> str: ...

    def render_item(self, item: str, qid: str | None = None) -> str: ...

    def knows_item(self, item: str) -> bool: ...

    def provenance(self) -> dict: ...


def collection_text_fields(collection) -> tuple[str, ...]:
    """The metadata fields ``collection`` holds, canonical film fields first, then its other columns
    in their order: the vocabulary ``all`` is taken from (less :data:`NON_TEXT_FIELDS`)."""
    columns = [str(c) for c in collection.items.columns]
    ordered = [f for f in collection_fields() if f in columns]
    return (*ordered, *(c for c in columns if c not in ordered))


@dataclass(frozen=True)
class _History:
    items: np.ndarray      # in sampling preference order (first = most preferred)
    ratings: np.ndarray
    order_key: np.ndarray  # presentation order (chronological or seeded random)


class HistoryProfiles:
    """Users' rated histories, sampled and rendered.

    ``history`` is the interactions used as history (``split.train``); it defaults to all of the
    collection's interactions. ``sampling='random'`` takes a seeded sample of ``size`` rated items
    (the same sample for every candidate of the user); ``'recent'`` takes the latest ``size``. Items
    being judged in a request are left out of the sample so a candidate's own rating never leaks.
    ``order='chronological'`` shows the sampled items oldest first (in seeded random order among
    equal timestamps); ``'random'`` in seeded random order. The collection's ``rating_scale`` is
    kept as ``rating_scale`` for the prompt.
    """

    kind = "history"

    def __init__(self, collection, fields: str | Sequence[str] = "title+genres", size: int = 50,
                 history: pd.DataFrame | None = None, sampling: str = "random", seed: int = 0,
                 users: Iterable[str] | None = None, order: str = "chronological"):
        if sampling not in SAMPLINGS:
            raise ConfigError(f"unknown history sampling {sampling!r}; choose {' or '.join(SAMPLINGS)}")
        if order not in HISTORY_ORDERS:
            raise ConfigError(f"unknown history order {order!r}; choose {' or '.join(HISTORY_ORDERS)}")
        if int(size) < 1:
            raise ConfigError(f"profile size must be at least 1, got {size}")
        if isinstance(fields, str) and fields == "all":
            self.fields = parse_fields("all", collection_text_fields(collection))
        else:
            self.fields = parse_fields(fields, (*collection_fields(), *map(str, collection.items.columns)))
        self.order = order
        self.unordered_users = 0  # users indexed with 2+ ratings that share one timestamp (or have none)
        self.rating_scale = collection.rating_scale
        self.field_spec = fields if isinstance(fields, str) else "+".join(self.fields)
        self.size = int(size)
        self.sampling = sampling
        self.seed = int(seed)
        self.collection_name = collection.name
        history = collection.interactions if history is None else history
        items = collection.items
        missing = [f for f in self.fields if f not in DERIVED_FIELDS and f not in items.columns]
        if missing:
            raise ConfigError(
                f"collection {collection.name!r} has no {', '.join(missing)} field(s), which field set "
                f"{self.field_spec!r} needs; its fields are {', '.join(map(str, items.columns)) or 'none'}. "
                "Choose a field set this collection supports")
        table = pd.DataFrame(index=items.index.astype(str))
        for f in self.fields:
            if f not in DERIVED_FIELDS:
                table[f] = items[f].to_numpy()
        self._stats = None
        self._own: dict[str, dict[str, list[float]]] = {}
        self._texts: dict[tuple[str, tuple[str, ...]], str] = {}  # rendered profiles, recent users
        if set(DERIVED_FIELDS) & set(self.fields):
            stats = history.groupby(history["item"].astype(str))["rating"].agg(["mean", "size", "sum"])
            self._stats = stats
            if "avg_rating" in self.fields:
                table["avg_rating"] = stats["mean"].reindex(table.index).to_numpy()
            if "num_ratings" in self.fields:
                table["num_ratings"] = stats["size"].reindex(table.index).fillna(0).to_numpy()
        self._table = table
        self._lines: dict[str, str] = {}
        if users is not None:  # index only the users being judged (item statistics above use everyone)
            history = history[history["user"].astype(str).isin(set(map(str, users)))]
        self._histories = self._index(history)

    def _index(self, history: pd.DataFrame) -> dict[str, _History]:
        h = history[["user", "item", "rating"]].copy()
        h["user"] = h["user"].astype(str)
        h["item"] = h["item"].astype(str)
        key = hash_keys(h["user"].to_numpy(), h["item"].to_numpy(), self.seed)
        # no timestamp column, or a missing time, reads as 0: one shared time is no order
        raw = history["timestamp"] if "timestamp" in history.columns else pd.Series(0, index=history.index)
        ts = pd.to_numeric(raw, errors="coerce").fillna(0).to_numpy(dtype=np.int64)
        h["hk"] = key
        h["ts"] = ts
        out: dict[str, _History] = {}
        for user, g in h.groupby("user", sort=False):
            items = g["item"].to_numpy()
            ratings = g["rating"].to_numpy(dtype=float)
            hk = g["hk"].to_numpy()
            t = g["ts"].to_numpy()
            if self.sampling == "random":
                pref = np.argsort(hk, kind="stable")
            else:
                pref = np.lexsort((hk, -t))  # newest first, hash among equal times
            self.unordered_users += bool(len(t) > 1 and t.min() == t.max())
            # chronological: by time, the seeded hash among equal times (all of them when every time
            # is the same, which is then exactly the random order); random: by the seeded hash
            shown = np.lexsort((hk, t)) if self.order == "chronological" else np.argsort(hk, kind="stable")
            rank = np.empty(len(items), dtype=np.int64)
            rank[shown] = np.arange(len(items))
            out[user] = _History(items[pref], ratings[pref], rank[pref])
        return out

    def has(self, qid: str) -> bool:
        return qid in self._histories

    def knows_item(self, item: str) -> bool:
        return item in self._table.index

    def render_item(self, item: str, qid: str | None = None) -> str:
        """An item's line. As ``qid``'s candidate, its average rating and number of ratings leave
        out ``qid``'s own ratings of it, which would otherwise give the answer away."""
        if qid is not None and self._stats is not None:
            own = self._own_ratings(qid).get(item)
            if own:
                return self._line(self._without(item, own))
        line = self._lines.get(item)
        if line is None:
            line = self._line(self._table.loc[item])
            self._lines[item] = line
        return line

    def item_fields(self, item: str, qid: str | None = None) -> tuple[tuple[str, str], ...]:
        """An item's (label, text) fields as :meth:`render_item`'s line joins them (``Title: …``), for a
        page that lays them out (recjudge annotate)."""
        row = self._table.loc[item]
        own = self._own_ratings(qid).get(item) if qid is not None and self._stats is not None else None
        if own:
            row = self._without(item, own)
        high = self.rating_scale.high_text
        return tuple((_label(f), _format(f, row[f], high)) for f in self.fields)

    def _line(self, row) -> str:
        high = self.rating_scale.high_text
        return " | ".join(f"{_label(f)}: {_format(f, row[f], high)}" for f in self.fields)

    def _without(self, item: str, own: list[float]):
        row = self._table.loc[item].copy()
        n = int(self._stats["size"].get(item, 0)) - len(own)
        total = float(self._stats["sum"].get(item, 0.0)) - sum(own)
        if "avg_rating" in self.fields:
            row["avg_rating"] = total / n if n > 0 else float("nan")
        if "num_ratings" in self.fields:
            row["num_ratings"] = max(n, 0)
        return row

    def _own_ratings(self, qid: str) -> dict[str, list[float]]:
        own = self._own.get(qid)
        if own is None:
            own = {}
            h = self._histories.get(qid)
            if h is not None:
                for i, r in zip(h.items, h.ratings):
                    own.setdefault(str(i), []).append(float(r))
            self._own[qid] = own
        return own

    def sample(self, qid: str, exclude: Sequence[str] = ()) -> list[tuple[str, float]]:
        """The sampled (item, rating) pairs of a user, in the order they are shown (``order``)."""
        h = self._histories[qid]
        skip = set(exclude)
        picked = []
        for i, item in enumerate(h.items):
            if item in skip or item not in self._table.index:
                continue
            picked.append(i)
            if len(picked) == self.size:
                break
        picked.sort(key=lambda i: h.order_key[i])
        return [(str(h.items[i]), float(h.ratings[i])) for i in picked]

    def profile_text(self, qid: str, exclude: Sequence[str] = ()) -> str:
        # only excluded items the user rated change the sample: a user's requests (one per
        # candidate chunk) mostly share one text, rendered once
        own = self._own_ratings(qid) if qid in self._histories else {}
        key = (qid, tuple(sorted(x for x in exclude if x in own)))
        text = self._texts.get(key)
        if text is None:
            text = "\n".join(f"- {self.render_item(item)} | Rating: {_fmt_rating(r)}"
                              for item, r in self.sample(qid, key[1]))
            if len(self._texts) >= 256:  # users are planned one after another: recent ones suffice
                self._texts.pop(next(iter(self._texts)))
            self._texts[key] = text
        return text

    def user_history(self, qid: str) -> list[tuple[str, float]]:
        """Every rated item of a user (no sampling), for the offline judges."""
        h = self._histories.get(qid)
        if h is None:
            return []
        return [(str(i), float(r)) for i, r in zip(h.items, h.ratings)]

    def provenance(self) -> dict:
        return {"kind": "history", "collection": self.collection_name, "fields": list(self.fields),
                "field_set": self.field_spec, "profile_size": self.size, "sampling": self.sampling,
                "history_order": self.order, "users_without_chronology": self.unordered_users,
                "seed": self.seed, "rating_scale": self.rating_scale.as_dict()}


class QueryProfiles:
    """Queries as profiles: ``{profile}`` is the query's text; candidates are rendered like items."""

    kind = "query"

    def __init__(self, topics: Mapping[str, str], collection, fields: str | Sequence[str] = "title",
                 source: str = "<topics>"):
        self.topics = {str(k): v for k, v in topics.items()}
        self.source = source
        self._items = HistoryProfiles(collection, fields=fields, size=1,
                                      history=collection.interactions.iloc[:0]
                                      if set(DERIVED_FIELDS).isdisjoint(parse_fields(fields))
                                      else collection.interactions)
        self.fields = self._items.fields
        self.rating_scale = self._items.rating_scale

    def has(self, qid: str) -> bool:
        return qid in self.topics

    def knows_item(self, item: str) -> bool:
        return self._items.knows_item(item)

    def render_item(self, item: str, qid: str | None = None) -> str:
        return self._items.render_item(item)

    def profile_text(self, qid: str, exclude: Sequence[str] = ()) -> str:
        return self.topics[qid]

    def provenance(self) -> dict:
        return {"kind": "query", "topics": os.path.basename(self.source), "fields": list(self.fields),
                "queries": len(self.topics)}


def read_topics(source) -> dict[str, str]:
    """Topics as ``qid<TAB>text`` lines, or JSON lines with ``qid``/``query_id`` and ``text``/``query``."""
    import json

    name, text = read_text(source, "topics file")
    topics: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(name, f"invalid JSON: {exc.msg}", "write one JSON object per line",
                                 line=number) from None
            if not isinstance(obj, dict):
                raise InputError(name, f"a JSON topic must be an object, got {type(obj).__name__}",
                                 'write {"qid": "...", "text": "..."} on each line', line=number)
            key = "qid" if "qid" in obj else "query_id"
            qid = obj.get(key)
            body = obj.get("text", obj.get("query"))
            if qid is None or not isinstance(body, str):
                raise InputError(name, "a JSON topic needs 'qid' (or 'query_id') and 'text' (or 'query')",
                                 "add both keys", line=number)
            if isinstance(qid, bool) or not isinstance(qid, (str, int)):
                # str() of an object or a list would become an id no run holds ({'a': 1})
                raise InputError(name, f"the query id ({key!r}) is a JSON {type(qid).__name__}, not a string or "
                                 "a whole number", f'give it as text, e.g. "{key}": "q1"', line=number)
        else:
            qid, sep, body = line.partition("\t")
            if not sep:
                raise InputError(name, "expected 'qid<TAB>query text'", "separate the id and text by a tab",
                                 line=number)
        qid, body = str(qid).strip(), " ".join(str(body).split())
        if not qid or not body:
            raise InputError(name, "empty query id or text", "give both", line=number)
        if qid in topics:
            raise InputError(name, f"query {qid!r} appears twice", "keep one line per query", line=number)
        topics[qid] = body
    if not topics:
        raise InputError(name, "no topics", "write one 'qid<TAB>text' line per query")
    return topics
