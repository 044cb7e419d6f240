"""recjudge: Cranfield-style evaluation of recommender systems with LLM judges.

TREC I/O and the error classes are imported here; the verbs (``recjudge.compare``, ``recjudge.judge`` …)
and their settings load on first use from :mod:`recjudge.api`, so ``import recjudge`` stays light. The
judging machinery itself is the package :mod:`recjudge.judging`.
"""

from .data.trec import Qrel, Qrels, Run, RunRow, read_qrels, read_run, read_runs, resolve_ties, write_qrels, write_run
from .errors import ConfigError, InputError, MissingExtraError, RecjudgeError

__version__ = "0.1.0"

# the verbs and their settings, served by __getattr__ from recjudge.api on first use
_API = (
    "load_collection", "split", "train", "judge", "evaluate", "compare", "agreement", "fill", "ablate",
    "audit_ties", "compare_settings", "estimate", "EstimateSettings",
    "CompareSettings", "AgreementSettings", "EvaluateSettings", "FillSettings", "AblateSettings", "TrainSettings",
    "TiesSettings", "CompareSettingsSettings",
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
