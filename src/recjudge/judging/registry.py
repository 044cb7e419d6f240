"""The judge registry: judges (the LLM judge, the offline baselines, yours) register themselves here,
and :func:`judge_pairs` runs the one a config names."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pandas as pd

from ..errors import ConfigError
from .config import JudgeConfig
from .profile import HistoryProfiles, ProfileSource, QueryProfiles
from .results import JudgeResult
from .select import Pair

__all__ = ["JudgeContext", "JudgeSpec", "register_judge", "get_judge", "judge_names", "judge_pairs",
           "BUILTIN_JUDGE_MODULES", "JUDGE_KINDS"]

JUDGE_KINDS = ("llm", "baseline")
# the modules whose import registers the built-in judges: imported by name on first lookup, so that
# neither they nor this module import each other in a cycle, and `import recjudge.judging` stays light
BUILTIN_JUDGE_MODULES = ("recjudge.judging.orchestrate", "recjudge.judging.baselines")


@dataclass(frozen=True)
class JudgeContext:
    """What a judge is given: the pairs, the collection, their profiles and the config."""

    pairs: tuple[Pair, ...]
    collection: Any
    profiles: ProfileSource
    config: JudgeConfig
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
    run: Callable[[JudgeContext], JudgeResult]


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


def judge_pairs(pairs: Iterable[Pair | tuple[str, str]], collection=None, config: JudgeConfig | None = None,
                *, cache_path: str | os.PathLike | None = None, history: pd.DataFrame | None = None,
                topics: Mapping[str, str] | None = None, topics_source: str = "<topics>",
                name: str = "judge", progress: Callable[[str], None] | None = None) -> JudgeResult:
    """Judge (user, item) pairs with the judge ``config.judge`` names.

    ``history`` is the interactions used as profiles (a split's ``train``; default: all of the
    collection's). ``topics`` (qid -> text) replaces histories with queries. ``cache_path`` is the
    SQLite cache that makes re-runs resume; without it answers are kept in memory only.
    """
    config = config or JudgeConfig()
    spec = get_judge(config.judge)
    pairs = tuple(Pair(str(q), str(d)) for q, d in pairs)
    if len(set(pairs)) != len(pairs):
        raise ConfigError("the pairs to judge hold duplicates; select them with select_pairs")
    if collection is None:
        raise ConfigError("judging needs a collection (item metadata)")
    if topics is not None:
        profiles: ProfileSource = QueryProfiles(topics, collection, config.fields, source=topics_source)
    else:
        profiles = HistoryProfiles(collection, config.fields, config.profile_size, history=history,
                                   sampling=config.sampling, seed=config.seed, users={p.qid for p in pairs},
                                   order=config.history_order)
    ctx = JudgeContext(pairs, collection, profiles, config, Path(cache_path) if cache_path else None, name,
                       history, progress)
    return spec.run(ctx)
