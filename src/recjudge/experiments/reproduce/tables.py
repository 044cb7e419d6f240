"""The cells of ``recjudge reproduce penha2025``: every chosen target computed by its family's module
(:mod:`.release`, :mod:`.historical`, :mod:`.rankings`, :mod:`.agreement`, :mod:`.pool`) beside the
published values, the settings that differ from the paper and the places where it contradicts itself."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from ...data.trec import Qrels
from .agreement import figure3_cells, figure4_cells, table3_cells, table8_cells
from .cells import Cells, ReproduceResult
from .common import TRIVIAL_DRAWS, Labels
from .differences import differences
from .historical import historical_cells
from .paper import paper_contradictions
from .pool import pool_cells
from .rankings import ranking_cells
from .release import dataset_cells
from .settings import ReproduceSettings, target_measures

def _flag_contradicted(frame: pd.DataFrame, published, contradictions: Sequence[Mapping]) -> pd.DataFrame:
    """Cells whose published value is one side of a contradiction of the paper say so in their note."""
    marks: dict[str, str] = {}
    for c in contradictions:
        for key in c.get("cells", ()):
            cell = published.cell(*key)
            if cell is not None:
                marks[cell.cite] = f"the paper contradicts this value ({c['where']}: see below)"
    if not marks:
        return frame
    hit = frame.cite.isin(list(marks))
    frame.loc[hit, "note"] = [(f"{n}; " if n else "") + marks[c] for n, c in zip(frame.note[hit], frame.cite[hit])]
    return frame


def compute(s: ReproduceSettings, collection, human: Qrels, runs: Mapping, run_files: Sequence,
            labels: Mapping[tuple[str, str, int], Qrels | None], published, base, not_applied: Mapping[str, Any],
            plan_rows, stopped: str | None, say: Callable[[str], None],
            historical: tuple[Mapping, Qrels] | None = None) -> ReproduceResult:
    """Every chosen target's cells, figures and extras; a target whose labels are missing is listed
    as not computed (judging stopped) rather than computed from part of them."""
    measures, measure_note = target_measures()
    ranking = [m for m in measures if not m.startswith("Judged")]
    cells = Cells(published)
    figures: dict[str, Any] = {}
    extras: dict[str, Any] = {"not_computed": {}}
    only = set(s.only)
    got = Labels(labels, stopped, extras["not_computed"])
    extras["trivial_draws"] = TRIVIAL_DRAWS
    dataset_cells(s, cells, extras, collection, human, runs, base)
    named: dict[str, str] = {}
    if only & {"table1", "figure2"}:
        if historical is None:
            for t in only & {"table1", "figure2"}:
                extras["not_computed"][t] = "no historical runs and qrels (give --historical-runs and --historical-qrels)"
        else:
            named = historical_cells(s, cells, figures, extras, runs, run_files, human, historical, ranking)
    exps = range(s.experiments)
    base_key = f"K={s.base_k()}"
    if only & {"table4", "table9", "figure5"}:
        base_labels = got.of(only & {"table4", "table9", "figure5"}, [("base", base_key, e) for e in exps])
        defined = None
        if "table9" in only and base_labels is not None:
            defined = got.of({"table9"}, [("prompts", "defined scale", e) for e in exps])
        if base_labels is not None:
            ranking_cells(s, cells, figures, extras, runs, human, base_labels, defined, ranking, named)
    if "table3" in only:
        table3_cells(s, got, cells, figures, extras, human, collection)
    if "table8" in only:
        table8_cells(s, got, cells, extras, human)
    if "figure3" in only:
        figure3_cells(s, got, cells, figures, extras, human)
    if "figure4" in only:
        base_labels = got.of({"figure4"}, [("base", base_key, e) for e in exps])
        if base_labels is not None:
            figure4_cells(s, cells, figures, human, base_labels)
    if "table5" in only:
        pool = got.of({"table5"}, [("pool", f"depth {s.depth}", 0)])
        if pool is not None:
            pool_cells(s, cells, figures, extras, runs, human, pool[0], ranking, collection)
    differ = differences(s, base, not_applied, measure_note, runs, run_files, collection, extras)
    extras["contradictions"] = paper_contradictions(published)
    extras["published_context"] = [c.as_dict() for c in published.table("table6")]
    frame = _flag_contradicted(cells.frame(), published, extras["contradictions"])
    return ReproduceResult(frame, figures, extras, tuple(differ), tuple(plan_rows),
                           not extras["not_computed"], stopped, {}, s.as_dict())
