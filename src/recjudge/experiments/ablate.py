"""Ablations: one experiment file, one row per judge variant (Penha et al. 2025, Tables 3, 4, 8, 9).

An experiment file (TOML) names a collection, the reference labels, the runs, a base judge
configuration and a grid of variants::

    name = "metadata-fields"
    collection = "ml-100k"
    reference = "historical:rating"      # or a qrels path
    runs = "runs/ml-100k"                # for system-ranking τ (optional; a path or a list of paths)
    out = "out/ablate-fields"
    per_user = 20                        # K: judged items per user, sampled from the reference
    experiments = 3                      # N independent experiments, averaged (default 1)
    mode = "one-at-a-time"               # or "product"

    [judge]                              # the base variant (any JudgeSettings setting)
    judge = "overlap"
    fields = "title+genres"

    [grid]                               # values to try, axis by axis
    fields = ["title", "title+genres", "all"]
    profile_size = [10, 50, 100]

Every variant judges the same kind of pairs — K items per user sampled (seeded) from those the
reference judges, the alignment setting — so agreement isolates the judge. The K samples are
nested: with one seed, a user's K = 10 items are the first 10 of its K = 50 items (one seeded hash
order per user, cut at K). Item-level agreement is measured on the sampled pairs; system-ranking τ
compares the rankings under the variant's labels with the rankings under the COMPLETE reference
qrels (every label it holds, not only the sampled pairs), as the paper's Tables 4 and 9 do.

``experiments = N`` repeats the whole experiment N times, each with its own sample of judged items
and of history items (seeds derived from ``seed``, recorded in the output; experiment 1 uses
``seed`` itself, so N = 1 is the single run). Every metric is the mean over the N experiments with a
95% t-interval across them on the Fisher-z scale of its range, so it stays in it (none for N = 1).
This is not the judge's ``repeats``, which asks the same prompt R times within one experiment. Identical prompts across variants are judged once
(shared SQLite cache); ``dry_run`` counts calls and estimated tokens per variant before anything is
spent, after the checks the real run makes first (:func:`preflight`): each LLM endpoint's key, its
answer to a free probe and the model it serves. The endpoints are probed once for the whole grid.

The file is validated as a whole when it is loaded (:meth:`Experiment.from_dict`): unknown keys,
a value of the wrong type, an unknown judge, metadata field, prompt, split or measure, and a
variant the judge would refuse are errors naming the file and the key, before anything is read
or judged.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Literal, NamedTuple

import numpy as np
import pandas as pd

from pydantic import Field, ValidationError, field_validator, model_validator
from typing_extensions import Annotated

from .._io import atomic_write, check_output_dir, check_outputs, read_toml, write_json
from ..data.trec import Qrels, Run
from ..errors import ConfigError, InputError
from ..judging.config import JudgeSettings
from ..evaluation.baselines import DEFAULT_DRAWS
from ..report.evaluation import CI_FLAG
from ..data.splits import SplitName
from ..settings import (FILE, MAX_SEED, PYTHON, Cli, Count, PathText, Positive, Seed, Settings, TiePolicy, checked,
                        option)

__all__ = ["Estimate", "Experiment", "ExperimentOutcome", "VariantRow", "across_experiments", "derive_seed",
           "endpoint_problems", "load_experiment", "preflight", "run_experiment", "sampled_pairs", "terminal_table",
           "variant_config", "variants", "with_options"]

MODES = ("one-at-a-time", "product")
AXIS_PER_USER = "per_user"
RESULT_FILES = ("ablation.csv", "ablation.json", "ablation.md", "judgments.sqlite")


# ------------------------------------------------------------------------------ the experiment

def _prefixed(errors, prefix: str):
    """pydantic errors of a nested table, their keys named as the file writes them (``judge.fields``)."""
    return [{**e, "loc": (f"{prefix}{e['loc'][0]}", *e["loc"][1:])} if e.get("loc") else e for e in errors]


class Experiment(Settings):
    """A validated experiment file: every key's type, and every judge, field, prompt, split, measure
    and grid value, is checked when it loads (:meth:`from_dict`), each error naming the file and the
    key (``grid.profile_size``); nothing is read or judged before."""

    command: ClassVar[str] = "ablate"
    name: str | None = option(None, "the experiment's name (default: the file's name)", min_length=1)
    collection: str = option(help="a registered collection or a path", min_length=1)
    collection_options: dict[str, Any] = option(help="the collection loader's options", default_factory=dict)
    split: SplitName = option("global_time", "the split whose training part gives the profiles")
    split_options: dict[str, Any] = option(help="the split's options", default_factory=dict)
    reference: str = option(help="historical[:MAPPING] (the split's held-out ratings) or a qrels path",
                            min_length=1)
    runs: str | tuple[Annotated[str, Field(min_length=1)], ...] | None = option(
        None, "runs for the system-ranking τ: a path or a list of paths", min_length=1)
    out: PathText | None = option(None, "where the results go (default: out/ablate-<name>)")
    per_user: Positive = option(20, "K items per user sampled from the reference")
    experiments: Positive = option(1, "independent experiments, averaged")
    seed: Seed = option(0, "seed of the samples; experiment e > 1 derives its own")
    mode: Literal[MODES] = option("one-at-a-time", "one setting at a time, or every combination")
    measures: tuple[str, ...] = option(("Compat(p=0.95)", "nDCG@100", "Bpref"), "measures of the τ", min_length=1)
    bootstrap: Count = option(1000, "user resamples of the CIs")
    baselines: Count = option(DEFAULT_DRAWS, "trivial judges (constant, random, popularity) on each variant's "
                                             "pairs, shown beside it; N = random draws (0: none)")
    tie_policy: TiePolicy = option("trec_eval", "order of equal scores (default trec_eval: docid descending, as trec_eval)")
    judge: dict[str, Any] = option(help="the base judge's settings", default_factory=dict)
    grid: dict[str, tuple] = option(help="values to try, axis by axis", default_factory=dict)
    # where the file came from and where per_user and experiments came from ("file", "default", or the
    # option that set them): set by from_dict and with_options, never by the file
    internal: ClassVar[frozenset[str]] = frozenset({"source", "origin"})
    source: str = option("<experiment>", "the file", cli=Cli(hidden=True))
    origin: dict[str, str] = option(help="where per_user and experiments came from", cli=Cli(hidden=True),
                                    default_factory=lambda: {"per_user": "default", "experiments": "default"})

    @field_validator("grid", mode="before")
    @classmethod
    def _grid_lists(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value  # refused as a table by the field's type
        out = {}
        for axis, values in value.items():
            if not isinstance(values, (list, tuple)) or not values:
                raise ValueError(f"key 'grid.{axis}' must be a non-empty list, not {_shown(values)}")
            out[axis] = tuple(values)
        return out

    @field_validator("judge", "grid", "collection_options", "split_options", "origin", mode="after")
    @classmethod
    def _read_only(cls, value: dict) -> Mapping:
        return MappingProxyType(dict(value))  # a loaded experiment is what was validated

    @field_validator("measures")
    @classmethod
    def _measures(cls, value: tuple) -> tuple:
        from ..evaluation.measures import measure_names

        # trec_eval names in ir-measures spelling, as every output names them
        return measure_names(list(checked(lambda v: measure_names(list(v)), value)))

    @field_validator("reference")
    @classmethod
    def _reference_rule(cls, value: str) -> str:
        from ..data.splits import RATING_LABELS

        if _is_historical(value):
            mapping = _historical_mapping(value)
            threshold = mapping.split(":", 1)[1] if mapping.startswith("threshold:") else None
            if mapping not in RATING_LABELS and not (threshold is not None and _is_float(threshold)):
                raise ValueError(f"unknown rating mapping {mapping!r}: write historical:MAPPING with MAPPING one of "
                                 f"{', '.join(RATING_LABELS)}, threshold:T, or give a qrels path")
        elif not Path(value).exists():
            raise ValueError(f"qrels file {value!r} not found (relative paths start at the folder you run "
                             "recjudge from)")
        return value

    @field_validator("runs")
    @classmethod
    def _runs_exist(cls, value):
        for r in [value] if isinstance(value, str) else value or ():
            if not Path(r).exists():
                raise ValueError(f"run file or folder {r!r} not found (relative paths start at the folder you run "
                                 "recjudge from)")
        return value

    @model_validator(mode="after")
    def _judge_and_grid(self):
        problems = []
        base = dict(self.judge)
        try:
            JudgeSettings._validate(base)
        except ValidationError as exc:
            problems += [JudgeSettings._message(e, FILE) for e in _prefixed(exc.errors(), "judge.")]
        axes = set(JudgeSettings.model_fields) | {AXIS_PER_USER}
        unknown = sorted(set(self.grid) - axes)
        if unknown:
            problems.append(f"unknown key(s) {', '.join('grid.' + k for k in unknown)}; the grid's axes are the "
                            f"judge's settings and per_user: {', '.join(sorted(axes))}")
        for axis, values in self.grid.items():
            if axis in unknown:
                continue
            for i, value in enumerate(values):
                try:
                    if axis == AXIS_PER_USER:
                        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                            raise ValueError(f"must be a positive whole number, not {_shown(value)} (item {i})")
                    else:
                        JudgeSettings._validate({**base, axis: value})
                except ValidationError as exc:
                    ours = [e for e in exc.errors() if e.get("loc") and e["loc"][0] == axis]
                    errs = _prefixed(ours or exc.errors(), "grid.")
                    problems += [JudgeSettings._message(e, FILE) + (f" (item {i})" if ours else
                                 f" (variant '{axis}={_shown(value)}')") for e in errs]
                    break
                except ValueError as exc:
                    problems.append(f"key 'grid.{axis}' {exc}")
                    break
        if problems:
            raise ValueError("; ".join(dict.fromkeys(problems)))
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<experiment>") -> Experiment:
        """Validate a parsed experiment file. Every error names ``source`` and the key, and says the fix."""
        if not isinstance(data, Mapping):
            raise InputError(source, f"expected a table of key = value, found {type(data).__name__}",
                             "write key = value lines")
        refused = sorted({"source", "origin"} & set(data))
        if refused:
            raise InputError(source, f"unknown key(s) {', '.join(refused)}", "remove them")
        name = data.get("name")
        values = dict(data)
        if not isinstance(name, str) or not name:
            values.setdefault("name", Path(source).stem) if "name" not in data else None
        stem = values.get("name") if isinstance(values.get("name"), str) else Path(source).stem
        if "out" not in values:
            values["out"] = str(Path("out") / f"ablate-{stem}")
        values["source"] = source
        values["origin"] = {k: "file" if k in data else "default" for k in ("per_user", "experiments")}
        exp = cls.from_file(values, source)
        # the judge's own checks (ranges, choices, generation parameters), once per variant
        for var in variants(exp):
            try:
                JudgeSettings._validate(dict(var.settings))
            except ValidationError as exc:
                text = "; ".join(JudgeSettings._message(e, FILE) for e in exc.errors())
                key = f"grid.{var.axis}" if var.axis in exp.grid else "grid"
                raise InputError(source, f"key {key!r}: variant {var.name!r}: {text}",
                                 "fix the [grid] value; nothing was judged") from None
        return exp

    @field_validator("out", mode="after")
    @classmethod
    def _out_path(cls, value):
        return None if value is None else Path(value)


def _shown(value: Any) -> str:
    """A value as the user wrote it in TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return repr(value)


