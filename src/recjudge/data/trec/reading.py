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

__all__ = ["read_run", "read_qrels", "read_runs", "IdDictionary", "column_roles", "QUERY_COLUMNS",
           "ITEM_COLUMNS", "SCORE_COLUMNS", "LABEL_COLUMNS"]

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
            table = (f", or a header line {_TABLE_EXAMPLE[layout.what]} first to read it as a table"
                     if len(fields) == 3 else "")
            raise InputError(name, f"expected {ncols} columns '{layout.layout}', found {len(fields)}",
                             f"write {ncols} whitespace-separated columns per line{table}", line=number)
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
        if col == "rank":
            # ranks order nothing (scores do, as in trec_eval and ir-measures), but they are kept: the runs
            # recjudge writes, and its tie audit of input order, carry them as 64-bit integers
            raise InputError(name, f"rank {field!r} does not fit a 64-bit integer; recjudge ranks by score and "
                             "ignores the rank column, but keeps it in the runs it writes", "write ranks 1, 2, 3, … "
                             "(any integers below 10^18 will do)", line=number)
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


# ------------------------------------------------------------------------- tables and ranx JSON
# What a recommender user writes besides TREC files: a table with a header (pandas' to_csv, RecBole's
# exports, ``user,item,score`` by hand), comma or tab separated, and ranx's JSON runs and qrels.

# accepted column names, case-insensitive; a RecBole type suffix (``user_id:token``) is dropped
QUERY_COLUMNS = ("user", "user_id", "userid", "qid", "query", "query_id", "q_id")
ITEM_COLUMNS = ("item", "item_id", "itemid", "docid", "doc", "doc_id")
SCORE_COLUMNS = ("score", "prediction", "rating")
LABEL_COLUMNS = ("label", "relevance", "rel")
_ROLES = {"run": (("qid", "user", QUERY_COLUMNS), ("docid", "item", ITEM_COLUMNS), ("score", "score", SCORE_COLUMNS)),
          "qrels": (("qid", "user", QUERY_COLUMNS), ("docid", "item", ITEM_COLUMNS), ("label", "label", LABEL_COLUMNS))}
_HEAD = 4096  # bytes read to tell the formats apart
_TABLE_EXAMPLE = {"run": "user,item,score", "qrels": "user,item,label"}
_JSON_EXAMPLE = {"run": '{"u1": {"i1": 0.9, "i2": 0.4}}', "qrels": '{"u1": {"i1": 1, "i2": 0}}'}


def _column_key(name: str) -> str:
    return name.strip().strip('"').split(":", 1)[0].strip().lower()


def column_roles(names, what: str) -> tuple[dict[str, int], str, str]:
    """Which of ``names`` (a header's, or a DataFrame's columns) hold the user, item and score (a run)
    or label (qrels): ``({"qid": i, "docid": j, "score": k}, "", "")``, or ``({}, problem, fix)``."""
    keys = [_column_key(str(n)) for n in names]
    found, problems = {}, []
    for role, noun, accepted in _ROLES[what]:
        hits = [i for i, k in enumerate(keys) if k in accepted]
        if len(hits) > 1:
            both = " and ".join(repr(str(names[i])) for i in hits)
            return {}, f"columns {both} both name the {noun}", f"keep one {noun} column"
        if hits:
            found[role] = hits[0]
        else:
            problems.append((noun, accepted))
    if problems:
        shown = ", ".join(repr(str(n)) for n in names)
        missing = "; ".join(f"{'an' if noun == 'item' else 'a'} {noun} column ({', '.join(accepted)})"
                            for noun, accepted in problems)
        other = ""
        if what == "run" and any(k in LABEL_COLUMNS for k in keys):
            other = "; it has a label column: is it qrels?"
        elif what == "qrels" and any(k in SCORE_COLUMNS for k in keys):
            other = "; it has a score column: is it a run?"
        nouns = [noun for noun, _ in problems]
        nouns = nouns[0] if len(nouns) == 1 else ", ".join(nouns[:-1]) + " or " + nouns[-1]
        return {}, f"no {nouns} column among the columns {shown}{other}", \
            f"name {missing}, e.g. the header {_TABLE_EXAMPLE[what]}"
    return found, "", ""


