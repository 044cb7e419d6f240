"""``evaluate``: score and rank systems under one label set, and its result."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ...data.trec import Qrels
from ...report.terminal import table as text_table
from .ranks import SystemTable
from .scoring import (
    measure_definitions,
    missing_user_settings,
    named_measures,
    ranking_measure,
    score_label_sets,
    summarize_ties,
    system_table,
)
from .text import groups_json, groups_text, tie_line, wrapped

if TYPE_CHECKING:
    from ...data.trec import Run

    RunSource = Run | str | os.PathLike  # a run, or a run file read when its turn comes

__all__ = ["EvaluationResult", "evaluate", "per_query_frame"]


@dataclass(frozen=True, eq=False)
class EvaluationResult:
    """The systems' scores and ranks under one label set (``recjudge evaluate``), as JSON, a frame or text.

    :func:`evaluate` fills the first four fields; the verb adds where the labels came from, the means per
    system group, the report it wrote, whether the JSON holds the per-user rows, and the protocol followed."""

    table: SystemTable
    settings: Mapping[str, object]
    tie_share: Mapping[str, float]
    tie_sensitivity: Mapping | None = None  # the tie note (recjudge.evaluation.ties.note.summarize)
    source: str | None = None  # where the qrels came from (a path); None: their name
    groups: pd.DataFrame | None = None  # per system group: number of systems and mean of each measure
    report_path: Path | None = None  # report.md, when one was written
    per_query: bool = False  # the JSON holds one row per run, user and measure
    protocol: Any = None  # the recjudge.protocol.ProtocolUse followed, stamped into the JSON

    def to_json(self) -> dict:
        scores = self.table.scores_frame()
        systems = []
        for name in scores.index:
            systems.append({
                "system": name,
                "scores": {m: float(scores.loc[name, m]) for m in scores.columns},
                "ranks": {m: float(self.table.ranks(m)[name]) for m in scores.columns},
                "tied_user_share": self.tie_share.get(name),
            })
        out = {"systems": systems, "settings": dict(self.settings)}
        if self.tie_sensitivity is not None:
            out["tie_sensitivity"] = dict(self.tie_sensitivity)
        out = groups_json(out, self.groups)
        if self.per_query:
            out["per_query"] = self.to_frame(per_query=True).to_dict(orient="records")
        if self.protocol is not None:
            out["protocol"] = self.protocol.as_dict()
        return out

    def to_frame(self, per_query: bool = False) -> pd.DataFrame:
        """Systems × measures, best first under the ranking measure (the first effectiveness measure,
        ``settings["ranked_by"]``), with that measure's rank: whole numbers, but the mean of their ranks
        for systems with equal means (7.5).

        ``per_query=True``: one row per run, user and measure (``run, query, measure, value``; trec_eval
        ``-q``, ir-measures ``iter_calc``), users in the order of their ids. Every user the qrels judge
        has a row: one a run does not rank scores 0 (trec_eval ``-c``), so each run's mean is the
        table's; a CompatHM value its script leaves out of the mean has no row."""
        if per_query:
            return per_query_frame(self.table.matrices)
        scores = self.table.scores_frame()
        by = self.settings["ranked_by"]
        ranked = scores.sort_values(by, ascending=False, kind="stable")
        ranks = self.table.ranks(by).reindex(ranked.index)
        ranked.insert(0, "rank", ranks.astype("int64") if (ranks == ranks.round()).all() else ranks)
        return ranked

    def format(self) -> str:
        """What ``recjudge evaluate`` prints: the ranked table, the tie note and the group means."""
        s = self.settings
        frame = self.to_frame()
        ranks = frame["rank"]
        tied = ranks != ranks.round()
        frame["rank"] = [f"{r:g}" for r in ranks]  # 1, 2, … and 7.5 for two systems tied at 7 and 8
        note = (f"\nrank {', '.join(dict.fromkeys(frame['rank'][tied]))}: systems with equal {s['ranked_by']} "
                "share the mean of their ranks" if tied.any() else "")
        source = self.source if self.source is not None else s["qrels"]
        return (wrapped(f"{len(frame)} systems under {source}; ranked by {s['ranked_by']} "
                        f"({s['ranked_by_note']}); tie policy {s['tie_policy']}") + "\n"
                + text_table(frame.round(4).reset_index()) + note + tie_line(self.tie_sensitivity)
                + groups_text(self.groups))

    def __str__(self) -> str:
        return self.format()


def per_query_frame(matrices) -> pd.DataFrame:
    """``{measure: users × runs}`` as rows ``run, query, measure, value``: run by run, user by user, the
    measures in their order (trec_eval ``-q``'s order); NaN values (left out of a mean) dropped."""
    names = list(matrices)
    if not names:
        return pd.DataFrame(columns=["run", "query", "measure", "value"])
    first = matrices[names[0]]
    runs, queries = np.asarray(first.columns, dtype=object), np.asarray(first.index, dtype=object)
    values = np.stack([matrices[m].reindex(index=first.index, columns=first.columns).to_numpy(dtype=float)
                       for m in names])  # measure × user × run
    n_m, n_q, n_r = values.shape
    frame = pd.DataFrame({"run": np.repeat(runs, n_q * n_m),
                          "query": np.tile(np.repeat(queries, n_m), n_r),
                          "measure": np.tile(np.asarray(names, dtype=object), n_r * n_q),
                          "value": values.transpose(2, 1, 0).ravel()})
    return frame[frame["value"].notna()].reset_index(drop=True)


def evaluate(runs: Mapping[str, RunSource], qrels: Qrels, measures: Sequence[str] | str | None = None,
             tie_policy: str = "trec_eval", seed: int = 0, export_ties: Mapping[str, dict] | None = None,
             tie_note: float = 1.0) -> EvaluationResult:
    """Score and rank systems under one label set.

    ``runs`` maps a name to a Run or to a run file (:func:`recjudge.data.trec.run_paths`); files are
    read one at a time, so the memory does not grow with the number of runs. ``tie_note`` < 1 also
    measures how far the ties of the runs could move the result
    (:mod:`recjudge.evaluation.ties.note`; ``tie_sensitivity`` of the result); 1 skips it.
    """
    names = named_measures(measures)
    scored, observer = score_label_sets(runs, {"labels": qrels}, names, tie_policy, seed, tie_note)
    table = system_table(qrels.name, scored, "labels", names)
    ties = summarize_ties(observer, {"labels": table}, names, "labels", tie_note, label_names={"labels": qrels.name})
    ranked_by, why = ranking_measure(list(names))
    settings = {"measures": list(names), "measure_definitions": measure_definitions(names),
                "ranked_by": ranked_by, "ranked_by_note": why,
                "tie_policy": tie_policy, "seed": seed,
                "qrels": qrels.name, "n_users": len(qrels.qids), **missing_user_settings(names),
                "export_ties": dict(export_ties or {})}
    return EvaluationResult(table, settings, scored.tied_user_share, ties)
