"""Ablations: one experiment file, one row per judge variant (Penha et al. 2025, Tables 3, 4, 8, 9).

An experiment file (TOML) names a collection, the reference labels, the runs, a base judge
configuration and a grid of variants::

    name = "metadata-fields"
    collection = "ml-100k"
    reference = "historical:rating"      # or a qrels path
    runs = "runs/ml-100k"                # for system-ranking τ (optional; a path or a list of paths)
    out = "out/ablate-fields"
    per_user = 20                        # K: judged items per user, sampled from the reference
    mode = "one-at-a-time"               # or "product"

    [judge]                              # the base variant (any JudgeConfig setting)
    judge = "overlap"
    fields = "title+genres"

    [grid]                               # values to try, axis by axis
    fields = ["title", "title+genres", "all"]
    profile_size = [10, 50, 100]

Every variant judges the same kind of pairs — K items per user sampled (seeded) from those the
reference judges, the alignment setting — so agreement isolates the judge. System-ranking τ
compares rankings under the reference restricted to the sampled pairs with rankings under the
variant's labels on the same pairs. Identical prompts across variants are judged once (shared
SQLite cache); ``dry_run`` counts calls and estimated tokens per variant before anything is spent.

The file is validated as a whole when it is loaded (:meth:`Experiment.from_dict`): unknown keys,
a value of the wrong type, an unknown judge, metadata field, prompt, split or measure, and a
variant the judge would refuse are errors naming the file and the key, before anything is read
or judged.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import pandas as pd

from .._io import atomic_write, check_output_dir, check_outputs, read_toml, write_json
from ..data.trec import TIE_POLICIES, Qrels, Run
from ..errors import ConfigError, InputError

__all__ = ["Experiment", "VariantRow", "load_experiment", "run_experiment", "variants"]

MODES = ("one-at-a-time", "product")
AXIS_PER_USER = "per_user"
RESULT_FILES = ("ablation.csv", "ablation.json", "ablation.md", "judgments.sqlite")
_MAX_COUNT = 2**31 - 1   # as recjudge.cli._args: larger counts only fail later, deep inside
_MAX_SEED = 2**63 - 1


# ------------------------------------------------------------------------------ value types

class _Type(NamedTuple):
    """A TOML value type: how to name one value and several, an example, and the test a value must pass."""

    one: str
    many: str
    example: str  # the value part of ``key = value``; for a table, how to write one
    ok: Callable[[Any], bool]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)  # TOML true is a Python int


def _is_number(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


STRING = _Type("a string", "strings", '"..."', lambda v: isinstance(v, str) and v != "")
BOOLEAN = _Type("true or false", "booleans", "true", lambda v: isinstance(v, bool))
POSITIVE = _Type("a positive integer", "positive integers", "10", lambda v: _is_int(v) and 1 <= v <= _MAX_COUNT)
COUNT = _Type(f"a whole number from 0 to {_MAX_COUNT}", "whole numbers ≥ 0", "0",
              lambda v: _is_int(v) and 0 <= v <= _MAX_COUNT)
SEED = _Type(f"a seed from 0 to {_MAX_SEED}", "seeds", "0", lambda v: _is_int(v) and 0 <= v <= _MAX_SEED)
POSITIVE_NUMBER = _Type("a positive number", "positive numbers", "1.5", lambda v: _is_number(v) and v > 0)
NUMBER = _Type("a number ≥ 0", "numbers ≥ 0", "0.5", lambda v: _is_number(v) and v >= 0)
TABLE = _Type("a table", "tables", "{ ... }", lambda v: isinstance(v, dict))
STRINGS = _Type("a non-empty list of strings", "lists of strings", '["...", "..."]',
                lambda v: isinstance(v, list) and bool(v) and all(STRING.ok(x) for x in v))
PATHS = _Type("a path or a non-empty list of paths", "paths", '"path" or ["path", ...]',
              lambda v: STRING.ok(v) or STRINGS.ok(v))

INTEGER = _Type("a whole number", "whole numbers", "0", _is_int)
FINITE = _Type("a number", "numbers", "1.0", _is_number)

# JudgeConfig settings with their TOML type. The ranges repeat JudgeConfig's own checks so the
# message can name the key; JudgeConfig stays the authority (every variant is built once at load).
# A setting not listed here gets the type of its annotation (:func:`_judge_type`).
JUDGE_KEYS: Mapping[str, _Type] = MappingProxyType({
    "judge": STRING, "model": STRING, "base_url": STRING, "api_key_env": STRING, "prompt": STRING,
    "fields": STRING, "profile_size": POSITIVE, "sampling": STRING, "seed": SEED, "repeats": POSITIVE,
    "aggregate": STRING, "items_per_call": POSITIVE, "concurrency": POSITIVE, "timeout": POSITIVE_NUMBER,
    "max_attempts": POSITIVE, "backoff_initial": NUMBER, "backoff_max": NUMBER, "structured": STRING,
    "params": TABLE, "max_calls": COUNT, "max_cost": NUMBER, "prices": STRING, "batch": BOOLEAN,
    "batch_poll": POSITIVE_NUMBER, "dry_run": BOOLEAN,
})

# Top-level keys: type, default. ``collection`` and ``reference`` are required.
TOP_KEYS: Mapping[str, tuple[_Type, Any]] = MappingProxyType({
    "name": (STRING, None), "collection": (STRING, None), "collection_options": (TABLE, {}),
    "split": (STRING, "global_time"), "split_options": (TABLE, {}), "reference": (STRING, None),
    "runs": (PATHS, None), "out": (STRING, None), "per_user": (POSITIVE, 20), "seed": (SEED, 0),
    "mode": (STRING, "one-at-a-time"), "measures": (STRINGS, ("Compat(p=0.95)", "nDCG@100", "Bpref")),
    "bootstrap": (COUNT, 1000), "tie_policy": (STRING, "hash"), "judge": (TABLE, {}), "grid": (TABLE, {}),
})
REQUIRED = ("collection", "reference")


def _shown(value: Any) -> str:
    """A value as the user wrote it in TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return repr(value)


