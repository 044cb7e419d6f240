"""Published numbers as data: a study's cells (table, row, column, value, citation) read and checked.

Each shipped file (``<name>.toml`` here) holds the numbers the study prints, one ``[[cell]]``
each, with the printed ± of its confidence interval where there is one; a cell the reproduction
computes but whose value the study does not print is absent or marked ``status = "unknown"``, and
:meth:`Published.value` answers None for both, so a report can say "not published in our data"
instead of comparing with an invented number.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ConfigError, InputError

__all__ = [
    "NOT_PUBLISHED",
    "RELATIONS",
    "UNITS",
    "Published",
    "PublishedCell",
    "load_published",
    "published_names",
]

PUBLISHED_DIR = Path(__file__).parent
UNITS = ("share", "percent", "count", "rank", "tokens", "label", "p", "number", "CAD")
RELATIONS = ("=", "<", ">=", "max", "approx")
NOT_PUBLISHED = "not published in our data"
_CELL_KEYS = {"table", "row", "column", "value", "status", "unit", "relation", "cite", "ci"}
_HEADER_KEYS = {"name", "title", "quoted_from", "cell"}


@dataclass(frozen=True)
class PublishedCell:
    """One published number (``value`` None: the cell exists but its value is not in our data)."""

    table: str
    row: str
    column: str
    value: float | None
    cite: str
    unit: str = "share"
    relation: str = "="
    ci: float | None = None   # the printed ± (half-width of the 95% confidence interval)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.table, self.row, self.column)

    def comparable(self, ours: float) -> float:
        """``ours`` (a share 0-1 for percent cells) on the published cell's scale."""
        return ours * 100.0 if self.unit == "percent" else ours

    def shown(self) -> str:
        """The value as the paper prints it (with its relation), or the unknown marker."""
        if self.value is None:
            return NOT_PUBLISHED
        v = self.value
        text = f"{v:,.0f}" if self.unit in ("count", "tokens", "rank", "CAD") else f"{v:g}"
        if self.ci is not None:
            text += f" ± {self.ci:g}"
        if self.unit == "percent":
            text += "%"
        elif self.unit == "CAD":
            text = f"${text} CAD"
        return {"<": f"< {text}", ">=": f"≥ {text}", "max": f"up to {text}",
                "approx": f"~{text}"}.get(self.relation, text)

    def inside(self, ours: float | None) -> bool | None:
        """Whether ``ours`` (on this cell's scale) lies within the printed ± or meets the printed
        bound of a p-value; None where the paper prints neither (or there is no value to check)."""
        if ours is None or self.value is None or math.isnan(ours):
            return None
        if self.ci is not None:
            return abs(ours - self.value) <= self.ci + 1e-12
        if self.unit == "p" and self.relation == "<":
            return ours < self.value
        return None

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "row": self.row, "column": self.column, "value": self.value,
                "unit": self.unit, "relation": self.relation, "ci": self.ci, "cite": self.cite}


@dataclass(frozen=True)
class Published:
    """A study's published cells, keyed by (table, row, column)."""

    name: str
    title: str
    quoted_from: str
    path: str
    cells: Mapping[tuple[str, str, str], PublishedCell]

    def cell(self, table: str, row: str, column: str) -> PublishedCell | None:
        return self.cells.get((table, row, column))

    def value(self, table: str, row: str, column: str) -> float | None:
        """The published value, or None when the cell is absent or marked unknown."""
        c = self.cell(table, row, column)
        return None if c is None else c.value

    def table(self, table: str) -> list[PublishedCell]:
        return [c for c in self.cells.values() if c.table == table]

    def tables(self) -> list[str]:
        return sorted({c.table for c in self.cells.values()})


def published_names() -> list[str]:
    """The studies whose published numbers ship with recjudge."""
    return sorted(p.stem for p in PUBLISHED_DIR.glob("*.toml"))


def _cell_lines(text: str) -> list[int]:
    """The line of each ``[[cell]]`` header, so errors name the line of the cell at fault."""
    return [i + 1 for i, line in enumerate(text.splitlines()) if re.match(r"\s*\[\[\s*cell\s*\]\]", line)]


