"""The experiment file: its model (every key validated on load), loading, and the command's options over it.

Precedence, as everywhere in recjudge: an option the caller gives (``--per-user``, ``per_user=``)
over the file's key, the file's key over a protocol's ``[ablate]`` value, that over the default.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Literal, NamedTuple

from pydantic import Field, ValidationError, field_validator, model_validator
from typing_extensions import Annotated

from ..._io import read_toml
from ...data.splits import SplitName
from ...errors import ConfigError, InputError
from ...evaluation.baselines import DEFAULT_DRAWS
from ...judging.config import JudgeSettings
from ...settings import FILE, PYTHON, Cli, Count, PathText, Positive, Seed, Settings, TiePolicy, checked, option

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
        from ...evaluation.measures import measure_names

        # trec_eval names in ir-measures spelling, as every output names them
        return measure_names(list(checked(lambda v: measure_names(list(v)), value)))

    @field_validator("reference")
    @classmethod
    def _reference_rule(cls, value: str) -> str:
        from ...data.splits import RATING_LABELS

        if is_historical(value):
            mapping = historical_mapping(value)
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


def is_historical(reference: str) -> bool:
    return reference == "historical" or reference.startswith("historical:")


def historical_mapping(reference: str) -> str:
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
                 named: Callable[[str], str] | None = None, defaults: Collection[str] = ()) -> Experiment:
    """``exp`` under the command's options, by recjudge's one rule: an option given (not None) replaces
    the file's key (``--per-user 50`` over ``per_user = 10``), except one named in ``defaults`` (a
    protocol's ``[ablate]`` value, e.g. Penha et al. 2025's K = 50), which only fills a key the file
    leaves out. ``named(field)`` is how the caller wrote the option (``AblateSettings.name_of``:
    ``--per-user``, ``per_user=``; default Python's): the origin the outputs record, and the name a
    refusal gives."""
    named = named or (lambda field: Experiment.spelled(field, PYTHON))
    changes: dict[str, Any] = {}
    origin = dict(exp.origin)
    for field, value in (("per_user", per_user), ("experiments", experiments)):
        if value is not None and not (field in defaults and origin.get(field) == "file"):
            changes[field], origin[field] = value, named(field)
    if not changes:
        return exp
    new = Experiment.build({**exp.given(), **changes, "origin": origin}, spelled=exp._spelled,
                           names={k: named(k) for k in changes})
    new._protocol = exp.protocol
    return new


def with_settings(exp: Experiment, settings: Any) -> Experiment:
    """``exp`` under the ``per_user`` and ``experiments`` of the command's settings (``AblateSettings``):
    what the caller gave over the file's keys, what its protocol gave under them (:func:`with_options`);
    the outputs record each as ``--per-user``, ``per_user=`` or ``protocol NAME``."""
    use = settings.protocol
    followed = frozenset(use.followed) if use is not None else frozenset()

    def named(field: str) -> str:
        return f"protocol {use.protocol.name}" if field in followed else settings.name_of(field)

    return with_options(exp, settings.per_user, settings.experiments, named=named, defaults=followed)


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
    from ...judging import JudgeSettings

    try:
        config = JudgeSettings.from_dict(dict(settings))
    except (ConfigError, TypeError):
        return tuple(sorted((a, repr(b)) for a, b in settings.items()))
    return repr(config)  # a config holds tables (params): compared by value, not hashed