def _is_historical(reference: str) -> bool:
    return reference == "historical" or reference.startswith("historical:")


def _historical_mapping(reference: str) -> str:
    return reference.split(":", 1)[1] if ":" in reference else "rating"


def _is_float(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def load_experiment(path: str | os.PathLike) -> Experiment:
    """Read and validate an experiment TOML file; errors name the file and the key."""
    return Experiment.from_dict(read_toml(path, "experiment file"), str(path))


def with_options(exp: Experiment, per_user: int | None = None, experiments: int | None = None,
                 named: Callable[[str], str] | None = None) -> Experiment:
    """``exp`` under the command's options: ``experiments`` replaces the file's N; ``per_user`` is the K of a
    file that sets none (a protocol's default, e.g. Penha et al. 2025's K = 50), never a file's own K.
    ``named(field)`` is how the caller wrote the option (the command's ``AblateSettings.name_of``:
    ``--per-user``, ``per_user=``; default Python's): the origin the outputs record, and the name a
    refusal gives."""
    named = named or (lambda field: Experiment.spelled(field, PYTHON))
    changes: dict[str, Any] = {}
    origin = dict(exp.origin)
    if experiments is not None:
        changes["experiments"], origin["experiments"] = experiments, named("experiments")
    if per_user is not None and origin.get("per_user") != "file":
        changes["per_user"], origin["per_user"] = per_user, named("per_user")
    if not changes:
        return exp
    new = Experiment.build({**exp.given(), **changes, "origin": origin}, spelled=exp._spelled,
                           names={k: named(k) for k in changes})
    new._protocol = exp.protocol
    return new


class Variant(NamedTuple):
    name: str
    axis: str            # the axis varied ("base" for the base variant)
    settings: Mapping[str, Any]
    per_user: int


def variants(exp: Experiment) -> list[Variant]:
    """The variants to run: the base plus each axis value (one-at-a-time) or the full product."""
    base = dict(exp.judge)
    out: list[Variant] = []
    seen: set[tuple] = set()

    def add(axis: str, changes: Mapping[str, Any]) -> None:
        settings = {**base, **{k: v for k, v in changes.items() if k != AXIS_PER_USER}}
        k = int(changes.get(AXIS_PER_USER, exp.per_user))
        # a value equal to the judge's default is the same variant as leaving it out
        key = (_effective(settings), k)
        if key in seen:
            return
        seen.add(key)
        label = ", ".join(f"{a}={b}" for a, b in changes.items()) or "base"
        out.append(Variant(label, axis, settings, k))

    if exp.mode == "product" and exp.grid:
        axes = list(exp.grid)
        for combo in itertools.product(*(exp.grid[a] for a in axes)):
            add("+".join(axes), dict(zip(axes, combo)))
    else:
        add("base", {})
        for axis, values in exp.grid.items():
            for v in values:
                add(axis, {axis: v})
    return out


def _effective(settings: Mapping[str, Any]) -> object:
    """What a variant's settings amount to: the judge config they build (defaults filled in), or the
    settings as written when they do not build one (refused later, with the key that set them)."""
    from ..judging import JudgeSettings

    try:
        config = JudgeSettings.from_dict(dict(settings))
    except (ConfigError, TypeError):
        return tuple(sorted((a, repr(b)) for a, b in settings.items()))
    return repr(config)  # a config holds tables (params): compared by value, not hashed


class Estimate(NamedTuple):
    """One metric over N experiments: their mean, a 95% t-interval across them, and each value."""

    mean: float
    ci: tuple[float, float]     # NaN, NaN with fewer than two defined values
    values: tuple[float, ...]   # experiment 1, 2, ... (NaN where the metric is undefined)

    @property
    def n(self) -> int:
        return sum(not math.isnan(v) for v in self.values)


def across_experiments(values: Sequence[float], confidence: float = 0.95,
                       bounds: tuple[float, float] = (-1.0, 1.0)) -> Estimate:
    """Mean and a Student t-interval over the defined values, on the Fisher-z scale of the metric's
    range ``bounds`` (:func:`recjudge.evaluation.intervals.bounded_t`): it never leaves the range
    (the plain ``mean ± t·s/√n`` gave τ 0.837 [0.559, 1.115] over three experiments) and always
    contains the mean.

    The interval is across independent experiments (each its own sample of items and histories), the
    paper's "repeated three times ... averaged"; one value gives no interval.
    """
    from ..evaluation.intervals import bounded_t

    values = tuple(float(v) for v in values)
    x = np.array([v for v in values if not math.isnan(v)], dtype=np.float64)
    if len(x) == 0:
        return Estimate(math.nan, (math.nan, math.nan), values)
    return Estimate(float(x.mean()), bounded_t(x, bounds, confidence), values)


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
    from ..judging import select_pairs

    return select_pairs(reference=reference, per_user=per_user, seed=seed)


class ExperimentOutcome(NamedTuple):
    """One variant in one experiment: its seeds, counts and metrics."""

    experiment: int             # 1-based
    pairs_seed: int             # the K judged items per user
    history_seed: int           # the judge's history sample (JudgeSettings.seed)
    pairs: int
    judged: int
    calls: int
    cache_hits: int
    est_input_tokens: int
    agree: float
    agree_ci: tuple[float, float]      # user bootstrap within this experiment
    tie: float
    tie_ci: tuple[float, float]
    disagree: float
    disagree_ci: tuple[float, float]
    kappa: float
    alpha_ordinal: float
    tau: Mapping[str, float]           # vs the complete reference qrels
    weighted_tau: Mapping[str, float]
    ci_note: str = ""                  # the shares' CIs covered below 95% in simulation (few users): why
    ci_summary: str = ""               # that note in one line, as printed
    ci_missing: str = ""               # why the shares have no CI (bootstrap = 0, ...); '' when they have
    # trivial judge → metric (kappa, agree, tau <measure>) → value on this experiment's pairs (random: mean of draws)
    baselines: Mapping[str, Mapping[str, float]] = MappingProxyType({})
    warnings: tuple[str, ...] = ()     # e.g. the variant gave every pair one label

    def to_json(self) -> dict:
        out = self._asdict()
        for key in ("agree_ci", "tie_ci", "disagree_ci"):
            out[key] = list(out[key])
        out["tau"], out["weighted_tau"] = dict(self.tau), dict(self.weighted_tau)
        out["baselines"] = {judge: dict(v) for judge, v in self.baselines.items()}
        out["warnings"] = list(self.warnings)
        return out


class VariantRow(NamedTuple):
    variant: str
    axis: str
    per_user: int
    experiments: int            # N
    pairs: int                  # counts: totals over the N experiments
    judged: int
    failed: int
    calls: int
    cache_hits: int
    est_input_tokens: int
    agree: Estimate
    tie: Estimate
    disagree: Estimate
    kappa: Estimate
    alpha_ordinal: Estimate
    tau: Mapping[str, Estimate]
    weighted_tau: Mapping[str, Estimate]
    outcomes: tuple[ExperimentOutcome, ...]


def _reference(exp: Experiment, collection):
    """The reference qrels and the interactions that serve as user histories."""
    from ..data.splits import historical_qrels, make_split

    split = make_split(collection, exp.split, **dict(exp.split_options))
    if _is_historical(exp.reference):
        return historical_qrels(split, _historical_mapping(exp.reference)), split.train
    from ..data.trec import read_qrels

    # external (e.g. human) qrels: profiles use the whole rated history
    return read_qrels(exp.reference), collection.interactions


def run_experiment(exp: Experiment, dry_run: bool = False,
                   progress: Callable[[str], None] | None = None, protocol=None) -> list[VariantRow]:
    """Judge every variant in each of the N experiments and score it against the reference; writes
    ``<out>/ablation.{csv,json,md}`` (naming ``protocol``, a ProtocolUse, when the run follows one)."""
    from ..judging.probe import probe_session

    with probe_session():  # every variant and experiment judges through the same endpoints: probed once
        return _run_experiment(exp, dry_run, progress, protocol)


def _run_experiment(exp: Experiment, dry_run: bool, progress: Callable[[str], None] | None,
                    protocol) -> list[VariantRow]:
    from ..data.collections import load_collection

    say = progress or (lambda m: None)

    check_experiment_outputs(exp)
    collection = load_collection(exp.collection, **dict(exp.collection_options))
    reference, history = _reference(exp, collection)
    runs: dict[str, Run] = {}
    if exp.runs:
        from ..data.trec import read_runs

        runs = read_runs(exp.runs)
    all_variants = variants(exp)
    preflight(exp, all_variants, collection, history, reference, runs, dry_run, say=progress)
    if not dry_run:
        exp.out.mkdir(parents=True, exist_ok=True)
    cache = None if dry_run else exp.out / "judgments.sqlite"
    # one question for the whole grid: its variants' calls together, not each variant's alone
    confirmed = not dry_run and _confirm_grid(exp, all_variants, collection, reference, history, cache, progress)
    outcomes: dict[int, list[ExperimentOutcome]] = {}
    for n, var, e, pairs_seed, history_seed in _jobs(exp, all_variants):
        label = f" (experiment {e + 1}/{exp.experiments})" if exp.experiments > 1 else ""
        say(f"[{n}/{len(all_variants)}] {var.name}{label}")
        config = variant_config(exp, var, seed=history_seed, dry_run=dry_run or var.settings.get("dry_run", False),
                                **({"yes": True} if confirmed else {}))
        name = f"{exp.name}-{n}" + (f"-e{e + 1}" if e else "")
        outcomes.setdefault(n, []).append(_one_experiment(exp, var, e, pairs_seed, config, collection, reference,
                                                          history, runs, cache, dry_run, name))
    rows = [_row(var, outcomes[n]) for n, var in enumerate(all_variants, start=1)]
    if not dry_run:
        write_results(exp, rows, protocol)
    return rows


def _jobs(exp: Experiment, all_variants: Sequence[Variant]):
    """(variant number, variant, experiment, pairs seed, history seed) of every judge run, in run order."""
    for n, var in enumerate(all_variants, start=1):
        history_base = variant_config(exp, var).seed
        for e in range(exp.experiments):
            yield n, var, e, derive_seed(exp.seed, e, "pairs"), derive_seed(history_base, e, "history")


def _confirm_grid(exp: Experiment, all_variants: Sequence[Variant], collection, reference: Qrels, history,
                  cache: Path | None, progress: Callable[[str], None] | None) -> bool:
    """Plan every variant's and experiment's calls (a dry run of each, the cache's answers counted),
    show the sum and confirm it once (:func:`recjudge.judging.budget.confirm_spend`); True when the
    grid pays for calls and they were confirmed, False when its judge pays for none."""
    from ..judging import judge_pairs
    from ..judging.budget import Plan, confirm_spend
    from ..judging.registry import get_judge

    first = variant_config(exp, all_variants[0]) if all_variants else None
    if first is None or get_judge(first.judge).kind != "llm":
        return False  # an offline judge: nothing is paid, nothing to plan
    pairs = calls = cached = tokens = 0
    cost: float | None = 0.0
    for n, var, e, pairs_seed, history_seed in _jobs(exp, all_variants):
        config = variant_config(exp, var, seed=history_seed, dry_run=True)
        s = judge_pairs(sampled_pairs(reference, var.per_user, pairs_seed), collection, config,
                        cache_path=cache if cache is not None and cache.exists() else None, history=history,
                        name=f"{exp.name}-{n}-plan").summary
        pairs += s.pairs
        calls += s.planned_calls - s.cache_hits - s.shared_calls
        cached += s.cache_hits
        tokens += s.estimated_input_tokens
        cost = None if cost is None or s.estimated_cost is None else cost + s.estimated_cost
    plan = Plan(pairs, calls, cached, ", ".join(first.public_endpoints()), first.model, tokens, cost,
                what=f"ablation {exp.name!r} ({len(all_variants)} variants × {exp.experiments} experiments)")
    confirm_spend(plan, first, say=progress)
    return True


def _table(exp: Experiment, var: Variant, field: str) -> str:
    """The table of the experiment file that sets a variant's judge setting ``field``: grid or judge."""
    return "grid" if field in exp.grid and field in var.axis.split("+") else "judge"


def variant_config(exp: Experiment, var: Variant, **changes: Any) -> JudgeSettings:
    """A variant's judge settings (with ``changes``), whose refusals name each setting by the key of
    the experiment file that sets it (``key 'judge.api_key_env'``, ``key 'grid.fields'``)."""
    names = {f: f"key '{_table(exp, var, f)}.{f}'" for f in JudgeSettings.model_fields}
    return JudgeSettings.build({**var.settings, **changes}, spelled=FILE, names=names)


def _written(exp: Experiment, var: Variant, config: JudgeSettings, field: str) -> str:
    """A judge setting as the file writes it: ``judge.model = 'gpt-4o-mini'``, or the default it left."""
    value = getattr(config, field)
    if field == "base_url":  # as it may be shown: no secret of a query string
        from ..urls import public_url

        value = public_url(value) if isinstance(value, str) or value is None else [public_url(u) for u in value]
    return f"{_table(exp, var, field)}.{field} = {value!r}" + ("" if field in var.settings else ", the default")


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
    from ..judging.client import ClientSettings, probe_endpoints
    from ..judging.dialects import get_dialect
    from ..judging.probe import describe, say_once

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
        key_at, url_at, model_at = (f"{_table(exp, var, f)}.{f}" for f in ("api_key_env", "base_url", "model"))
        unset = (f"the environment variable {env} is not set — export it, or name the variable that holds the "
                 f"key in {key_at}")
        if key is None and urls == (None,):  # the OpenAI API: nothing to ask without a key
            add(key_at, f" ({_written(exp, var, config, 'api_key_env')}): {unset}")
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
                            f"correct {_written(exp, var, config, 'base_url')}")
            elif status in (401, 403):
                fix = unset if key is None else (f"the key in {env} is not one it takes — export a valid one, or "
                                                 f"name another variable in {key_at}")
                add(key_at, f": endpoint {public} refused the key (GET /v1/models answered HTTP {status}; "
                            f"{_written(exp, var, config, 'api_key_env')}): {fix}")
            elif status == 200 and info.model_ids and model not in info.model_ids \
                    and not get_dialect(info.kind).any_model:
                listed = ", ".join(map(repr, info.model_ids[:10])) + (", ..." if len(info.model_ids) > 10 else "")
                add(model_at, f": endpoint {public} does not serve model {model!r} "
                              f"({_written(exp, var, config, 'model')}); it lists {listed}: set {model_at} to one "
                              "of them")
            elif status not in (200, 404):  # 404: a server that lists no models, asked as it is
                add(url_at, f": endpoint {public} answered HTTP {status} to GET /v1/models; check "
                            f"{_written(exp, var, config, 'base_url')}")
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
    from ..judging import HistoryProfiles, get_judge
    from ..judging.budget import load_models

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
                at = f"{_table(exp, var, 'max_cost')}.max_cost"
                problems.append((at, f"variant {var.name!r} ({_written(exp, var, config, 'max_cost')}): no price "
                                     f"for model {config.model!r}, so the budget cannot be kept; add the model to a "
                                     f"price table named in {_table(exp, var, 'prices')}.prices (USD per million "
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


def _one_experiment(exp: Experiment, var: Variant, index: int, pairs_seed: int, config, collection,
                    reference: Qrels, history, runs: Mapping[str, Run], cache: Path | None,
                    dry_run: bool, name: str) -> ExperimentOutcome:
    from ..evaluation.agreement import agreement
    from ..evaluation.metaeval import compare
    from ..judging import judge_pairs

    pairs = sampled_pairs(reference, var.per_user, pairs_seed)
    result = judge_pairs(pairs, collection, config, cache_path=cache, history=history, name=name)
    s = result.summary
    nan, nan2 = math.nan, (math.nan, math.nan)
    counts = {"experiment": index + 1, "pairs_seed": pairs_seed, "history_seed": config.seed, "pairs": s.pairs,
              "judged": s.judged, "cache_hits": s.cache_hits, "est_input_tokens": s.estimated_input_tokens}
    cand = None if dry_run else result.qrels()
    if cand is None:
        return ExperimentOutcome(**counts, calls=s.planned_calls if dry_run else s.calls, agree=nan, agree_ci=nan2,
                                 tie=nan, tie_ci=nan2, disagree=nan, disagree_ci=nan2, kappa=nan,
                                 alpha_ordinal=nan, tau={}, weighted_tau={})
    # item-level agreement on the judged pairs only ...
    sampled = reference.frame.merge(pd.DataFrame(pairs, columns=["qid", "docid"]), on=["qid", "docid"])
    sampled_ref = Qrels.from_frame(sampled, reference.name)
    ag = agreement(sampled_ref, cand, missing="drop", bootstrap=exp.bootstrap, seed=pairs_seed)
    taus: dict[str, float] = {}
    wtaus: dict[str, float] = {}
    if len(runs) >= 2:
        # ... system rankings against the complete reference: cutting the reference down to the K
        # sampled pairs would compare the LLM with a reference as sparse as itself (Penha et al. 2025,
        # Tables 4 and 9, score every K against the full human qrels)
        cmp = compare(runs, reference, {"variant": cand}, measures=list(exp.measures), queries="own",
                      tie_policy=exp.tie_policy, seed=exp.seed, bootstrap=0, baselines=exp.baselines)
        for m, ra in cmp.agreement["variant"].items():
            taus[m], wtaus[m] = ra.kendall_tau, ra.weighted_tau
    pw = ag.pairwise
    return ExperimentOutcome(**counts, calls=s.calls, agree=pw.agree, agree_ci=pw.agree_ci, tie=pw.tie,
                             tie_ci=pw.tie_ci, disagree=pw.disagree, disagree_ci=pw.disagree_ci,
                             kappa=ag.cohen_kappa, alpha_ordinal=ag.krippendorff_alpha_ordinal, tau=taus,
                             weighted_tau=wtaus, ci_note=pw.ci_note, ci_summary=pw.ci_summary,
                             ci_missing=pw.ci_missing,
                             baselines=_trivial(exp, sampled_ref, cand, pairs_seed, cmp if len(runs) >= 2 else None),
                             warnings=_one_label(var.name, cand))


def _trivial(exp: Experiment, sampled: Qrels, cand: Qrels, seed: int, cmp) -> dict[str, dict[str, float]]:
    """Trivial judge → κ, agree and τ per measure on this experiment's pairs (none when ``baselines`` = 0)."""
    from ..evaluation.baselines import agreement_baselines

    if not exp.baselines:
        return {}
    item = agreement_baselines(sampled, cand, "drop", draws=exp.baselines, seed=seed)
    out = {judge: {"kappa": st["cohen_kappa"].mean, "agree": st["agree"].mean} for judge, st in item.items()}
    for m, by_judge in (cmp.baselines.get("variant", {}) if cmp is not None else {}).items():
        for judge, st in by_judge.items():
            out[judge][f"tau {m}"] = st["kendall_tau"].mean
    return out


def _one_label(variant: str, cand: Qrels) -> tuple[str, ...]:
    from ..evaluation.baselines import single_label, single_label_warning

    label = single_label(cand)
    return () if label is None else (single_label_warning(variant, label, kind="variant")
                                     + "; its κ is 0 by construction",)


SHARES = ("agree", "tie", "disagree")  # in [0, 1]; κ, α and τ in [−1, 1]


def _row(var: Variant, outcomes: Sequence[ExperimentOutcome]) -> VariantRow:
    def est(name: str) -> Estimate:
        return across_experiments([getattr(o, name) for o in outcomes],
                                  bounds=(0.0, 1.0) if name in SHARES else (-1.0, 1.0))

    def per_measure(name: str) -> dict[str, Estimate]:
        measures = list(dict.fromkeys(m for o in outcomes for m in getattr(o, name)))
        return {m: across_experiments([getattr(o, name).get(m, math.nan) for o in outcomes]) for m in measures}

    total = {k: sum(getattr(o, k) for o in outcomes) for k in ("pairs", "judged", "calls", "cache_hits",
                                                                "est_input_tokens")}
    return VariantRow(var.name, var.axis, var.per_user, len(outcomes), total["pairs"], total["judged"],
                      total["pairs"] - total["judged"], total["calls"], total["cache_hits"],
                      total["est_input_tokens"], est("agree"), est("tie"), est("disagree"), est("kappa"),
                      est("alpha_ordinal"), per_measure("tau"), per_measure("weighted_tau"), tuple(outcomes))


def check_experiment_outputs(exp: Experiment) -> None:
    """Refuse, before any work, an ``out`` folder (or a result file in it) that is an input or unwritable."""
    inputs = [exp.source, exp.collection]
    if not _is_historical(exp.reference):
        inputs.append(exp.reference)
    if exp.runs is not None:
        inputs += [exp.runs] if isinstance(exp.runs, str) else list(exp.runs)
    inputs = [p for p in inputs if Path(p).exists()]
    option = f"key 'out' of {exp.source}"
    check_output_dir(exp.out, option, inputs)
    check_outputs({f"{option} ({name})": exp.out / name for name in RESULT_FILES}, inputs)


_METRICS = ("agree", "tie", "disagree", "kappa", "alpha_ordinal")


def _estimates(row: VariantRow) -> dict[str, Estimate]:
    """Every metric of a row by its column name (``agree``, ``tau nDCG@100``, ``wtau Bpref``, ...)."""
    out = {m: getattr(row, m) for m in _METRICS}
    out.update({f"tau {m}": e for m, e in row.tau.items()})
    out.update({f"wtau {m}": e for m, e in row.weighted_tau.items()})
    return out


def rows_frame(rows: Sequence[VariantRow]) -> pd.DataFrame:
    """One row per variant: counts (totals over N), each metric's mean over the N experiments with
    ``_ci_lo`` / ``_ci_hi`` (95% t-interval across experiments; NaN for N = 1) and, for N = 1, the
    pairwise shares' user-bootstrap CI as ``_boot_lo`` / ``_boot_hi``."""
    records = []
    for r in rows:
        rec = {k: getattr(r, k) for k in ("variant", "axis", "per_user", "experiments", "pairs", "judged", "failed",
                                          "calls", "cache_hits", "est_input_tokens")}
        for name, e in _estimates(r).items():
            rec[name], rec[f"{name}_ci_lo"], rec[f"{name}_ci_hi"] = e.mean, e.ci[0], e.ci[1]
        for name in ("agree", "tie", "disagree"):
            boot = getattr(r.outcomes[0], f"{name}_ci") if r.experiments == 1 else (math.nan, math.nan)
            rec[f"{name}_boot_lo"], rec[f"{name}_boot_hi"] = boot
        rec["boot_ci_note"] = r.outcomes[0].ci_note if r.experiments == 1 else ""
        rec["boot_ci_missing"] = r.outcomes[0].ci_missing if r.experiments == 1 else ""
        records.append(rec)
    return pd.DataFrame(records)


TAU_REFERENCE = "complete"  # what ablation.json says τ is measured against


def notes(exp: Experiment) -> list[str]:
    """What the numbers are: the reference, K and its nesting, and which interval the brackets hold."""
    where = {"file": "set in the file", "default": "the default"}
    k_origin = where.get(exp.origin.get("per_user", ""), f"from {exp.origin.get('per_user', '')}")
    lines = [(f"Reference: `{exp.reference}`. K = {exp.per_user} items per user ({k_origin}; a K axis in [grid] "
              "overrides it per variant), sampled from the items the reference labels; the samples are nested "
              "across K (one seeded order per user, cut at K)."),
             ("τ and weighted τ: system rankings under each variant's labels against rankings under the COMPLETE "
              "reference qrels (all their labels, not only the sampled pairs); agreement, κ and α on the sampled "
              "pairs.")]
    seeds = [derive_seed(exp.seed, e, "pairs") for e in range(exp.experiments)]
    if exp.experiments == 1 and exp.bootstrap == 0:
        lines.append(f"One experiment (seed {exp.seed}): pairwise shares with no interval (0 resamples: bootstrap "
                     "= 0); no interval across experiments (set experiments = N, or --experiments N, for N "
                     "independent experiments).")
    elif exp.experiments == 1:
        lines.append(f"One experiment (seed {exp.seed}): pairwise shares with 95% CIs within it (Korn–Graubard: "
                     "Clopper–Pearson at the effective number of pairs, SE from a user bootstrap; with fewer than 25 "
                     "users they covered below 95% in simulation, see `recjudge agreement`); no interval "
                     "across experiments (set experiments = N, or --experiments N, for N independent experiments).")
    else:
        lines.append(f"Mean of {exp.experiments} independent experiments, each its own sample of judged items "
                     f"(seeds {', '.join(map(str, seeds))}) and of history items (the judge's seed, derived the "
                     f"same way; all in ablation.json); brackets: 95% t-interval across the {exp.experiments} "
                     f"experiments (Student t, {exp.experiments - 1} degrees of freedom, on the Fisher-z scale of "
                     "each metric's range, so shares stay in [0, 1] and κ, α, τ in [−1, 1]), not a user bootstrap. "
                     "Counts are totals over the experiments. The judge's `repeats` is another thing: the same "
                     "prompt asked R times within one experiment.")
    return lines


def write_results(exp: Experiment, rows: Sequence[VariantRow], protocol=None) -> dict[str, Path]:
    from ..report.evaluation import markdown_table

    frame = rows_frame(rows)
    paths = {"csv": exp.out / "ablation.csv", "json": exp.out / "ablation.json", "md": exp.out / "ablation.md"}
    with atomic_write(paths["csv"]) as fh:
        frame.to_csv(fh, index=False)
    records = frame.to_dict(orient="records")
    for rec, r in zip(records, rows):
        rec["per_experiment"] = [o.to_json() for o in r.outcomes]
    header = {"name": exp.name, "source": exp.source, "reference": exp.reference, "collection": exp.collection,
              "per_user": exp.per_user, "per_user_from": exp.origin.get("per_user"), "nested_samples": True,
              "experiments": exp.experiments, "experiments_from": exp.origin.get("experiments"),
              "seed": exp.seed, "pairs_seeds": [derive_seed(exp.seed, e, "pairs") for e in range(exp.experiments)],
              "interval": ("95% Student t-interval across experiments, on the Fisher-z scale of each metric's "
                           "range (shares [0, 1]; κ, α, τ [−1, 1])" if exp.experiments > 1
                           else "none across experiments (N = 1); pairwise shares: Korn-Graubard (Clopper-Pearson "
                                "at the effective number of pairs, SE from a user bootstrap)"),
              "tau_reference": TAU_REFERENCE, "mode": exp.mode, "judge": dict(exp.judge),
              "grid": {k: list(v) for k, v in exp.grid.items()}}
    write_json(paths["json"], {"experiment": header, "rows": records, "warnings": ablation_warnings(rows),
                               **({"protocol": protocol.as_dict()} if protocol is not None else {})})
    shown = format_rows(rows)
    with atomic_write(paths["md"]) as fh:
        fh.write(f"# Ablation: {exp.name}\n\n" + "\n\n".join(notes(exp)) + "\n\n")
        fh.write(markdown_table(shown, index=False) + "\n")
        fh.write("".join(f"\n{line}\n" for line in coverage_notes(rows)))
        trivial = trivial_frame(rows)
        if trivial is not None:
            fh.write(f"\n{_trivial_header(exp.baselines)}:\n\n"
                     + markdown_table(trivial, index=False) + "\n")
        fh.write("".join(f"\n**Warning:** {w}.\n" for w in ablation_warnings(rows)))
    return paths


def format_rows(rows: Sequence[VariantRow]) -> pd.DataFrame:
    """The table shown: N = 1 gives pairwise shares with their user-bootstrap CI; N > 1 every metric's
    mean with its 95% t-interval across experiments."""
    out = []
    for r in rows:
        rec = {"variant": r.variant, "K": r.per_user, "N": r.experiments, "judged": f"{r.judged}/{r.pairs}",
               "calls": r.calls, "est. tokens": r.est_input_tokens}
        labels = {"kappa": "κ", "alpha_ordinal": "α"}
        for name, e in _estimates(r).items():
            shown = labels.get(name, name.replace("wtau ", "τ_w ").replace("tau ", "τ "))
            if r.experiments > 1:
                rec[shown] = _ci(e.mean, e.ci)
            elif name in ("agree", "tie", "disagree"):
                # flagged where the measured coverage of such an interval is below 95% (few users)
                rec[shown] = _ci(e.mean, getattr(r.outcomes[0], f"{name}_ci")) + (
                    CI_FLAG if r.outcomes[0].ci_note and not math.isnan(e.mean) else "")
            else:
                rec[shown] = _num(e.mean)
        out.append(rec)
    return pd.DataFrame(out)


TERMINAL_WIDTH = 100  # the widest line the terminal table prints; ablation.csv / .json hold every column
NAME_WIDTH = 30       # longer variant names are numbered, the names listed above the table


def terminal_table(rows: Sequence[VariantRow], dry_run: bool = False, width: int = TERMINAL_WIDTH) -> str:
    """:func:`format_rows` as the terminal shows it, no line wider than ``width``: the counts and
    item-level agreement in one block, the system-ranking τ in another, each wrapped by pandas into
    further blocks (the variant repeated) when it is still too wide; a dry run shows what it plans.
    The estimated tokens of a real run, and every interval column, are in ablation.csv / .json."""
    import textwrap

    shown = format_rows(rows)
    if shown.empty:
        return "(no variants)"
    names = list(shown["variant"])
    head = []
    if any(len(n) > NAME_WIDTH for n in names):
        labels = [f"#{i}" for i in range(1, len(names) + 1)]
        head = ["variants:"] + [textwrap.fill(f"{label} {name}", width, initial_indent="  ",
                                              subsequent_indent=" " * (len(label) + 3))
                                for label, name in zip(labels, names)] + [""]
        names = labels
    shown = shown.assign(variant=names).set_index("variant")
    shown.index.name = None
    if dry_run:
        blocks = [("", shown[["K", "judged", "calls", "est. tokens"]].rename(columns={"judged": "pairs"}))]
    else:
        tau = [c for c in shown.columns if c.startswith("τ")]
        counts = [c for c in shown.columns if c not in tau and c != "est. tokens"]
        brackets = "95% interval across experiments" if any(r.experiments > 1 for r in rows) else "95% CI"
        blocks = [(f"agreement with the reference on the sampled pairs (shares: {brackets})", shown[counts])]
        if tau:
            blocks.append(("system rankings against the complete reference: Kendall τ and weighted τ_w",
                           shown[tau]))
    text = []
    for title, block in blocks:
        body = "\n".join(line.rstrip() for line in block.to_string(line_width=width).splitlines())
        text.append((title + "\n" if title else "") + body)
    return "\n".join(head) + "\n\n".join(text)


def coverage_notes(rows: Sequence[VariantRow]) -> list[str]:
    """What a flagged interval of :func:`format_rows` means, in one short line per distinct note (the full
    note is in ablation.json)."""
    seen = dict.fromkeys(r.outcomes[0].ci_summary or r.outcomes[0].ci_note for r in rows
                         if r.experiments == 1 and r.outcomes[0].ci_note)
    return [f"({CI_FLAG}) agree / tie / disagree intervals: {note}" for note in seen]


def trivial_frame(rows: Sequence[VariantRow]) -> pd.DataFrame | None:
    """Per variant and trivial judge: κ, agree and τ per measure on the variant's own pairs, each the mean
    over the N experiments (random: of its draws too); None when no experiment measured them."""
    records = []
    for r in rows:
        judges = list(dict.fromkeys(j for o in r.outcomes for j in o.baselines))
        for judge in judges:
            metrics = list(dict.fromkeys(k for o in r.outcomes for k in o.baselines.get(judge, {})))
            rec = {"variant": r.variant, "trivial judge": judge}
            for k in metrics:
                values = [o.baselines[judge][k] for o in r.outcomes if k in o.baselines.get(judge, {})]
                mean = across_experiments(values).mean
                rec[{"kappa": "κ"}.get(k, k.replace("tau ", "τ "))] = _num(mean)
            records.append(rec)
    return pd.DataFrame(records) if records else None


def trivial_lines(rows: Sequence[VariantRow], exp: Experiment | None = None) -> list[str]:
    """The block under the ablation table: what trivial judges get on each variant's pairs, and the warnings."""
    import textwrap

    lines = []
    frame = trivial_frame(rows)
    if frame is not None:
        draws = exp.baselines if exp is not None else DEFAULT_DRAWS
        lines += ["", *textwrap.wrap(_trivial_header(draws) + ":", 100), frame.to_string(index=False)]
    lines += [f"warning: {w}" for w in ablation_warnings(rows)]
    return lines


def _trivial_header(draws: int) -> str:
    from ..evaluation.baselines import TRIVIAL_KINDS

    return ("Trivial judges on each variant's own pairs, mean over the experiments ("
            + TRIVIAL_KINDS.format(draws=draws).replace("its ", "the variant's ", 1).replace("mean ± sd", "mean") + ")")


def ablation_warnings(rows: Sequence[VariantRow]) -> list[str]:
    return list(dict.fromkeys(w for r in rows for o in r.outcomes for w in o.warnings))


def _num(x: float) -> str:
    return "–" if x != x else f"{x:.3f}"


def _ci(x: float, ci: tuple[float, float]) -> str:
    if x != x:
        return "–"
    if math.isnan(ci[0]):
        return f"{x:.3f}"
    return f"{x:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
