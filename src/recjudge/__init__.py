"""recjudge: Cranfield-style evaluation of recommender systems with LLM judges.

TREC I/O and the error classes are imported here; the verbs (``recjudge.compare`` …) and their
configs load on first use from :mod:`recjudge.api`, so ``import recjudge`` stays light.
"""

import importlib
import sys
import types

from .data.trec import Qrel, Qrels, Run, RunRow, read_qrels, read_run, read_runs, resolve_ties, write_qrels, write_run
from .errors import ConfigError, InputError, MissingExtraError, RecjudgeError

__version__ = "0.1.0"

# the verbs and their settings, served by __getattr__ from recjudge.api on first use
_API = (
    "load_collection", "split", "train", "judge", "evaluate", "compare", "agreement", "fill", "ablate",
    "audit_ties", "compare_settings",
    "CompareSettings", "AgreementSettings", "EvaluateSettings", "FillSettings", "AblateSettings", "TrainSettings",
    "TiesSettings", "CompareSettingsSettings",
)

# TREC I/O: the part of recjudge.data.trec a user needs at the top level
_TREC = ("Run", "RunRow", "Qrels", "Qrel", "read_run", "read_runs", "read_qrels", "write_run", "write_qrels",
         "resolve_ties")

__all__ = ["__version__", "RecjudgeError", "InputError", "ConfigError", "MissingExtraError", *_TREC, *_API]


class _JudgeVerb:
    """``recjudge.judge``: the ``judge`` verb when called, the ``recjudge.judge`` package otherwise.

    The verb and the package share a name, and importing the package sets ``recjudge.judge`` to
    it; this object answers both ways, so ``recjudge.judge(...)`` judges and
    ``recjudge.judge.JudgeConfig`` (or ``import recjudge.judge as j``) still reaches the package.
    """

    __slots__ = ()

    @property
    def __dict__(self):  # the package's namespace, so tools that read __dict__ (pytest's monkeypatch) see it
        return vars(importlib.import_module(f"{__name__}.judge"))

    def __call__(self, *args, **kwargs):
        from .api import judge

        return judge(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(importlib.import_module(f"{__name__}.judge"), name)

    def __setattr__(self, name: str, value) -> None:  # e.g. monkeypatch.setattr("recjudge.judge.X", …)
        setattr(importlib.import_module(f"{__name__}.judge"), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(importlib.import_module(f"{__name__}.judge"), name)

    def __dir__(self) -> list[str]:
        return dir(importlib.import_module(f"{__name__}.judge"))

    def __repr__(self) -> str:
        return "<recjudge.judge: the judge verb and package>"


class _Package(types.ModuleType):
    # a data descriptor on the module's class wins over the package the import system assigns
    @property
    def judge(self) -> _JudgeVerb:
        return _JUDGE

    @judge.setter
    def judge(self, package: types.ModuleType) -> None:
        pass  # the package stays reachable through sys.modules and _JUDGE's attributes


_JUDGE = _JudgeVerb()
sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):
    if name in _API:
        from . import api

        value = getattr(api, name)
        globals()[name] = value  # later look-ups skip this hook
        return value
    raise AttributeError(f"module 'recjudge' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