def _head(data) -> bytes:
    """The first bytes of what polars reads (a path, decompressed when gzip, or bytes), BOM dropped."""
    if isinstance(data, bytes):
        head = data[:_HEAD]
    else:
        try:
            with open(data, "rb") as fh:
                head = fh.read(_HEAD)
            if head[:2] == GZIP_MAGIC:
                with gzip.open(data, "rb") as fh:
                    head = fh.read(_HEAD)
        except (OSError, EOFError, zlib.error):
            return b""  # the reader reports it
    return head[3:] if head.startswith(BOM) else head


def _looks_trec(line: str, layout: _Layout) -> bool:
    fields = line.split()
    if len(fields) != len(layout.names):
        return False
    try:
        int(fields[3])
        if layout.what == "run":
            float(fields[4])
    except ValueError:
        return False
    return True


def _sniff(head: bytes, layout: _Layout, name: str) -> tuple[str, str]:
    """("trec" | "table" | "json", the table's separator) from the first bytes: ``{`` opens ranx's JSON;
    a first line that is not a TREC line is a header when it names a user or item column (comma or
    tab separated), or holds commas and no space. A TREC file reads no further than its first line here."""
    text = head.lstrip()
    if text[:1] == b"{":
        return "json", ""
    if name.lower().removesuffix(".gz").endswith(".json") and text:
        raise InputError(name, f"a .json {layout.what} must hold ranx's JSON (an object of users), not "
                         f"{text[:20].decode('utf-8', 'replace')!r}…", f"write it as {_JSON_EXAMPLE[layout.what]}")
    first = next((line for line in text.split(b"\n") if line.strip()), b"").decode("utf-8", "replace").rstrip("\r")
    if not first or _looks_trec(first, layout):
        return "trec", ""
    for sep in (",", "\t"):
        named = any(_column_key(f) in QUERY_COLUMNS + ITEM_COLUMNS for f in first.split(sep))
        # a comma line without spaces is a table too (a header to ask for); a spaced one, a broken TREC line
        if sep in first and (named or sep == "," and " " not in first.strip()):
            return "table", sep
    return "trec", ""


_ID_FAULT = "[ " + _ODD_POLARS[1:]  # a space, a control character or a Unicode space


def _check_ids(col, noun: str, name: str, where) -> None:
    """Refuse an empty id, or one holding a character a TREC file cannot hold (``where(i)``: the
    keywords naming row i)."""
    bad = (col.str.contains(_ID_FAULT) | (col.str.len_bytes() == 0)).fill_null(False)
    if bad.any():
        i = int(bad.arg_true()[0])
        raise InputError(name, f"{noun} id {col[i]!r} is empty or holds a space, tab or control character, which "
                         "TREC files (and so recjudge's outputs) cannot hold",
                         "replace those characters in the ids, e.g. by _", **where(i))


def _coded(layout: _Layout, qid, docid, values, name: str, dictionary: IdDictionary | None) -> dict:
    """The columns of :func:`_columns` from polars series of users, items (strings) and scores or labels;
    each user's rows ranked in file order."""
    pl = _polars()
    n = len(qid)
    if layout.what == "run":
        rank = pl.DataFrame({"q": qid}).select(pl.int_range(pl.len()).over("q") + 1).to_series()
        df = pl.DataFrame({"qid": qid, "q0": pl.repeat("Q0", n, eager=True), "docid": docid.cast(pl.Categorical),
                           "rank": rank.cast(pl.Int64), "score": values.cast(pl.Float64),
                           "tag": pl.repeat(_source_run_name(name), n, eager=True)})
    else:
        df = pl.DataFrame({"qid": qid, "iteration": pl.repeat("0", n, eager=True),
                           "docid": docid.cast(pl.Categorical), "label": values.cast(pl.Int64)})
    cols = _columns(df, layout, dictionary)
    if cols is None:  # pragma: no cover - the ids and values were checked
        raise InputError(name, f"the {layout.what} does not parse", f"write it as {_TABLE_EXAMPLE[layout.what]}")
    return cols


