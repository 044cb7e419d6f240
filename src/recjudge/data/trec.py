"""TREC runs and qrels: one strict reader and one writer per format, plus the tie policy.

A run leaves :func:`resolve_ties` tie-free: each ranking is ordered by score and then by the
declared policy, and its scores are rewritten as strictly decreasing positive integers
(``n, n-1, …, 1``). :func:`ensure_tie_free` is how every consumer gets a tie-free run: it checks
the scores (float32, as trec_eval compares them) instead of trusting ``Run.tie_policy``. trec_eval breaks ties by docid descending, ir-measures'
Python providers by docid ascending; after the rewrite both see one order.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import math
import os
import warnings
import weakref
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from .._io import Source, atomic_write, existing_file, gzip_error, is_inline, read_text, source_name
from ..errors import ConfigError, InputError

__all__ = [
    "RunRow",
    "Qrel",
    "Run",
    "Qrels",
    "TIE_POLICIES",
    "read_run",
    "read_runs",
    "read_qrels",
    "write_run",
    "write_qrels",
    "resolve_ties",
    "ensure_tie_free",
    "is_tie_free",
    "top_k",
    "tied_user_share",
    "run_name",
    "hash_keys",
    "string_hashes",
    "seeded_hash_keys",
    "FrameCodes",
    "frame_codes",
    "RunTable",
    "QrelsTable",
    "ScoreOrder",
    "score_order",
    "READERS",
    "IdDictionary",
    "native_module",
    "available_readers",
]

RUN_SUFFIXES = (".run", ".txt", ".trec")
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


class RunTable(NamedTuple):
    """A run's columns as the reader and the tie policy keep them: ids as int32 codes, no Python
    object per row. Every distinct value appears in at least one row, except docids of runs read
    with a shared :class:`IdDictionary`."""

    codes: FrameCodes   # qid and docid codes
    rank: np.ndarray    # int64 per row
    score: np.ndarray   # float64 per row
    tcode: np.ndarray   # int32 per row: the tag's code
    tags: np.ndarray    # object: the distinct tags


class QrelsTable(NamedTuple):
    """Qrels columns with ids as int32 codes (see :class:`RunTable`)."""

    codes: FrameCodes   # qid and docid codes
    icode: np.ndarray   # int32 per row: the iteration's code
    iterations: np.ndarray  # object: the distinct iteration values
    label: np.ndarray   # int64 per row


def _set(obj, **values) -> None:
    for key, value in values.items():
        object.__setattr__(obj, key, value)


class _Coded:
    """A frame and its coded table, each built from the other on first use (:class:`Run`, :class:`Qrels`)."""

    _frame: pd.DataFrame | None
    _table: NamedTuple | None

    def _frame_of(self, table) -> pd.DataFrame:  # the frame's columns from a table
        raise NotImplementedError

    def _table_of(self, frame: pd.DataFrame):  # the table from a frame
        raise NotImplementedError

    @property
    def frame(self) -> pd.DataFrame:
        if self._frame is None:
            f = self._frame_of(self._table)
            _remember_codes(f, self._table.codes)
            _set(self, _frame=f)
        return self._frame

    @property
    def table(self):
        if self._table is None:
            _set(self, _table=self._table_of(self._frame))
        return self._table

    @property
    def codes(self) -> FrameCodes:
        return self._table.codes if self._table is not None else frame_codes(self._frame)

    def __len__(self) -> int:
        return len(self._table.codes.qcode) if self._table is not None else len(self._frame)

    @property
    def qids(self) -> list[str]:
        return sorted(self.codes.qids)

    def to_frame(self) -> pd.DataFrame:
        return self.frame.copy()


@dataclass(frozen=True, eq=False, init=False)
class Run(_Coded):
    """One system's rankings. ``frame`` columns: qid, docid, rank, score, tag; row order is input order.

    ``tie_policy`` is None until :func:`resolve_ties` has ordered the rows and rewritten scores. It
    is a record, not a guarantee (the frame is mutable): consumers call :func:`ensure_tie_free`,
    which verifies the scores.

    A run holds a frame, a :class:`RunTable` (what the readers and :func:`resolve_ties` make), or
    both; each is built from the other on first use, so scoring a run read from a file never makes
    a Python object per row. Neither may be changed in place.
    """

    name: str
    tie_policy: str | None
    seed: int | None
    _frame: pd.DataFrame | None = field(repr=False)
    _table: RunTable | None = field(repr=False)
    _order: ScoreOrder | None = field(repr=False)  # see score_order

    def __init__(self, name: str, frame: pd.DataFrame | None = None, tie_policy: str | None = None,
                 seed: int | None = None, *, table: RunTable | None = None):
        if frame is None and table is None:
            raise TypeError("Run needs a frame or a table")
        _set(self, name=name, tie_policy=tie_policy, seed=seed, _frame=frame, _table=table, _order=None)

    def _frame_of(self, t: RunTable) -> pd.DataFrame:
        c = t.codes
        return pd.DataFrame({"qid": c.qids[c.qcode], "docid": c.docids[c.dcode], "rank": t.rank, "score": t.score,
                             "tag": t.tags[t.tcode]})

    def _table_of(self, f: pd.DataFrame) -> RunTable:
        return RunTable(frame_codes(f), f["rank"].to_numpy(dtype=np.int64), f.score.to_numpy(dtype=np.float64),
                        *_factorize32(f.tag.to_numpy(dtype=object)))

    @property
    def scores(self) -> np.ndarray:
        """float64 per row, in row order."""
        return self._table.score if self._table is not None else self._frame.score.to_numpy(dtype=np.float64)

    def __iter__(self) -> Iterator[RunRow]:
        f = self.frame
        for qid, docid, rank, score, tag in zip(f.qid, f.docid, f["rank"], f.score, f.tag):
            yield RunRow(qid, docid, int(rank), float(score), tag)

    def renamed(self, name: str) -> Run:
        """The same rankings under another name (nothing is copied)."""
        return self._sharing(name, self.tie_policy, self.seed)

    def _sharing(self, name: str, tie_policy: str | None, seed: int | None) -> Run:
        """A run holding these very rows (frame, table and score order) under another record."""
        out = Run(name, self._frame, tie_policy, seed, table=self._table)
        _set(out, _order=self._order)
        return out

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
        df = df[["qid", "docid", "rank", "score", "tag"]]
        _check_run_frame(df, f"<frame {name}>", lines=None)
        return cls(name, df.reset_index(drop=True))

    @classmethod
    def from_rows(cls, rows: Iterable[RunRow | tuple], name: str = "run") -> Run:
        return cls.from_frame(_rows_frame(rows, RunRow._fields), name)


@dataclass(frozen=True, eq=False, init=False)
class Qrels(_Coded):
    """Relevance labels. ``frame`` columns: qid, iteration, docid, label (int64).

    Like :class:`Run`, held as a frame, a :class:`QrelsTable` or both, each built on first use.
    """

    name: str
    _frame: pd.DataFrame | None = field(repr=False)
    _table: QrelsTable | None = field(repr=False)

    def __init__(self, name: str, frame: pd.DataFrame | None = None, *, table: QrelsTable | None = None):
        if frame is None and table is None:
            raise TypeError("Qrels needs a frame or a table")
        _set(self, name=name, _frame=frame, _table=table)

    def _frame_of(self, t: QrelsTable) -> pd.DataFrame:
        c = t.codes
        return pd.DataFrame({"qid": c.qids[c.qcode], "iteration": t.iterations[t.icode], "docid": c.docids[c.dcode],
                             "label": t.label})

    def _table_of(self, f: pd.DataFrame) -> QrelsTable:
        return QrelsTable(frame_codes(f), *_factorize32(f.iteration.to_numpy(dtype=object)),
                          f.label.to_numpy(dtype=np.int64))

    @property
    def labels(self) -> np.ndarray:
        """int64 per row, in row order."""
        return self._table.label if self._table is not None else self._frame.label.to_numpy(dtype=np.int64)

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
        _check_qrels_frame(df, f"<frame {name}>", lines=None)
        return cls(name, df.reset_index(drop=True))

    @classmethod
    def from_rows(cls, rows: Iterable[Qrel | tuple], name: str = "qrels") -> Qrels:
        return cls.from_frame(_rows_frame(rows, Qrel._fields), name)


def _rows_frame(rows: Iterable[tuple], fields: tuple[str, ...]) -> pd.DataFrame:
    """Records as a frame with one column per field (an empty frame keeps the columns)."""
    return pd.DataFrame(list(rows), columns=list(fields))


# ---------------------------------------------------------------------------------------- reading

def run_name(path: str | os.PathLike) -> str:
    """A run's name: the file name without .gz, a leading ``input.`` and a trailing .run/.txt/.trec.

    TREC archives name runs ``input.RUNTAG.gz``; recjudge writes ``SYSTEM.run``.
    """
    name = Path(path).name
    if name.endswith(".gz"):
        name = name[:-3]
    if name.startswith("input.") and len(name) > len("input."):
        name = name[len("input."):]
    for suffix in RUN_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _split_lines(text: str) -> tuple[list[str], list[int]]:
    """Non-blank lines and their 1-based line numbers."""
    lines, numbers = [], []
    for i, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            lines.append(line)
            numbers.append(i)
    return lines, numbers


def _frame_from_text(text: str, ncols: int, name: str, what: str, layout: str) -> tuple[pd.DataFrame, list[int]]:
    lines, numbers = _split_lines(text)
    if not lines:
        raise InputError(name, f"empty {what} file", f"a {what} needs at least one line '{layout}'")
    for line, number in zip(lines, numbers):
        n = len(line.split())
        if n != ncols:
            raise InputError(name, f"expected {ncols} columns '{layout}', found {n}",
                             f"write {ncols} whitespace-separated columns per line", line=number)
    frame = pd.read_csv(io.StringIO("\n".join(lines)), sep=r"\s+", header=None, dtype=str,
                        engine="c", keep_default_na=False, na_filter=False, quoting=3)
    return frame, numbers


class FrameCodes(NamedTuple):
    """A frame's qid and docid columns as int32 codes into their distinct values (first-seen order)."""

    qcode: np.ndarray   # int32 per row
    qids: np.ndarray    # object: the distinct qids
    dcode: np.ndarray   # int32 per row
    docids: np.ndarray  # object: the distinct docids


