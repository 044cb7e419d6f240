"""Opening inputs (path, .gz, file object, inline string) and writing outputs atomically."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Union

from .errors import InputError

Source = Union[str, os.PathLike, IO[str], IO[bytes]]


def source_name(source: Source) -> str:
    """A name for error messages: the path, the file object's name, or '<inline>'."""
    if isinstance(source, os.PathLike):
        return os.fspath(source)
    if isinstance(source, str):
        return "<inline>" if is_inline(source) else source
    return str(getattr(source, "name", "<stream>"))


def is_inline(text: str) -> bool:
    # A path never holds a newline; an inline TREC file of one line still ends with one.
    return "\n" in text


def read_text(source: Source, what: str = "file") -> tuple[str, str]:
    """Return (name, full text) of a source. Errors name the file and say how to fix it."""
    name = source_name(source)
    if isinstance(source, str) and is_inline(source):
        return name, source
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise InputError(name, f"{what} not found", "check the path")
        if path.is_dir():
            raise InputError(name, f"expected a {what}, found a folder", "name a file")
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise InputError(name, f"cannot read {what}: {exc.strerror}", "check permissions") from None
        return name, _decode(raw, name, what)
    data = source.read()
    if isinstance(data, bytes):
        return name, _decode(data, name, what)
    return name, data


def _decode(raw: bytes, name: str, what: str) -> str:
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputError(name, f"unreadable gzip {what}: {exc}",
                             "re-create the file, or gunzip it to see what is wrong") from None
    elif name.endswith(".gz"):
        raise InputError(name, f"{what} is named .gz but is not gzip data",
                         "rename it without .gz or compress it with gzip")
    try:
        # utf-8-sig: a byte-order mark would otherwise stick to the first id
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(name, f"not UTF-8 text (byte {exc.start})", "save the file as UTF-8") from None


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Write to a temp file beside ``path`` and rename it into place only on success.

    A ``.gz`` path is gzip-compressed. Nothing half-written is ever left at ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates 0600; give the file the mode a plain open() would
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as raw:
            if path.suffix == ".gz":
                # mtime=0 keeps the bytes reproducible
                with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
                    if "b" in mode:
                        yield gz
                    else:
                        with io.TextIOWrapper(gz, encoding=encoding, newline="\n") as fh:
                            yield fh
            elif "b" in mode:
                yield raw
            else:
                with io.TextIOWrapper(raw, encoding=encoding, newline="\n") as fh:
                    yield fh
                    fh.flush()
                    os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _finite(obj):
    """NaN and infinity become null: strict JSON parsers reject them."""
    import math

    import numpy as np

    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_json(path: str | os.PathLike, obj) -> None:
    import json

    text = json.dumps(obj, indent=2, sort_keys=False, default=_json_default)
    # round trip through Python objects so numpy values are converted before NaN is replaced
    text = json.dumps(_finite(json.loads(text)), indent=2, allow_nan=False)
    with atomic_write(path) as fh:
        fh.write(text + "\n")


def _json_default(obj):
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def read_toml(path: str | os.PathLike, what: str = "file") -> dict:
    """A TOML file as a dict; a missing file or bad syntax is an InputError naming file and line."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    src = str(path)
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(src, f"{what} not found", "check the path") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(src, f"not valid TOML: {exc}", "fix the TOML syntax",
                         line=getattr(exc, "lineno", None)) from None
