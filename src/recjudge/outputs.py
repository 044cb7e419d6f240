"""A command's outputs as one set: a reader sees the old set or the new one, never a mix.

Inside ``with output_set():`` every file :func:`recjudge._io.atomic_write` writes is staged beside
its target (written and flushed to disk under a temporary name) and nothing is replaced yet. When
the block ends without an error the set is committed: a journal listing every rename is written
to each folder the set touches, the renames are made with SIGINT and SIGTERM held back (the rename
of a dozen files takes microseconds), and the journals are removed. An error, a full disk or a
signal before that leaves every old file as it was and removes the staged ones. A process killed
during the renames themselves (SIGKILL, power loss) leaves its journal: the next recjudge command
that reads or writes in that folder completes the renames first (:func:`recover`), so the set is
then the new one, whole.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import json
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import OutputError

__all__ = ["OutputSet", "output_set", "recover", "disk_error", "current", "pid_alive", "recover_once", "JOURNAL_PREFIX",
           "MANIFEST"]

JOURNAL_PREFIX = ".recjudge-commit."
MANIFEST = ".recjudge-outputs.json"  # in a report folder: the files of the set it holds
_current: contextvars.ContextVar[OutputSet | None] = contextvars.ContextVar("recjudge_output_set", default=None)


@dataclass
class OutputSet:
    """The staged files of one command: (temporary path, target) in the order written, and targets
    to remove when the set commits (an output the new set no longer has)."""

    staged: list[tuple[Path, Path]] = field(default_factory=list)
    removals: list[Path] = field(default_factory=list)
    owned: list[Path] = field(default_factory=list)  # report folders whose earlier set this one replaces

    def stage(self, tmp: Path, target: Path) -> None:
        # a target written twice keeps its last content
        for i, (old_tmp, old_target) in enumerate(self.staged):
            if old_target == target:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(old_tmp)
                del self.staged[i]
                break
        self.staged.append((tmp, target))

    def content(self, target: str | os.PathLike) -> Path:
        """Where ``target``'s new content is now: its staged file, or the target itself."""
        target = Path(target)
        for tmp, staged_target in reversed(self.staged):
            if staged_target == target:
                return tmp
        return target

    def remove(self, target: Path) -> None:
        self.removals.append(Path(target))

    def own(self, folder: str | os.PathLike) -> None:
        """``folder`` holds one set of this kind (a report): the files its earlier set wrote and this one
        does not (a figure of a candidate no longer compared) go with the commit. Only files listed in the
        folder's manifest (:data:`MANIFEST`), written by recjudge, are ever removed."""
        folder = Path(folder)
        if folder not in self.owned:
            self.owned.append(folder)

    def _manifests(self) -> None:
        """Stage each owned folder's new manifest, and remove what only its old one lists."""
        for folder in self.owned:
            root = folder.resolve()
            mine = sorted(str(t.resolve().relative_to(root)) for _, t in self.staged
                          if t.resolve().is_relative_to(root) and t.name != MANIFEST)
            manifest = folder / MANIFEST
            try:
                before = json.loads(manifest.read_text(encoding="utf-8")).get("files", [])
            except (OSError, ValueError, AttributeError):
                before = []
            for name in set(before) - set(mine):
                if isinstance(name, str) and ".." not in Path(name).parts and (root / name).is_file():
                    self.removals.append(root / name)
            tmp = folder / f"{MANIFEST}.{os.getpid()}.tmp"
            try:
                _write_synced(tmp, json.dumps({"files": mine}, indent=1) + "\n")
                self.stage(tmp, manifest)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise

    def discard(self) -> None:
        for tmp, _ in self.staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        self.staged.clear()
        self.removals.clear()
        self.owned.clear()

    def commit(self) -> None:
        if not self.staged and not self.removals:
            return
        where = (self.owned or [Path(".")])[0] / MANIFEST
        try:
            self._manifests()
        except OSError as exc:
            self.discard()
            raise disk_error(where, exc) from None
        except BaseException:
            self.discard()
            raise
        folders = sorted({t.parent.resolve() for _, t in self.staged} | {t.parent.resolve() for t in self.removals})
        entry = {"pid": os.getpid(), "renames": [[str(a.resolve()), str(b.resolve())] for a, b in self.staged],
                 "removals": [str(t.resolve()) for t in self.removals]}
        journals = [f / f"{JOURNAL_PREFIX}{os.getpid()}.json" for f in folders]
        text = json.dumps(entry)
        try:
            for j in journals:
                _write_synced(j, text)
        except OSError as exc:
            for j in journals:
                with contextlib.suppress(OSError):
                    os.unlink(j)
            self.discard()
            raise disk_error(j, exc) from None
        with _signals_held():
            _apply(entry)
            for f in folders:
                _sync_dir(f)
            for j in journals:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(j)
        self.staged.clear()
        self.removals.clear()
        self.owned.clear()


