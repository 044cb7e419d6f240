"""Reading helpers shared by the collection families: checked ids, canonical frames, CSV and text fields.

Every problem is an InputError naming the file (and the line when one is known).
"""

from __future__ import annotations

import ast
import csv
import json
import re
import warnings
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from ...errors import InputError

MULTI_VALUED = ("genres", "directors", "cast", "languages")


def check_utf8(raw: bytes, source: str, what: str) -> None:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_utf8(raw, exc, source, what) from None


def not_utf8(raw: bytes, exc: UnicodeDecodeError, source: str, what: str) -> InputError:
    line = raw.count(b"\n", 0, exc.start) + 1
    return InputError(source, f"{what} is not UTF-8 text (byte 0x{raw[exc.start]:02x})", "save it as UTF-8", line=line)


def utf8_error(path: Path, what: str) -> InputError:
    """The InputError for a file that failed to decode, with the line of its first bad byte."""
    try:
        raw = path.read_bytes()
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return not_utf8(raw, exc, str(path), what)
    except OSError:
        pass
    return InputError(str(path), f"{what} is not UTF-8 text", "save it as UTF-8")


_WHITESPACE = re.compile(r"\s")


def id_problem(value) -> str | None:
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


def check_ids(values, what: str, source: str, column: str | None = None, lines=None,
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
        problem = id_problem(u)
        if problem is not None:
            problems[u] = problem
    if problems:
        i = int(np.flatnonzero(pd.Series(arr).isin(list(problems)).to_numpy())[0])
        value = arr[i]
        named = f"{what} ({column})" if column else what
        problem = f"{named} {problems.get(value) or id_problem(value)}"
        fix = f"give every row a {what} without spaces"
        if rows:
            raise InputError(source, f"{problem} in data row {i + 1}", fix)
        line = int(lines[i]) if lines is not None else i + 2
        raise InputError(source, problem, fix, line=line)
    if all(isinstance(u, str) for u in uniq):
        return arr
    return np.array([str(v) for v in arr], dtype=object)


def interaction_frame(user, item, rating, timestamp, source: str) -> tuple[pd.DataFrame, int]:
    """Canonical interaction frame; a repeated (user, item) keeps its latest rating at its first
    timestamp. Returns (frame, dropped). Ids are checked by the loaders (with file lines); the
    check here only guards callers that skip it."""
    df = pd.DataFrame({
        "user": pd.Series(check_ids(user, "user id", source, rows=True), dtype=object),
        "item": pd.Series(check_ids(item, "item id", source, rows=True), dtype=object),
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


def items_frame(index: Iterable[str], columns: Mapping[str, Iterable]) -> pd.DataFrame:
    idx = pd.Index([str(i) for i in index], name="item")
    data = {k: pd.Series(list(v), index=idx, dtype=object) for k, v in columns.items()}
    frame = pd.DataFrame(data, index=idx)
    frame = frame[~frame.index.duplicated(keep="first")]
    return frame.where(pd.notna(frame), None)


def is_missing(value) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and np.isnan(value):
        return True
    return isinstance(value, str) and value.strip() == ""


def to_int(value) -> int | None:
    if is_missing(value):
        return None
    m = re.search(r"\d+", str(value))
    return int(m.group()) if m else None


def to_year(value) -> int | None:
    if is_missing(value):
        return None
    m = re.search(r"(1[89]\d\d|20\d\d)", str(value))
    return int(m.group()) if m else None


def to_list(value, seps: str = "|") -> tuple[str, ...] | None:
    """Multi-valued field from a list, a JSON/Python list literal or a separated string."""
    if isinstance(value, (list, tuple)):
        return tuple(str(v).strip() for v in value if not is_missing(v))
    if is_missing(value):
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
                    if not is_missing(v):
                        out.append(str(v).strip())
                return tuple(out)
    parts = re.split("[" + re.escape(seps) + "]", text)
    return tuple(p.strip() for p in parts if p.strip())


def to_text(value) -> str | None:
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v).strip() for v in value if not is_missing(v))
    return None if is_missing(value) else str(value).strip()


def _first_ragged_line(path: Path) -> int | None:
    # errors="replace": only the field count matters here
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        rows = csv.reader(fh)
        width = len(next(rows, []))
        for number, row in enumerate(rows, start=2):
            if row and len(row) != width:
                return number
    return None


def read_csv(path: Path, what: str, required: Iterable[str] = ()) -> pd.DataFrame:
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
        raise utf8_error(path, what) from None
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


def numeric_column(frame: pd.DataFrame, col: str, path: Path, integer: bool = False) -> np.ndarray:
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



def pick_column(frame: pd.DataFrame, candidates: tuple[str, ...]) -> str | None:
    lower = {c.lower(): c for c in frame.columns}
    for c in candidates:
        if c in frame.columns:
            return c
        if c.lower() in lower:
            return lower[c.lower()]
    return None



_TITLE_YEAR = re.compile(r"^(.*?)\s*\((\d{4})(?:[-–]\d{0,4})?\)\s*$")


def split_title(title) -> tuple[str | None, int | None]:
    if is_missing(title):
        return None, None
    text = str(title).strip()
    m = _TITLE_YEAR.match(text)
    if m:
        return m.group(1), int(m.group(2))
    return text, None

