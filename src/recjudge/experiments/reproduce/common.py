"""What every table family of the reproduction shares: labels cut to a sample, means over experiments
with their interval, a job's labels or the targets it leaves not computed."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from ...data.trec import Qrels
from ...evaluation.baselines import DEFAULT_DRAWS
from ..ablate import across_experiments
from .cells import Cells

TRIVIAL_DRAWS = DEFAULT_DRAWS  # random draws of the trivial judges shown beside Tables 3, 4, 8, 9 and Figure 3

def restrict(qrels: Qrels, pairs: Sequence, name: str | None = None) -> Qrels:
    """``qrels`` cut down to the (qid, docid) ``pairs``."""
    wanted = pd.DataFrame(list(pairs), columns=["qid", "docid"]).astype(str)
    return Qrels.from_frame(qrels.frame.merge(wanted, on=["qid", "docid"]), name or qrels.name)


def mean_of(values: Sequence[float]) -> float:
    """The mean of the finite values (NaN when none: a τ over constant scores is undefined)."""
    return across_experiments(values).mean


def ci_note(values: Sequence[float], bounds: tuple[float, float] = (-1.0, 1.0), scale: float = 1.0) -> str:
    lo, hi = across_experiments(values, bounds=bounds).ci
    if math.isnan(lo):
        return f"{len(values)} experiment" + ("s" if len(values) != 1 else "")
    unit = "%" if scale == 100.0 else ""
    return f"mean of {len(values)} experiments, 95% CI [{lo * scale:.4f}{unit}, {hi * scale:.4f}{unit}]"


def add_mean(cells: Cells, target: str, row: str, column: str, values: Sequence[float],
             published_as: tuple[str, str, str] | None = None, note: str = "") -> None:
    """A cell that is a mean over experiments, its CI stated on the published cell's scale (percent or share)."""
    cell = cells.published.cell(*(published_as or (target, row, column)))
    percent = cell is not None and cell.unit == "percent"
    # the interval is built on the shares' own range, then shown on the cell's scale (scaling first
    # put the values outside the τ-sized default bounds and lost the interval)
    text = ci_note(values, bounds=(0.0, 1.0), scale=100.0) if percent else ci_note(values)
    cells.add(target, row, column, mean_of(values), text + (f"; {note}" if note else ""), published_as)


def short_name(measure: str) -> str:
    for name in ("Compat", "nDCG", "Bpref", "Judged"):
        if measure.startswith(name):
            return name
    return measure


def published_cell_exists(cells: Cells, key: tuple[str, str, str]) -> bool:
    return cells.published.cell(*key) is not None


class Labels:
    """The judge's labels by job key (group, row, experiment); a target whose labels are not all there is
    listed as not computed (judging stopped) rather than computed from part of them."""

    def __init__(self, labels: Mapping[tuple[str, str, int], Qrels | None], stopped: str | None,
                 not_computed: dict[str, str]):
        self.labels, self.stopped, self.not_computed = labels, stopped, not_computed

    def of(self, targets: set[str], keys: Sequence[tuple]) -> list | None:
        """The labels of ``keys``, or None (and each target said not computed) when any is missing."""
        absent = [k for k in keys if self.labels.get(k) is None]
        if absent:
            for t in sorted(targets):
                self.not_computed[t] = (f"judging stopped ({self.stopped or 'no labels'}) before {len(absent)} of "
                                        f"its {len(keys)} judge jobs finished; run the same command again to "
                                        "resume from the cache")
            return None
        return [self.labels[k] for k in keys]
