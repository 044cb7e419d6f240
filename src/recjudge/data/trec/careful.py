"""The careful reader: a TREC file line by line, its first fault named with its line and a fix.

A file polars does not read as it is (tabs, doubled or edge spaces, blank lines, a fault) comes
here: the first fault is an InputError naming its line, and otherwise the whitespace is made plain
so that the same parse reads it (:func:`careful`). :func:`check_head` words the fault of a file's
first lines before a gzip file is inflated whole.
"""

from __future__ import annotations

import re

import numpy as np

from ...errors import InputError
from .fields import ODD_RE, load_polars
from .parsing import TABLE_EXAMPLE, Layout, coded_columns, looks_trec, parse
from .records import MAX_LABEL
from .sources import HEAD_BYTES


_INT = re.compile(r"[+-]?[0-9]+")


CHUNK_LINES = 1 << 18  # lines checked, made plain and parsed at a time: the text is never held whole
MAX_LINE = 16 << 20  # bytes: no TREC line is longer


def careful(data, layout: Layout, name: str) -> tuple[dict, np.ndarray]:
    """Read ``data`` (a path, plain or gzip, or bytes) line by line: the first fault as an InputError
    naming its line and a fix, or the columns (from polars' parse of the text with its whitespace
    made plain) and each row's line.

    The text goes by in pieces (:func:`~recjudge.data.trec.sources.blocks`), each piece parsed as it
    is checked: a file valid at first and broken late holds at most the table of its valid lines,
    never its whole text (nor a Python string per line). Text that is not UTF-8 is named first, as
    before any other fault."""
    _check_utf8(data, name, layout.what)
    frames, numbers = [], []
    for plain, lines in _plain_pieces(data, layout, name):
        df = parse(plain, layout)
        if df is None or df.height == 0 or sum(df.null_count().row(0)) > 0:  # a number polars does not read
            _name_bad_number(plain, layout, name, lines)
            raise InputError(name, f"the {layout.what} does not parse", f"check it has the columns '{layout.layout}'")
        frames.append(df)
        numbers.append(lines)
    if not frames:
        raise InputError(name, f"empty {layout.what} file", f"a {layout.what} needs at least one line '{layout.layout}'")
    pl = load_polars()
    df = frames[0] if len(frames) == 1 else pl.concat(frames, rechunk=False)
    del frames
    cols = coded_columns(df, layout)
    if cols is None:  # pragma: no cover - every field was checked line by line
        raise InputError(name, f"the {layout.what} does not parse", f"check it has the columns '{layout.layout}'")
    return cols, np.concatenate(numbers)


def _pieces(data, name: str, what: str):
    """(number of the first line, text) of the text behind ``data`` in pieces of whole lines (a piece
    ends at a newline; the last one is the text after the last newline, '' when the text ends with one)."""
    from .sources import blocks

    number, tail = 1, b""
    for block in blocks(data, name, what):
        cut = block.rfind(b"\n")
        if cut < 0:
            tail += block
            if len(tail) > MAX_LINE:
                raise InputError(name, f"a line longer than {MAX_LINE >> 20} MiB (no TREC {what} line is)",
                                 f"write one '{what}' line per text line", line=number)
            continue
        piece, tail = tail + block[:cut], block[cut + 1:]
        yield number, piece
        number += piece.count(b"\n") + 1
    yield number, tail


def _check_utf8(data, name: str, what: str) -> None:
    """The InputError of the first byte that is not UTF-8, with its line and column."""
    for number, piece in _pieces(data, name, what):
        try:
            piece.decode("utf-8")
        except UnicodeDecodeError as exc:
            column = exc.start - (piece.rfind(b"\n", 0, exc.start) + 1) + 1
            raise InputError(name, f"not UTF-8 text (byte 0x{piece[exc.start]:02x} at column {column})",
                             "save the file as UTF-8", line=number + piece.count(b"\n", 0, exc.start)) from None


