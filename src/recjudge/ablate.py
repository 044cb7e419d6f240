"""Ablations: one experiment file, one row per judge variant (Penha et al. 2025, Tables 3, 4, 8, 9).

An experiment file (TOML) names a collection, the reference labels, the runs, a base judge
configuration and a grid of variants::

    name = "metadata-fields"
    collection = "ml-100k"
    reference = "historical:rating"      # or a qrels path
    runs = "runs/ml-100k"                # for system-ranking τ (optional)
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
Unknown keys anywhere in the file are errors.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from ._io import atomic_write, read_toml, write_json
from .errors import ConfigError, InputError
from .trec import TIE_POLICIES, Qrels, Run

__all__ = ["Experiment", "VariantRow", "load_experiment", "run_experiment", "variants"]

TOP_KEYS = {"name", "collection", "collection_options", "split", "split_options", "reference", "runs", "out",
            "per_user", "seed", "mode", "measures", "bootstrap", "tie_policy", "judge", "grid"}
MODES = ("one-at-a-time", "product")
AXIS_PER_USER = "per_user"


@dataclass(frozen=True)
class Experiment:
    name: str
    collection: str
    reference: str
    out: Path
    judge: Mapping[str, Any]
    grid: Mapping[str, tuple]
    runs: str | None = None
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


def load_experiment(path: str | os.PathLike) -> Experiment:
    """Read and validate an experiment TOML file; errors name the file and the key."""
    from .judge import JudgeConfig

    src = str(path)
    data = read_toml(path, "experiment file")
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise InputError(src, f"unknown key(s) {', '.join(unknown)}", f"use only {', '.join(sorted(TOP_KEYS))}")
    for key in ("collection", "reference"):
        if key not in data:
            raise InputError(src, f"missing key {key!r}", f"add {key} = \"...\" at the top of the file")
    judge = dict(data.get("judge", {}))
    grid_raw = dict(data.get("grid", {}))
    known = {f.name for f in dataclasses.fields(JudgeConfig)}
    for key, values in grid_raw.items():
        if key != AXIS_PER_USER and key not in known:
            raise InputError(src, f"[grid] has unknown axis {key!r}",
                             f"vary per_user or a judge setting: {', '.join(sorted(known))}")
        if not isinstance(values, list) or not values:
            raise InputError(src, f"[grid] {key} must be a non-empty list", f"write {key} = [value, ...]")
    try:
        JudgeConfig.from_dict(judge)
    except ConfigError as exc:
        raise InputError(src, f"[judge]: {exc}", "fix the judge settings") from None
    mode = data.get("mode", "one-at-a-time")
    if mode not in MODES:
        raise InputError(src, f"mode {mode!r} is not one of {', '.join(MODES)}", "choose one of them")
    ints = {}
    for key, default in (("per_user", 20), ("seed", 0), ("bootstrap", 1000)):
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < (1 if key == "per_user" else 0):
            raise InputError(src, f"{key} = {value!r} is not a whole number"
                             + (" ≥ 1" if key == "per_user" else " ≥ 0"), f"write {key} = {default}")
        ints[key] = value
    for k in grid_raw.get(AXIS_PER_USER, []):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InputError(src, f"[grid] per_user holds {k!r}", "give whole numbers ≥ 1")
    tie_policy = str(data.get("tie_policy", "hash"))
    if tie_policy not in TIE_POLICIES:
        raise InputError(src, f"tie_policy {tie_policy!r} is unknown", f"choose one of {', '.join(TIE_POLICIES)}")
    measures = data.get("measures", list(Experiment.measures))
    try:
        from .measures import parse_measures

        parse_measures(list(measures))
    except ConfigError as exc:
        raise InputError(src, f"measures: {exc}", "use ir-measures names such as nDCG@100") from None
    name = str(data.get("name", Path(path).stem))
    exp = Experiment(
        name=name, collection=str(data["collection"]), reference=str(data["reference"]),
        out=Path(data.get("out", Path("out") / f"ablate-{name}")), judge=judge,
        grid={k: tuple(v) for k, v in grid_raw.items()}, runs=data.get("runs"),
        per_user=ints["per_user"], seed=ints["seed"], mode=mode,
        measures=tuple(measures), bootstrap=ints["bootstrap"],
        tie_policy=tie_policy, split=str(data.get("split", "global_time")),
        split_options=dict(data.get("split_options", {})),
        collection_options=dict(data.get("collection_options", {})), source=src)
    for var in variants(exp):
        try:
            JudgeConfig.from_dict(dict(var.settings))
        except (ConfigError, TypeError) as exc:
            raise InputError(src, f"variant {var.name!r}: {exc}",
                             "fix the [grid] value; nothing was judged") from None
    return exp


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
    from .splits import historical_qrels, make_split

    split = make_split(collection, exp.split, **dict(exp.split_options))
    if exp.reference.startswith("historical"):
        mapping = exp.reference.split(":", 1)[1] if ":" in exp.reference else "rating"
        return historical_qrels(split, mapping), split.train
    from .trec import read_qrels

    # external (e.g. human) qrels: profiles use the whole rated history
    return read_qrels(exp.reference), collection.interactions


def run_experiment(exp: Experiment, dry_run: bool = False,
                   progress: Callable[[str], None] | None = None) -> list[VariantRow]:
    """Judge every variant and score it against the reference; writes ``<out>/ablation.{csv,json,md}``."""
    from .agreement import agreement
    from .collections import load_collection
    from .judge import JudgeConfig, judge_pairs, select_pairs
    from .metaeval import compare

    say = progress or (lambda m: None)
    collection = load_collection(exp.collection, **dict(exp.collection_options))
    reference, history = _reference(exp, collection)
    runs: dict[str, Run] = {}
    if exp.runs:
        from .trec import read_runs

        runs = read_runs(exp.runs)
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
    from .report import markdown_table

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
