"""The study's judge and samples: the protocol's judge settings, Table 3's field sets, each experiment's
K items per participant, and what makes two jobs' prompts the same."""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from .settings import FIELD_ROWS, ReproduceSettings, protocol_settings

# judge settings that change neither a prompt nor its answer: they stay out of a job's identity
_NOT_PROMPT = {"concurrency", "timeout", "max_attempts", "backoff_initial", "backoff_max", "max_calls",
               "max_cost", "prices", "batch", "batch_poll", "dry_run", "drain_grace", "endpoint_cooldown",
               "backend", "api_key_env", "context_tokens", "yes", "confirm_above_usd",
               "confirm_above_calls", "parse_retries", "stop_after_first", "stop_window", "stop_share"}


def training_positives(settings: ReproduceSettings) -> float:
    """The rating at or above which a rating trains the systems (0: every rating)."""
    if settings.min_rating is not None:
        return float(settings.min_rating)
    return float(protocol_settings("train").get("min_rating") or 0.0)


def base_judge(settings: ReproduceSettings) -> tuple[Any, dict[str, Any]]:
    """The protocol's judge as a JudgeSettings with this run's overrides; and the protocol settings this
    recjudge's judge has no field for (reported, never silently dropped)."""
    from ...judging import JudgeSettings

    known = set(JudgeSettings.model_fields)
    values, params, not_applied = {}, {}, {}
    for key, value in protocol_settings("judge").items():
        if key in known:
            values[key] = value
        elif key == "reasoning_effort":
            params["reasoning_effort"] = value
        elif key != "split":  # the judge command's split: reproduce judges participants on their whole history
            not_applied[key] = value
    if params:
        values["params"] = params
    overrides = {"model": settings.model, "base_url": settings.base_url, "profile_size": settings.profile_size,
                 "fields": settings.fields, "prices": settings.prices, "context_tokens": settings.context_tokens,
                 "prompt": settings.prompt}
    values.update({k: v for k, v in overrides.items() if v is not None})
    values.update(concurrency=settings.concurrency, seed=settings.seed)
    return JudgeSettings.from_dict(values), not_applied


def prompt_identity(config) -> tuple:
    """What makes two jobs' prompts (and answers) the same, apart from the pair."""
    return tuple((name, repr(getattr(config, name))) for name in type(config).model_fields
                 if name not in _NOT_PROMPT)


def field_sets(settings: ReproduceSettings, collection) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Table 3's rows: {paper row: field set} for the rows the collection can show, and the rows it
    cannot (row → missing fields); field sets given explicitly must all be shown (each is its own row,
    named by the paper where it is one of the paper's)."""
    from ...judging.profile import DERIVED_FIELDS, parse_fields

    have = set(collection.fields) | set(DERIVED_FIELDS)
    by_set = {fs: row for row, fs in FIELD_ROWS.items()}
    wanted = {by_set.get(fs, fs): fs for fs in settings.field_sets} if settings.field_sets else dict(FIELD_ROWS)
    usable, skipped = {}, {}
    for row, fs in wanted.items():
        lacking = [f for f in parse_fields(fs, collection.fields) if f not in have] if fs != "all" else []
        if not lacking:
            usable[row] = fs
        elif settings.field_sets:
            raise ConfigError(f"--field-sets {fs}: the collection has no {', '.join(lacking)} field; its fields are "
                              f"{', '.join(collection.fields)}")
        else:
            skipped[row] = lacking
    return usable, skipped


def samples(settings: ReproduceSettings, human, k: int, experiment: int) -> tuple:
    """Experiment ``experiment``'s K random human-judged items per participant (nested across K)."""
    from ...judging import select_pairs

    return select_pairs(reference=human, per_user=k, seed=settings.seed + experiment)
