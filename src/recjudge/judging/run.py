"""Judging (user, item) pairs with the judge the settings name: profiles built, the judge's run called."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Callable, Iterable, Mapping

import pandas as pd

from ..errors import ConfigError
from .config import JudgeSettings
from .profile import HistoryProfiles, ProfileSource, QueryProfiles
from .registry import JudgeContext, get_judge
from .results import JudgeResult
from .select import Pair

__all__ = ["judge_pairs"]

log = logging.getLogger("recjudge.judging")


def judge_pairs(pairs: Iterable[Pair | tuple[str, str]], collection=None, config: JudgeSettings | None = None,
                *, cache_path: str | os.PathLike | None = None, history: pd.DataFrame | None = None,
                topics: Mapping[str, str] | None = None, topics_source: str = "<topics>",
                name: str = "judge", progress: Callable[[str], None] | None = None) -> JudgeResult:
    """Judge (user, item) pairs with the judge ``config.judge`` names.

    ``history`` is the interactions used as profiles (a split's ``train``; default: all of the
    collection's). ``topics`` (qid -> text) replaces histories with queries. ``cache_path`` is the
    SQLite cache that makes re-runs resume; without it answers are kept in memory only.
    """
    config = config or JudgeSettings()
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
    if spec.kind != "llm" and progress is not None:
        progress(f"plan: {len(pairs):,} pairs for the {config.judge} judge, offline: no calls are paid")
    ctx = JudgeContext(pairs, collection, profiles, config, Path(cache_path) if cache_path else None, name,
                       history, progress)
    result = spec.run(ctx)
    return _with_injection_check(result, collection, profiles)


def _with_injection_check(result: JudgeResult, collection, profiles: ProfileSource) -> JudgeResult:
    """Say in the summary (and the log) when judged candidates carry text that addresses the judge."""
    from .injection import check_injections

    fields = getattr(profiles, "fields", None)
    if result.summary.dry_run or not fields:
        return result
    check = check_injections(result.labels, collection, fields)
    if check is None:
        return result
    log.warning("%s", check.format())
    summary = dataclasses.replace(result.summary, injection={**check.as_dict(), "text": check.format()})
    return dataclasses.replace(result, summary=summary)