class _Checker:
    """Errors of one experiment file: each names the file and the key (``grid.profile_size``)."""

    def __init__(self, source: str):
        self.source = source

    def error(self, key: str, problem: str, fix: str) -> InputError:
        return InputError(self.source, f"key {key!r}: {problem}", fix)

    def typed(self, key: str, value: Any, kind: _Type, example: str) -> Any:
        if not kind.ok(value):
            raise self.error(key, f"expected {kind.one}, found {_shown(value)}", f"write {example}")
        return value

    def choice(self, key: str, value: str, choices: Sequence[str]) -> str:
        if value not in choices:
            raise self.error(key, f"{value!r} is not one of {', '.join(choices)}", "choose one of them")
        return value

    def unknown(self, where: str, keys, known) -> None:
        bad = sorted(set(keys) - set(known))
        if bad:
            label = ", ".join(f"{where}{k}" for k in bad)
            raise InputError(self.source, f"unknown key(s) {label}", f"use only {', '.join(sorted(known))}")


def _example(key: str, kind: _Type, many: bool = False) -> str:
    leaf = key.rsplit(".", 1)[-1]
    if many:
        return f"{leaf} = [{kind.example}, ...] under [grid]"
    if kind is TABLE:
        return f"[{leaf}] on a line of its own, its settings below it"
    return f"{leaf} = {kind.example}"


def _judge_value(check: _Checker, key: str, name: str, value: Any) -> Any:
    """One judge setting: its type, and the names it refers to (judge, fields, prompt, sampling)."""
    from ..judge import judge_names, load_template, parse_fields
    from ..judge.profile import SAMPLINGS

    kind = _judge_type(name)
    if kind is None:
        return value  # an annotation with no TOML counterpart: JudgeConfig checks the value
    check.typed(key, value, kind, _example(key, kind))
    try:
        if name == "judge":
            check.choice(key, value, judge_names())
        elif name == "fields":
            parse_fields(value)
        elif name == "sampling":
            check.choice(key, value, SAMPLINGS)
        elif name == "prompt":
            load_template(value)
    except (ConfigError, InputError) as exc:
        if isinstance(exc, InputError) and exc.source == check.source:
            raise
        raise check.error(key, str(exc), "correct the value") from None
    return value


def _grid_values(check: _Checker, axis: str, values: Any) -> tuple:
    key = f"grid.{axis}"
    kind = POSITIVE if axis == AXIS_PER_USER else _judge_type(axis)
    many = f"a non-empty list of {kind.many}" if kind else "a non-empty list"
    if not isinstance(values, list) or not values:
        raise check.error(key, f"expected {many}, found {_shown(values)}",
                          f"write {_example(key, kind or STRING, many=True)}")
    for v in values:
        if kind is not None and not kind.ok(v):
            raise check.error(key, f"expected {many}, found {_shown(v)} in {_shown(values)}",
                              f"write {_example(key, kind, many=True)}")
        if axis != AXIS_PER_USER:
            _judge_value(check, key, axis, v)
    return tuple(values)