def _values(text_col, noun: str, layout: _Layout, name: str, where):
    """Scores (decimals, finite is checked with the run) or labels (whole numbers) from text."""
    pl = _polars()
    num = text_col.str.strip_chars().cast(pl.Float64, strict=False)
    bad = num.is_null()
    if layout.what == "qrels":
        bad = bad | (num != num.floor()).fill_null(True) | (num.abs() > MAX_LABEL).fill_null(True)
    if bad.any():
        i = int(bad.arg_true()[0])
        fix = ("use whole-number labels (ir-measures and trec_eval reject fractions)" if layout.what == "qrels"
               else "write a decimal score")
        what = "a whole number" if layout.what == "qrels" else "a number"
        raise InputError(name, f"{noun} {text_col[i]!r} is not {what}", fix, **where(i))
    return num


def _table_columns(raw: bytes, sep: str, layout: _Layout, name: str, dictionary: IdDictionary | None
                   ) -> tuple[dict, np.ndarray]:
    """A table with a header line: the columns :func:`column_roles` names, each row's line."""
    import csv

    pl = _polars()
    lines_head = raw[:_HEAD * 16].decode("utf-8", "replace").split("\n")
    skip = next((i for i, line in enumerate(lines_head) if line.strip()), 0)  # blank lines before the header
    header = next(csv.reader([lines_head[skip].rstrip("\r")], delimiter=sep))
    roles, problem, fix = column_roles(header, layout.what)
    if problem:
        kind = "a CSV" if sep == "," else "a tab-separated"
        raise InputError(name, f"{problem}; read as {kind} table with a header line, since the first line is not "
                         f"a TREC line '{layout.layout}'", fix, line=skip + 1)
    order = [roles[r] for r, _, _ in _ROLES[layout.what]]
    empty = InputError(name, f"holds a header but no {layout.what} rows", "add rows such as " +
                       _TABLE_EXAMPLE[layout.what].replace("user", "u1").replace("item", "i1")
                       .replace("score", "0.5").replace("label", "1"))
    try:
        df = pl.read_csv(raw, separator=sep, has_header=False, infer_schema=False, quote_char='"',
                         skip_rows=skip + 1, raise_if_empty=False)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        _utf8(raw, name)
        _ragged(raw, sep, len(header), name, skip)
        if not raw.split(b"\n", skip + 1)[-1].strip():
            raise empty from None
        raise InputError(name, f"the table does not parse ({str(exc).splitlines()[0]})",
                         f"write {len(header)} fields per line, as the header") from None
    if df.width > len(header):
        _ragged(raw, sep, len(header), name, skip)
    if df.width < len(header):  # rows shorter than the header all along
        df = df.with_columns([pl.lit(None, pl.String).alias(f"_pad{i}") for i in range(len(header) - df.width)])
    df = pl.DataFrame({k: df.to_series(i) for k, i in zip("qdv", order)})
    lines = np.arange(df.height, dtype=np.int64) + skip + 2
    blank = (df["q"].is_null() & df["d"].is_null() & df["v"].is_null()).to_numpy()
    if blank.any():  # a blank line reads as a row of nulls
        df, lines = df.filter(~pl.Series(blank)), lines[~blank]
    if df.height == 0:
        raise empty

    def where(i):
        return {"line": int(lines[i])}

    nouns = dict(zip("qdv", [_column_key(header[i]) for i in order]))
    for key in "qdv":
        missing = df[key].is_null()
        if missing.any():
            i = int(missing.arg_true()[0])
            raise InputError(name, f"no {nouns[key]!r} value (the line has fewer fields than the header's "
                             f"{len(header)})", f"write {len(header)} fields per line, as the header", **where(i))
    # spaces around a field (user, item, score) are the writer's layout, not part of the id
    q, d = df["q"].str.strip_chars(" "), df["d"].str.strip_chars(" ")
    _check_ids(q, "user", name, where)
    _check_ids(d, "item", name, where)
    values = _values(df["v"], nouns["v"], layout, name, where)
    return _coded(layout, q, d, values, name, dictionary), lines


