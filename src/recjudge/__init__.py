"""recjudge: Cranfield-style evaluation of recommender systems with LLM judges."""

from .data.trec import Qrel, Qrels, Run, RunRow, read_qrels, read_run, read_runs, resolve_ties, write_qrels, write_run
from .errors import ConfigError, InputError, MissingExtraError, RecjudgeError

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "RecjudgeError",
    "InputError",
    "ConfigError",
    "MissingExtraError",
    "Run",
    "RunRow",
    "Qrels",
    "Qrel",
    "read_run",
    "read_runs",
    "read_qrels",
    "write_run",
    "write_qrels",
    "resolve_ties",
]
