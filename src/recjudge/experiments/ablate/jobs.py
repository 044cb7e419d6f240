"""The grid's job list: each variant's judge settings (refusals in the file's keys) and its seeds per experiment."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

from ...data.trec import Qrels
from ...judging.config import JudgeSettings
from ...settings import FILE, MAX_SEED
from .experiment import Experiment, Variant


def jobs(exp: Experiment, all_variants: Sequence[Variant]) -> Iterator[tuple[int, Variant, int, int, int]]:
    """(variant number, variant, experiment, pairs seed, history seed) of every judge run, in run order."""
    for n, var in enumerate(all_variants, start=1):
        history_base = variant_config(exp, var).seed
        for e in range(exp.experiments):
            yield n, var, e, derive_seed(exp.seed, e, "pairs"), derive_seed(history_base, e, "history")


def derive_seed(base: int, index: int, purpose: str) -> int:
    """The seed of experiment ``index`` (0-based) for one purpose ("pairs", "history").

    Experiment 0 keeps ``base``, so one experiment is exactly the run without ``experiments``; the
    others take 63 bits of SHA-256 over (purpose, base, index): fixed by those three alone, so
    experiment 2's sample is the same whether N is 3 or 10.
    """
    if index == 0:
        return int(base)
    digest = hashlib.sha256(f"recjudge-experiment\x1f{purpose}\x1f{base}\x1f{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & MAX_SEED


def sampled_pairs(reference: Qrels, per_user: int, seed: int):
    """K judged items per user from those ``reference`` labels: one seeded hash order per user cut at K,
    so the K = 10 sample is the first 10 of the K = 50 sample under the same seed (nested)."""
    from ...judging import select_pairs

    return select_pairs(reference=reference, per_user=per_user, seed=seed)




def table_of(exp: Experiment, var: Variant, field: str) -> str:
    """The table of the experiment file that sets a variant's judge setting ``field``: grid or judge."""
    return "grid" if field in exp.grid and field in var.axis.split("+") else "judge"


def variant_config(exp: Experiment, var: Variant, **changes: Any) -> JudgeSettings:
    """A variant's judge settings (with ``changes``), whose refusals name each setting by the key of
    the experiment file that sets it (``key 'judge.api_key_env'``, ``key 'grid.fields'``)."""
    names = {f: f"key '{table_of(exp, var, f)}.{f}'" for f in JudgeSettings.model_fields}
    return JudgeSettings.build({**var.settings, **changes}, spelled=FILE, names=names)


def written(exp: Experiment, var: Variant, config: JudgeSettings, field: str) -> str:
    """A judge setting as the file writes it: ``judge.model = 'gpt-4o-mini'``, or the default it left."""
    value = getattr(config, field)
    if field == "base_url":  # as it may be shown: no secret of a query string
        from ...urls import public_url

        value = public_url(value) if isinstance(value, str) or value is None else [public_url(u) for u in value]
    return f"{table_of(exp, var, field)}.{field} = {value!r}" + ("" if field in var.settings else ", the default")


