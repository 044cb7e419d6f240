"""TREC runs and qrels, one module per job.

- :mod:`.records`: :class:`Run`, :class:`Qrels` and their coded tables, rows as typed tuples, the
  rules every run and qrels obeys;
- :mod:`.reading`: one reader for runs and qrels (path, .gz, file object or inline string);
- :mod:`.writing`: the writers (atomic; .gz compressed);
- :mod:`.discovery`: which files of a runs folder are runs, and each run's name;
- :mod:`.hashing`: the disclosed hash of (seed, user, item).

The tie policy (:func:`resolve_ties`, :func:`ensure_tie_free`, the score order) lives with the tie
code in :mod:`recjudge.evaluation.ties.policy`; its names are importable from here too.
"""

from __future__ import annotations

import importlib

from .discovery import COMPANION_SUFFIXES, iter_run_files, run_paths
from .hashing import hash_keys, seeded_hash_keys, string_hashes
from .reading import IdDictionary, read_qrels, read_run, read_runs
from .records import (MAX_LABEL, RUN_SUFFIXES, TIE_POLICIES, FrameCodes, Qrel, Qrels, QrelsTable, Run, RunRow,
                      RunTable, sorted_codes, frame_codes, run_name)
from .writing import write_qrels, write_run

_POLICY = ("ScoreOrder", "score_order", "resolve_ties", "ensure_tie_free", "is_tie_free", "top_k", "tied_user_share",
           "order_rows", "block_starts")

__all__ = [
    "RunRow",
    "Qrel",
    "Run",
    "Qrels",
    "TIE_POLICIES",
    "MAX_LABEL",
    "read_run",
    "read_runs",
    "read_qrels",
    "write_run",
    "write_qrels",
    "resolve_ties",
    "ensure_tie_free",
    "is_tie_free",
    "top_k",
    "tied_user_share",
    "run_name",
    "hash_keys",
    "string_hashes",
    "seeded_hash_keys",
    "FrameCodes",
    "frame_codes",
    "RunTable",
    "QrelsTable",
    "ScoreOrder",
    "score_order",
    "IdDictionary",
    "available_readers",
    "iter_run_files",
    "order_rows",
    "run_paths",
    "RUN_SUFFIXES",
    "COMPANION_SUFFIXES",
]


def available_readers() -> list[str]:
    """The readers this install has: one, polars' CSV parser, on every install."""
    return ["polars"]


def __getattr__(name: str):
    # the tie policy moved next to the tie code; loaded on first use (it imports these records)
    if name in _POLICY:
        return getattr(importlib.import_module("recjudge.evaluation.ties.policy"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
