"""The judgment cache: SQLite in WAL mode, one row per model call, committed as each answer arrives.

Key = SHA-256 of (template hash, model, endpoint, generation parameters, rendered prompt hash,
repetition index); the endpoint is its public URL (several endpoints: their sorted URLs), so the
same model name served by two different servers never shares answers. The schema version is checked
on open: a cache of another version is refused with the way out. A row keeps the raw answer, the labels by item, the parse status, token usage, latency and
the (redacted) error. Only ``ok`` rows count as answered: failed or partial calls are asked again on
the next run, so re-running a command resumes it and a killed run loses only calls in flight.

The file is marked as recjudge's (SQLite ``application_id``): another program's SQLite file, or a
cache whose tables or columns are missing, is refused without being changed. One process at a time
uses a cache (an advisory lock on ``<cache>.lock``, holding its PID); a second run on the same
cache refuses at once naming the first. What comes back from the cache is checked like what comes
from an endpoint: a row whose labels are not whole numbers of the template's scale, one for each of
its items, is a miss (asked again, and counted in :attr:`JudgeCache.invalid`). A write that cannot
succeed (locked, disk full, read-only) raises :class:`CacheWriteError` naming the file and the cause.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sqlite3
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..errors import ConfigError

__all__ = ["Usage", "CallRecord", "CacheWriteError", "JudgeCache", "cache_key", "prompt_hash", "merge_records",
           "APPLICATION_ID"]

SCHEMA_VERSION = "2"  # 2: the endpoint entered the key; rows record the endpoint that answered
APPLICATION_ID = 0x524A4447  # "RJDG" in SQLite's application_id: this file is a recjudge judgment cache
BUSY_SECONDS = 5.0  # how long a write waits for another connection's lock before it is an error


class CacheWriteError(ConfigError):
    """An answer could not be written to the cache: no further call should be paid for."""


@dataclass(frozen=True)
class Usage:
    prompt: int = 0
    cached: int = 0
    completion: int = 0
    reasoning: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt + other.prompt, self.cached + other.cached,
                     self.completion + other.completion, self.reasoning + other.reasoning)

    def as_dict(self) -> dict[str, int]:
        return {"prompt": self.prompt, "cached": self.cached, "completion": self.completion,
                "reasoning": self.reasoning}


@dataclass(frozen=True)
class CallRecord:
    """One answered (or finally failed) call. ``labels`` and ``item_errors`` are keyed by item id."""

    key: str
    qid: str
    items: tuple[str, ...]
    repeat: int
    status: str                      # ok | partial | failed
    reason: str | None = None        # why not ok (first failing reason)
    error: str | None = None         # redacted error text
    raw: str | None = None
    labels: Mapping[str, int] = field(default_factory=dict)
    criteria: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    item_errors: Mapping[str, str] = field(default_factory=dict)
    usage: Usage = Usage()
    latency: float = 0.0
    attempts: int = 0
    via: str = "chat"
    mode: str = ""                   # structured output used: json_schema | text
    endpoint: str | None = None      # public URL of the endpoint that answered
    answered: int = 0                # attempts the server answered (HTTP 2xx: billed); not stored

    def rekeyed(self, qid: str, items: tuple[str, ...]) -> CallRecord | None:
        """This answer (to the same rendered prompt) as the answer for ``qid``'s ``items``.

        Identical prompts show the same candidates in the same order, so the i-th item of the stored
        call is the i-th item of this request; the stored qid and items are never trusted.
        """
        if self.qid == qid and self.items == items:
            return self
        if len(self.items) != len(items):
            return None
        to_req = dict(zip(self.items, items))
        return replace(
            self, qid=qid, items=items,
            labels={to_req[k]: v for k, v in self.labels.items() if k in to_req},
            criteria={to_req[k]: v for k, v in self.criteria.items() if k in to_req},
            item_errors={to_req[k]: v for k, v in self.item_errors.items() if k in to_req})


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(template_sha: str, model: str, params: Mapping, prompt_sha: str, repeat: int,
              endpoint: str = "") -> str:
    """The identity of an answer. ``endpoint`` is the public URL (no credentials) of the server(s)."""
    blob = json.dumps([template_sha, model, endpoint, dict(sorted(params.items())), prompt_sha, int(repeat)],
                      sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


_COLUMNS = ("key", "qid", "items", "repeat", "status", "reason", "error", "raw", "labels", "criteria",
            "item_errors", "prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens",
            "latency", "attempts", "via", "mode", "template_hash", "model", "params", "prompt_hash",
            "created", "endpoint")


class JudgeCache:
    def __init__(self, path: str | os.PathLike, scale: tuple[int, int] | None = None):
        """Open (or create) the cache at ``path``; ``scale`` (lowest, highest label) checks what it returns."""
        self.path = Path(path)
        self.scale = scale
        self.invalid: list[tuple[str, str]] = []  # (key, why) of rows read back as misses
        self._db = None
        self._lock = None
        memory = str(path) == ":memory:"
        if not memory:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock = _ProcessLock.acquire(self.path)
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            self._release()
            raise ConfigError(f"the judgment cache {self.path} could not be opened: {_cause(exc, self.path)}; "
                              "give another --cache path") from None
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _open(self) -> None:
        existed = str(self.path) != ":memory:" and self.path.exists() and self.path.stat().st_size > 0
        self._db = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_SECONDS)
        if existed:
            self._check_ours()
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL loses nothing on a process kill (only on power loss) and is much faster than FULL
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(
            """
            CREATE TABLE IF NOT EXISTS calls (
                key TEXT PRIMARY KEY, qid TEXT NOT NULL, items TEXT NOT NULL, repeat INTEGER NOT NULL,
                status TEXT NOT NULL, reason TEXT, error TEXT, raw TEXT, labels TEXT, criteria TEXT,
                item_errors TEXT, prompt_tokens INTEGER, cached_tokens INTEGER, completion_tokens INTEGER,
                reasoning_tokens INTEGER, latency REAL, attempts INTEGER, via TEXT, mode TEXT,
                template_hash TEXT, model TEXT, params TEXT, prompt_hash TEXT, created REAL, endpoint TEXT);
            CREATE TABLE IF NOT EXISTS batches (
                batch_id TEXT PRIMARY KEY, input_file_id TEXT, keys TEXT NOT NULL, status TEXT NOT NULL,
                created REAL);
            CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);
            """)
        self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        # a write before any call: a cache that cannot keep an answer (full disk, read-only) is found
        # before one is paid for, not after
        self._db.execute("INSERT OR REPLACE INTO meta VALUES ('opened', ?)", (repr(time.time()),))
        (found,) = self._db.execute("SELECT v FROM meta WHERE k = 'schema'").fetchone()
        if found != SCHEMA_VERSION:
            # keys of another schema are computed differently: their answers would never be found
            # (re-paying every call) or, worse, found for the wrong endpoint
            raise ConfigError(f"the judgment cache {self.path} has schema version {found}, this recjudge "
                              f"writes version {SCHEMA_VERSION} (its keys include the endpoint); give a new "
                              "--cache path, or move the old file away to start afresh")

    def _check_ours(self) -> None:
        """Refuse, before anything is written, a file that is not a whole recjudge cache."""
        (app,) = self._db.execute("PRAGMA application_id").fetchone()
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if app not in (0, APPLICATION_ID):
            raise ConfigError(f"{self.path} is another program's SQLite file (application_id {app:#x}), not a "
                              "recjudge judgment cache; it was left unchanged — give another --cache path")
        if "meta" in tables:
            found = self._db.execute("SELECT v FROM meta WHERE k = 'schema'").fetchone()
            if found is not None and found[0] != SCHEMA_VERSION:
                raise ConfigError(f"the judgment cache {self.path} has schema version {found[0]}, this recjudge "
                                  f"writes version {SCHEMA_VERSION} (its keys include the endpoint); give a new "
                                  "--cache path, or move the old file away to start afresh")
        if app == 0 and not {"calls", "meta"} & tables:
            # an unmarked file is adopted only when it is a cache written before the mark
            raise ConfigError(f"{self.path} is not a recjudge judgment cache (its tables: "
                              f"{', '.join(sorted(tables)) or 'none'}); it was left unchanged — give another "
                              "--cache path")
        missing_tables = sorted({"calls", "meta"} - tables)
        if missing_tables:
            raise ConfigError(f"the judgment cache {self.path} is damaged: table(s) {', '.join(missing_tables)} "
                              "missing; move it away (its answers cannot be trusted) or give another --cache path")
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(calls)")}
        lacking = [c for c in _COLUMNS if c not in columns]
        if lacking:
            raise ConfigError(f"the judgment cache {self.path} is damaged: table calls lacks column(s) "
                              f"{', '.join(lacking)}; move it away or give another --cache path")

    def close(self) -> None:
        self._release()

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def get_ok(self, keys: Sequence[str]) -> dict[str, CallRecord]:
        """The answered calls among ``keys``."""
        out: dict[str, CallRecord] = {}
        keys = list(keys)
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM calls WHERE status = 'ok' AND key IN ({marks})", chunk)
            for row in rows:
                rec, why = self._checked(row)
                if rec is not None:
                    out[rec.key] = rec
                else:
                    self._set_invalid(row[0], why)
        return out

    def _checked(self, row) -> tuple[CallRecord | None, str]:
        """The row as a record, or (None, why) when it is not an answer recjudge could have written."""
        try:
            rec = _record(row)
        except (ValueError, TypeError) as exc:
            return None, f"unreadable row ({exc})"
        items = rec.items
        if not isinstance(rec.labels, dict):
            return None, f"labels {rec.labels!r} are not a mapping of item to label"
        if set(rec.labels) != set(items) or len(set(items)) != len(items):
            return None, f"labels for {sorted(map(str, rec.labels))} where the call asked for {list(items)}"
        for item, label in rec.labels.items():
            if isinstance(label, bool) or not isinstance(label, int):
                return None, f"label {label!r} of item {item} is not a whole number"
            if self.scale is not None and not self.scale[0] <= label <= self.scale[1]:
                return None, f"label {label} of item {item} is outside the scale {self.scale[0]}-{self.scale[1]}"
        return rec, ""

    def _set_invalid(self, key: str, why: str) -> None:
        """An invalid ``ok`` row becomes a miss: kept for inspection, replaced by the next answer."""
        self.invalid.append((key, why))
        self._write("UPDATE calls SET status = 'invalid', reason = ? WHERE key = ?", (f"invalid cache row: {why}", key))

    def get(self, key: str) -> CallRecord | None:
        row = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM calls WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        rec, _ = self._checked(row) if row[4] == "ok" else (_safe_record(row), "")
        return rec

    def _write(self, sql: str, values: Sequence) -> None:
        try:
            self._db.execute(sql, values)
        except sqlite3.DatabaseError as exc:
            raise CacheWriteError(f"could not write to the judgment cache {self.path}: {_cause(exc, self.path)}; "
                                  "no further call is made, and the answers received are kept in the outputs") from None

    def put(self, rec: CallRecord, template_hash: str, model: str, params: Mapping, prompt_sha: str) -> CallRecord:
        """Store a call and return what the cache now holds for its key.

        An ``ok`` row is never replaced by a later failure of the same key, and labels an earlier
        partial answer gave are kept when a later attempt gives fewer (they are merged; the call
        becomes ``ok`` once every item has a label).
        """
        if rec.status != "ok":  # an ok answer replaces whatever is not ok: no need to read it first
            old = self.get(rec.key)
            if old is not None and old.status == "ok":
                return old
            if old is not None and old.labels and len(old.items) == len(rec.items):
                rec = merge_records(old, rec)
        before = self._db.total_changes
        values = (
            rec.key, rec.qid, json.dumps(list(rec.items)), rec.repeat, rec.status, rec.reason, rec.error,
            rec.raw, json.dumps(dict(rec.labels)), json.dumps({k: dict(v) for k, v in rec.criteria.items()}),
            json.dumps(dict(rec.item_errors)), rec.usage.prompt, rec.usage.cached, rec.usage.completion,
            rec.usage.reasoning, rec.latency, rec.attempts, rec.via, rec.mode, template_hash, model,
            json.dumps(dict(sorted(params.items())), default=str), prompt_sha, time.time(), rec.endpoint)
        marks = ",".join("?" * len(_COLUMNS))
        self._write(
            f"INSERT INTO calls ({', '.join(_COLUMNS)}) VALUES ({marks}) ON CONFLICT(key) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
            + " WHERE calls.status != 'ok'", values)
        if self._db.total_changes == before:  # an ok row was there (another run answered it first)
            return self.get(rec.key) or rec
        return rec

    def count(self, status: str | None = None) -> int:
        if status is None:
            return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
        return self._db.execute("SELECT COUNT(*) FROM calls WHERE status = ?", (status,)).fetchone()[0]

    # batches ----------------------------------------------------------------------------------
    def add_batch(self, batch_id: str, input_file_id: str, keys: Iterable[str]) -> None:
        self._db.execute("INSERT OR REPLACE INTO batches VALUES (?, ?, ?, 'pending', ?)",
                         (batch_id, input_file_id, json.dumps(list(keys)), time.time()))

    def pending_batches(self) -> list[tuple[str, list[str]]]:
        rows = self._db.execute("SELECT batch_id, keys FROM batches WHERE status = 'pending' ORDER BY created")
        return [(b, json.loads(k)) for b, k in rows]

    def close_batch(self, batch_id: str, status: str) -> None:
        self._db.execute("UPDATE batches SET status = ? WHERE batch_id = ?", (status, batch_id))


def merge_records(old: CallRecord, new: CallRecord) -> CallRecord:
    """``new`` with the labels of ``old`` (an answer to the same prompt) it lacks. Items are matched
    by position: the same prompt lists the same candidates in the same order."""
    to_new = dict(zip(old.items, new.items))
    labels = {to_new[k]: v for k, v in old.labels.items() if k in to_new}
    labels.update(new.labels)
    criteria = {to_new[k]: v for k, v in old.criteria.items() if k in to_new and to_new[k] not in new.labels}
    criteria.update(new.criteria)
    errors = {k: v for k, v in new.item_errors.items() if k not in labels}
    for item in new.items:
        if item not in labels and item not in errors:
            errors[item] = new.reason or "unparseable"
    if len(labels) == len(new.items):
        return replace(new, status="ok", reason=None, error=None, labels=labels, criteria=criteria, item_errors={})
    status = "partial" if labels else new.status
    return replace(new, status=status, labels=labels, criteria=criteria, item_errors=errors)


def _safe_record(row) -> CallRecord | None:
    try:
        return _record(row)
    except (ValueError, TypeError):
        return None


def _cause(exc: sqlite3.DatabaseError, path: Path) -> str:
    """Why SQLite could not use ``path``, in words a user can act on."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        holders = _lock_holders(path)
        who = f"PID {', '.join(map(str, holders))}" if holders else "another process"
        return f"locked by {who} for more than {BUSY_SECONDS:g} s ({text})"
    if "disk is full" in text or "disk I/O" in text:
        try:
            free = shutil.disk_usage(path.parent).free
            return f"the disk is full ({free:,} bytes free on {path.parent}) ({text})"
        except OSError:
            return f"the disk is full ({text})"
    if "readonly" in text or "read-only" in text:
        return f"the file or its folder is read-only ({text})"
    if "not a database" in text or "malformed" in text:
        return f"not a SQLite database, or a damaged one ({text})"
    return text


