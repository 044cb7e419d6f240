"""Amazon Reviews 2023 (BLaIR layout): a reviews JSONL (user_id, parent_asin, rating, timestamp) and its item meta."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from ...errors import InputError
from . import STARS, Collection, register_collection
from ._read import id_problem, interaction_frame, is_missing, items_frame, to_list, to_text

__all__ = ["load_amazon_reviews", "AMAZON_FIELDS"]

# the item meta fields kept (canonical title; the rest under their release names)
AMAZON_FIELDS = ("title", "features", "description", "categories", "store", "price")

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
    path = _reviews_file(Path(path))
    if meta is None:
        meta = _meta_beside(path)
    users, items, ratings, times = _read_reviews(path)
    STARS.check(ratings, str(path))
    inter, dropped = interaction_frame(users, items, ratings, times, str(path))
    if min_rating is not None:
        inter = inter[inter.rating >= min_rating].reset_index(drop=True)
    unit = "ms" if int(inter.timestamp.max()) > 10**11 else "s"
    if meta is not None:
        meta = Path(meta)
        item_frame = _read_meta(meta)
    else:
        item_frame = items_frame(sorted(inter.item.unique()), {})
    stem = path.name.removesuffix(".gz").removesuffix(".jsonl")
    info = {"loader": "amazon", "source": str(path), "meta": str(meta) if meta else None,
            "duplicates_dropped": dropped, "timestamp_unit": unit, "min_rating": min_rating}
    return Collection(name or f"amazon-{stem}", inter, item_frame, None, info, STARS)


def _reviews_file(path: Path) -> Path:
    """``path`` itself, or the one reviews file (not ``meta_*``) of the folder ``path``."""
    if not path.is_dir():
        return path
    found = sorted(p for p in path.iterdir() if p.name.removesuffix(".gz").endswith(".jsonl"))
    reviews = [p for p in found if not p.name.startswith("meta_")]
    if len(reviews) != 1:
        raise InputError(str(path), f"expected one reviews .jsonl[.gz] file, found {len(reviews)}",
                         "point at the reviews file itself")
    return reviews[0]


def _meta_beside(path: Path) -> Path | None:
    """The ``meta_<Category>.jsonl[.gz]`` next to reviews file ``path``, if there is one."""
    for cand in (path.with_name("meta_" + path.name),
                 path.with_name("meta_" + path.name.removesuffix(".gz")),
                 path.with_name("meta_" + path.name + ".gz")):
        if cand.exists():
            return cand
    return None


def _read_reviews(path: Path) -> tuple[list[str], list[str], list[float], list[int]]:
    """Users, items, ratings and whole timestamps of the reviews file, each line checked."""
    users, items, ratings, times = [], [], [], []
    for n, obj in _jsonl(path):
        missing = [k for k in ("user_id", "parent_asin", "rating", "timestamp") if k not in obj]
        if missing:
            raise InputError(str(path), f"review lacks {missing}", "each review needs user_id, parent_asin, "
                                                                   "rating and timestamp", line=n)
        for key, what in (("user_id", "user id"), ("parent_asin", "item id")):
            problem = id_problem(obj[key])
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
    return users, items, ratings, times


def _read_meta(meta: Path) -> pd.DataFrame:
    """The items frame of the meta file: title, features, description, categories, store, price."""
    ids, cols = [], {k: [] for k in AMAZON_FIELDS}
    for n, obj in _jsonl(meta):
        if "parent_asin" not in obj:
            raise InputError(str(meta), "item lacks parent_asin", "each meta line needs parent_asin", line=n)
        problem = id_problem(obj["parent_asin"])
        if problem is not None:
            raise InputError(str(meta), f"item id (parent_asin) {problem}",
                             "give every item an id without spaces", line=n)
        ids.append(str(obj["parent_asin"]))
        cols["title"].append(to_text(obj.get("title")))
        cols["features"].append(to_list(obj.get("features")) or None)
        cols["description"].append(to_text(obj.get("description")))
        cols["categories"].append(to_list(obj.get("categories")) or None)
        cols["store"].append(to_text(obj.get("store")))
        price = obj.get("price")
        cols["price"].append(None if is_missing(price) or price == "None" else str(price))
    return items_frame(ids, cols)




def _detect(path: Path) -> bool:
    if path.is_file():
        return path.name.removesuffix(".gz").endswith((".jsonl", ".json"))
    return any(p.name.removesuffix(".gz").endswith(".jsonl") for p in path.iterdir())


register_collection("amazon", load_amazon_reviews, "Amazon Reviews 2023 JSONL (reviews + meta)",
                    fields=AMAZON_FIELDS, rating_scale=STARS, timestamp_unit="ms", detect=_detect)
