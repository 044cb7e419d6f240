"""Opening inputs (path, .gz, file object, inline string) and writing outputs atomically."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TypeVar, Union

from .errors import InputError, OutputError
from .outputs import pid_alive

Source = Union[str, os.PathLike, IO[str], IO[bytes]]
T = TypeVar("T")
R = TypeVar("R")


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
    """Return (name, full text) of a source. Errors name the file and say how to fix it.

    The rules the TREC reader follows too: a path named .gz must hold gzip data, a file object is
    judged by its content (``gzip.open`` hands over decompressed data under a .gz name), and a
    leading byte-order mark is dropped from every form.
    """
    name = source_name(source)
    if isinstance(source, str) and is_inline(source):
        return name, source.removeprefix("\ufeff")
    if isinstance(source, (str, os.PathLike)):
        path = existing_file(source, what)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise InputError(name, f"cannot read {what}: {exc.strerror}", "check permissions") from None
        if raw[:2] != b"\x1f\x8b" and name.endswith(".gz"):
            raise gzip_error(name, what)
        return name, _decode(raw, name, what)
    try:
        data = source.read()
    except (OSError, EOFError, zlib.error) as exc:  # a gzip stream that does not decompress
        raise gzip_error(name, what, exc) from None
    if isinstance(data, (bytes, bytearray, memoryview)):
        return name, _decode(bytes(data), name, what)
    return name, data.removeprefix("\ufeff")


def existing_file(source: str | os.PathLike, what: str) -> Path:
    """``source`` as a Path, or the InputError of a missing file or of a folder where a file is wanted."""
    from .outputs import recover_once

    path, name = Path(source), os.fspath(source)
    recover_once(path.parent)  # a set a killed process was committing here: read the new one, whole
    if not path.exists():
        raise InputError(name, f"{what} not found", "check the path")
    if path.is_dir():
        raise InputError(name, f"expected a {what}, found a folder", "name a file")
    return path


def gzip_error(name: str, what: str, exc: BaseException | None = None) -> InputError:
    """The error of gzip data that does not decompress (``exc``), or of a .gz name on other data."""
    if exc is None:
        return InputError(name, f"{what} is named .gz but is not gzip data",
                          "rename it without .gz or compress it with gzip")
    return InputError(name, f"unreadable gzip {what}: {exc}", "re-create the file, or gunzip it to see what is wrong")


def _decode(raw: bytes, name: str, what: str) -> str:
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise gzip_error(name, what, exc) from None
    try:
        # utf-8-sig: a byte-order mark would otherwise stick to the first id
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(name, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {column})",
                         "save the file as UTF-8", line=line) from None


def read_concurrently(read: Callable[[T], R], sources: Sequence[T], workers: int = 2) -> list[R]:
    """``[read(s) for s in sources]``, ``workers`` at a time: recjudge's reader (polars) parses without
    the GIL, so files read side by side on two cores. Results keep the sources' order, and the error
    raised is the one the first failing source (in that order) gives, as in the sequential loop."""
    if len(sources) < 2 or workers < 2:
        return [read(s) for s in sources]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="recjudge-read") as pool:
        futures = [pool.submit(read, s) for s in sources]
        return [f.result() for f in futures]


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Write to a temp file beside ``path`` and rename it into place only on success.

    A ``.gz`` path is gzip-compressed. Nothing half-written is ever left at ``path``. Inside
    :func:`recjudge.outputs.output_set` the rename waits for the whole set. A full disk or another
    write error names ``path`` (and the free space left).
    """
    from .outputs import current, disk_error, recover_once

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(str(path), f"cannot create the folder {path.parent}: {exc.strerror}") from None
    recover_once(path.parent)  # a set a killed process was committing here is completed first
    sweep_stale_temps(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{_temp_prefix(path)}{os.getpid()}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise disk_error(path, exc) from None
    staged = current()
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
                    os.fsync(raw.fileno())  # closing the wrapper closes raw too
            if not raw.closed:
                raw.flush()
                os.fsync(raw.fileno())
        if staged is not None:
            staged.stage(Path(tmp), path)
            return
        try:
            os.replace(tmp, path)
        except OSError as exc:
            raise OutputError(str(path), f"cannot replace it: {exc.strerror}") from None
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise disk_error(path, exc) from None
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def remove_output(path: str | os.PathLike) -> None:
    """Remove an earlier output this command no longer writes (with the set, inside one)."""
    from .outputs import current

    staged = current()
    if staged is not None:
        staged.remove(Path(path))
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


def sweep_stale_temps(path: str | os.PathLike) -> list[Path]:
    """Remove temp files that an earlier, killed writer of ``path`` left beside it.

    Temp names carry the writer's pid (``.NAME.PID.XXXX.tmp``); a file whose writer is no longer
    alive is stale. Files of a live writer (another process writing the same target) are kept.
    """
    path = Path(path)
    prefix = _temp_prefix(path)
    removed = []
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not (entry.name.startswith(prefix) and entry.name.endswith(".tmp")):
            continue
        pid = entry.name[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and (int(pid) == os.getpid() or pid_alive(int(pid))):
            continue
        with contextlib.suppress(OSError):
            entry.unlink()
            removed.append(entry)
    return removed


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_outputs(outputs: dict[str, str | os.PathLike | None],
                  inputs: Iterable[str | os.PathLike | None] = ()) -> None:
    """Refuse, before any work, outputs that would overwrite an input or cannot be written.

    ``outputs`` maps an option name (``--out``) to a path (None = not asked for); ``inputs`` are
    the paths read (files or folders; a file inside an input folder counts as an input). Checks:
    the same path, a symlink or a hard link to an input; an output that is a folder; a parent that
    is a file; a folder that cannot be created or written; two outputs on one path.
    """
    in_paths = [Path(p) for p in inputs if p is not None and not (isinstance(p, str) and is_inline(p))]
    seen: dict[str, str] = {}
    for option, out in outputs.items():
        if out is None:
            continue
        out = Path(out)
        key = os.path.realpath(out)
        if key in seen:
            raise OutputError(str(out), f"{option} and {seen[key]} name the same file", "give each output its own path")
        seen[key] = option
        if out.exists():
            for src in _expand(in_paths):
                if _same_file(out, src):
                    raise OutputError(str(out), f"{option} is the input {src}; it would be overwritten",
                                      "write the output to a new path")
        _check_writable(out, option)


def _expand(paths: list[Path]) -> Iterator[Path]:
    """Input files, with the files directly inside an input folder."""
    for p in paths:
        if p.is_dir():
            with contextlib.suppress(OSError):
                yield from (f for f in p.iterdir() if f.is_file())
        elif p.exists():
            yield p


def _check_writable(out: Path, option: str) -> None:
    if out.is_dir():
        raise OutputError(str(out), f"{option} is a folder", "name a file inside it")
    _check_folder(out, out.parent, option)


def _check_folder(out: Path, parent: Path, option: str) -> None:
    """``parent`` (the folder ``out`` goes in, or ``out`` itself for an output folder), or the nearest
    ancestor that exists, must be a folder this process can write; errors name ``out``, the user's path."""
    while not parent.exists():
        if parent.parent == parent:
            break
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(str(out), f"{option}: {parent} is a file, not a folder", "choose another output path")
    if out != parent and out.exists() and not os.access(out, os.W_OK):
        raise OutputError(str(out), f"{option} is not writable", "check its permissions or choose another path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(str(out), f"{option}: the folder {parent} is not writable",
                          "choose a writable folder")


def check_output_dir(out: str | os.PathLike | None, option: str, inputs=()) -> None:
    """Like :func:`check_outputs` for an output folder (``--report DIR``)."""
    if out is None:
        return
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputError(str(out), f"{option} is a file, not a folder", "name a folder")
    for src in inputs:
        if src is not None and Path(src).exists() and out.exists() and _same_file(out, Path(src)):
            raise OutputError(str(out), f"{option} is the input folder {src}", "write the report elsewhere")
    _check_folder(out, out, option)


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
    _, text = read_text(path, what)  # names the file for a missing, folder, unreadable or non-UTF-8 path
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        import re

        # TOMLDecodeError has .lineno only from Python 3.14; older ones say "(at line N, column M)"
        found = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = getattr(exc, "lineno", None) or (int(found.group(1)) if found else None)
        raise InputError(src, f"not valid TOML: {exc}", "fix the TOML syntax", line=line) from None
