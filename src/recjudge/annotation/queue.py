"""Who labels what next: tasks offered to assessors in order, each to ``overlap`` of them.

A task is open to an assessor while fewer than ``overlap`` others have labelled it, skipped it or
hold it (it is on their screen): with one server and several assessors, each gets the next open
task at once and no two get the same one unless overlap asks for it. A skipped task is offered
again to the one who skipped it once nothing else is open to them. In self-assessment each
assessor is a user and gets that user's pairs only.
"""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path

from .log import LabelLog, State, log_name, read_events

__all__ = ["Board", "HOLD_SECONDS"]

HOLD_SECONDS = 15 * 60  # a task on an idle screen is released to others after this


class Board:
    """The assessors' logs and the open tasks of one annotation."""

    def __init__(self, ids: list[str], folder: Path, provenance: dict, overlap: int = 1, self_mode: bool = False):
        self.ids = list(ids)
        self.known = set(self.ids)
        self.folder = Path(folder)
        self.provenance = provenance
        self.overlap = int(overlap)
        self.self_mode = self_mode
        self.logs: dict[str, LabelLog] = {}
        self.holds: dict[str, tuple[str, float]] = {}  # assessor -> (task, since)
        self._lock = threading.RLock()
        for path in sorted(self.folder.glob("*.jsonl")):  # earlier assessors count for the overlap
            events = read_events(path)
            if events:
                self.log(str(events[0].get("annotator")))

    def log(self, annotator: str) -> LabelLog:
        with self._lock:
            if annotator not in self.logs:
                self.logs[annotator] = LabelLog(self.folder, annotator, self.provenance)
            return self.logs[annotator]

    def state(self, annotator: str) -> State:
        return self.log(annotator).state

    def _taken(self, task: str, annotator: str) -> int:
        now = time.monotonic()
        n = 0
        for name, lg in self.logs.items():
            if name == annotator:
                continue
            held = self.holds.get(name)
            if task in lg.state.labels or task in lg.state.skipped or (
                    held is not None and held[0] == task and now - held[1] < HOLD_SECONDS):
                n += 1
        return n

    def mine(self, task: str, annotator: str) -> bool:
        """Whether ``task`` may be shown to ``annotator`` (self-assessment: only the user's own pairs)."""
        return task in self.known and (not self.self_mode or task.split("\t", 1)[0] == annotator)

    def open_tasks(self, annotator: str) -> list[str]:
        """The tasks still to offer ``annotator``, in order: open ones first, then those they skipped."""
        with self._lock:
            state = self.state(annotator)
            skipped = set(state.skipped)
            fresh = [t for t in self.ids if t not in state.labels and t not in skipped and self.mine(t, annotator)
                     and self._taken(t, annotator) < self.overlap]
            return fresh + [t for t in state.skipped if t not in state.labels and t in self.known]

    def next_task(self, annotator: str) -> str | None:
        """The task to show ``annotator`` now (held for them), or None when they are done."""
        with self._lock:
            held = self.holds.get(annotator)
            state = self.state(annotator)
            if held is not None and held[0] not in state.labels and held[0] not in state.skipped:
                return held[0]
            tasks = self.open_tasks(annotator)
            if not tasks:
                self.holds.pop(annotator, None)
                return None
            self.holds[annotator] = (tasks[0], time.monotonic())
            return tasks[0]

    def show(self, annotator: str, task: str) -> None:
        """``annotator`` is shown ``task`` again (an undo brings it back)."""
        with self._lock:
            self.holds[annotator] = (task, time.monotonic())

    def progress(self, annotator: str) -> dict:
        """Labels done, the total (done + still open to them), the rate per hour and the time left."""
        state = self.state(annotator)
        done, left = len(state.labels), len(self.open_tasks(annotator))
        recent = [s for s in list(state.seconds.values())[-50:] if s > 0]
        per_label = statistics.median(recent) if recent else None
        return {"done": done, "total": done + left, "left": left, "skipped": len(state.skipped),
                "flagged": len(state.flagged),
                "per_hour": None if not per_label else round(3600 / per_label, 1),
                "eta_seconds": None if not per_label else round(left * per_label)}

    def file_of(self, annotator: str) -> str:
        return log_name(annotator)