def load_published(name_or_path: str | os.PathLike = "penha2025") -> Published:
    """A shipped study by name (``penha2025``) or a file of the same shape, validated as a whole."""
    from ..._io import read_text, read_toml

    text = str(name_or_path)
    path = Path(text)
    if path.suffix != ".toml" and os.sep not in text and not path.exists():
        path = PUBLISHED_DIR / f"{text}.toml"
        if not path.is_file():
            raise ConfigError(f"no published numbers for {text!r}; shipped: {', '.join(published_names())}")
    src = str(path)
    data = read_toml(path, "published-values file")
    lines = _cell_lines(read_text(path, "published-values file")[1])
    unknown = sorted(set(data) - _HEADER_KEYS)
    if unknown:
        raise InputError(src, f"unknown top-level key(s) {', '.join(unknown)}",
                         f"use only {', '.join(sorted(_HEADER_KEYS))}")
    for key in ("name", "title", "quoted_from"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise InputError(src, f"missing or empty key {key!r}", f'add {key} = "..." at the top of the file')
    raw = data.get("cell")
    if not isinstance(raw, list) or not raw:
        raise InputError(src, "no [[cell]] tables", "add one [[cell]] table per published number")
    cells: dict[tuple[str, str, str], PublishedCell] = {}
    for n, entry in enumerate(raw):
        line = lines[n] if n < len(lines) else None
        cell = _cell(entry, src, line)
        if cell.key in cells:
            raise InputError(src, f"cell {'/'.join(cell.key)} is given twice", "keep one of them", line=line)
        cells[cell.key] = cell
    return Published(data["name"], data["title"], data["quoted_from"], src, cells)


def _cell(entry: Any, src: str, line: int | None) -> PublishedCell:
    def bad(problem: str, fix: str) -> InputError:
        return InputError(src, problem, fix, line=line)

    if not isinstance(entry, dict):
        raise bad("a cell is not a table", "write each cell as a [[cell]] table")
    extra = sorted(set(entry) - _CELL_KEYS)
    if extra:
        raise bad(f"unknown cell key(s) {', '.join(extra)}", f"use only {', '.join(sorted(_CELL_KEYS))}")
    for key in ("table", "row", "column", "cite"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise bad(f"missing or empty key {key!r}", f'add {key} = "..." to the cell')
    has_value, status = "value" in entry, entry.get("status")
    if has_value == (status == "unknown"):
        raise bad("a cell needs exactly one of value = NUMBER or status = \"unknown\"",
                  "give the published number, or mark the cell unknown")
    if status not in (None, "unknown"):
        raise bad(f"status = {status!r}", 'the only status is "unknown"')
    value = entry.get("value")
    if has_value and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)):
        raise bad(f"value = {value!r} is not a number", "write the number as the paper prints it, e.g. 0.5981")
    unit, relation = entry.get("unit", "share"), entry.get("relation", "=")
    if unit not in UNITS:
        raise bad(f"unit = {unit!r}", f"use one of {', '.join(UNITS)}")
    if relation not in RELATIONS:
        raise bad(f"relation = {relation!r}", f"use one of {', '.join(RELATIONS)}")
    if has_value and unit == "share" and not -1.0 <= value <= 1.0:
        raise bad(f"value = {value} is outside [-1, 1] for a share or correlation",
                  'give unit = "percent" (or another unit) for a number on another scale')
    ci = entry.get("ci")
    if ci is not None and (isinstance(ci, bool) or not isinstance(ci, (int, float)) or not math.isfinite(ci)
                           or ci < 0 or not has_value):
        raise bad(f"ci = {ci!r} is not the ± of a printed value",
                  "give the half-width of the printed interval (a number ≥ 0) beside value")
    return PublishedCell(entry["table"], entry["row"], entry["column"], float(value) if has_value else None,
                         entry["cite"], unit, relation, None if ci is None else float(ci))
