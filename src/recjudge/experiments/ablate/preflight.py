"""The grid's checks before any call: field sets, prices, each LLM endpoint's key, answer and model, the runs' users."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...data.trec import Qrels, Run
from ...errors import ConfigError, InputError
from ...judging.config import JudgeSettings
from .experiment import Experiment, Variant
from .jobs import table_of, variant_config, written

def _who(names: Sequence[str]) -> str:
    """The variants a problem concerns, briefly."""
    shown = ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"variant {shown}" if len(names) == 1 else f"variants {shown}"


def _blocking(make: Callable[[], Any]) -> Any:
    """``asyncio.run(make())``, on a thread of its own when called inside an event loop (a notebook)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


def endpoint_problems(exp: Experiment, llm: Sequence[tuple[Variant, JudgeSettings]],
                      say: Callable[[str], None]) -> list[tuple[str, str]]:
    """What the LLM variants' endpoints would refuse, found for free: each distinct endpoint's key is in
    its environment variable, the endpoint answers ``GET /v1/models`` (no generation, nothing paid) and
    lists the model when it lists models. (key, problem) pairs, one per problem with every variant it
    concerns, in the file's keys; what each probe found is said once."""
    from ...judging.client import ClientSettings, probe_endpoints
    from ...judging.dialects import get_dialect
    from ...judging.probe import describe, say_once

    groups: dict[tuple, list[tuple[Variant, JudgeSettings]]] = {}
    for var, config in llm:
        key = os.environ.get(config.api_key_env) or None
        sig = (key, config.api_key_env if key is None else None, config.endpoints(), config.model,
               config.endpoint_kind, config.timeout)
        groups.setdefault(sig, []).append((var, config))
    found_problems: dict[tuple[str, str], list[str]] = {}  # (key, problem) -> the variants it concerns
    for (key, _, urls, model, kind, timeout), members in groups.items():
        var, config = members[0]

        def add(at: str, problem: str, members=members) -> None:
            found_problems.setdefault((at, problem), []).extend(v.name for v, _ in members)

        env = config.api_key_env
        key_at, url_at, model_at = (f"{table_of(exp, var, f)}.{f}" for f in ("api_key_env", "base_url", "model"))
        unset = (f"the environment variable {env} is not set — export it, or name the variable that holds the "
                 f"key in {key_at}")
        if key is None and urls == (None,):  # the OpenAI API: nothing to ask without a key
            add(key_at, f" ({written(exp, var, config, 'api_key_env')}): {unset}")
            continue
        client = ClientSettings(model, urls if len(urls) > 1 else urls[0], key or "not-needed", timeout,
                                endpoint_kind=kind)
        try:
            found = _blocking(lambda: probe_endpoints(client))
        except ConfigError as exc:
            add(url_at, f": {exc}")
            continue
        for (public, info, why), url in zip(found, urls):
            status = info.models_status
            if status == 0:
                add(url_at, f": endpoint {public} does not answer GET /v1/models ({why}); start the server, or "
                            f"correct {written(exp, var, config, 'base_url')}")
            elif status in (401, 403):
                fix = unset if key is None else (f"the key in {env} is not one it takes — export a valid one, or "
                                                 f"name another variable in {key_at}")
                add(key_at, f": endpoint {public} refused the key (GET /v1/models answered HTTP {status}; "
                            f"{written(exp, var, config, 'api_key_env')}): {fix}")
            elif status == 200 and info.model_ids and model not in info.model_ids \
                    and not get_dialect(info.kind).any_model:
                listed = ", ".join(map(repr, info.model_ids[:10])) + (", ..." if len(info.model_ids) > 10 else "")
                add(model_at, f": endpoint {public} does not serve model {model!r} "
                              f"({written(exp, var, config, 'model')}); it lists {listed}: set {model_at} to one "
                              "of them")
            elif status not in (200, 404):  # 404: a server that lists no models, asked as it is
                add(url_at, f": endpoint {public} answered HTTP {status} to GET /v1/models; check "
                            f"{written(exp, var, config, 'base_url')}")
            elif say_once(url, note := describe(public, info)):
                say(note)
    return [(at, _who(list(dict.fromkeys(names))) + problem) for (at, problem), names in found_problems.items()]


def preflight(exp: Experiment, all_variants: Sequence[Variant], collection, history, reference: Qrels,
              runs: Mapping[str, Run], dry_run: bool, say: Callable[[str], None] | None = None) -> None:
    """Everything the grid needs, checked for every variant before the first call, in a dry run as in
    the real one: each field set against the collection's fields, each LLM variant's price when it sets
    a budget, its endpoint (the key in its environment variable, the server answering and serving the
    model: :func:`endpoint_problems`, free), and that the runs rank the reference's users. Every
    problem is listed at once, each with the key that set it, so a dry run finds them all."""
    from ...judging import HistoryProfiles, get_judge
    from ...judging.budget import load_models

    problems: list[tuple[str, str]] = []
    checked: set[tuple] = set()
    llm: list[tuple[Variant, JudgeSettings]] = []
    for var in all_variants:
        config = variant_config(exp, var)
        key = f"grid.{var.axis}" if var.axis in exp.grid else ("judge" if var.axis == "base" else "grid")
        if ("fields", config.fields) not in checked:
            checked.add(("fields", config.fields))
            try:  # the judge's own rule, on no history: what a profile of this field set needs
                HistoryProfiles(collection, config.fields, 1, history=history.iloc[:0], users=())
            except ConfigError as exc:
                problems.append((key, f"variant {var.name!r}: {exc}"))
        if config.dry_run or get_judge(config.judge).kind != "llm":
            continue
        if config.backend_name() in ("chat", "batch"):  # the OpenAI-compatible backends: their endpoints
            llm.append((var, config))
        marker = ("price", config.model, config.max_cost, config.prices)
        if config.max_cost is not None and marker not in checked:
            checked.add(marker)
            if load_models(config.prices).get(config.model) is None:
                at = f"{table_of(exp, var, 'max_cost')}.max_cost"
                problems.append((at, f"variant {var.name!r} ({written(exp, var, config, 'max_cost')}): no price "
                                     f"for model {config.model!r}, so the budget cannot be kept; add the model to a "
                                     f"price table named in {table_of(exp, var, 'prices')}.prices (USD per million "
                                     "tokens: input, cached_input, output), or remove max_cost"))
    # what the endpoints are goes where the judge's own notes go: the progress, else a warning
    problems += endpoint_problems(exp, llm, say or logging.getLogger(__name__).warning)
    if runs and not set(reference.qids) & {q for r in runs.values() for q in r.qids}:
        problems.append(("runs", f"no run ranks any user that the reference {exp.reference!r} judges, so every τ "
                                 "would compare zeros; give runs of the same users (query id = user id)"))
    if problems:
        listed = "\n".join(f"  - key {k!r}: {p}" for k, p in problems)
        raise InputError(exp.source, f"{len(problems)} problem(s) in the grid, found before any call:\n{listed}",
                         "fix each key named above; nothing was judged")


