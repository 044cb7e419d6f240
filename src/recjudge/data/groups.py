"""System groups (e.g. pooled / non-pooled systems, Penha et al. 2025 Table 1): read, and averaged over."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from .._io import Source, read_text
from ..errors import InputError

__all__ = ["read_groups", "groups_from_sidecars", "group_means"]


def read_groups(source: Source) -> dict[str, str]:
    """``system<TAB or spaces>group`` per line (``#`` starts a comment); a system listed twice is an error."""
    name, text = read_text(source, "groups file")
    groups: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise InputError(name, f"expected 'system group', found {len(parts)} fields",
                             "write one system and its group per line, e.g. 'BPR pooled'", line=number)
        system, group = parts
        if system in groups:
            raise InputError(name, f"system {system!r} is listed twice", "give each system one group", line=number)
        groups[system] = group
    if not groups:
        raise InputError(name, "no system is listed", "write one 'system group' per line")
    return groups


def groups_from_sidecars(run_files: Iterable[str | os.PathLike]) -> dict[str, str]:
    """The ``group`` that ``recjudge train`` recorded beside each run (runs without one are left out)."""
    from .trec import run_name

    out = {}
    for f in run_files:
        side = Path(f).parent / f"{run_name(f)}.json"
        try:
            group = json.loads(side.read_text(encoding="utf-8")).get("group")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(group, str) and group:
            out[run_name(f)] = group
    return out


def group_means(scores: pd.DataFrame, groups: Mapping[str, str], source: str = "--groups") -> pd.DataFrame:
    """Per group: the number of systems and the mean of each column of ``scores`` (systems × measures).

    Every system must have a group (a mean over part of a group would mislead); systems the groups name
    but the runs lack are left out.
    """
    missing = [s for s in scores.index if s not in groups]
    if missing:
        raise InputError(source, f"no group for systems {missing[:5]}" + (" …" if len(missing) > 5 else ""),
                         "list every evaluated system with its group")
    g = pd.Series([groups[s] for s in scores.index], index=scores.index, name="group")
    means = scores.groupby(g).mean()
    means.insert(0, "systems", scores.groupby(g).size())
    return means