def _plain_pieces(data, layout: Layout, name: str):
    """(the lines made plain, as bytes for polars; their line numbers) of at most :data:`CHUNK_LINES`
    lines at a time; the first fault of a line as an InputError naming it."""
    ncols = len(layout.names)
    rows, numbers = [], []
    for first, piece in _pieces(data, name, layout.what):
        for number, line in enumerate(piece.decode("utf-8").split("\n"), start=first):
            fields = _fields(line, layout, ncols, name, number)
            if fields is None:
                continue
            rows.append(" ".join(fields))
            numbers.append(number)
            if len(rows) >= CHUNK_LINES:
                yield ("\n".join(rows) + "\n").encode("utf-8"), np.asarray(numbers, dtype=np.int64)
                rows, numbers = [], []
    if rows:
        yield ("\n".join(rows) + "\n").encode("utf-8"), np.asarray(numbers, dtype=np.int64)


def _fields(line: str, layout: Layout, ncols: int, name: str, number: int) -> list[str] | None:
    """A line's fields (None for a blank line), or the InputError of its fault."""
    if line.endswith("\r"):
        line = line[:-1]
    fields = line.replace("\t", " ").split(" ")
    fields = [f for f in fields if f]
    if not fields:
        return None
    odd = ODD_RE.search(line.replace("\t", " "))
    if odd:
        ch = odd.group()
        raise InputError(name, f"a field holds the character U+{ord(ch):04X} ({ch!r}), which TREC tools read "
                         "differently (some split fields there, some do not)",
                         "separate fields by spaces or tabs only, and remove that character from ids", line=number)
    if len(fields) != ncols:
        table = (f", or a header line {TABLE_EXAMPLE[layout.what]} first to read it as a table"
                 if len(fields) == 3 else "")
        raise InputError(name, f"expected {ncols} columns '{layout.layout}', found {len(fields)}",
                         f"write {ncols} whitespace-separated columns per line{table}", line=number)
    for field, kind, col in zip(fields, layout.kinds, layout.names):
        if kind == "int":
            _check_int(field, col, name, number)
    return fields


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


def _name_bad_number(plain: bytes, layout: Layout, name: str, lines: np.ndarray) -> None:
    pl = load_polars()
    df = parse(plain, layout, numbers=False)
    if df is None:
        return
    for col, kind in zip(layout.names, layout.kinds):
        if kind == "float":
            text = df.get_column(col)
            bad = text.cast(pl.Float64, strict=False).is_null().to_numpy()
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InputError(name, f"{col} {text[i]!r} is not a number", "write a decimal score", line=int(lines[i]))


def check_head(head: bytes, layout: Layout, name: str) -> None:
    """A file that is not text, or whose first line is no TREC line, fails on its first bytes: before a
    gzip file is inflated whole (18 MB of gzip can hold 4 GB of NUL bytes)."""
    nul = head.find(b"\x00")
    if nul >= 0:
        line = head.count(b"\n", 0, nul)
        start = head.rfind(b"\n", 0, nul) + 1
        end = head.find(b"\n", nul)
        # the careful reader words a NUL inside a field; what it lets pass is binary data all the same
        careful(b"\n" * line + head[start:end if end >= 0 else len(head)] + b"\n", layout, name)
        raise InputError(name, f"holds a NUL byte (binary data, not a TREC {layout.what} file)",
                         "give the text file (a .gz must decompress to text)", line=line + 1)
    lines = head.split(b"\n")
    complete = lines[:-1] if len(head) >= HEAD_BYTES else lines  # the last line of a cut head may be partial
    for number, line in enumerate(complete, start=1):
        text = line.decode("utf-8", "replace").rstrip("\r")
        if not text.strip():
            continue
        if not looks_trec(text, layout):
            # the careful reader words the fault of that first line (file, line, fix)
            careful(b"\n" * (number - 1) + line + b"\n", layout, name)
        return
