"""The label log: one append-only JSONL file per assessor, each event written and fsynced at once.

A line is one event: ``label`` (with the label, an optional note and the seconds taken), ``skip``,
``flag`` (on or off) or ``undo`` (of the assessor's last label or skip). Every line names the
assessor, the task (user and item), the time, the profile seed and the prompt template's hash, so
a label can be traced to exactly what was shown. A closed tab, a killed server or a power cut loses
nothing written: the state is the log read again (:func:`fold`); a line cut short by a crash is
its last, and is ignored with a warning.

The file's name is derived from the assessor's name (:func:`log_name`): a few letters of it and a
hash, so no text typed on the page ever becomes a path.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError

__all__ = ["LabelLog", "State", "fold", "log_name", "read_events", "EVENTS", "LOG_VERSION"]

EVENTS = ("label", "skip", "flag", "undo")
LOG_VERSION = 1
log = logging.getLogger("recjudge.annotation")


def log_name(annotator: str) -> str:
    """The file stem of an assessor's log and qrels: up to 24 of its letters, digits, '-' and '_', and
    8 hex digits of its SHA-256 (two names never share a file; nothing typed becomes a path)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", annotator).strip("-")[:24] or "assessor"
    return f"{slug}-{hashlib.sha256(annotator.encode('utf-8')).hexdigest()[:8]}"


@dataclass
class State:
    """One assessor's labels as the log has them now."""

    annotator: str
    labels: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)       # in skip order (offered again last)
    flagged: set[str] = field(default_factory=set)
    seconds: dict[str, float] = field(default_factory=dict)
    times: list[float] = field(default_factory=list)       # epoch seconds of each label kept
    done: list[tuple[str, str]] = field(default_factory=list)  # (event, task) that undo takes back, in order

    def apply(self, event: dict) -> None:
        kind, task = event["event"], event.get("task")
        if kind == "label":
            self.labels[task] = int(event["label"])
            if event.get("note"):
                self.notes[task] = str(event["note"])
            self.seconds[task] = float(event.get("seconds") or 0)
            self.times.append(float(event.get("epoch") or 0))
            if task in self.skipped:
                self.skipped.remove(task)
            self.done.append(("label", task))
        elif kind == "skip":
            if task not in self.skipped:
                self.skipped.append(task)
            self.done.append(("skip", task))
        elif kind == "flag":
            (self.flagged.add if event.get("on", True) else self.flagged.discard)(task)
        elif kind == "undo" and self.done:
            self._undo()

    def _undo(self) -> None:
        kind, task = self.done.pop()
        if kind == "label":
            self.labels.pop(task, None)
            self.notes.pop(task, None)
            self.seconds.pop(task, None)
            if self.times:
                self.times.pop()
        elif task in self.skipped:
            self.skipped.remove(task)

    def last_undoable(self) -> str | None:
        return self.done[-1][1] if self.done else None


def read_events(path: Path) -> list[dict]:
    """The events of a log; a last line cut short (a crash mid-write) is dropped with a warning, a bad
    line elsewhere is an error naming the file and line."""
    try:
        lines = path.read_bytes().split(b"\n")
    except FileNotFoundError:
        return []
    events = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            event = json.loads(raw)
            if not isinstance(event, dict) or event.get("event") not in EVENTS:
                raise ValueError("not an event")
        except ValueError:
            if number >= len(lines) - 1:  # the last line: written in part when the process died
                log.warning("%s: line %d is incomplete (a write cut short) and is ignored", path, number)
                continue
            raise InputError(str(path), f"line {number} is no label event", "restore the log from a backup, or "
                             "remove that line (every other label is kept)", line=number) from None
        events.append(event)
    return events


def fold(annotator: str, events) -> State:
    state = State(annotator)
    for event in events:
        state.apply(event)
    return state


class LabelLog:
    """An assessor's log file: events appended (one ``write`` of one line, then fsync) under a lock."""

    def __init__(self, folder: Path, annotator: str, provenance: dict):
        self.path = Path(folder) / f"{log_name(annotator)}.jsonl"
        self.annotator = annotator
        self.provenance = dict(provenance)
        self._lock = threading.Lock()
        events = read_events(self.path)
        other = next((e.get("annotator") for e in events if e.get("annotator") != annotator), None)
        if other is not None:
            raise InputError(str(self.path), f"this log holds the labels of {other!r}, not {annotator!r}",
                             "give each assessor's log its own file (the name's hash decides it)")
        self.state = fold(annotator, events)

    def append(self, kind: str, task: str, **values) -> dict:
        """Write one event and apply it to the state; returns the event."""
        now = _dt.datetime.now(_dt.timezone.utc)
        qid, _, docid = task.partition("\t")
        event = {"v": LOG_VERSION, "event": kind, "annotator": self.annotator, "task": task, "user": qid,
                 "item": docid, **values, "time": now.isoformat(timespec="milliseconds"),
                 "epoch": round(now.timestamp(), 3), **self.provenance}
        line = (json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            new = not self.path.exists()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
            if new:  # the file's name in its folder survives a power cut too
                _sync_dir(self.path.parent)
            self.state.apply(event)
        return event


def _sync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_logs(folder: Path) -> dict[str, State]:
    """Every assessor's state from the logs in ``folder`` (labels/*.jsonl), by assessor name."""
    states = {}
    for path in sorted(Path(folder).glob("*.jsonl")):
        events = read_events(path)
        if events:
            name = str(events[0].get("annotator"))
            states[name] = fold(name, events)
    return states


__all__ += ["read_logs"]