def _utf8(raw: bytes, name: str) -> str:
    """``raw`` as text, or the InputError naming the line of its first byte that is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(name, f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", "save the file as UTF-8",
                         line=raw.count(b"\n", 0, exc.start) + 1) from None


def _ragged(raw: bytes, sep: str, width: int, name: str, skip: int) -> None:
    """The line with more fields than the header, named (polars refuses such a table)."""
    import csv
    import io

    reader = csv.reader(io.StringIO(raw.decode("utf-8", "replace")), delimiter=sep)
    for row in reader:
        if reader.line_num > skip + 1 and len(row) > width:
            raise InputError(name, f"{len(row)} fields, the header names {width}",
                             "quote fields that hold the separator, or remove the extra fields", line=reader.line_num)


def _json_columns(raw: bytes, layout: _Layout, name: str, dictionary: IdDictionary | None) -> dict:
    """ranx's JSON run ``{"user": {"item": score}}`` (qrels: labels)."""
    import json
    import math

    pl = _polars()
    fix = f"write ranx's JSON {layout.what}: {_JSON_EXAMPLE[layout.what]}"
    try:
        # pairs keep what a dict would hide: a key given twice
        top = json.loads(_utf8(raw, name), object_pairs_hook=lambda pairs: ("object", pairs),
                         parse_constant=lambda c: float("nan"))
    except json.JSONDecodeError as exc:
        raise InputError(name, f"not valid JSON ({exc.msg}, column {exc.colno})", fix, line=exc.lineno) from None
    if not (isinstance(top, tuple) and top[0] == "object"):
        raise InputError(name, f"the JSON holds a {type(top).__name__}, not an object of users", fix)
    value_word = "score" if layout.what == "run" else "label"
    qids, docids, values, seen = [], [], [], set()
    for user, items in top[1]:
        if user in seen:
            raise InputError(name, f"user {user!r} is given twice", "merge its items into one object")
        seen.add(user)
        if not (isinstance(items, tuple) and items[0] == "object"):
            raise InputError(name, f"user {user!r} maps to {_json_kind(items)}, not an object of items", fix)
        names = [d for d, _ in items[1]]
        if len(set(names)) != len(names):
            dup = next(d for i, d in enumerate(names) if d in names[:i])
            raise InputError(name, f"item {dup!r} is given twice for user {user!r}",
                             f"keep one {value_word} per (user, item)")
        for d, v in items[1]:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            if ok and layout.what == "qrels":
                ok = float(v).is_integer() and abs(v) <= MAX_LABEL
            if not ok:
                what = "a whole-number label" if layout.what == "qrels" else "a finite number"
                raise InputError(name, f"user {user!r}, item {d!r}: the {value_word} {_json_kind(v)} is not {what}",
                                 fix)
        qids += [user] * len(names)
        docids += names
        values += [v for _, v in items[1]]
    if not qids:
        raise InputError(name, f"empty {layout.what}: no user has an item", fix)
    q, d = pl.Series(qids, dtype=pl.String), pl.Series(docids, dtype=pl.String)

    _check_ids(q, "user", name, lambda i: {})
    _check_ids(d, "item", name, lambda i: {})
    return _coded(layout, q, d, pl.Series(values, dtype=pl.Float64), name, dictionary)


def _json_kind(value) -> str:
    if isinstance(value, tuple):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return repr(value)


# ------------------------------------------------------------------------------------- readers

