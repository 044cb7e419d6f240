"""Text for a terminal: tables and prose no wider than :data:`WIDTH` columns (the files a command
writes, CSV and JSON, keep every column)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import pandas as pd

__all__ = ["WIDTH", "table", "prose"]

WIDTH = 100


def table(rows: pd.DataFrame | Sequence[Sequence[str]], header: Sequence[str] | None = None,
          width: int = WIDTH) -> str:
    """``rows`` (a frame, or rows of cells under ``header``) as text whose lines fit ``width``: the
    first column names each row, and columns that do not fit go to further blocks under it (pandas
    wraps them, each block repeating the names)."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows), columns=list(header or ()))
    if frame.empty:
        return frame.to_string(index=False)
    frame = frame.set_index(frame.columns[0])
    frame.index.name = None
    # text cells right-aligned as numbers are; the row names left-aligned
    frame.index = [str(i).ljust(max(len(str(j)) for j in frame.index)) for i in frame.index]
    text = frame.to_string(line_width=width)
    return "\n".join(line.rstrip().removesuffix("\\").rstrip() for line in text.splitlines())


def prose(text: str, width: int = WIDTH, indent: str = "  ") -> str:
    """A paragraph wrapped to ``width``, its further lines indented."""
    return "\n".join(textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False))
