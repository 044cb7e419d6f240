"""The assessors' labels out of their logs: one qrels file each, and the labelling report.

Export writes ``qrels/<file>.qrels`` per assessor (``<file>`` is the log's name, :func:`log_name`)
and ``qrels/assessors.tsv`` (name, file, labels, skipped, flagged) as one output set: a reader sees
the earlier export or this one, whole. ``recjudge agreement --reference qrels/A.qrels --candidate
qrels/B.qrels`` then compares two assessors.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .._io import atomic_write, remove_output
from ..data.trec import Qrels, write_qrels
from ..outputs import output_set
from .log import State, log_name, read_logs

__all__ = ["export_qrels", "AnnotateReport", "labelling_report", "LABELS_DIR", "QRELS_DIR"]

LABELS_DIR, QRELS_DIR = "labels", "qrels"


def _qrels(state: State) -> Qrels:
    rows = sorted((tid.split("\t", 1) + [label]) for tid, label in state.labels.items())
    frame = pd.DataFrame(rows, columns=["qid", "docid", "label"]) if rows else pd.DataFrame(
        {"qid": [], "docid": [], "label": []})
    frame.insert(1, "iteration", "0")
    return Qrels(log_name(state.annotator), frame.astype({"label": "int64"}))


def export_qrels(out: str | Path, states: dict[str, State] | None = None) -> dict[str, Path]:
    """Each assessor's labels as qrels under ``out/qrels`` (atomically, as one set); their paths by name."""
    out = Path(out)
    states = read_logs(out / LABELS_DIR) if states is None else states
    paths = {}
    with output_set():
        for stale in set(_exported(out)) - {f"{log_name(n)}.qrels" for n in states}:
            remove_output(out / QRELS_DIR / stale)  # an assessor whose log is gone keeps no qrels
        if not states and _exported(out):
            remove_output(out / QRELS_DIR / "assessors.tsv")
        for name, state in sorted(states.items()):
            paths[name] = write_qrels(_qrels(state), out / QRELS_DIR / f"{log_name(name)}.qrels")
        if states:
            with atomic_write(out / QRELS_DIR / "assessors.tsv") as fh:
                fh.write("assessor\tqrels\tlabels\tskipped\tflagged\n")
                for name, state in sorted(states.items()):
                    open_skips = [t for t in state.skipped if t not in state.labels]
                    fh.write(f"{_cell(name)}\t{paths[name].name}\t{len(state.labels)}\t{len(open_skips)}\t"
                             f"{len(state.flagged)}\n")
    return paths


def _exported(out: Path) -> list[str]:
    """The qrels files the last export listed in assessors.tsv (only those are ever removed)."""
    try:
        rows = (out / QRELS_DIR / "assessors.tsv").read_text(encoding="utf-8").splitlines()[1:]
    except OSError:
        return []
    names = [r.split("\t")[1] for r in rows if r.count("\t") >= 4]
    return [n for n in names if n.endswith(".qrels") and "/" not in n and "\\" not in n and not n.startswith(".")]


def _cell(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


@dataclass(frozen=True)
class AssessorSummary:
    name: str
    labels: int
    active_hours: float
    per_hour: float | None
    median_seconds: float | None
    distribution: dict[int, int]
    skipped: int
    flagged: int


@dataclass(frozen=True)
class AnnotateReport:
    """``annotate --report``: labels per hour per assessor and the label distribution."""

    assessors: tuple[AssessorSummary, ...]
    paths: dict

    def to_json(self) -> dict:
        return {"assessors": [{**a.__dict__, "distribution": {str(k): v for k, v in a.distribution.items()}}
                              for a in self.assessors],
                "distribution": {str(k): v for k, v in self.distribution().items()},
                "qrels": {k: str(v) for k, v in self.paths.items()}}

    def distribution(self) -> dict[int, int]:
        total: Counter = Counter()
        for a in self.assessors:
            total.update(a.distribution)
        return dict(sorted(total.items()))

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{k: v for k, v in a.__dict__.items() if k != "distribution"} for a in self.assessors])

    def format(self) -> str:
        if not self.assessors:
            return "no labels yet"
        from tabulate import tabulate

        levels = sorted(self.distribution())
        rows = [[a.name, a.labels, f"{a.active_hours:.2f}", "-" if a.per_hour is None else f"{a.per_hour:.0f}",
                 "-" if a.median_seconds is None else f"{a.median_seconds:.1f}", a.skipped, a.flagged,
                 *(a.distribution.get(k, 0) for k in levels)] for a in self.assessors]
        total = self.distribution()
        rows.append(["all", sum(total.values()), "", "", "", "", "", *(total.get(k, 0) for k in levels)])
        head = ["assessor", "labels", "hours", "per hour", "median s", "skipped", "flagged",
                *(f"={k}" for k in levels)]
        note = ("hours: the time spent on the labels kept (each from its task's display to its key); per hour: "
                "labels / hours")
        return tabulate(rows, head, tablefmt="simple", disable_numparse=True) + "\n" + note


def labelling_report(out: str | Path, paths: dict | None = None) -> AnnotateReport:
    """The summary of the logs under ``out/labels``."""
    states = read_logs(Path(out) / LABELS_DIR)
    rows = []
    for name, s in sorted(states.items()):
        secs = [s.seconds.get(t, 0.0) for t in s.labels]
        hours = sum(secs) / 3600
        positive = [x for x in secs if x > 0]
        rows.append(AssessorSummary(name, len(s.labels), round(hours, 4),
                                    round(len(s.labels) / hours, 1) if hours > 0 else None,
                                    round(statistics.median(positive), 2) if positive else None,
                                    dict(sorted(Counter(s.labels.values()).items())),
                                    len([t for t in s.skipped if t not in s.labels]), len(s.flagged)))
    return AnnotateReport(tuple(rows), dict(paths or {}))