def _read(source: Source, layout: _Layout, dictionary: IdDictionary | None = None):
    """(name, columns, each row's line as a function of the row, or None where rows have no line);
    ``dictionary`` as in :func:`_columns`. A table with a header or a ranx JSON file is told from a
    TREC file by its first bytes (:func:`_sniff`)."""
    src, data = _source(source, layout.what)
    head = _head(data)
    kind, sep = _sniff(head, layout, src)
    if kind == "trec":
        _check_head(head, layout, src)
    if kind == "json":
        return src, _json_columns(_raw(data, src, layout.what), layout, src, dictionary), None
    if kind == "table":
        cols, lines = _table_columns(_raw(data, src, layout.what), sep, layout, src, dictionary)
        return src, cols, _line_of(lines)
    cols = _columns(_parse(data, layout), layout, dictionary)
    if cols is not None:
        return src, cols, _line_of(None)
    cols, lines = _careful(_raw(data, src, layout.what), layout, src)
    return src, cols, _line_of(lines)


def _check_head(head: bytes, layout: _Layout, name: str) -> None:
    """A file that is not text, or whose first line is no TREC line, fails on its first bytes: before a
    gzip file is inflated whole (18 MB of gzip can hold 4 GB of NUL bytes)."""
    nul = head.find(b"\x00")
    if nul >= 0:
        line = head.count(b"\n", 0, nul)
        start = head.rfind(b"\n", 0, nul) + 1
        end = head.find(b"\n", nul)
        # the careful reader words a NUL inside a field; what it lets pass is binary data all the same
        _careful(b"\n" * line + head[start:end if end >= 0 else len(head)] + b"\n", layout, name)
        raise InputError(name, f"holds a NUL byte (binary data, not a TREC {layout.what} file)",
                         "give the text file (a .gz must decompress to text)", line=line + 1)
    lines = head.split(b"\n")
    complete = lines[:-1] if len(head) >= _HEAD else lines  # the last line of a cut head may be partial
    for number, line in enumerate(complete, start=1):
        text = line.decode("utf-8", "replace").rstrip("\r")
        if not text.strip():
            continue
        if not _looks_trec(text, layout):
            # the careful reader words the fault of that first line (file, line, fix)
            _careful(b"\n" * (number - 1) + line + b"\n", layout, name)
        return


def _line_of(lines: np.ndarray | None):
    if lines is not None:
        return lambda i: int(lines[i])
    return lambda i: i + 1  # polars read it as it is: no blank line, row i is line i + 1


def _source_run_name(src: str) -> str:
    return "inline" if src == "<inline>" else run_name(src)


def _source_qrels_name(src: str) -> str:
    return "inline" if src == "<inline>" else run_name(src).removesuffix(".qrels")


def read_run(source: Source, name: str | None = None, *, dictionary: IdDictionary | None = None) -> Run:
    """Read a TREC run ``qid Q0 docid rank score tag`` from a path, .gz, file object or inline string;
    or a table with a header (``user,item,score``, comma or tab separated) or ranx's JSON run
    ``{"user": {"item": score}}`` (:func:`_sniff`). A table's or a JSON run's ranks are the file order
    of each user's rows; scores decide the ranking, as for a TREC run.

    ``dictionary``: document ids shared with the other runs read with it (:class:`IdDictionary`).
    """
    src, cols, line_of = _read(source, RUN, dictionary)
    table = _run_table(cols, dictionary)
    check_run(table, src, line_of)
    return Run(name if name is not None else _source_run_name(src), table=table)


def read_qrels(source: Source, name: str | None = None) -> Qrels:
    """Read TREC qrels ``qid iter docid label`` from a path, .gz, file object or inline string; or a table
    with a header (``user,item,label``) or ranx's JSON qrels ``{"user": {"item": label}}``."""
    src, cols, line_of = _read(source, QRELS)
    table = _qrels_table(cols)
    check_qrels(table, src, line_of)
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

