"""Which files of a runs folder are runs, and each run's name."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from pathlib import Path

from ...errors import InputError
from .records import RUN_SUFFIXES, run_name

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
    given: dict[str, Path] = {}
    for p in paths:
        path = Path(p)
        key = os.path.abspath(path)  # the same argument twice; aliases of one file meet in run_paths
        if key in given:
            what = "runs folder" if path.is_dir() else "run file"
            also = "" if str(given[key]) == str(path) else f" (as {given[key]} and {path})"
            raise InputError(str(path), f"this {what} is given twice{also}", f"give each {what} once")
        given[key] = path
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
            if _same_file(origin[name], f):  # a file named, and again inside a folder named
                raise InputError(str(f), f"this run file is given twice (as {origin[name]} and inside a runs folder)",
                                 "give each run file once: name the folder or the file, not both")
            raise InputError(str(f), f"run name {name!r} is also used by {origin[name]}",
                             "rename one of the files: a run's name is its file name")
        origin[name] = f
    return origin



def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