# Codes per frame object, so each run's strings are hashed once however many steps (tie share, tie
# check, one matrix per label set) read it; an entry goes when its frame is collected.
_CODES: dict[int, tuple[weakref.ref, FrameCodes]] = {}


def _factorize32(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    codes, uniques = pd.factorize(values)
    return codes.astype(np.int32 if len(uniques) < 2**31 else np.int64, copy=False), np.asarray(uniques, dtype=object)


def _remember_codes(frame: pd.DataFrame, codes: FrameCodes) -> FrameCodes:
    key = id(frame)
    _CODES[key] = (weakref.ref(frame, lambda _ref, key=key: _CODES.pop(key, None)), codes)
    return codes


def frame_codes(frame: pd.DataFrame) -> FrameCodes:
    """The qid and docid codes of a run or qrels frame, computed once per frame object.

    The readers fill them while parsing. Cached by identity: a frame whose qid or docid column is
    changed in place after its codes were taken must be copied first (recjudge never does that:
    every step that reorders rows builds a new frame).
    """
    hit = _CODES.get(id(frame))
    if hit is not None and hit[0]() is frame and len(hit[1].qcode) == len(frame):
        return hit[1]
    qcode, qids = _factorize32(frame["qid"].to_numpy(dtype=object))
    dcode, docids = _factorize32(frame["docid"].to_numpy(dtype=object))
    return _remember_codes(frame, FrameCodes(qcode, qids, dcode, docids))


@functools.cache
def _pyarrow_csv():
    """pyarrow's CSV reader when pyarrow is installed (optional: pandas' C reader is the fallback)."""
    try:
        import pyarrow
        import pyarrow.compute
        import pyarrow.csv
    except ImportError:
        return None
    return pyarrow


def _read_arrow(text: str, names: tuple[str, ...], kinds: tuple[type, ...]) -> tuple[pd.DataFrame, FrameCodes] | None:
    """Parse text without tabs or carriage returns with pyarrow, split on ``" "``; None when it is not
    single-spaced (an empty field, a wrong number of fields) or does not parse. String columns come
    back as int32 dictionary codes.

    No Python object is made per row: ids become codes in C++ (multithreaded), and the frame's
    string columns are the distinct strings taken by code.
    """
    pa = _pyarrow_csv()
    if pa is None:
        return None
    csv = pa.csv
    data = text.encode("utf-8")
    types = {n: (pa.dictionary(pa.int32(), pa.string()) if k is str else pa.int64() if k is int else pa.float64())
             for n, k in zip(names, kinds)}
    try:
        table = csv.read_csv(pa.py_buffer(data), read_options=csv.ReadOptions(column_names=list(names)),
                             parse_options=csv.ParseOptions(delimiter=" ", quote_char=False),
                             convert_options=csv.ConvertOptions(column_types=types, null_values=[],
                                                                strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        return None
    if table.num_rows == 0 or data.count(b" ") != (len(names) - 1) * table.num_rows:
        return None  # a short line (see _read_typed)
    table = table.unify_dictionaries()
    text_dtype = pd.Series(["a"]).dtype  # pandas' default string dtype, as Run.from_frame makes
    arrow_backed = getattr(text_dtype, "storage", None) == "pyarrow"
    columns, coded = {}, {}
    for name, kind in zip(names, kinds):
        col = table.column(name)
        if kind is str:
            chunks = col.chunks
            codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in chunks]).astype(np.int32, copy=False)
            uniques = np.asarray(chunks[0].dictionary.to_numpy(zero_copy_only=False), dtype=object)
            if (uniques == "").any():
                return None  # an empty field: a doubled, leading or trailing space, which \\s+ would skip
            coded[name] = (codes, uniques)
            # the distinct strings taken by code (object), or decoded in C++ for arrow-backed strings
            columns[name] = (pd.array(pa.compute.cast(col, pa.string()), dtype=text_dtype) if arrow_backed
                             else uniques[codes])
        else:
            columns[name] = col.to_numpy()
    frame = pd.DataFrame(columns)
    codes = FrameCodes(*coded["qid"], *coded["docid"])
    return frame, codes


def _read_typed(text: str, names: tuple[str, ...], kinds: tuple[type, ...]) -> tuple[pd.DataFrame, FrameCodes] | None:
    """A well-formed table with typed columns and its id codes, or None to let the careful reader name the fault.

    Text without tabs and carriage returns is first split on ``" "`` (by pyarrow when installed,
    else by pandas' C reader: a quarter faster than ``\\s+``). That split agrees with ``\\s+``
    when no field comes out empty (a doubled, leading or trailing space makes one) and the text
    holds ``ncols - 1`` spaces per row (a line with too many fields is a parse error, so one with
    too few cannot hide behind it); otherwise pandas splits on ``\\s+``. String columns come back
    as pandas' default string dtype (object before pandas 3), as :meth:`Run.from_frame` makes them.
    """
    seps: tuple[str, ...] = (r"\s+",)
    if "\t" not in text and "\r" not in text:
        if _pyarrow_csv() is None or _reader() == "pandas":
            seps = (" ", r"\s+")
        else:
            parsed = _read_arrow(text, names, kinds)
            if parsed is not None:
                return parsed  # else pandas' " " split would be refused too: straight to \s+
    for sep in seps:
        parsed = _read_pandas(text, names, kinds, sep)
        if parsed is not None:
            return parsed
    return None


# pandas before 3 parses decimals one unit in the last place off now and then unless told to round
# trip (as Python's float(), which ir-measures reads scores with); pandas 3 does it by default
_ROUND_TRIP = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}


