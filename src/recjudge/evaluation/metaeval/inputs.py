"""Names for the label sets a command reads, and the tie records ``recjudge train`` writes beside its runs."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence

__all__ = ["label_set_names", "export_tie_info"]


def _name_key(name: str) -> str:
    # two names that would give one figure file name (report slugs) collide too
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()


def label_set_names(names: Sequence[str], paths: Sequence[str | os.PathLike]) -> list[str]:
    """One output name per label set, for tables, JSON keys and figure names.

    ``names`` are the qrels names (:func:`recjudge.data.trec.read_qrels`: the file stem without .gz and
    .qrels), ``paths`` the files they came from, in input order (reference first). A name shared by
    several inputs (compared as letters and digits, ignoring case) is prefixed with each one's
    parent folder (``judgeA/llm``, ``judgeB/llm``); a name that still repeats gets ``-2``, ``-3``
    in input order.
    """
    from collections import Counter
    from pathlib import Path

    counts = Counter(_name_key(n) for n in names)
    named = []
    for name, path in zip(names, paths):
        parent = Path(path).resolve().parent.name  # resolved: "llm.qrels" has no parent in its text
        named.append(f"{parent}/{name}" if counts[_name_key(name)] > 1 and parent else name)
    out: list[str] = []
    seen: set[str] = set()
    for name in named:
        unique, k = name, 2
        while _name_key(unique) in seen:
            unique, k = f"{name}-{k}", k + 1
        seen.add(_name_key(unique))
        out.append(unique)
    return out


def export_tie_info(run_files: Sequence[str | os.PathLike]) -> dict[str, dict]:
    """Per run name: the tie handling recorded at export (``<run>.json`` beside a run from
    ``recjudge train``: tie_policy, tie_seed, tied_user_share before the policy), where present."""
    from ...data.trec import iter_run_files, run_name

    info: dict[str, dict] = {}
    for f in iter_run_files(run_files):
        side = f.parent / f"{run_name(f)}.json"
        if not side.is_file() or side.name == f.name:  # a ranx JSON run is no sidecar of itself
            continue
        try:
            meta = json.loads(side.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and "tie_policy" in meta:
            info[run_name(f)] = {"tie_policy": meta.get("tie_policy"), "tie_seed": meta.get("tie_seed"),
                                 "tied_user_share": meta.get("tied_user_share"), "k": meta.get("k")}
    return info
