"""Reading TREC runs and qrels: one reader, polars' CSV parser, for every input form.

A path (plain or gzip), a file object (text or binary) and an inline string all end in the same
parse: polars splits the fields on ``" "`` and parses the numbers, and ids come back as categorical
codes, turned into int32 codes without a Python string per row. A file that is not in that plain
shape (tabs, doubled or edge spaces, blank lines) or that holds a fault goes through
:func:`_careful`, which reads it line by line, names the first fault with its line and a fix, and
otherwise rewrites the whitespace so that the same parser reads it: every form gives the same table
or the same error.

The rules: fields are separated by spaces or tabs, lines end with ``\\n`` (a ``\\r`` before it is
dropped), blank lines are skipped, and a leading byte-order mark is not part of the first id. Any
other control or Unicode space character in a field is refused: TREC tools disagree on whether it
separates fields (Python's ``split()``, which ir-measures reads runs with, says yes; trec_eval's
``sscanf`` says no for most). Ranks and labels are integers written as such (``1.0`` is refused:
ir-measures and trec_eval reject fractional labels); scores are decimals, and must be finite.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import threading
import weakref
import zlib
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from ..._io import Source, existing_file, gzip_error, is_inline, source_name
from ...errors import InputError
from .discovery import run_paths
from .records import (MAX_LABEL, FrameCodes, Qrels, QrelsTable, Run, RunTable, check_qrels, check_run,
                      factorize32, label_column, run_name)

__all__ = ["read_run", "read_qrels", "read_runs", "IdDictionary"]

GZIP_MAGIC = b"\x1f\x8b"
BOM = b"\xef\xbb\xbf"


class _Layout(NamedTuple):
    what: str                   # "run" or "qrels"
    layout: str                 # the columns as the error messages spell them
    names: tuple[str, ...]
    kinds: tuple[str, ...]      # per column: "id" (coded), "label" (coded, usually one value), "int", "float"


RUN = _Layout("run", "qid Q0 docid rank score tag", ("qid", "q0", "docid", "rank", "score", "tag"),
              ("id", "label", "id", "int", "float", "label"))
QRELS = _Layout("qrels", "qid iter docid label", ("qid", "iteration", "docid", "label"), ("id", "label", "id", "int"))


def _polars():
    import polars  # imported on first read: `import recjudge` and the CLI's --help stay light

    return polars


def _parse(data, layout: _Layout, numbers: bool = True):
    """polars' parse of ``data`` (a path or bytes), or None when it refuses it: docids as
    categoricals (coded while parsing, so their strings are never held whole), the other ids as
    strings in polars' buffers (no Python object), numbers typed unless ``numbers`` is False."""
    pl = _polars()
    typed = {"int": pl.Int64, "float": pl.Float64}
    schema = {n: typed[k] if numbers and k in typed else pl.String for n, k in zip(layout.names, layout.kinds)}
    try:
        frame = pl.scan_csv(data, separator=" ", has_header=False, quote_char=None, schema=schema,
                            raise_if_empty=False)
        # qrels are six times a run's size: every text column coded while parsing keeps the peak low
        # (the iteration column held as strings alone took 40-70 MB at 6 million lines); a run's qids
        # are coded by segment instead (cheaper)
        coded = ["docid"] if layout.what == "run" else [n for n, k in zip(layout.names, layout.kinds)
                                                         if k in ("id", "label")]
        # the streaming engine parses in pieces (a third less peak memory on big qrels); rows keep file order
        return frame.with_columns(pl.col(*coded).cast(pl.Categorical)).collect(engine="streaming")
    except (pl.exceptions.PolarsError, OSError, EOFError, zlib.error, ValueError):
        return None


