"""recjudge: Cranfield-style evaluation of recommender systems with LLM judges.

TREC I/O and the error classes are imported here, and recjudge's measures are registered with
ir-measures (``ir_measures.calc_aggregate([CompatHM(p=0.95), nDCG(dcg='exp-log2')@100], qrels, run)``
works after ``import recjudge``); the verbs (``recjudge.compare``, ``recjudge.judge`` …)
and their settings load on first use from :mod:`recjudge.api`, so ``import recjudge`` stays light. The
judging machinery itself is the package :mod:`recjudge.judging`.
"""

from typing import TYPE_CHECKING

from .data.trec import Qrel, Qrels, Run, RunRow, read_qrels, read_run, read_runs, write_qrels, write_run
from .evaluation import measures as _measures  # noqa: F401 - registers CompatHM and recjudge's provider with ir-measures
from .evaluation.ties.policy import resolve_ties
from .errors import ConfigError, InputError, MissingExtraError, RecjudgeError

__version__ = "0.1.0"

if TYPE_CHECKING:  # what static tools (IDEs, type checkers) read; at run time __getattr__ serves them
    from .api import *  # noqa: F403 - its __all__: the verbs and their settings

# the verbs and their settings, served by __getattr__ from recjudge.api on first use
_API = (
    "load_collection", "split", "train", "judge", "evaluate", "compare", "agreement", "fill", "ablate",
    "ties", "compare_settings", "audit_popularity", "audit_consistency", "audit_injection_scan", "audit_position",
    "audit_injection", "demo", "estimate", "EstimateSettings", "annotate", "AnnotateSettings",
    "CompareSettings", "AgreementSettings", "EvaluateSettings", "FillSettings", "AblateSettings", "TrainSettings",
    "TiesSettings", "SettingsComparisonSettings",
)

# TREC I/O: the part of recjudge.data.trec a user needs at the top level
_TREC = ("Run", "RunRow", "Qrels", "Qrel", "read_run", "read_runs", "read_qrels", "write_run", "write_qrels",
         "resolve_ties")

__all__ = ["__version__", "RecjudgeError", "InputError", "ConfigError", "MissingExtraError", *_TREC, *_API]


def __getattr__(name: str):
    if name in _API:
        from . import api

        value = getattr(api, name)
        globals()[name] = value  # later look-ups skip this hook
        return value
    raise AttributeError(f"module 'recjudge' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
