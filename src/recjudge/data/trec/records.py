"""TREC records: a run and a qrels held as int32-coded tables, their rows as typed tuples.

A :class:`Run` or :class:`Qrels` always holds a table (:class:`RunTable`, :class:`QrelsTable`: ids
as int32 codes into their distinct values, no Python object per row); the pandas frame users see is
built from it on first use. Neither is changed in place after construction.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ...errors import InputError
from .fields import load_polars

RUN_SUFFIXES = (".run", ".txt", ".trec")
TABLE_SUFFIXES = (".csv", ".tsv", ".json")  # runs and qrels as tables or ranx JSON: read when named, not found in folders
TIE_POLICIES = ("hash", "trec_eval", "docid", "input")
MAX_LABEL = 999_999_999  # nine digits: fits trec_eval's C int with room


class RunRow(NamedTuple):
    qid: str
    docid: str
    rank: int
    score: float
    tag: str


class Qrel(NamedTuple):
    qid: str
    docid: str
    label: int
    iteration: str = "0"


class FrameCodes(NamedTuple):
    """qid and docid columns as int32 codes into their distinct values."""

    qcode: np.ndarray   # int32 per row
    qids: np.ndarray    # object: the distinct qids
    dcode: np.ndarray   # int32 per row
    docids: np.ndarray  # object: the distinct docids


class RunTable(NamedTuple):
    """A run's columns: ids as int32 codes, no Python object per row. Every distinct value appears in
    at least one row, except docids of runs read with a shared :class:`~recjudge.data.trec.IdDictionary`
    (then ``docids`` is the dictionary's ids and ``ids`` the dictionary)."""

    codes: FrameCodes   # qid and docid codes
    rank: np.ndarray    # int64 per row
    score: np.ndarray   # float64 per row
    tcode: np.ndarray   # int32 per row: the tag's code
    tags: np.ndarray    # object: the distinct tags
    ids: object = None  # the IdDictionary whose ids ``codes.docids`` are, or None


class QrelsTable(NamedTuple):
    """Qrels columns with ids as int32 codes (see :class:`RunTable`)."""

    codes: FrameCodes   # qid and docid codes
    icode: np.ndarray   # int32 per row: the iteration's code
    iterations: np.ndarray  # object: the distinct iteration values
    label: np.ndarray   # per row, the narrowest signed integers that hold them (label_column); Qrels.labels is int64


def label_column(values: np.ndarray) -> np.ndarray:
    """Labels in the narrowest of int8/int16/int32/int64 that holds them: int8 for the usual scales, an
    eighth of int64's memory (two qrels of 100,000 users hold 120 million labels)."""
    values = np.asarray(values)
    if len(values) == 0:
        return values.astype(np.int64)
    # NumPy's narrowest type for a negative value is signed: one that holds both -(hi + 1) and lo holds [lo, hi]
    return values.astype(np.min_scalar_type(-max(-int(values.min()), int(values.max()) + 1)), copy=False)


def factorize32(values) -> tuple[np.ndarray, np.ndarray]:
    """int32 codes (first-seen order) and the distinct values (object) of a column."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object))
    return codes.astype(np.int32 if len(uniques) < 2**31 else np.int64, copy=False), np.asarray(uniques, dtype=object)


def frame_codes(frame: pd.DataFrame) -> FrameCodes:
    """The qid and docid codes of a run or qrels frame."""
    return FrameCodes(*factorize32(frame["qid"].to_numpy(dtype=object)),
                      *factorize32(frame["docid"].to_numpy(dtype=object)))


def sorted_codes(values) -> np.ndarray:
    """Integer codes whose order is the values' string order (code points = UTF-8 byte order)."""
    values = np.asarray(values, dtype=object)
    if len(values) < 4096:
        return pd.factorize(values, sort=True)[0].astype(np.int64, copy=False)
    # polars compares the UTF-8 bytes in Rust: half pandas' time on 500,000 docids (a top-1000 run's ties)
    pl = load_polars()
    return pl.Series(values, dtype=pl.String).rank("dense").to_numpy().astype(np.int64) - 1


def string_rank(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Per row (``codes`` into the distinct strings ``values``), an integer key in its string's order
    (as :func:`sorted_codes`), equal for equal strings. Only the strings the rows use are compared,
    so the cost follows the rows, not ``values``: a dictionary shared by every run of an evaluation
    is never sorted whole (that made reading many runs quadratic)."""
    codes = np.asarray(codes)
    n = len(values)
    if len(codes) * 8 >= n:  # a mark per value costs no more than the rows
        used = np.zeros(n, dtype=bool)
        used[codes] = True
        used = np.flatnonzero(used)
        key = np.zeros(n, dtype=np.int64)
        key[used] = sorted_codes(values[used])
        return key[codes]
    used, inverse = np.unique(codes, return_inverse=True)
    return sorted_codes(values[used])[inverse.reshape(-1)]


def _pair_keys(codes: FrameCodes) -> np.ndarray:
    """One integer per (qid, docid) pair: uint32 when every pair fits (a sort of half the bytes)."""
    width = max(len(codes.docids), 1)
    if max(len(codes.qids), 1) * width <= 2**32:
        key = codes.qcode.astype(np.uint32)
        key *= np.uint32(width)
        key += codes.dcode.astype(np.uint32, copy=False)
        return key
    return codes.qcode.astype(np.int64) * width + codes.dcode


def has_duplicate_pairs(codes: FrameCodes) -> bool:
    """Whether a (qid, docid) pair is given twice: one sort, fast on files grouped by query."""
    key = np.sort(_pair_keys(codes))
    return bool(np.any(key[1:] == key[:-1]))


def duplicate_pairs(codes: FrameCodes) -> np.ndarray:
    """Rows whose (qid, docid) pair appeared on an earlier row."""
    return pd.Series(_pair_keys(codes)).duplicated().to_numpy()


def _strings(values: np.ndarray) -> np.ndarray:
    """Distinct ids taken by code as a frame column (pandas' default string dtype, object before pandas 3)."""
    return pd.array(values, dtype=_TEXT) if _TEXT is not None else values


_TEXT = pd.Series(["a"]).dtype if int(pd.__version__.split(".")[0]) >= 3 else None


class Run:
    """One system's rankings. ``frame`` columns: qid, docid, rank, score, tag; row order is input order.

    ``tie_policy`` is None until :func:`~recjudge.evaluation.ties.policy.resolve_ties` has ordered the
    rows and rewritten scores. It is a record, not a guarantee: consumers call ``ensure_tie_free``,
    which verifies the scores.

    Built from a :class:`RunTable` (what the reader and the tie policy make) or from a frame (then
    its table is computed at once); the frame of a table is built on first use, so scoring a run read
    from a file never makes a Python object per row.
    """

    __slots__ = ("_name", "_tie_policy", "_seed", "_table", "_frame", "__weakref__")

    def __init__(self, name: str, frame: pd.DataFrame | None = None, tie_policy: str | None = None,
                 seed: int | None = None, *, table: RunTable | None = None):
        if table is None:
            if frame is None:
                raise TypeError("Run needs a frame or a table")
            table = RunTable(frame_codes(frame), frame["rank"].to_numpy(dtype=np.int64),
                             frame["score"].to_numpy(dtype=np.float64), *factorize32(frame["tag"].to_numpy(dtype=object)))
        self._name, self._tie_policy, self._seed = name, tie_policy, seed
        self._table, self._frame = table, frame

    name = property(lambda self: self._name)
    tie_policy = property(lambda self: self._tie_policy)
    seed = property(lambda self: self._seed)
    table = property(lambda self: self._table, doc="The run's columns (:class:`RunTable`).")

    def __repr__(self) -> str:
        return f"Run(name={self._name!r}, rows={len(self)}, tie_policy={self._tie_policy!r}, seed={self._seed!r})"

    @property
    def frame(self) -> pd.DataFrame:
        if self._frame is None:  # memoised: the frame stands for the table, which never changes
            t, c = self._table, self._table.codes
            self._frame = pd.DataFrame({"qid": _strings(c.qids)[c.qcode], "docid": _strings(c.docids)[c.dcode],
                                        "rank": t.rank, "score": t.score, "tag": _strings(t.tags)[t.tcode]})
        return self._frame

    @property
    def codes(self) -> FrameCodes:
        return self._table.codes

    @property
    def scores(self) -> np.ndarray:
        """float64 per row, in row order."""
        return self._table.score

    def __len__(self) -> int:
        return len(self._table.codes.qcode)

    @property
    def qids(self) -> list[str]:
        return sorted(self.codes.qids)

    def to_frame(self) -> pd.DataFrame:
        return self.frame.copy()

    def __iter__(self) -> Iterator[RunRow]:
        f = self.frame
        for qid, docid, rank, score, tag in zip(f.qid, f.docid, f["rank"], f.score, f.tag):
            yield RunRow(qid, docid, int(rank), float(score), tag)

    def renamed(self, name: str) -> Run:
        """The same rankings under another name (nothing is copied)."""
        return self.recorded(name, self._tie_policy, self._seed)

    def recorded(self, name: str, tie_policy: str | None, seed: int | None) -> Run:
        """These very rows under another record (name, tie policy, seed)."""
        return Run(name, self._frame, tie_policy, seed, table=self._table)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, name: str = "run", tag: str | None = None) -> Run:
        """Build a run from columns qid, docid, score (rank and tag optional); validates like the reader."""
        missing = {"qid", "docid", "score"} - set(frame.columns)
        if missing:
            raise InputError(f"<frame {name}>", f"missing columns {sorted(missing)}",
                             "give at least qid, docid and score")
        df = pd.DataFrame({
            "qid": frame["qid"].astype(str).to_numpy(),
            "docid": frame["docid"].astype(str).to_numpy(),
        })
        df["score"] = pd.to_numeric(frame["score"], errors="coerce").astype("float64").to_numpy()
        if "rank" in frame.columns:
            df["rank"] = frame["rank"].astype("int64").to_numpy()
        else:
            df["rank"] = df.groupby("qid", sort=False).cumcount().to_numpy() + 1
        df["tag"] = frame["tag"].astype(str).to_numpy() if "tag" in frame.columns else (tag or name)
        df = df[["qid", "docid", "rank", "score", "tag"]].reset_index(drop=True)
        run = cls(name, df)
        check_run(run.table, f"<frame {name}>")
        return run

    @classmethod
    def from_rows(cls, rows: Iterable[RunRow | tuple], name: str = "run") -> Run:
        return cls.from_frame(_rows_frame(rows, RunRow._fields), name)


class Qrels:
    """Relevance labels. ``frame`` columns: qid, iteration, docid, label (int64).

    Like :class:`Run`, built from a :class:`QrelsTable` or a frame; the frame of a table is built on first use.
    """

    __slots__ = ("_name", "_table", "_frame", "__weakref__")

    def __init__(self, name: str, frame: pd.DataFrame | None = None, *, table: QrelsTable | None = None):
        if table is None:
            if frame is None:
                raise TypeError("Qrels needs a frame or a table")
            table = QrelsTable(frame_codes(frame), *factorize32(frame["iteration"].to_numpy(dtype=object)),
                               label_column(frame["label"].to_numpy(dtype=np.int64)))
        self._name, self._table, self._frame = name, table, frame

    name = property(lambda self: self._name)
    table = property(lambda self: self._table, doc="The labels' columns (:class:`QrelsTable`).")

    def __repr__(self) -> str:
        return f"Qrels(name={self._name!r}, rows={len(self)})"

    @property
    def frame(self) -> pd.DataFrame:
        if self._frame is None:  # memoised, as Run.frame
            t, c = self._table, self._table.codes
            self._frame = pd.DataFrame({"qid": _strings(c.qids)[c.qcode], "iteration": _strings(t.iterations)[t.icode],
                                        "docid": _strings(c.docids)[c.dcode],
                                        "label": t.label.astype(np.int64)})
        return self._frame

    @property
    def codes(self) -> FrameCodes:
        return self._table.codes

    @property
    def labels(self) -> np.ndarray:
        """int64 per row, in row order (a copy: the table holds them narrower, :attr:`table`)."""
        return self._table.label.astype(np.int64)

    def __len__(self) -> int:
        return len(self._table.codes.qcode)

    @property
    def qids(self) -> list[str]:
        return sorted(self.codes.qids)

    def to_frame(self) -> pd.DataFrame:
        return self.frame.copy()

    def __iter__(self) -> Iterator[Qrel]:
        f = self.frame
        for qid, docid, label, it in zip(f.qid, f.docid, f.label, f.iteration):
            yield Qrel(qid, docid, int(label), it)

    def renamed(self, name: str) -> Qrels:
        """The same labels under another name (nothing is copied)."""
        return Qrels(name, self._frame, table=self._table)

    def to_dict(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        c = self.codes
        for q, d, lab in zip(c.qids[c.qcode].tolist(), c.docids[c.dcode].tolist(), self.labels.tolist()):
            out.setdefault(q, {})[d] = lab
        return out

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, name: str = "qrels") -> Qrels:
        missing = {"qid", "docid", "label"} - set(frame.columns)
        if missing:
            raise InputError(f"<frame {name}>", f"missing columns {sorted(missing)}",
                             "give qid, docid and label")
        labels = pd.to_numeric(frame["label"], errors="coerce")
        bad = labels.isna() | (labels != np.floor(labels))
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError(f"<frame {name}>", f"row {i}: label {frame['label'].iloc[i]!r} is not an integer",
                             "round labels to integers (ir-measures and trec_eval reject fractions)")
        big = (labels.abs() > MAX_LABEL).to_numpy()
        if big.any():
            i = int(np.flatnonzero(big)[0])
            raise InputError(f"<frame {name}>", f"row {i}: label {frame['label'].iloc[i]!r} is out of range",
                             f"use labels from {-MAX_LABEL} to {MAX_LABEL}")
        df = pd.DataFrame({
            "qid": frame["qid"].astype(str).to_numpy(),
            "iteration": (frame["iteration"].astype(str).to_numpy() if "iteration" in frame.columns
                          else "0"),
            "docid": frame["docid"].astype(str).to_numpy(),
            "label": labels.astype("int64").to_numpy(),
        })
        qrels = cls(name, df)
        check_qrels(qrels.table, f"<frame {name}>")
        return qrels

    @classmethod
    def from_rows(cls, rows: Iterable[Qrel | tuple], name: str = "qrels") -> Qrels:
        return cls.from_frame(_rows_frame(rows, Qrel._fields), name)


def _rows_frame(rows: Iterable[tuple], fields: tuple[str, ...]) -> pd.DataFrame:
    """Records as a frame with one column per field (an empty frame keeps the columns)."""
    return pd.DataFrame(list(rows), columns=list(fields))


# ------------------------------------------------------------------------------------ validation
# The rules every run and qrels obeys, however it was made; ``line`` maps a row to its line in the
# file (None for tables built in memory, whose errors name the row instead).

def _where(i: int, line) -> dict:
    return {"line": line(i)} if line is not None else {}


def _row(i: int, line) -> str:
    return "" if line is not None else f"row {i}: "


def check_run(t: RunTable, src: str, line=None) -> None:
    """Refuse an empty run, a score that is not finite and a (query, document) pair given twice."""
    if len(t.score) == 0:
        raise InputError(src, "empty run", "a run needs at least one ranked document")
    bad = ~np.isfinite(t.score)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(src, f"{_row(i, line)}score {float(t.score[i])!r} is not a finite number",
                         "give every document a finite score (no NaN or infinity)", **_where(i, line))
    _check_pairs(t.codes, src, line, "appears twice for query", "keep one line per (query, document)")


def check_qrels(t: QrelsTable, src: str, line=None) -> None:
    """Refuse empty qrels, a label out of range and a (query, document) pair judged twice."""
    if len(t.label) == 0:
        raise InputError(src, "empty qrels", "qrels need at least one judged document")
    big = np.abs(t.label) > MAX_LABEL
    if big.any():
        i = int(np.flatnonzero(big)[0])
        raise InputError(src, f"{_row(i, line)}label {int(t.label[i])} is out of range",
                         f"use labels from {-MAX_LABEL} to {MAX_LABEL} (trec_eval keeps labels in a C int)",
                         **_where(i, line))
    _check_pairs(t.codes, src, line, "is judged twice for query", "keep one label per (query, document)")


def _check_pairs(c: FrameCodes, src: str, line, what: str, fix: str) -> None:
    if has_duplicate_pairs(c):
        dup = duplicate_pairs(c)
        i = int(np.flatnonzero(dup)[0])
        same = (c.qcode == c.qcode[i]) & (c.dcode == c.dcode[i])
        first = int(np.flatnonzero(same)[0])
        also = f" (first at line {line(first)})" if line is not None else ""
        raise InputError(src, f"{_row(i, line)}document {c.docids[c.dcode[i]]!r} {what} {c.qids[c.qcode[i]]!r}{also}",
                         fix, **_where(i, line))


def run_name(path: str | os.PathLike) -> str:
    """A run's name: the file name without .gz, a leading ``input.`` and a trailing .run/.txt/.trec (or
    .csv/.tsv/.json).

    TREC archives name runs ``input.RUNTAG.gz``; recjudge writes ``SYSTEM.run``.
    """
    name = Path(path).name
    if name.endswith(".gz"):
        name = name[:-3]
    if name.startswith("input.") and len(name) > len("input."):
        name = name[len("input."):]
    for suffix in RUN_SUFFIXES + TABLE_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name