def _check_path(check: _Checker, key: str, value: str, what: str) -> None:
    if not Path(value).exists():
        raise check.error(key, f"{what} {value!r} not found", "check the path (relative paths start at the "
                          "folder you run recjudge from)")


@dataclass(frozen=True)
class Experiment:
    """A validated experiment; build it from a TOML table with :meth:`from_dict` (or :func:`load_experiment`)."""

    name: str
    collection: str
    reference: str
    out: Path
    judge: Mapping[str, Any]
    grid: Mapping[str, tuple]
    runs: str | tuple[str, ...] | None = None
    per_user: int = 20
    seed: int = 0
    mode: str = "one-at-a-time"
    measures: tuple[str, ...] = ("Compat(p=0.95)", "nDCG@100", "Bpref")
    bootstrap: int = 1000
    tie_policy: str = "hash"
    split: str = "global_time"
    split_options: Mapping[str, Any] = field(default_factory=dict)
    collection_options: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<experiment>"

    def __post_init__(self):
        # read-only views: a loaded experiment is what was validated
        for name in ("judge", "split_options", "collection_options"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        object.__setattr__(self, "grid", MappingProxyType({k: tuple(v) for k, v in self.grid.items()}))
        object.__setattr__(self, "measures", tuple(self.measures))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<experiment>") -> Experiment:
        """Validate a parsed experiment file. Every error names ``source`` and the key, and says the fix."""
        from ..data.splits import RATING_LABELS, SPLITS
        from ..evaluation.measures import parse_measures
        from ..judge import JudgeConfig

        check = _Checker(source)
        check.unknown("", data, TOP_KEYS)
        for key in REQUIRED:
            if key not in data:
                raise InputError(source, f"missing key {key!r}", f"add {key} = \"...\" at the top of the file")
        values = {}
        for key, (kind, default) in TOP_KEYS.items():
            values[key] = check.typed(key, data[key], kind, _example(key, kind)) if key in data else default
        check.choice("mode", values["mode"], MODES)
        check.choice("tie_policy", values["tie_policy"], TIE_POLICIES)
        check.choice("split", values["split"], tuple(SPLITS))
        try:
            parse_measures(list(values["measures"]))
        except ConfigError as exc:
            raise check.error("measures", str(exc), 'use ir-measures names, e.g. measures = ["nDCG@100"]') from None
        reference = values["reference"]
        if _is_historical(reference):
            mapping = _historical_mapping(reference)
            threshold = mapping.split(":", 1)[1] if mapping.startswith("threshold:") else None
            if mapping not in RATING_LABELS and not (threshold is not None and _is_float(threshold)):
                raise check.error("reference", f"unknown rating mapping {mapping!r}",
                                  f"write historical:MAPPING with MAPPING one of {', '.join(RATING_LABELS)}, "
                                  "threshold:T, or give a qrels path")
        else:
            _check_path(check, "reference", reference, "qrels file")
        runs = values["runs"]
        if runs is not None:
            runs = runs if isinstance(runs, str) else tuple(runs)
            for r in [runs] if isinstance(runs, str) else runs:
                _check_path(check, "runs", r, "run file or folder")

        judge = dict(values["judge"])
        check.unknown("judge.", judge, _config_fields())
        for name, value in judge.items():
            _judge_value(check, f"judge.{name}", name, value)
        grid = dict(values["grid"])
        axes = _config_fields() | {AXIS_PER_USER}
        check.unknown("grid.", grid, axes)
        grid = {axis: _grid_values(check, axis, v) for axis, v in grid.items()}

        name = values["name"] if values["name"] is not None else Path(source).stem
        out = Path(values["out"]) if values["out"] is not None else Path("out") / f"ablate-{name}"
        exp = cls(name=name, collection=values["collection"], reference=reference, out=out, judge=judge, grid=grid,
                  runs=runs, per_user=values["per_user"], seed=values["seed"], mode=values["mode"],
                  measures=tuple(values["measures"]), bootstrap=values["bootstrap"],
                  tie_policy=values["tie_policy"], split=values["split"],
                  split_options=values["split_options"], collection_options=values["collection_options"],
                  source=source)
        # the judge's own checks (ranges, choices, generation parameters), once per variant
        try:
            JudgeConfig.from_dict(judge)
        except (ConfigError, TypeError) as exc:
            raise check.error("judge", str(exc), "fix the judge settings") from None
        for var in variants(exp):
            try:
                JudgeConfig.from_dict(dict(var.settings))
            except (ConfigError, TypeError) as exc:
                raise check.error(f"grid.{var.axis}" if var.axis in grid else "grid",
                                  f"variant {var.name!r}: {exc}", "fix the [grid] value; nothing was judged") from None
        return exp


def _is_historical(reference: str) -> bool:
    return reference == "historical" or reference.startswith("historical:")


def _historical_mapping(reference: str) -> str:
    return reference.split(":", 1)[1] if ":" in reference else "rating"


def _is_float(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _judge_type(name: str) -> _Type | None:
    """The TOML type of a judge setting: from :data:`JUDGE_KEYS`, else from JudgeConfig's annotation."""
    if name in JUDGE_KEYS:
        return JUDGE_KEYS[name]
    import typing

    from ..judge import JudgeConfig

    try:
        hint = typing.get_type_hints(JudgeConfig).get(name)
    except Exception:  # an annotation that does not evaluate: leave the value to JudgeConfig
        return None
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args and len(args) == 1 and type(None) in typing.get_args(hint):
        hint = args[0]  # X | None: TOML has no null, so the value is an X
    origin = typing.get_origin(hint) or hint
    by_type = {bool: BOOLEAN, int: INTEGER, float: FINITE, str: STRING}
    if origin in by_type:
        return by_type[origin]
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return TABLE
    return None


def _config_fields() -> set[str]:
    import dataclasses

    from ..judge import JudgeConfig

    return {f.name for f in dataclasses.fields(JudgeConfig)}


def load_experiment(path: str | os.PathLike) -> Experiment:
    """Read and validate an experiment TOML file; errors name the file and the key."""
    return Experiment.from_dict(read_toml(path, "experiment file"), str(path))


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
        key = (tuple(sorted((a, repr(b)) for a, b in settings.items())), k)
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


class VariantRow(NamedTuple):
    variant: str
    axis: str
    per_user: int
    pairs: int
    judged: int
    failed: int
    calls: int
    cache_hits: int
    est_input_tokens: int
    agree: float
    agree_ci: tuple[float, float]
    tie: float
    tie_ci: tuple[float, float]
    disagree: float
    disagree_ci: tuple[float, float]
    kappa: float
    alpha_ordinal: float
    tau: Mapping[str, float]
    weighted_tau: Mapping[str, float]


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
                   progress: Callable[[str], None] | None = None) -> list[VariantRow]:
    """Judge every variant and score it against the reference; writes ``<out>/ablation.{csv,json,md}``."""
    from ..data.collections import load_collection
    from ..evaluation.agreement import agreement
    from ..evaluation.metaeval import compare
    from ..judge import JudgeConfig, judge_pairs, select_pairs

    say = progress or (lambda m: None)
    check_experiment_outputs(exp)
    collection = load_collection(exp.collection, **dict(exp.collection_options))
    reference, history = _reference(exp, collection)
    runs: dict[str, Run] = {}
    if exp.runs:
        from ..data.trec import read_runs

        runs = read_runs(exp.runs)
    if not dry_run:
        exp.out.mkdir(parents=True, exist_ok=True)
    cache = exp.out / "judgments.sqlite"
    rows: list[VariantRow] = []
    all_variants = variants(exp)
    for n, var in enumerate(all_variants, start=1):
        say(f"[{n}/{len(all_variants)}] {var.name}")
        config = JudgeConfig.from_dict({**var.settings, "dry_run": dry_run or var.settings.get("dry_run", False)})
        pairs = select_pairs(reference=reference, per_user=var.per_user, seed=exp.seed)
        result = judge_pairs(pairs, collection, config, cache_path=None if dry_run else cache, history=history,
                             name=f"{exp.name}-{n}")
        s = result.summary
        nan2 = (float("nan"), float("nan"))
        if dry_run or result.qrels() is None:
            rows.append(VariantRow(var.name, var.axis, var.per_user, s.pairs, s.judged, s.pairs - s.judged,
                                   s.planned_calls, s.cache_hits, s.estimated_input_tokens, float("nan"), nan2,
                                   float("nan"), nan2, float("nan"), nan2, float("nan"), float("nan"), {}, {}))
            continue
        cand = result.qrels()
        sampled = reference.frame.merge(pd.DataFrame(pairs, columns=["qid", "docid"]), on=["qid", "docid"])
        ref_sub = Qrels.from_frame(sampled, reference.name)
        ag = agreement(ref_sub, cand, missing="drop", bootstrap=exp.bootstrap, seed=exp.seed)
        taus: dict[str, float] = {}
        wtaus: dict[str, float] = {}
        if len(runs) >= 2:
            cmp = compare(runs, ref_sub, {"variant": cand}, measures=list(exp.measures), queries="shared",
                          tie_policy=exp.tie_policy, seed=exp.seed, bootstrap=0)
            for m, ra in cmp.agreement["variant"].items():
                taus[m], wtaus[m] = ra.kendall_tau, ra.weighted_tau
        pw = ag.pairwise
        rows.append(VariantRow(var.name, var.axis, var.per_user, s.pairs, s.judged, s.pairs - s.judged, s.calls,
                               s.cache_hits, s.estimated_input_tokens, pw.agree, pw.agree_ci, pw.tie, pw.tie_ci,
                               pw.disagree, pw.disagree_ci, ag.cohen_kappa, ag.krippendorff_alpha_ordinal,
                               taus, wtaus))
    if not dry_run:
        write_results(exp, rows)
    return rows


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


def rows_frame(rows: Sequence[VariantRow]) -> pd.DataFrame:
    records = []
    for r in rows:
        rec = {k: v for k, v in r._asdict().items() if k not in ("tau", "weighted_tau")}
        for key in ("agree_ci", "tie_ci", "disagree_ci"):
            lo, hi = rec.pop(key)
            rec[f"{key}_lo"], rec[f"{key}_hi"] = lo, hi
        for m, v in r.tau.items():
            rec[f"tau {m}"] = v
        for m, v in r.weighted_tau.items():
            rec[f"wtau {m}"] = v
        records.append(rec)
    return pd.DataFrame(records)


def write_results(exp: Experiment, rows: Sequence[VariantRow]) -> dict[str, Path]:
    from ..report.evaluation import markdown_table

    frame = rows_frame(rows)
    paths = {"csv": exp.out / "ablation.csv", "json": exp.out / "ablation.json", "md": exp.out / "ablation.md"}
    with atomic_write(paths["csv"]) as fh:
        frame.to_csv(fh, index=False)
    write_json(paths["json"], {"experiment": {"name": exp.name, "source": exp.source, "reference": exp.reference,
                                              "collection": exp.collection, "per_user": exp.per_user,
                                              "seed": exp.seed, "mode": exp.mode, "judge": dict(exp.judge),
                                              "grid": {k: list(v) for k, v in exp.grid.items()}},
                               "rows": frame.to_dict(orient="records")})
    shown = format_rows(rows)
    with atomic_write(paths["md"]) as fh:
        fh.write(f"# Ablation: {exp.name}\n\nReference: `{exp.reference}`; K = {exp.per_user} items per user "
                 f"sampled from the reference (seed {exp.seed}); pairwise shares with user-bootstrap 95% CIs.\n\n")
        fh.write(markdown_table(shown, index=False) + "\n")
    return paths


def format_rows(rows: Sequence[VariantRow]) -> pd.DataFrame:
    out = []
    for r in rows:
        rec = {"variant": r.variant, "K": r.per_user, "judged": f"{r.judged}/{r.pairs}",
               "calls": r.calls, "est. tokens": r.est_input_tokens,
               "agree": _ci(r.agree, r.agree_ci), "tie": _ci(r.tie, r.tie_ci),
               "disagree": _ci(r.disagree, r.disagree_ci), "κ": _num(r.kappa), "α": _num(r.alpha_ordinal)}
        for m, v in r.tau.items():
            rec[f"τ {m}"] = _num(v)
        for m, v in r.weighted_tau.items():
            rec[f"τ_w {m}"] = _num(v)
        out.append(rec)
    return pd.DataFrame(out)


def _num(x: float) -> str:
    return "–" if x != x else f"{x:.3f}"


def _ci(x: float, ci: tuple[float, float]) -> str:
    if x != x:
        return "–"
    return f"{x:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
