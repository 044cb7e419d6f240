"""The judge registry: judges (the LLM judge, the offline baselines, yours) register themselves here,
and :func:`recjudge.judging.run.judge_pairs` runs the one the settings name."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..errors import ConfigError

if TYPE_CHECKING:  # annotations only
    from pathlib import Path

    import pandas as pd

    from .profile import ProfileSource
    from .select import Pair

__all__ = ["JudgeContext", "JudgeSpec", "register_judge", "get_judge", "judge_names",
           "BUILTIN_JUDGE_MODULES", "JUDGE_KINDS"]

JUDGE_KINDS = ("llm", "baseline")
# the modules whose import registers the built-in judges: imported by name on first lookup, so that
# neither they nor this module import each other in a cycle, and `import recjudge.judging` stays light
BUILTIN_JUDGE_MODULES = ("recjudge.judging.orchestrate", "recjudge.judging.baselines")


@dataclass(frozen=True)
class JudgeContext:
    """What a judge is given: the pairs, the collection, their profiles and the judge's settings (a
    :class:`~recjudge.judging.config.JudgeSettings`; not imported here, since the settings check their
    judge's name against this registry)."""

    pairs: tuple[Pair, ...]
    collection: Any
    profiles: ProfileSource
    config: Any
    cache_path: Path | None
    name: str
    history: pd.DataFrame | None = None
    progress: Callable[[str], None] | None = None


@dataclass(frozen=True)
class JudgeSpec:
    """A judge: ``kind`` is ``llm`` or ``baseline`` (a non-LLM reference, declared as such in outputs)."""

    name: str
    kind: str
    description: str
    run: Callable[[JudgeContext], Any]  # returns a JudgeResult


_JUDGES: dict[str, JudgeSpec] = {}


def register_judge(spec: JudgeSpec) -> JudgeSpec:
    """Add a judge; a second judge of the same name is refused."""
    if spec.name in _JUDGES:
        raise ConfigError(f"a judge named {spec.name!r} is already registered; choose another name")
    if spec.kind not in JUDGE_KINDS:
        raise ConfigError(f"judge kind must be 'llm' or 'baseline', got {spec.kind!r}")
    _JUDGES[spec.name] = spec
    return spec


def _load_builtin() -> None:
    for module in BUILTIN_JUDGE_MODULES:  # cheap once imported: sys.modules answers
        importlib.import_module(module)


def get_judge(name: str) -> JudgeSpec:
    _load_builtin()
    try:
        return _JUDGES[name]
    except KeyError:
        raise ConfigError(f"unknown judge {name!r}; choose one of {', '.join(judge_names())}") from None


def judge_names() -> tuple[str, ...]:
    """Every registered judge, LLM judges first, then by name: the CLI's --judge choices."""
    _load_builtin()
    return tuple(sorted(_JUDGES, key=lambda n: (_JUDGES[n].kind != "llm", n)))
