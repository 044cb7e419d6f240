"""The cells of a reproduction: each computed value beside its published one, and the result they make."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .plan import PlanRow

if TYPE_CHECKING:
    import pandas as pd

@dataclass(frozen=True, eq=False)
class ReproduceResult:
    """Every computed cell (with its published value), the figures' data, and where the report is."""

    cells: pd.DataFrame                      # target, row, column, ours, published, difference, inside, note
    figures: Mapping[str, Any]
    extras: Mapping[str, Any]
    differences: tuple[Mapping[str, str], ...]
    plan: tuple[PlanRow, ...]
    complete: bool
    stopped: str | None
    paths: Mapping[str, Path] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    plan_text: str = ""


CELL_COLUMNS = ["target", "row", "column", "ours", "published", "published_value", "difference", "inside",
                "cite", "note", "unit"]


class Cells:
    """Computed cells collected beside their published values."""

    def __init__(self, published):
        self.published = published
        self.rows: list[dict] = []

    def add(self, target: str, row: str, column: str, ours: float | None, note: str = "",
            published_as: tuple[str, str, str] | None = None) -> None:
        """A cell of ``target``; its published value is the cell (target, row, column) of the published
        file, or ``published_as`` where the paper prints it elsewhere (e.g. in the text)."""
        from ..published import NOT_PUBLISHED

        cell = self.published.cell(*(published_as or (target, row, column)))
        pub = None if cell is None else cell.value
        value = None if ours is None or (isinstance(ours, float) and math.isnan(ours)) else float(ours)
        if value is not None and cell is not None:
            value = cell.comparable(value)  # on the published cell's scale
        diff = None if value is None or pub is None else value - pub
        self.rows.append({"target": target, "row": row, "column": column, "ours": value,
                          "published": NOT_PUBLISHED if cell is None else cell.shown(), "published_value": pub,
                          "difference": diff, "inside": None if cell is None else cell.inside(value),
                          "cite": "" if cell is None else cell.cite, "note": note,
                          "unit": "share" if cell is None else cell.unit})

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows, columns=CELL_COLUMNS)
