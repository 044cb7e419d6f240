"""The lines evaluate's and compare's results print beside their tables: the tie note, group means, wrapped prose."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ...report.terminal import prose

__all__ = ["wrapped", "tie_line", "groups_text", "groups_json"]


def wrapped(text: str, width: int = 100) -> str:
    """A paragraph wrapped to ``width``, its further lines indented four spaces."""
    return prose(text, width, indent="    ")


def tie_line(tie_sensitivity: Mapping | None) -> str:
    """The tie note's one line (recjudge.evaluation.ties.note), when the ties could change the result."""
    note = (tie_sensitivity or {}).get("note")
    return f"\n{wrapped(note)}" if note else ""


def groups_text(groups: pd.DataFrame | None) -> str:
    """The means per system group, under the table ('' without groups)."""
    if groups is None:
        return ""
    return "\n\nmeans per system group:\n" + groups.round(4).to_string()


def groups_json(data: dict, groups: pd.DataFrame | None) -> dict:
    """``data`` with the means per system group as records, when there are groups."""
    if groups is None:
        return data
    return {**data, "groups": groups.reset_index().to_dict(orient="records")}