def _read_pandas(text: str, names: tuple[str, ...], kinds: tuple[type, ...], sep: str
                 ) -> tuple[pd.DataFrame, FrameCodes] | None:
    dtype = {i: k if k is not int else np.int64 for i, k in enumerate(kinds)}
    try:
        raw = pd.read_csv(io.StringIO(text), sep=sep, header=None, engine="c", quoting=3, dtype=dtype,
                          **_ROUND_TRIP,
                          keep_default_na=False, skip_blank_lines=True,
                          na_values={i: [] for i, k in enumerate(kinds) if k is not str})
    except (ValueError, TypeError, OverflowError, pd.errors.ParserError):
        return None
    if raw.shape[1] != len(names) or len(raw) == 0:
        return None
    if sep == " " and text.count(" ") != (len(names) - 1) * len(raw):
        return None  # a short line
    raw.columns = list(names)  # the parsed frame is the result: no copy of its columns
    codes = FrameCodes(*_factorize32(raw["qid"].to_numpy(dtype=object)),
                       *_factorize32(raw["docid"].to_numpy(dtype=object)))
    others = [pd.unique(raw[n].to_numpy(dtype=object)) for n, k in zip(names, kinds)
              if k is str and n not in ("qid", "docid")]
    # an empty or missing field: a doubled, leading or trailing space under sep=" ", a short line under \s+
    if any(pd.isna(u).any() or (u == "").any() for u in (codes.qids, codes.docids, *others)):
        return None
    return raw, codes


READERS = ("auto", "scan", "pyarrow", "pandas")
_CHUNK = 1 << 24  # bytes per read: the scanner streams, so memory does not grow with the file


def available_readers() -> list[str]:
    """The fast readers this install has, fastest first: the compiled scanner, pyarrow, pandas' C parser."""
    return [r for r in READERS[1:]
            if (r != "scan" or _scanner_type() is not None) and (r != "pyarrow" or _pyarrow_csv() is not None)]


def _reader() -> str:
    """The fast reader to try first: ``RECJUDGE_READER`` (auto, scan, pyarrow, pandas), for benchmarks
    and tests; ``auto`` takes the fastest one available. The careful reader is always last."""
    choice = os.environ.get("RECJUDGE_READER", "auto")
    if choice not in READERS:
        raise ConfigError(f"RECJUDGE_READER={choice!r}; choose one of {', '.join(READERS)}")
    have = available_readers()
    if choice == "auto":
        return have[0]
    if choice == "scan" and choice not in have:
        raise ConfigError("RECJUDGE_READER=scan, but recjudge._native is not available (RECJUDGE_NATIVE=0, or it "
                          "was not built: reinstall recjudge with a C compiler present, pip install -e .)")
    if choice == "pyarrow" and choice not in have:
        raise ConfigError('RECJUDGE_READER=pyarrow, but pyarrow is not installed: pip install "recjudge[fast]"')
    return choice