# Characters a field may not hold: control characters (tab and CR included: the careful reader
# splits on tabs and drops a CR before the newline) and the Unicode spaces Python's split() breaks on.
_ODD = [(0x00, 0x1F), (0x7F, 0x7F), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
        (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
_ODD_RE = re.compile("[" + "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in _ODD) + "]")
_ODD_POLARS = "[" + "".join(f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in _ODD) + "]"  # Rust regex syntax


def _odd(strings) -> bool:
    """Whether a distinct value is empty or holds a character a field may not hold."""
    return bool(strings.str.contains(_ODD_POLARS).any()) or bool((strings.str.len_bytes() == 0).any())


def _one_code(phys) -> bool:
    return phys.min() == phys.max()


def _codes(col, kind: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """(int32 code per row, the distinct strings in first-seen order, whether one is odd).

    Three ways, cheapest first, all giving codes in first-seen order: a column of one value (Q0, a
    tag, an iteration); a column grouped in segments of one value (the qids of a run or qrels
    written user by user: only the segments' first strings become Python strings); otherwise
    polars' categorical encoding.
    """
    pl = _polars()
    n = len(col)
    if kind == "label" and n and (col.dtype == pl.String and (col == col[0]).all()
                                  or col.dtype == pl.Categorical and _one_code(col.to_physical())):
        values = col.head(1).cast(pl.String)
        # one code for every row: a read-only view of one zero, no memory per row
        return np.broadcast_to(np.int32(0), (n,)), np.asarray(values.to_numpy(), dtype=object), _odd(values)
    if kind == "qid" and col.dtype == pl.String:
        starts = np.flatnonzero((col != col.shift(1)).fill_null(True).to_numpy())
        if len(starts) <= n // 4:
            seg_codes, values = factorize32(np.asarray(col.gather(starts).to_numpy(), dtype=object))
            return (np.repeat(seg_codes, np.diff(np.r_[starts, n])).astype(np.int32, copy=False), values,
                    _odd(pl.Series(values, dtype=pl.String)))
    if col.dtype == pl.String:
        col = col.cast(pl.Categorical)
    phys = col.to_physical().to_numpy()
    distinct = col.unique(maintain_order=True)
    dphys = distinct.to_physical().to_numpy()
    lut = np.empty(int(dphys.max()) + 1 if len(dphys) else 1, dtype=np.int32)  # untouched pages cost nothing
    lut[dphys] = np.arange(len(dphys), dtype=np.int32)
    strings = distinct.cast(pl.String)
    return lut[phys], np.asarray(strings.to_numpy(), dtype=object), _odd(strings)


_ODD_VALUE = object()  # IdDictionary.encode_categorical: a new id holds an odd character


def _columns(df, layout: _Layout, dictionary: IdDictionary | None = None) -> dict | None:
    """The parsed columns as numpy (ids as codes), or None when a field is missing or holds an odd character.

    With a ``dictionary``, a run's docids are coded in it at once when polars allows it
    (:meth:`IdDictionary.encode_categorical`): ``out["docid"]`` is then ``(codes, dictionary)``.
    """
    if df is None or df.height == 0 or sum(df.null_count().row(0)) > 0:
        return None
    out = {}
    for name, kind in zip(layout.names, layout.kinds):
        col = df.get_column(name)
        df = df.drop(name)  # each column's buffers go once it is converted
        if dictionary is not None and name == "docid" and layout.what == "run":
            coded = dictionary.encode_categorical(col)
            if coded is not None:
                if coded is _ODD_VALUE:
                    return None
                out[name] = (coded, dictionary)
                continue
        if kind in ("id", "label"):
            codes, values, odd = _codes(col, "qid" if name == "qid" else kind)
            if odd:
                return None
            out[name] = (codes, values)
        else:
            out[name] = col.to_numpy()
    return out


def _run_table(cols: dict, dictionary: IdDictionary | None) -> RunTable:
    dcode, docids = cols["docid"]
    ids = None
    if dictionary is not None:
        if docids is not dictionary:  # not coded while converting (_columns)
            dcode = dictionary.encode(docids)[dcode]
        docids, ids = dictionary.ids(), dictionary
    return RunTable(FrameCodes(*cols["qid"], dcode, docids), cols["rank"].astype(np.int64, copy=False),
                    cols["score"].astype(np.float64, copy=False), *cols["tag"], ids)


def _qrels_table(cols: dict) -> QrelsTable:
    return QrelsTable(FrameCodes(*cols["qid"], *cols["docid"]), *cols["iteration"],
                      label_column(cols["label"]))


# -------------------------------------------------------------------------------------- sources

def _gunzip(data: bytes, name: str, what: str) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise gzip_error(name, what, exc) from None


def _source(source: Source, what: str) -> tuple[str, object]:
    """(name for messages, what polars reads: a path, or the bytes of a file object or inline string).

    A path named .gz must hold gzip data; a file object is judged by its content (``gzip.open``
    hands over text already decompressed under a .gz name). Text is UTF-8, a leading BOM dropped.
    """
    name = source_name(source)
    if isinstance(source, str) and is_inline(source):
        return name, _encoded(source, name, what)
    if isinstance(source, (str, os.PathLike)):
        path = existing_file(source, what)
        try:
            with open(path, "rb") as fh:
                head = fh.read(2)
        except OSError as exc:
            raise InputError(name, f"cannot read {what}: {exc.strerror}", "check permissions") from None
        if head != GZIP_MAGIC and name.endswith(".gz"):
            raise gzip_error(name, what)
        return name, os.fspath(path)
    try:
        data = source.read()
    except (OSError, EOFError, zlib.error) as exc:  # a gzip stream that does not decompress
        raise gzip_error(name, what, exc) from None
    if isinstance(data, str):
        return name, _encoded(data, name, what)
    data = bytes(data)
    if data[:2] == GZIP_MAGIC:
        data = _gunzip(data, name, what)
    return name, data[3:] if data.startswith(BOM) else data


def _encoded(text: str, name: str, what: str) -> bytes:
    text = text[1:] if text.startswith("\ufeff") else text
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        raise InputError(name, f"holds a character that is not valid Unicode ({text[exc.start]!r})",
                         "save the file as UTF-8", line=line) from None


def _raw(data, name: str, what: str) -> bytes:
    """The bytes behind ``data`` (a path is read and decompressed), BOM dropped."""
    if isinstance(data, bytes):
        return data
    with open(data, "rb") as fh:
        raw = fh.read()
    if raw[:2] == GZIP_MAGIC:
        raw = _gunzip(raw, name, what)
    return raw[3:] if raw.startswith(BOM) else raw


# -------------------------------------------------------------------------------------- careful

_INT = re.compile(r"[+-]?[0-9]+")


def _careful(data: bytes, layout: _Layout, name: str) -> tuple[dict, np.ndarray]:
    """Read ``data`` line by line: the first fault as an InputError naming its line and a fix, or the
    columns (from polars' parse of the text with its whitespace made plain) and each row's line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(name, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at column {column})",
                         "save the file as UTF-8", line=line) from None
    ncols = len(layout.names)
    rows, numbers = [], []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.endswith("\r"):
            line = line[:-1]
        fields = line.replace("\t", " ").split(" ")
        fields = [f for f in fields if f]
        if not fields:
            continue
        odd = _ODD_RE.search(line.replace("\t", " "))
        if odd:
            ch = odd.group()
            raise InputError(name, f"a field holds the character U+{ord(ch):04X} ({ch!r}), which TREC tools read "
                             "differently (some split fields there, some do not)",
                             "separate fields by spaces or tabs only, and remove that character from ids", line=number)
        if len(fields) != ncols:
            raise InputError(name, f"expected {ncols} columns '{layout.layout}', found {len(fields)}",
                             f"write {ncols} whitespace-separated columns per line", line=number)
        for field, kind, col in zip(fields, layout.kinds, layout.names):
            if kind == "int":
                _check_int(field, col, name, number)
        rows.append(" ".join(fields))
        numbers.append(number)
    if not rows:
        raise InputError(name, f"empty {layout.what} file", f"a {layout.what} needs at least one line '{layout.layout}'")
    plain = ("\n".join(rows) + "\n").encode("utf-8")
    lines = np.asarray(numbers, dtype=np.int64)
    cols = _columns(_parse(plain, layout), layout)
    if cols is None:  # a number polars does not read: find it
        _name_bad_number(plain, layout, name, lines)
        raise InputError(name, f"the {layout.what} does not parse", f"check it has the columns '{layout.layout}'")
    return cols, lines


def _check_int(field: str, col: str, name: str, number: int) -> None:
    what = "label" if col == "label" else col
    if not _INT.fullmatch(field):
        fix = ("use whole-number labels (ir-measures and trec_eval reject fractions)" if col == "label"
               else "write the rank as 1, 2, 3, …")
        raise InputError(name, f"{what} {field!r} is not an integer", fix, line=number)
    digits = field.lstrip("+-").lstrip("0")
    if col == "label" and len(digits) > 9:
        raise InputError(name, f"label {field!r} is out of range",
                         f"use labels from {-MAX_LABEL} to {MAX_LABEL} (trec_eval keeps labels in a C int)", line=number)
    if len(digits) > 18:
        raise InputError(name, f"{what} {field!r} is out of range", "write a smaller integer", line=number)


def _name_bad_number(plain: bytes, layout: _Layout, name: str, lines: np.ndarray) -> None:
    pl = _polars()
    df = _parse(plain, layout, numbers=False)
    if df is None:
        return
    for col, kind in zip(layout.names, layout.kinds):
        if kind == "float":
            text = df.get_column(col)
            bad = text.cast(pl.Float64, strict=False).is_null().to_numpy()
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InputError(name, f"{col} {text[i]!r} is not a number", "write a decimal score", line=int(lines[i]))


# ------------------------------------------------------------------------------------- readers

def _read(source: Source, layout: _Layout, dictionary: IdDictionary | None = None
          ) -> tuple[str, dict, np.ndarray | None]:
    """(name, columns, each row's line or None when rows are lines 1, 2, …); ``dictionary`` as in
    :func:`_columns`."""
    src, data = _source(source, layout.what)
    cols = _columns(_parse(data, layout), layout, dictionary)
    if cols is not None:
        return src, cols, None
    cols, lines = _careful(_raw(data, src, layout.what), layout, src)
    return src, cols, lines


def _line_of(lines: np.ndarray | None):
    if lines is not None:
        return lambda i: int(lines[i])
    return lambda i: i + 1  # polars read it as it is: no blank line, row i is line i + 1


def _source_run_name(src: str) -> str:
    return "inline" if src == "<inline>" else run_name(src)


def _source_qrels_name(src: str) -> str:
    return "inline" if src == "<inline>" else run_name(src).removesuffix(".qrels")


def read_run(source: Source, name: str | None = None, *, dictionary: IdDictionary | None = None) -> Run:
    """Read a TREC run ``qid Q0 docid rank score tag`` from a path, .gz, file object or inline string.

    ``dictionary``: document ids shared with the other runs read with it (:class:`IdDictionary`).
    """
    src, cols, lines = _read(source, RUN, dictionary)
    table = _run_table(cols, dictionary)
    check_run(table, src, _line_of(lines))
    return Run(name if name is not None else _source_run_name(src), table=table)


def read_qrels(source: Source, name: str | None = None) -> Qrels:
    """Read TREC qrels ``qid iter docid label`` from a path, .gz, file object or inline string."""
    src, cols, lines = _read(source, QRELS)
    table = _qrels_table(cols)
    check_qrels(table, src, _line_of(lines))
    return Qrels(name if name is not None else _source_qrels_name(src), table=table)


def read_runs(paths: Iterable[str | os.PathLike] | str | os.PathLike) -> dict[str, Run]:
    """Read runs from files and folders; keys are run names, which must be unique."""
    return {name: read_run(f, name=name) for name, f in run_paths(paths).items()}


class IdDictionary:
    """Ids shared by the runs of one evaluation: each distinct string gets one code for all of them.

    Runs read with a dictionary (``read_run(..., dictionary=d)``) hold ``d.ids()`` as their docids,
    which may then list ids a run does not use, and ``d`` as their table's ``ids``. What depends
    only on the string is then computed once per string for every run: its code in some qrels, its
    disclosed hash (:meth:`hashes`), its place in string order (:meth:`order`). Safe to share
    between a reading thread and a scoring one.
    """

    def __init__(self):
        self._code: dict[str, int] = {}
        self._ids = np.empty(0, dtype=object)
        self._hashes = np.empty(0, dtype=np.uint64)
        self._order: np.ndarray | None = None
        self._by_rank = np.empty(0, dtype=object)  # the ids in string order (what _order ranks)
        self._issued: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()
        self._by_phys = np.zeros(0, dtype=np.int32)  # code per polars global categorical code (-1: not seen)
        self._categories: list = []  # a categorical column per batch of new strings: their table stays alive
        self._lock = threading.Lock()

    def encode(self, values: np.ndarray) -> np.ndarray:
        """The code of each of ``values`` (distinct strings; int32), new strings added."""
        with self._lock:
            return self._encode(values)

    def _encode(self, values: np.ndarray) -> np.ndarray:
        code = self._code
        before = len(code)
        out = np.fromiter((code.setdefault(v, len(code)) for v in values.tolist()), dtype=np.int32,
                          count=len(values))
        if len(code) > before:  # new strings, in code order; a new array, so one a run holds never changes
            self._ids = np.concatenate([self._ids, np.asarray(values, dtype=object)[out >= before]])
            self._issued[id(self._ids)] = self._ids
        return out

    def encode_categorical(self, col):
        """The code of each row of a polars categorical column of the global categories (int32), new
        strings added; :data:`_ODD_VALUE` when a new string holds a character a field may not hold
        (nothing added); None when the column is not such a column.

        polars codes such a column with the process's one string table, whose codes stay (a string
        keeps its code while categories are alive; the dictionary holds a column of them). So
        only strings new to this dictionary become Python strings: each one once for all the runs.
        """
        pl = _polars()
        if col.dtype != pl.Categorical or not col.dtype.categories.is_global() or len(col) == 0:
            return None
        phys = col.to_physical().to_numpy()
        with self._lock:
            top = int(phys.max())
            if top >= len(self._by_phys):
                self._by_phys = np.concatenate([self._by_phys, np.full(top + 1 - len(self._by_phys), -1, np.int32)])
            out = self._by_phys[phys]
            new = np.flatnonzero(out < 0)
            if len(new) == 0:
                return out
            # the new strings in first-seen order, as encode() would number them
            _, first = np.unique(phys[new], return_index=True)
            rows = new[np.sort(first)]
            strings = col.gather(rows).cast(pl.String)
            if _odd(strings):
                return _ODD_VALUE
            codes = self._encode(np.asarray(strings.to_numpy(), dtype=object))
            self._by_phys[phys[rows]] = codes
            self._categories.append(col.gather(rows[:1]))
            return self._by_phys[phys]

    def ids(self) -> np.ndarray:
        """Every id so far, by code."""
        return self._ids

    def issued(self, docids: np.ndarray) -> bool:
        """Whether ``docids`` is an array :meth:`ids` gave: its codes are this dictionary's."""
        return self._issued.get(id(docids)) is docids

    def hashes(self) -> np.ndarray:
        """``B(id)`` per code (:func:`~recjudge.data.trec.hashing.string_hashes`), each computed once."""
        from .hashing import string_hashes

        with self._lock:
            ids = self._ids
            if len(self._hashes) < len(ids):
                self._hashes = np.concatenate([self._hashes, string_hashes(ids[len(self._hashes):])])
            return self._hashes

    def order(self) -> np.ndarray:
        """Per code, its rank in string order (code points, as trec_eval's strcmp on UTF-8)."""
        from .records import sorted_codes

        with self._lock:
            ids = self._ids
            old = 0 if self._order is None else len(self._order)
            if old == len(ids):
                return self._order
            if old == 0 or len(ids) - old > old:
                order = sorted_codes(ids)
            else:  # grown since: the new ids merged in (each run adds a few; a sort of all would be per run)
                new = ids[old:]
                rank = sorted_codes(new)
                by_rank = np.empty(len(new), dtype=object)
                by_rank[rank] = new
                below = np.searchsorted(self._by_rank, by_rank)  # old ids before each new one (ids are unique)
                order = np.empty(len(ids), dtype=np.int64)
                order[:old] = self._order + np.searchsorted(below, self._order, side="right")
                order[old:] = (below + np.arange(len(new)))[rank]
            self._by_rank = np.empty(len(ids), dtype=object)
            self._by_rank[order] = ids
            self._order = order
            return order

    def __len__(self) -> int:
        return len(self._ids)

