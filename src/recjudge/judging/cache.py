"""The judgment cache: SQLite in WAL mode, one row per model call, committed as each answer arrives.

Key = SHA-256 of (template hash, model, endpoint, generation parameters, rendered prompt hash,
repetition index); the endpoint is its public URL (several endpoints: their sorted URLs), so the
same model name served by two different servers never shares answers. The schema version is checked
on open: a cache of another version is refused with the way out. A row keeps the raw answer, the labels by item, the parse status, token usage, latency and
the (redacted) error. Only ``ok`` rows count as answered: failed or partial calls are asked again on
the next run, so re-running a command resumes it and a killed run loses only calls in flight.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..errors import ConfigError

__all__ = ["Usage", "CallRecord", "JudgeCache", "cache_key", "prompt_hash", "merge_records"]

SCHEMA_VERSION = "2"  # 2: the endpoint entered the key; rows record the endpoint that answered


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
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            if getattr(self, "_db", None) is not None:
                self._db.close()
            raise ConfigError(f"the judgment cache {self.path} is not a recjudge cache ({exc}); give another "
                              "--cache path") from None

    def _open(self) -> None:
        self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
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
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        (found,) = self._db.execute("SELECT v FROM meta WHERE k = 'schema'").fetchone()
        if found != SCHEMA_VERSION:
            self._db.close()
            # keys of another schema are computed differently: their answers would never be found
            # (re-paying every call) or, worse, found for the wrong endpoint
            raise ConfigError(f"the judgment cache {self.path} has schema version {found}, this recjudge "
                              f"writes version {SCHEMA_VERSION} (its keys include the endpoint); give a new "
                              "--cache path, or move the old file away to start afresh")

    def close(self) -> None:
        self._db.close()

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
                rec = _record(row)
                out[rec.key] = rec
        return out

    def get(self, key: str) -> CallRecord | None:
        row = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM calls WHERE key = ?", (key,)).fetchone()
        return _record(row) if row is not None else None

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
        self._db.execute(
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

    def ok_keys(self) -> set[str]:
        return {r[0] for r in self._db.execute("SELECT key FROM calls WHERE status = 'ok'")}

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