def _lock_holders(path: Path) -> list[int]:
    """PIDs holding POSIX locks on ``path`` (Linux's /proc/locks; empty where it cannot tell)."""
    try:
        st = os.stat(path)
        want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        with open("/proc/locks", encoding="ascii") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    pids = set()
    for line in lines:
        parts = line.split()
        dev = next((p for p in parts if p.count(":") == 2), None)
        if dev == want:
            try:
                pids.add(int(parts[parts.index(dev) - 1]))
            except (ValueError, IndexError):
                continue
    return sorted(pids - {os.getpid()})


class _ProcessLock:
    """One process at a time on a cache: an exclusive ``flock`` on ``<cache>.lock`` holding the owner's
    PID. Opens of the same cache within one process share it."""

    _held: dict[str, list] = {}
    _guard = threading.Lock()

    def __init__(self, key: str):
        self.key = key

    @classmethod
    def acquire(cls, path: Path) -> _ProcessLock:
        import fcntl

        key = str(path.resolve())
        with cls._guard:
            entry = cls._held.get(key)
            if entry is not None:
                entry[1] += 1
                return cls(key)
            lock_path = Path(key + ".lock")
            try:
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise ConfigError(f"the judgment cache {path} cannot be locked ({lock_path}: {exc.strerror}); "
                                  "check that its folder is writable, or give another --cache path") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                owner = ""
                try:
                    owner = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
                except OSError:
                    pass
                os.close(fd)
                if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise ConfigError(f"the judgment cache {path} is in use by another recjudge run"
                                      + (f" (PID {owner})" if owner else "") + "; wait for it to finish (a second "
                                      "run would pay for the same prompts again), or give another --cache path") from None
                raise ConfigError(f"the judgment cache {path} cannot be locked ({exc.strerror})") from None
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
            except OSError:
                pass  # the PID is a courtesy; the lock itself is what matters
            cls._held[key] = [fd, 1]
            return cls(key)

    def release(self) -> None:
        with self._guard:
            entry = self._held.get(self.key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del self._held[self.key]
                os.close(entry[0])  # closing the descriptor releases the flock


def _record(row) -> CallRecord:
    d = dict(zip(_COLUMNS, row))
    return CallRecord(
        key=d["key"], qid=d["qid"], items=tuple(json.loads(d["items"])), repeat=d["repeat"],
        status=d["status"], reason=d["reason"], error=d["error"], raw=d["raw"],
        labels=json.loads(d["labels"] or "{}"), criteria=json.loads(d["criteria"] or "{}"),
        item_errors=json.loads(d["item_errors"] or "{}"),
        usage=Usage(d["prompt_tokens"] or 0, d["cached_tokens"] or 0, d["completion_tokens"] or 0,
                    d["reasoning_tokens"] or 0),
        latency=d["latency"] or 0.0, attempts=d["attempts"] or 0, via=d["via"] or "chat", mode=d["mode"] or "",
        endpoint=d["endpoint"])
