"""TREC runs and qrels, one module per job.

- :mod:`.records`: :class:`Run`, :class:`Qrels` and their coded tables, rows as typed tuples, the
  rules every run and qrels obeys;
- :mod:`.reading`: one reader for runs and qrels (path, .gz, file object or inline string), from
  :mod:`.sources` (where the bytes come from), :mod:`.parsing` (polars' parse into coded columns),
  :mod:`.careful` (line by line, naming the first fault), :mod:`.tables` (tables with a header and
  ranx's JSON) and :mod:`.fields` (what a field may hold);
- :mod:`.dictionary`: the docids shared by the runs of one evaluation (:class:`IdDictionary`);
- :mod:`.writing`: the writers (atomic; .gz compressed);
- :mod:`.discovery`: which files of a runs folder are runs, and each run's name;
- :mod:`.hashing`: the disclosed hash of (seed, user, item).

The tie policy (:func:`~recjudge.evaluation.ties.policy.resolve_ties`, ``ensure_tie_free``, the
score order) lives with the tie code in :mod:`recjudge.evaluation.ties.policy`.
"""

from __future__ import annotations

from .dictionary import IdDictionary
from .discovery import COMPANION_SUFFIXES, iter_run_files, run_paths
from .hashing import hash_keys, seeded_hash_keys, string_hashes
from .reading import read_qrels, read_run, read_runs
from .records import (MAX_LABEL, RUN_SUFFIXES, TIE_POLICIES, FrameCodes, Qrel, Qrels, QrelsTable, Run, RunRow,
                      RunTable, frame_codes, run_name, sorted_codes, string_rank)
from .writing import write_qrels, write_run

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
    "run_name",
    "hash_keys",
    "string_hashes",
    "seeded_hash_keys",
    "FrameCodes",
    "frame_codes",
    "sorted_codes",
    "string_rank",
    "RunTable",
    "QrelsTable",
    "IdDictionary",
    "available_readers",
    "iter_run_files",
    "run_paths",
    "RUN_SUFFIXES",
    "COMPANION_SUFFIXES",
]


def available_readers() -> list[str]:
    """The readers this install has: one, polars' CSV parser, on every install."""
    return ["polars"]

