"""Where a reader's bytes come from: a path (plain or gzip), a file object or an inline string."""

from __future__ import annotations

import gzip
import os
import zlib

from ..._io import Source, existing_file, gzip_error, is_inline, source_name
from ...errors import InputError
from .records import run_name

GZIP_MAGIC = b"\x1f\x8b"
BOM = b"\xef\xbb\xbf"
HEAD_BYTES = 4096  # bytes read to tell the formats apart


def _gunzip(data: bytes, name: str, what: str) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise gzip_error(name, what, exc) from None


def open_source(source: Source, what: str) -> tuple[str, object]:
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


def raw_bytes(data, name: str, what: str) -> bytes:
    """The bytes behind ``data`` (a path is read and decompressed), BOM dropped."""
    if isinstance(data, bytes):
        return data
    with open(data, "rb") as fh:
        raw = fh.read()
    if raw[:2] == GZIP_MAGIC:
        raw = _gunzip(raw, name, what)
    return raw[3:] if raw.startswith(BOM) else raw

def blocks(data, name: str, what: str, size: int = 8 << 20):
    """The bytes behind ``data`` (a path, decompressed when gzip, or bytes) in pieces of about ``size``,
    BOM dropped: never the whole decompressed text at once."""
    if isinstance(data, bytes):
        data = data[3:] if data.startswith(BOM) else data
        for start in range(0, len(data), size):
            yield data[start:start + size]
        return
    with open(data, "rb") as fh:
        gz = fh.read(2) == GZIP_MAGIC
    with (gzip.open(data, "rb") if gz else open(data, "rb")) as fh:
        first = True
        while True:
            try:
                block = fh.read(size)
            except (OSError, EOFError, zlib.error) as exc:
                if not gz:
                    raise
                raise gzip_error(name, what, exc) from None
            if not block:
                return
            if first and block.startswith(BOM):
                block = block[3:]
            first = False
            yield block


def head_bytes(data) -> bytes:
    """The first bytes of what polars reads (a path, decompressed when gzip, or bytes), BOM dropped."""
    if isinstance(data, bytes):
        head = data[:HEAD_BYTES]
    else:
        try:
            with open(data, "rb") as fh:
                head = fh.read(HEAD_BYTES)
            if head[:2] == GZIP_MAGIC:
                with gzip.open(data, "rb") as fh:
                    head = fh.read(HEAD_BYTES)
        except (OSError, EOFError, zlib.error):
            return b""  # the reader reports it
    return head[3:] if head.startswith(BOM) else head


def source_run_name(src: str) -> str:
    """A run's name from the name of its source (:func:`~recjudge.data.trec.records.run_name`)."""
    return "inline" if src == "<inline>" else run_name(src)


def source_qrels_name(src: str) -> str:
    return "inline" if src == "<inline>" else run_name(src).removesuffix(".qrels")