def current() -> OutputSet | None:
    """The output set being written, if a command opened one."""
    return _current.get()


@contextlib.contextmanager
def output_set() -> Iterator[OutputSet]:
    """Stage every atomic write of the block; commit them together when it ends without an error.
    Nested sets join the outer one."""
    outer = _current.get()
    if outer is not None:
        yield outer
        return
    staged = OutputSet()
    token = _current.set(staged)
    try:
        yield staged
    except BaseException:
        staged.discard()
        raise
    finally:
        _current.reset(token)
    staged.commit()


_checked: set[str] = set()
_checked_lock = threading.Lock()


def recover_once(folder: str | os.PathLike) -> None:
    """:func:`recover` for a folder this process has not looked at yet: readers and writers call it on
    every file, and a folder (63 runs, read on two threads) is scanned once."""
    key = os.path.abspath(folder)
    with _checked_lock:
        if key in _checked:
            return
        _checked.add(key)
        recover(folder)


def recover(folder: str | os.PathLike) -> int:
    """Complete the sets a killed process was committing in ``folder``; returns how many."""
    folder = Path(folder)
    try:
        names = [e.name for e in os.scandir(folder) if e.name.startswith(JOURNAL_PREFIX) and e.name.endswith(".json")]
    except OSError:
        return 0
    done = 0
    for name in names:
        journal = folder / name
        pid = name[len(JOURNAL_PREFIX):-len(".json")]
        if pid.isdigit() and int(pid) != os.getpid() and pid_alive(int(pid)):
            continue  # another live process is committing it right now
        try:
            entry = json.loads(journal.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # written partly: its set never started renaming, the old files stand
        _apply(entry)
        folders = {Path(b).parent for _, b in entry.get("renames", [])} | {Path(t).parent for t in entry.get("removals", [])}
        for f in folders:
            with contextlib.suppress(OSError):
                os.unlink(f / name)
        done += 1
    return done


def disk_error(path: Path, exc: OSError) -> OutputError:
    """An OutputError naming ``path`` and, for a full disk, the free space left."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            free = shutil.disk_usage(path.parent).free
            room = f"{free:,} bytes free on {path.parent}"
        except OSError:
            room = f"the free space of {path.parent} is unknown"
        return OutputError(str(path), f"no space left on the device ({room}); nothing of this command's outputs "
                                      "was replaced", "free space, or write the outputs elsewhere")
    return OutputError(str(path), f"cannot write it: {exc.strerror or exc}; nothing of this command's outputs "
                                  "was replaced", "check the folder's permissions and free space")


def _apply(entry: dict) -> None:
    for tmp, target in entry.get("renames", []):
        with contextlib.suppress(FileNotFoundError):  # renamed already (by the writer, or a reader before)
            os.replace(tmp, target)
    for target in entry.get("removals", []):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)


def _write_synced(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` is running (one this process may not signal counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the renames are done (main thread only; elsewhere they go to it)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
