"""RecBole atomic files: ``<name>.inter`` (user_id, item_id, rating, timestamp) and an optional ``<name>.item``.

Atomic files hold any rating scale: each collection declares the standard scale its ratings fit
(1–5 stars, 0.5–5 half stars), else their observed range.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import InputError
from . import Collection, register_collection
from ._read import check_ids, interaction_frame, items_frame, numeric_column, to_list, to_text, to_year, utf8_error

__all__ = ["load_recbole_atomic"]

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
        raise utf8_error(path, "atomic file") from None
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
        raise utf8_error(path, "atomic file") from None
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
    rating = np.ones(len(frame)) if implicit else numeric_column(frame, "rating", path)
    timestamp = numeric_column(frame, "timestamp", path)
    users = check_ids(frame.user_id, "user id", str(path), "user_id")
    item_ids = check_ids(frame.item_id, "item id", str(path), "item_id")
    inter, dropped = interaction_frame(users, item_ids, rating, timestamp, str(path))
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
                columns[canon] = [to_year(v) for v in values]
            elif canon == "title":
                columns[canon] = [to_text(v) for v in values]
            elif typ.endswith("_seq"):
                columns[canon] = [to_list(v, " ") for v in values]
            else:
                columns[canon] = [to_text(v) for v in values]
        items = items_frame(check_ids(iframe.item_id, "item id", str(item_path), "item_id"), columns)
    else:
        items = items_frame(sorted(inter.item.unique()), {})
    info = {"loader": "recbole", "source": str(path), "implicit": implicit, "duplicates_dropped": dropped,
            "min_rating": min_rating, "timestamp_unit": "s"}
    return Collection(name or stem, inter, items, None, info)




def _detect(path: Path) -> bool:
    if path.is_file():
        return path.name.endswith(".inter")
    return any(p.name.endswith(".inter") for p in path.iterdir())


register_collection("recbole", load_recbole_atomic, "RecBole atomic files (.inter, .item)",
                    fields=("title", "year", "genres"), timestamp_unit="s", detect=_detect)
