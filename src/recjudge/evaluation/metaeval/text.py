"""The lines evaluate's and compare's results print beside their tables: the tie note, group means, wrapped prose."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ...report.terminal import prose

__all__ = ["wrapped", "tie_line", "groups_text", "groups_json", "estimate_hint"]


def wrapped(text: str, width: int = 100) -> str:
    """A paragraph wrapped to ``width``, its further lines indented four spaces."""
    return prose(text, width, indent="    ")


def estimate_hint(human: str, n_human: int, llm: str, n_llm: int) -> str:
    """The line pointing to ``recjudge estimate`` when human labels judge only some of the LLM's users."""
    return wrapped(f"{human} judges {n_human:,} of the {n_llm:,} users {llm} judges: `recjudge estimate` "
                   f"(--human {human}, --llm {llm}) estimates each system's mean under {human}'s labels over all "
                   f"{n_llm:,} users, with intervals")


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