@functools.cache
def native_module():
    """``recjudge._native`` (the compiled tokenizer and join), or None where it was not built or
    ``RECJUDGE_NATIVE=0`` turns it off (what an install without a C compiler runs; for benchmarks)."""
    if os.environ.get("RECJUDGE_NATIVE", "1") == "0":
        return None
    try:
        from .. import _native
    except ImportError:
        return None
    return _native


def _scanner_type():
    """The compiled tokenizer (``recjudge._native.Scanner``), or None."""
    native = native_module()
    return None if native is None else native.Scanner


def _scan_source(source: Source, what: str, kinds: str, shared: dict | None = None
                 ) -> tuple[str, tuple | None, Source]:
    """(name, the scanner's result or None, what the careful reader should read instead).

    Paths (plain or gzip) are streamed in chunks, so neither the file nor its text is ever held
    whole; errors opening or decompressing name the file as :func:`recjudge._io.read_text` does. A
    file object is read once, and its bytes are what the careful reader gets when the scanner refuses.
    """
    name = source_name(source)

    def new_scanner(rows_hint: int = 0):
        return _scanner_type()(kinds, (0, 2), shared, rows_hint)

    if isinstance(source, str) and is_inline(source):
        scanner = new_scanner()
        try:
            scanner.feed(source.encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate: the careful reader says where
            return name, None, source
        return name, scanner.finish(), source
    if not isinstance(source, (str, os.PathLike)):
        scanner = new_scanner()
        data = source.read()
        fallback = io.StringIO(data) if isinstance(data, str) else io.BytesIO(data)
        fallback.name = name
        if isinstance(data, str):
            try:
                scanner.feed(data.encode("utf-8"))
            except UnicodeEncodeError:
                return name, None, fallback
        elif data[:2] == b"\x1f\x8b":
            return name, None, fallback  # a compressed stream: read_text decompresses it (and names a fault)
        else:
            scanner.feed(memoryview(data)[3:] if data.startswith(BOM) else data)
        return name, scanner.finish(), fallback
    path = existing_file(source, what)
    try:
        with open(path, "rb") as fh:
            compressed = fh.read(2) == b"\x1f\x8b"
            fh.seek(0)
            if not compressed and name.endswith(".gz"):
                raise gzip_error(name, what)
            # rows expected from the size (short TREC lines; gzip packs them about five to one)
            scanner = new_scanner(os.fstat(fh.fileno()).st_size * (5 if compressed else 1) // 20)
            stream = gzip.GzipFile(fileobj=fh, mode="rb") if compressed else fh
            buf = bytearray(_CHUNK)
            view = memoryview(buf)
            first = True
            while True:
                n = stream.readinto(buf)
                if not n:
                    break
                chunk = view[:n]
                if first and bytes(chunk[:3]) == BOM:
                    chunk = chunk[3:]
                first = False
                if not scanner.feed(chunk):
                    break
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise gzip_error(name, what, exc) from None
    except OSError as exc:
        raise InputError(name, f"cannot read {what}: {exc.strerror or exc}", "check permissions") from None
    return name, scanner.finish(), source


BOM = b"\xef\xbb\xbf"
RUN_KINDS = "s-sifs"     # qid Q0 docid rank score tag
QRELS_KINDS = "sssi"     # qid iteration docid label


def _array32(buffer) -> np.ndarray:
    return np.frombuffer(buffer, dtype=np.int32)


def _strings(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _scanned_codes(qcol, dcol, duplicate: int, grouped: bool, docids: np.ndarray | None = None) -> FrameCodes | None:
    """The id codes of a scanned file, or None when a (qid, docid) pair repeats (the careful reader
    names it). ``docids``: the shared dictionary's ids, when the docid column used one."""
    codes = FrameCodes(_array32(qcol[0]), _strings(qcol[1]), _array32(dcol[0]),
                       _strings(dcol[1]) if docids is None else docids)
    if duplicate >= 0 or (not grouped and _has_duplicate_pairs(codes)):
        return None
    return codes


def _scanned_run(result, dictionary: IdDictionary | None = None) -> RunTable | None:
    _, cols, duplicate, grouped = result
    codes = _scanned_codes(cols[0], cols[2], duplicate, grouped, dictionary.ids() if dictionary else None)
    if codes is None:
        return None
    tcode, tags = cols[5]
    return RunTable(codes, np.frombuffer(cols[3], dtype=np.int64), np.frombuffer(cols[4], dtype=np.float64),
                    _array32(tcode), _strings(tags))


class IdDictionary:
    """Document ids shared by runs read together: each distinct id gets one code for all of them.

    Runs read with one dictionary (``read_run(..., dictionary=d)``) hold ``d.ids()`` as their
    docids, which may then list ids a run does not use; what depends only on the document (its
    code in some qrels) is looked up once per id instead of once per run. Only the compiled reader
    shares codes; a run another reader reads has docids of its own. One thread at a time.
    """

    def __init__(self):
        native = native_module()
        self._native = None if native is None else native.Dictionary()
        self._ids = np.empty(0, dtype=object)
        self._issued: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()

    def ids(self) -> np.ndarray:
        """Every id so far, by code. A new array whenever ids were added, so one a run holds never changes."""
        if self._native is not None and len(self._native) > len(self._ids):
            self._ids = np.concatenate([self._ids, _strings(self._native.strings(len(self._ids)))])
            self._issued[id(self._ids)] = self._ids
        return self._ids

    def issued(self, docids: np.ndarray) -> bool:
        """Whether ``docids`` is an array :meth:`ids` gave: its codes are this dictionary's."""
        return self._issued.get(id(docids)) is docids

    def __len__(self) -> int:
        return len(self._native) if self._native is not None else 0


def _scanned_qrels(result) -> QrelsTable | None:
    _, cols, duplicate, grouped = result
    label = np.frombuffer(cols[3], dtype=np.int64)
    if (np.abs(label) > MAX_LABEL).any():
        return None
    codes = _scanned_codes(cols[0], cols[2], duplicate, grouped)
    if codes is None:
        return None
    icode, iterations = cols[1]
    return QrelsTable(codes, _array32(icode), _strings(iterations), label)


def _fast_run_frame(text: str) -> pd.DataFrame | None:
    """The run frame parsed by a typed C reader, or None when anything is off.

    Only well-formed input takes this path; on any doubt (a parse error, a missing field, a
    non-finite score, a duplicate) the careful reader runs and reports the line.
    """
    parsed = _read_typed(text, ("qid", "q0", "docid", "rank", "score", "tag"), (str, str, str, int, float, str))
    if parsed is None:
        return None
    raw, codes = parsed
    if not np.isfinite(raw["score"].to_numpy()).all() or _has_duplicate_pairs(codes):
        return None
    del raw["q0"]
    _remember_codes(raw, codes)
    return raw


def _has_duplicate_pairs(codes: FrameCodes) -> bool:
    # integer pair codes: ~10x cheaper than DataFrame.duplicated over two string columns
    key = codes.qcode.astype(np.int64) * len(codes.docids) + codes.dcode
    return bool(pd.Series(key).duplicated().any())


def _source_run_name(src: str) -> str:
    return "inline" if src == "<inline>" else run_name(src)


def _source_qrels_name(src: str) -> str:
    return "inline" if src == "<inline>" else run_name(src).removesuffix(".qrels")


def read_run(source: Source, name: str | None = None, *, dictionary: IdDictionary | None = None) -> Run:
    """Read a TREC run ``qid Q0 docid rank score tag`` from a path, .gz, file object or inline string.

    ``dictionary``: document ids shared with the other runs read with it (:class:`IdDictionary`).
    """
    if _reader() == "scan":
        shared = {2: dictionary._native} if dictionary is not None and dictionary._native is not None else None
        src, scanned, source = _scan_source(source, "run", RUN_KINDS, shared)
        table = _scanned_run(scanned, dictionary if shared else None) if scanned is not None else None
        if table is not None:
            return Run(name if name is not None else _source_run_name(src), table=table)
    src, text = read_text(source, "run")
    if name is None:
        name = _source_run_name(src)
    fast = _fast_run_frame(text)
    if fast is not None:
        return Run(name, fast)
    raw, numbers = _frame_from_text(text, 6, src, "run", "qid Q0 docid rank score tag")
    df = pd.DataFrame({"qid": raw[0].to_numpy(), "docid": raw[2].to_numpy()})
    rank = pd.to_numeric(raw[3], errors="coerce")
    bad = rank.isna() | (rank != np.floor(rank))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(src, f"rank {raw[3].iloc[i]!r} is not an integer", "write the rank as 1, 2, 3, …",
                         line=numbers[i])
    df["rank"] = rank.astype("int64").to_numpy()
    df["score"] = _decimals(raw[4])
    bad = (df.score.isna() & ~raw[4].str.lower().isin(["nan", "+nan", "-nan"])).to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(src, f"score {raw[4].iloc[i]!r} is not a number", "write a decimal score",
                         line=numbers[i])
    df["tag"] = raw[5].to_numpy()
    _check_run_frame(df, src, numbers, raw_scores=raw[4])
    return Run(name, df)


def _decimals(texts: pd.Series) -> np.ndarray:
    """The numbers pandas recognises in ``texts`` (NaN elsewhere), each converted by Python's float():
    correctly rounded, as ir-measures reads scores (pandas' parser can be one unit in the last place off)."""
    values = pd.to_numeric(texts, errors="coerce").astype("float64").to_numpy(copy=True)
    good = np.flatnonzero(~np.isnan(values))
    values[good] = [float(t) for t in texts.to_numpy(dtype=object)[good]]
    return values


def _check_run_frame(df: pd.DataFrame, src: str, lines: list[int] | None, raw_scores=None) -> None:
    def where(i: int) -> dict:
        return {"line": lines[i]} if lines is not None else {}

    if len(df) == 0:
        raise InputError(src, "empty run", "a run needs at least one ranked document")
    score = df.score.to_numpy()
    bad = ~np.isfinite(score)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        shown = raw_scores.iloc[i] if raw_scores is not None else score[i]
        raise InputError(src, f"score {shown!r} is not a finite number",
                         "give every document a finite score (no NaN or infinity)", **where(i))
    dup = df.duplicated(["qid", "docid"]).to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        first = int(np.flatnonzero(((df.qid == df.qid.iloc[i]) & (df.docid == df.docid.iloc[i])).to_numpy())[0])
        also = f" (first at line {lines[first]})" if lines is not None else ""
        raise InputError(src, f"document {df.docid.iloc[i]!r} appears twice for query {df.qid.iloc[i]!r}{also}",
                         "keep one line per (query, document)", **where(i))


def _fast_qrels_frame(text: str) -> pd.DataFrame | None:
    """Qrels parsed by a typed C reader, or None to let the careful reader find and name the fault."""
    parsed = _read_typed(text, ("qid", "iteration", "docid", "label"), (str, str, str, int))
    if parsed is None:
        return None
    raw, codes = parsed
    if (np.abs(raw["label"].to_numpy()) > MAX_LABEL).any() or _has_duplicate_pairs(codes):
        return None
    _remember_codes(raw, codes)
    return raw


def read_qrels(source: Source, name: str | None = None) -> Qrels:
    """Read TREC qrels ``qid iter docid label`` from a path, .gz, file object or inline string."""
    if _reader() == "scan":
        src, scanned, source = _scan_source(source, "qrels", QRELS_KINDS)
        table = _scanned_qrels(scanned) if scanned is not None else None
        if table is not None:
            return Qrels(name if name is not None else _source_qrels_name(src), table=table)
    src, text = read_text(source, "qrels")
    if name is None:
        name = _source_qrels_name(src)
    fast = _fast_qrels_frame(text)
    if fast is not None:
        return Qrels(name, fast)
    raw, numbers = _frame_from_text(text, 4, src, "qrels", "qid iter docid label")
    labels = raw[3]
    ok = labels.str.fullmatch(r"[+-]?\d+").to_numpy()
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise InputError(src, f"label {labels.iloc[i]!r} is not an integer",
                         "use whole-number labels (ir-measures and trec_eval reject fractions)",
                         line=numbers[i])
    big = (labels.str.lstrip("+-").str.lstrip("0").str.len() > 9).to_numpy()
    if big.any():
        i = int(np.flatnonzero(big)[0])
        raise InputError(src, f"label {labels.iloc[i]!r} is out of range",
                         f"use labels from {-MAX_LABEL} to {MAX_LABEL} (trec_eval keeps labels in a C int)",
                         line=numbers[i])
    df = pd.DataFrame({
        "qid": raw[0].to_numpy(),
        "iteration": raw[1].to_numpy(),
        "docid": raw[2].to_numpy(),
        "label": labels.astype("int64").to_numpy(),
    })
    _check_qrels_frame(df, src, numbers)
    return Qrels(name, df)


def _check_qrels_frame(df: pd.DataFrame, src: str, lines: list[int] | None) -> None:
    if len(df) == 0:
        raise InputError(src, "empty qrels", "qrels need at least one judged document")
    dup = df.duplicated(["qid", "docid"]).to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise InputError(src, f"document {df.docid.iloc[i]!r} is judged twice for query {df.qid.iloc[i]!r}",
                         "keep one label per (query, document)",
                         **({"line": lines[i]} if lines is not None else {}))


# Files that sit beside runs (sidecars, reports, figures, qrels) and are never runs.
COMPANION_SUFFIXES = (".json", ".jsonl", ".tsv", ".csv", ".md", ".html", ".png", ".pdf", ".svg", ".toml",
                      ".yaml", ".yml", ".qrels", ".log", ".db", ".sqlite", ".py", ".sh")


def _is_run_like(f: Path) -> bool:
    """Named like a run: .run/.txt/.trec (optionally .gz), any .gz, or ``input.*``."""
    name = f.name
    return (name.endswith(".gz") or name.startswith("input.")
            or any(name.endswith(s) for s in RUN_SUFFIXES))


def _folder_entries(path: Path) -> tuple[list[Path], list[Path], list[str]]:
    """(files named like runs, other candidate files, skip notes) of one runs folder."""
    try:
        entries = sorted(path.iterdir())
    except OSError as exc:
        raise InputError(str(path), f"cannot list the runs folder: {exc.strerror}", "check its permissions") from None
    named, other, notes = [], [], []
    for f in entries:
        if f.name.startswith("."):
            continue
        if f.is_dir():
            notes.append(f"{f}: a subfolder, not read (name it with --runs to include its runs)")
        elif not f.is_file():
            notes.append(f"{f}: not a regular file")
        elif _is_run_like(f):
            named.append(f)
        elif f.suffix.lower() in COMPANION_SUFFIXES:
            continue  # sidecars and reports: silently not runs
        else:
            other.append(f)
    return named, other, notes


def iter_run_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Expand folders into the run files they hold, sorted by name; explicitly named files are kept.

    In a folder, files named like runs are taken; other files without a known companion suffix are
    taken when they parse as a run (TREC archives name runs ``RUNTAG`` or ``input.RUNTAG``).
    Subfolders and files that are not runs are reported in one warning, never read silently.
    """
    files, notes = _expand_run_paths(paths)
    if notes:
        warnings.warn("runs folder entries skipped:\n  " + "\n  ".join(notes), stacklevel=2)
    return files


def _expand_run_paths(paths: Iterable[str | os.PathLike]) -> tuple[list[Path], list[str]]:
    files: list[Path] = []
    notes: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            named, other, folder_notes = _folder_entries(path)
            found = list(named)
            for f in other:
                if _parses_as_run(f):
                    found.append(f)
                else:
                    folder_notes.append(f"{f}: not a TREC run (first line is not 'qid Q0 docid rank score tag')")
            if not found:
                raise InputError(str(path), "folder holds no run files" +
                                 (" (" + "; ".join(folder_notes) + ")" if folder_notes else ""),
                                 "put TREC run files (e.g. NAME.run, NAME.gz, input.NAME.gz) in it")
            files.extend(sorted(found))
            notes.extend(folder_notes)
        elif path.exists():
            files.append(path)
        else:
            raise InputError(str(path), "run file or folder not found", "check the path")
    return files, notes


def _parses_as_run(f: Path) -> bool:
    """Whether the first non-blank line of ``f`` has the six columns of a run with numeric rank and score."""
    try:
        with open(f, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    if head[:2] == b"\x1f\x8b":
        return True  # compressed: let the reader decide (and report) the content
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    for line in text.splitlines():
        if line.strip():
            cols = line.split()
            if len(cols) != 6:
                return False
            try:
                int(cols[3]), float(cols[4])
            except ValueError:
                return False
            return True
    return False


def run_paths(paths: Iterable[str | os.PathLike] | str | os.PathLike) -> dict[str, Path]:
    """Run name → file for files and folders (folders expanded as :func:`iter_run_files` does);
    names must be unique. For reading one run at a time (:func:`recjudge.evaluation.measures.score_runs`)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    origin: dict[str, Path] = {}
    for f in iter_run_files(paths):
        name = run_name(f)
        if name in origin:
            raise InputError(str(f), f"run name {name!r} is also used by {origin[name]}",
                             "rename one of the files: a run's name is its file name")
        origin[name] = f
    return origin


def read_runs(paths: Iterable[str | os.PathLike] | str | os.PathLike) -> dict[str, Run]:
    """Read runs from files and folders; keys are run names, which must be unique."""
    return {name: read_run(f, name=name) for name, f in run_paths(paths).items()}


# ---------------------------------------------------------------------------------------- writing

def _format_scores(scores: np.ndarray) -> list[str]:
    # Integral scores (all tie-free runs) print as integers; others with repr's round-trip digits.
    return [str(int(s)) if s.is_integer() and abs(s) < 2**53 else repr(s) for s in scores.tolist()]


def write_run(run: Run, dest: str | os.PathLike, tag: str | None = None) -> Path:
    """Write ``run`` atomically as ``qid Q0 docid rank score tag`` (a .gz path is compressed)."""
    f = run.frame
    tags = [tag] * len(f) if tag is not None else f.tag.tolist()
    scores = _format_scores(f.score.to_numpy())
    with atomic_write(dest) as fh:
        fh.writelines(
            f"{q} Q0 {d} {r} {s} {t}\n"
            for q, d, r, s, t in zip(f.qid.tolist(), f.docid.tolist(), f["rank"].tolist(), scores, tags)
        )
    return Path(dest)


def write_qrels(qrels: Qrels, dest: str | os.PathLike) -> Path:
    """Write qrels atomically as ``qid iter docid label``."""
    f = qrels.frame
    with atomic_write(dest) as fh:
        fh.writelines(
            f"{q} {i} {d} {int(lab)}\n"
            for q, i, d, lab in zip(f.qid.tolist(), f.iteration.tolist(), f.docid.tolist(), f.label.tolist())
        )
    return Path(dest)


# ------------------------------------------------------------------------------------- tie policy

def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x += np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return x


_HASH_MEMO: dict[str, int] = {}
_HASH_MEMO_MAX = 2_000_000  # ids; runs of one collection share their items, so most lookups hit


def _blake64(v: str) -> int:
    h = _HASH_MEMO.get(v)
    if h is None:
        h = int.from_bytes(hashlib.blake2b(v.encode("utf-8"), digest_size=8).digest(), "little")
        if len(_HASH_MEMO) < _HASH_MEMO_MAX:
            _HASH_MEMO[v] = h
    return h


def string_hashes(values: Iterable[str]) -> np.ndarray:
    """``B(v)`` of each string: the first 8 bytes (little-endian) of BLAKE2b of its UTF-8 encoding."""
    return np.fromiter((_blake64(v) for v in values), dtype=np.uint64)


def seeded_hash_keys(user_hashes: np.ndarray, item_hashes: np.ndarray, user_of_row: np.ndarray,
                     seed: int = 0) -> np.ndarray:
    """The disclosed tie-break key from string hashes: ``splitmix64(splitmix64(B(qid) ^ seed) ^ B(docid))``.

    ``user_hashes`` holds ``B`` per distinct user, ``item_hashes`` ``B`` per row and ``user_of_row``
    each row's index into ``user_hashes``: callers that draw many seeds hash the strings once.
    """
    hq = _splitmix64(user_hashes ^ np.uint64(seed & 0xFFFFFFFFFFFFFFFF))
    return _splitmix64(hq[user_of_row] ^ item_hashes)


def hash_keys(qids: np.ndarray | pd.Series, docids: np.ndarray | pd.Series, seed: int = 0) -> np.ndarray:
    """The disclosed tie-break key: ``splitmix64(splitmix64(B(qid) ^ seed) ^ B(docid))``.

    ``B`` is the first 8 bytes (little-endian) of BLAKE2b of the UTF-8 string. Stable across
    platforms, processes and Python versions (unlike ``hash()``); docid is the collision fallback.
    """
    q_codes, q_uniq = pd.factorize(np.asarray(qids, dtype=object), sort=False)
    d_codes, d_uniq = pd.factorize(np.asarray(docids, dtype=object), sort=False)
    hd = string_hashes(np.asarray(d_uniq, dtype=object))
    return seeded_hash_keys(string_hashes(np.asarray(q_uniq, dtype=object)), hd[d_codes], q_codes, seed)


def _sorted_codes(values) -> np.ndarray:
    """Integer codes whose order is the values' string order (code points = UTF-8 byte order)."""
    return pd.factorize(np.asarray(values, dtype=object), sort=True)[0].astype(np.int64, copy=False)


def _docid_order(docids: np.ndarray) -> np.ndarray:
    """Rank of each docid in byte-wise string order (what trec_eval's strcmp uses)."""
    return _sorted_codes(docids)


def _check_policy(policy: str) -> None:
    if policy not in TIE_POLICIES:
        raise ConfigError(f"unknown tie policy {policy!r}; choose one of {', '.join(TIE_POLICIES)}")


class ScoreOrder(NamedTuple):
    """A run's rows ordered by qid (string order), then score descending, ties in row order."""

    order: np.ndarray   # row indices (the identity when the rows are in that order already)
    qrank: np.ndarray   # per ordered row: index of its qid in ``qids`` (int32)
    score: np.ndarray   # per ordered row
    in_place: bool      # the rows were in that order: ``order`` is the identity
    qids: np.ndarray    # object: the run's distinct qids in string order
    pos: np.ndarray     # per ordered row: 0-based position inside its query (int32)
    starts: np.ndarray  # per query (index into qids): its first ordered row

    @property
    def lengths(self) -> np.ndarray:
        """Per query (index into qids): its rows."""
        return np.diff(np.r_[self.starts, len(self.qrank)])


def _score_order_of(codes: FrameCodes, score: np.ndarray) -> ScoreOrder:
    rank = _sorted_codes(codes.qids)
    qids = np.empty(len(codes.qids), dtype=object)
    qids[rank] = codes.qids
    qrank = rank[codes.qcode]
    n = len(score)
    order, in_place = np.arange(n), True
    if n > 1:
        new_query = qrank[1:] != qrank[:-1]
        if not (np.all(qrank[1:] >= qrank[:-1]) and np.all((score[1:] <= score[:-1]) | new_query)):
            order, in_place = np.lexsort((-score, qrank)), False  # stable: equal scores keep row order
            qrank, score = qrank[order], score[order]
    starts = np.flatnonzero(np.r_[True, qrank[1:] != qrank[:-1]]) if n else np.zeros(0, dtype=np.int64)
    pos = np.arange(n, dtype=np.int64) - np.repeat(starts, np.diff(np.r_[starts, n]))
    small = np.int32 if n < 2**31 else np.int64  # half the memory of the two row-length index arrays
    return ScoreOrder(order, qrank.astype(small, copy=False), score, in_place, qids, pos.astype(small), starts)


def score_order(run: Run) -> ScoreOrder:
    """The run's rows by qid, then score descending (ties in row order): sorted at most once per run.

    Runs written as TREC runs usually are (grouped by query, best first), which one linear pass
    confirms without sorting. The tie share, the tie check, :func:`resolve_ties` and the measures
    all start from this one order.
    """
    cached = run._order
    if cached is None:
        cached = _score_order_of(run.codes, run.scores)
        _set(run, _order=cached)
    return cached


def _block_starts(so: ScoreOrder) -> np.ndarray:
    """Per ordered row: whether it starts a block of equal scores (a new query or a new score)."""
    new_block = np.ones(len(so.score), dtype=bool)
    new_block[1:] = (so.pos[1:] == 0) | (so.score[1:] != so.score[:-1])
    return new_block


def _tie_blocks(so: ScoreOrder) -> tuple[np.ndarray, np.ndarray] | None:
    """(ordered positions inside a block of equal scores, their block number), or None when no two
    rows of a query share a score."""
    new_block = _block_starts(so)
    if new_block.all():
        return None
    block = np.cumsum(new_block) - 1
    size = np.bincount(block)
    tied = np.flatnonzero(size[block] > 1)
    return tied, block[tied]


def _policy_order(codes: FrameCodes, so: ScoreOrder, policy: str, seed: int) -> np.ndarray:
    """Row indices ordered by qid, score descending, then ``policy``: the score order, with the rows
    of each tie block (and only those) put in the policy's order."""
    order = so.order
    blocks = None if policy == "input" else _tie_blocks(so)
    if blocks is None:
        return order  # tie-free (or 'input'): the policy decides nothing, so its keys are never computed
    at, block = blocks
    rows = order[at]
    dcode = codes.dcode[rows]
    used = np.unique(dcode)
    where = np.searchsorted(used, dcode)
    docrank = _docid_order(codes.docids[used])[where]
    if policy == "hash":
        item_hashes = string_hashes(codes.docids[used])[where]
        keys: tuple = (docrank, seeded_hash_keys(string_hashes(codes.qids), item_hashes, codes.qcode[rows], seed))
    elif policy == "trec_eval":
        keys = (-docrank,)
    else:
        keys = (docrank,)
    order = order.copy()
    # blocks stay where they are; rows are reordered inside each block (lexsort: last key primary)
    order[at] = rows[np.lexsort((*keys, block))]
    return order


def order_rows(frame: pd.DataFrame, policy: str = "hash", seed: int = 0) -> np.ndarray:
    """Row indices of ``frame`` ordered by qid, score descending, then the tie policy."""
    _check_policy(policy)
    codes = frame_codes(frame)
    return _policy_order(codes, _score_order_of(codes, frame.score.to_numpy(dtype=np.float64)), policy, seed)


def _compact(codes: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``codes`` renumbered over the values still used (first-seen order), when some are not."""
    used = np.zeros(len(values), dtype=bool)
    used[codes] = True
    if used.all():
        return codes, values
    new = np.cumsum(used, dtype=np.int64) - 1
    return new[codes].astype(np.int32), values[used]


def resolve_ties(run: Run, policy: str = "hash", seed: int = 0, depth: int | None = None) -> Run:
    """Order each ranking by score then ``policy`` and rewrite scores as n, n-1, …, 1 (tie-free).

    ``depth`` truncates each ranking to its top ``depth`` after ordering. ``input`` keeps file order
    among ties and warns: a relevant-first candidate list then wins every tie.
    """
    if policy == "input":
        warnings.warn(
            f"run {run.name!r}: tie policy 'input' resolves equal scores by file order; a list written "
            "relevant-first then wins every tie. Prefer 'hash'.", stacklevel=2)
    _check_policy(policy)
    t = run.table
    so = score_order(run)
    order = _policy_order(t.codes, so, policy, seed)
    pos = so.pos  # the policy reorders rows inside blocks only: qids stay in place
    n = np.repeat(so.lengths, so.lengths)
    keep = None
    if depth is not None:
        keep = pos < depth
        order, pos = order[keep], pos[keep]
        n = np.minimum(n[keep], depth)
    c = t.codes
    dcode, docids, tcode, tags = c.dcode[order], c.docids, t.tcode[order], t.tags
    if depth is not None:  # rows were dropped: keep only the ids still used
        dcode, docids = _compact(dcode, docids)
        tcode, tags = _compact(tcode, tags)
    table = RunTable(FrameCodes(c.qcode[order], c.qids, dcode, docids), (pos + 1).astype(np.int64),
                     (n - pos).astype(np.float64), tcode, tags)
    out = Run(run.name, tie_policy=policy, seed=seed, table=table)
    # the result is in score order by construction: record it, so nothing checks or sorts it again
    qrank = so.qrank if keep is None else so.qrank[keep]
    starts = so.starts if keep is None else np.flatnonzero(pos == 0)
    _set(out, _order=ScoreOrder(np.arange(len(pos)), qrank, table.score, True, so.qids, pos, starts))
    return out


def is_tie_free(run: Run) -> bool:
    """Whether no two documents of a query share a score compared as float32 (trec_eval's view).

    Then every tie policy gives the same order, so trec_eval and ir-measures rank alike.
    """
    so = score_order(run)
    s32 = so.score.astype(np.float32)
    return bool(np.all((s32[1:] < s32[:-1]) | (so.pos[1:] == 0)))


def ensure_tie_free(run: Run, policy: str = "hash", seed: int = 0) -> Run:
    """``run`` made tie-free under ``policy``: untouched when its scores are already tie-free.

    The check is on the scores (:func:`is_tie_free`), never on ``run.tie_policy``: a run that
    claims a policy but ties in float32 is resolved again, and a raw run without ties keeps its
    scores (it is recorded as resolved by ``policy``, which could not reorder it).
    """
    _check_policy(policy)
    if is_tie_free(run):
        return run if run.tie_policy is not None else run._sharing(run.name, policy, seed)
    return resolve_ties(run, policy, seed)


def top_k(run: Run, k: int) -> pd.DataFrame:
    """Rows of each query's ``k`` best scores, ranked; ``run`` must be tie-free (:func:`ensure_tie_free`)."""
    so = score_order(run)
    return run.frame.iloc[so.order[so.pos < k]]


def tied_user_share(run: Run, k: int | None = None) -> float:
    """Share of queries whose top-``k`` (by score, before any tie policy) holds two equal scores.

    A tie block that straddles position k counts: it decides which items enter the top-k.
    """
    # computed, not read from run.tie_policy: a resolved run simply has no ties; ties need no order
    # among themselves here, so the run's one score order serves
    so = score_order(run)
    q, s = so.qrank, so.score
    tie = (s[1:] == s[:-1]) & (so.pos[1:] > 0)  # position 0 starts a query
    if k is not None:
        tie &= so.pos[1:] <= k  # pair (k-1, k) 0-based crosses the boundary and counts
    n = len(so.qids)
    if not n:
        return math.nan
    tied = np.zeros(n, dtype=bool)
    tied[q[1:][tie]] = True
    return int(tied.sum()) / n


__all__ += ["iter_run_files", "order_rows", "run_paths", "RUN_SUFFIXES", "COMPANION_SUFFIXES"]
