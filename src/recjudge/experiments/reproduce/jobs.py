"""The judge jobs the chosen targets need (:func:`plan_jobs`): one judge configuration over a set of pairs each."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError
from .judges import field_sets, samples
from .settings import ReproduceSettings

@dataclass(frozen=True)
class JudgeJob:
    """One judge configuration over a set of pairs, for one job group and experiment."""

    group: str
    row: str
    experiment: int
    config: Any
    pairs: tuple

    @property
    def name(self) -> str:
        return f"{self.group}-{self.row}-e{self.experiment}".replace(" ", "_").replace("+", "_")


def plan_jobs(settings: ReproduceSettings, human, base, collection, pool_runs: Mapping | None = None
              ) -> list[JudgeJob]:
    """The judge jobs the chosen targets need, in the order they run. Every alignment and ranking
    target reads one sample per experiment, nested across K (Table 3's K = 50 items are among Table 9's
    K = 100), so the protocol's judge labels each pair once; the field sets, profile sizes and the
    defined-scale prompt then ask only what differs. The depth-100 pool is judged once."""
    from ...judging import select_pairs

    jobs: list[JudgeJob] = []
    groups = settings.job_groups()
    rows = field_sets(settings, collection)[0] if "fields" in groups else {}
    for e in range(settings.experiments):
        config = base.replace(seed=settings.seed + e)
        if "base" in groups:
            jobs.append(JudgeJob("base", f"K={settings.base_k()}", e, config,
                                 samples(settings, human, settings.base_k(), e)))
        sample = samples(settings, human, settings.per_user, e)
        if "fields" in groups:
            jobs += [JudgeJob("fields", row, e, config.replace(fields=fs), sample) for row, fs in rows.items()]
        if "profiles" in groups:
            jobs += [JudgeJob("profiles", f"profile {n}", e, config.replace(profile_size=n), sample)
                     for n in settings.profile_sizes]
        if "prompts" in groups:
            jobs.append(JudgeJob("prompts", "defined scale", e, config.replace(prompt=settings.defined_scale_prompt),
                                 samples(settings, human, settings.prompts_k(), e)))
    if "pool" in groups:
        if not pool_runs:
            raise ConfigError("Table 5 judges the systems' depth-100 pool: give --runs, or let reproduce train "
                              "the systems")
        pool = select_pairs(pool_runs, depth=settings.depth, users=set(human.frame.qid), seed=settings.seed)
        jobs.append(JudgeJob("pool", f"depth {settings.depth}", 0, base.replace(seed=settings.seed), tuple(pool)))
    return jobs
