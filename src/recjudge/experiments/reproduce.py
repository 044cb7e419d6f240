"""``recjudge reproduce penha2025``: every table and figure of Penha et al. 2025 from an ML-32M-ext
release folder, each cell beside the published number.

The protocol (``protocols/penha2025.toml``) gives the settings; :func:`plan_jobs` turns the chosen
tables into judge jobs (one judge configuration over a set of pairs); :func:`plan` prices them
without a call; :func:`run_reproduce` trains or reads the systems, judges through one shared cache
(a prompt two tables share is asked once; an interrupted run resumes with no repeated call),
computes the cells and hands them to :mod:`recjudge.report.reproduce`.

What each target holds (the paper's content as recjudge's issues describe it):

- table1: Judged@100 per system group, historical runs under historical qrels vs Cranfield runs
  under the human qrels;
- table3 / figure3: item-level agreement (human 0 vs human 1-7 on the LLM's raw labels) per
  metadata field set, K items per participant;
- table4: τ and weighted τ of the system ranking under the LLM's labels on K = 10/50/100/200
  items per participant against the complete human qrels; table9: the same per experiment;
- table5 / figure5: calibrated gap filling (Human-only, LLM fills gaps, Full LLM) on the depth-100
  pool; figure5: system ranks under the LLM's labels vs the human ones;
- table8: the baseline and the defined-scale prompt, item-level agreement;
- figure2: historical vs Cranfield ranking, τ and rank shifts; figure4: agreement by label distance.
- Beyond the paper: significance agreement (paired sign-flip tests, Holm) and the top of the
  ranking; the judge's popularity bias.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "STUDY",
    "TARGETS",
    "JudgeJob",
    "PlanRow",
    "ReproduceResult",
    "ReproduceSettings",
    "plan",
    "plan_jobs",
    "protocol_settings",
    "run_reproduce",
]

STUDY = "penha2025"
TARGETS = ("table1", "table3", "table4", "table5", "table8", "table9",
           "figure2", "figure3", "figure4", "figure5")
K_VALUES = (10, 50, 100, 200)
PROMPT_ROWS = {"baseline": "baseline", "defined scale": "defined-scale"}
FALLBACK_MEASURES = ("Judged@100", "Compat(p=0.95)", "nDCG@100", "Bpref")
# which judge jobs a target needs: the same jobs serve several targets
_JOBS_OF = {"table3": "fields", "figure3": "fields", "table8": "prompts", "table4": "ksweep",
            "table9": "ksweep", "figure4": "ksweep", "table5": "pool", "figure5": "pool"}
_GROUP_TITLE = {"fields": "metadata field sets (Table 3, Figure 3)", "prompts": "prompt variants (Table 8)",
                "ksweep": "K items per participant (Tables 4, 9, Figure 4)",
                "pool": "depth-100 pool and every human-judged pair (Table 5, Figure 5, significance)"}
# judge settings that change neither a prompt nor its answer: they stay out of a job's identity
_NOT_PROMPT = {"concurrency", "timeout", "max_attempts", "backoff_initial", "backoff_max", "max_calls",
               "max_cost", "prices", "batch", "batch_poll", "dry_run", "drain_grace", "endpoint_cooldown",
               "backend", "transport", "api_key_env", "context_tokens"}


def protocol_settings(command: str) -> dict[str, Any]:
    """The study protocol's option values for ``command`` (train, judge, compare, evaluate, fill, ablate)."""
    from ..protocol import load_protocol

    return load_protocol(STUDY).settings(command)


@dataclass(frozen=True)
class ReproduceSettings:
    """What ``recjudge reproduce penha2025`` runs; None means the protocol's value."""

    collection: Path
    out: Path
    model: str | None = None
    base_url: str | None = None
    runs: Path | None = None                 # Cranfield runs (trained on every rating), else trained
    historical_runs: Path | None = None      # runs trained on a historical split (Table 1, Figure 2)
    historical_qrels: Path | None = None     # that split's held-out ratings as qrels
    groups: Path | None = None               # system → group (pooled / non-pooled); else the run sidecars
    grid: str | None = None
    systems: str | None = None
    epochs: int | None = None
    device: str = "cpu"
    sample_users: int | None = None
    min_interactions: int | None = None
    historical_split: str = "user_ratio"
    only: tuple[str, ...] = TARGETS
    experiments: int | None = None
    per_user: int | None = None
    k_values: tuple[int, ...] = K_VALUES
    depth: int = 100
    field_sets: tuple[str, ...] | None = None
    profile_size: int | None = None
    fields: str | None = None
    concurrency: int = 8
    context_tokens: int | None = None        # the model's window (default: the price table's limit)
    max_cost: float | None = None
    prices: str | None = None
    call_seconds: float = 30.0
    seed: int = 0
    permutations: int = 10_000
    bootstrap: int = 1000
    alpha: float = 0.05
    dry_run: bool = False

    def resolved(self) -> ReproduceSettings:
        """Protocol values for what was left None; every value range-checked."""
        ablate = protocol_settings("ablate")
        s = dataclasses.replace(
            self, experiments=self.experiments or int(ablate.get("experiments", 3)),
            per_user=self.per_user or int(ablate.get("per_user", 50)))
        bad = [t for t in s.only if t not in TARGETS]
        if bad or not s.only:
            raise ConfigError(f"--only {','.join(s.only)}: choose among {', '.join(TARGETS)}")
        for name in ("experiments", "per_user", "depth", "concurrency", "permutations"):
            v = getattr(s, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be a whole number ≥ 1, got {v!r}")
        if not s.k_values or any(k < 1 for k in s.k_values):
            raise ConfigError(f"K values must be positive, got {s.k_values}")
        if s.max_cost is not None and not (math.isfinite(s.max_cost) and s.max_cost >= 0):
            raise ConfigError(f"--max-cost must be a number of USD ≥ 0, got {s.max_cost}")
        if not (math.isfinite(s.call_seconds) and s.call_seconds > 0):
            raise ConfigError(f"--call-seconds must be positive, got {s.call_seconds}")
        if (s.historical_runs is None) != (s.historical_qrels is None):
            raise ConfigError("--historical-runs and --historical-qrels go together: give both, or neither "
                              "(then the historical systems are trained)")
        return s

    def job_groups(self) -> list[str]:
        return list(dict.fromkeys(_JOBS_OF[t] for t in self.only if t in _JOBS_OF))

    def as_dict(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = os.fspath(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
        return out


# ----------------------------------------------------------------------------------- judge settings

def base_judge(settings: ReproduceSettings) -> tuple[Any, dict[str, Any]]:
    """The protocol's judge as a JudgeConfig with this run's overrides; and the protocol settings this
    recjudge's judge has no field for (reported, never silently dropped)."""
    from ..judge import JudgeConfig

    known = {f.name for f in dataclasses.fields(JudgeConfig)}
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
                 "fields": settings.fields, "prices": settings.prices, "context_tokens": settings.context_tokens}
    values.update({k: v for k, v in overrides.items() if v is not None})
    values.update(concurrency=settings.concurrency, seed=settings.seed)
    return JudgeConfig.from_dict(values), not_applied


def _identity(config) -> tuple:
    """What makes two jobs' prompts (and answers) the same, apart from the pair."""
    return tuple((f.name, repr(getattr(config, f.name))) for f in dataclasses.fields(config)
                 if f.name not in _NOT_PROMPT)


def field_sets(settings: ReproduceSettings, collection) -> tuple[tuple[str, ...], dict[str, list[str]]]:
    """Table 3's rows: the named field sets (title alone, title plus one field, all) the collection can
    show, and those it cannot (set → missing fields); field sets given explicitly must all be shown."""
    from ..judge.profile import DERIVED_FIELDS, FIELD_SETS, parse_fields

    have = set(collection.fields) | set(DERIVED_FIELDS)
    usable, skipped = [], {}
    for fs in settings.field_sets or tuple(FIELD_SETS):
        lacking = [f for f in parse_fields(fs, collection.fields) if f not in have] if fs != "all" else []
        if not lacking:
            usable.append(fs)
        elif settings.field_sets:
            raise ConfigError(f"--field-sets {fs}: the collection has no {', '.join(lacking)} field; its fields are "
                              f"{', '.join(collection.fields)}")
        else:
            skipped[fs] = lacking
    return tuple(usable), skipped


def table3_row(fields: str) -> str:
    """The paper's row name for a field set where we know it (issue 11: "Title + All metadata")."""
    return "Title + All metadata" if fields == "all" else fields


# ----------------------------------------------------------------------------------------- jobs

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
        return f"{self.group}-{self.row}-e{self.experiment}".replace(" ", "_")


def plan_jobs(settings: ReproduceSettings, human, base, collection, pool_runs: Mapping | None = None
              ) -> list[JudgeJob]:
    """The judge jobs the chosen targets need, in the order they run."""
    from ..judge import Pair, select_pairs

    jobs: list[JudgeJob] = []
    groups = settings.job_groups()
    kmax = max(settings.k_values)
    rows = field_sets(settings, collection)[0] if "fields" in groups else ()
    for e in range(settings.experiments):
        seed = settings.seed + e
        config = base.replace(seed=seed)
        if "ksweep" in groups:
            jobs.append(JudgeJob("ksweep", f"K={kmax}", e, config,
                                 select_pairs(reference=human, per_user=kmax, seed=seed)))
        sample = select_pairs(reference=human, per_user=settings.per_user, seed=seed)
        if "fields" in groups:
            jobs += [JudgeJob("fields", fs, e, config.replace(fields=fs), sample) for fs in rows]
        if "prompts" in groups:
            jobs += [JudgeJob("prompts", row, e, config.replace(prompt=p), sample) for row, p in PROMPT_ROWS.items()]
    if "pool" in groups:
        if not pool_runs:
            raise ConfigError("Table 5 and Figure 5 judge the systems' depth-100 pool: give --runs, or let "
                              "reproduce train the systems")
        pool = set(select_pairs(pool_runs, depth=settings.depth, users=set(human.frame.qid), seed=settings.seed))
        pool |= {Pair(str(q), str(d)) for q, d in zip(human.frame.qid, human.frame.docid)}  # for calibration
        jobs.append(JudgeJob("pool", f"depth {settings.depth} + human pairs", 0, base.replace(seed=settings.seed),
                             tuple(sorted(pool))))
    return jobs


# ----------------------------------------------------------------------------------------- plan

@dataclass(frozen=True)
class PlanRow:
    """The cost of one job group: pairs it needs, calls still to make (a prompt counted once over all
    groups, and not at all when the cache holds it), tokens, USD and wall time."""

    group: str
    tables: str
    pairs: int
    shared_pairs: int         # pairs whose prompt an earlier group already asks
    calls: int                # calls this group adds (shared and cached prompts excluded)
    cache_hits: int
    input_tokens: int
    output_tokens: int
    cost: float | None
    wall_seconds: float
    over_context: int = 0             # pairs whose prompt exceeds the model's context window: never sent
    overflow_users: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def plan(jobs: Sequence[JudgeJob], collection, history, cache_path: Path | None, concurrency: int,
         call_seconds: float) -> list[PlanRow]:
    """Price every job group without a call: each distinct prompt once, the cache's answers free."""
    from ..judge import judge_pairs
    from ..judge.budget import output_estimate
    from ..judge.prompts import load_template

    seen: dict[tuple, set] = {}
    rows: dict[str, dict] = {}
    for job in jobs:
        ident = _identity(job.config)
        done = seen.setdefault(ident, set())
        new = [p for p in job.pairs if p not in done]
        done.update(new)
        r = rows.setdefault(job.group, {"pairs": 0, "shared": 0, "calls": 0, "hits": 0, "tokens": 0, "out": 0,
                                        "cost": 0.0, "priced": True, "over": 0, "users": set()})
        r["pairs"] += len(job.pairs)
        r["shared"] += len(job.pairs) - len(new)
        if not new:
            continue
        res = judge_pairs(new, collection, job.config.replace(dry_run=True), cache_path=cache_path,
                          history=history, name=job.name)
        s = res.summary
        r["over"] += s.failures.get("context_overflow", 0)
        r["users"] |= {o.user for o in s.context_overflow}
        calls = s.planned_calls - s.cache_hits
        r["calls"] += calls
        r["hits"] += s.cache_hits
        r["tokens"] += s.estimated_input_tokens
        r["out"] += calls * output_estimate(load_template(job.config.prompt), job.config.items_per_call)
        if s.estimated_cost is None:
            r["priced"] = False
        else:
            r["cost"] += s.estimated_cost
    out = []
    for group, r in rows.items():
        out.append(PlanRow(group, _GROUP_TITLE[group], r["pairs"], r["shared"], r["calls"], r["hits"], r["tokens"],
                           r["out"], r["cost"] if r["priced"] else None,
                           math.ceil(r["calls"] / concurrency) * call_seconds, r["over"], tuple(sorted(r["users"]))))
    return out


def format_plan(rows: Sequence[PlanRow], model: str, concurrency: int, call_seconds: float, published) -> str:
    """The plan as a table, with the totals and the paper's own figures beside them."""
    lines = [(f"Plan for {model} at concurrency {concurrency} (assumed {call_seconds:g} s per call; "
              "tokens ≈ 4 characters each):"), ""]
    head = f"{'jobs':<78} {'pairs':>8} {'shared':>7} {'calls':>8} {'cached':>7} {'input tok':>13} " \
           f"{'output tok':>11} {'USD':>11} {'wall':>9}"
    lines.append(head)
    for r in rows:
        cost = "unknown" if r.cost is None else f"{r.cost:,.2f}" if r.cost >= 1 else f"{r.cost:.4f}"
        lines.append(f"{r.tables:<78} {r.pairs:>8,} {r.shared_pairs:>7,} {r.calls:>8,} {r.cache_hits:>7,} "
                     f"{r.input_tokens:>13,} {r.output_tokens:>11,} {cost:>11} {_duration(r.wall_seconds):>9}")
    calls = sum(r.calls for r in rows)
    tokens = sum(r.input_tokens for r in rows)
    costs = [r.cost for r in rows]
    total_cost = "unknown (no price for this model; see --prices)" if any(c is None for c in costs) \
        else f"${sum(costs):,.2f}"
    lines += ["", (f"total: {calls:,} calls, {tokens:,} input tokens, {sum(r.output_tokens for r in rows):,} "
                   f"output tokens, {total_cost}, about {_duration(math.ceil(calls / concurrency) * call_seconds)}")]
    if calls:
        lines.append(f"input tokens per call: {tokens / calls:,.0f} on average; output tokens are the labels' only "
                     "(a reasoning model's reasoning tokens come on top, so the cost is a lower bound)")
    over = sorted({u for r in rows for u in r.overflow_users})
    if over:
        lines.append(f"over the model's context window (never cut, never sent): {sum(r.over_context for r in rows):,} "
                     f"pairs of {len(over)} user(s): {', '.join(over[:10])}" + (" …" if len(over) > 10 else ""))
    paper_calls = published.cell("cost", "full run", "calls")
    paper_tokens = published.cell("cost", "profile, all fields", "input tokens per call")
    if paper_calls is not None and paper_tokens is not None:
        lines.append(f"the paper: one full run is {paper_calls.shown()} calls; profiles with all fields average "
                     f"{paper_tokens.shown()} tokens")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# ------------------------------------------------------------------------------------------ run

@dataclass(frozen=True, eq=False)
class ReproduceResult:
    """Every computed cell (with its published value), the figures' data, and where the report is."""

    cells: pd.DataFrame                      # target, row, column, ours, published, difference, note
    figures: Mapping[str, Any]
    extras: Mapping[str, Any]
    differences: tuple[Mapping[str, str], ...]
    plan: tuple[PlanRow, ...]
    complete: bool
    stopped: str | None
    paths: Mapping[str, Path] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    plan_text: str = ""


class _Cells:
    """Computed cells collected beside their published values."""

    def __init__(self, published):
        self.published = published
        self.rows: list[dict] = []

    def add(self, target: str, row: str, column: str, ours: float | None, note: str = "",
            published_as: tuple[str, str, str] | None = None) -> None:
        from .published import NOT_PUBLISHED

        cell = self.published.cell(*(published_as or (target, row, column)))
        pub = None if cell is None else cell.value
        value = None if ours is None or (isinstance(ours, float) and math.isnan(ours)) else float(ours)
        if value is not None and cell is not None:
            value = cell.comparable(value)  # on the published cell's scale
        diff = None if value is None or pub is None else value - pub
        self.rows.append({"target": target, "row": row, "column": column, "ours": value,
                          "published": NOT_PUBLISHED if cell is None else cell.shown(), "published_value": pub,
                          "difference": diff, "cite": "" if cell is None else cell.cite, "note": note,
                          "unit": "share" if cell is None else cell.unit})

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows, columns=["target", "row", "column", "ours", "published", "published_value",
                                                "difference", "cite", "note", "unit"])


def _measures() -> tuple[list[str], str]:
    """The protocol's measures when this recjudge knows them all, else the ir-measures ones (noted)."""
    from ..evaluation.measures import parse_measures

    wanted = str(protocol_settings("compare").get("measures", ",".join(FALLBACK_MEASURES)))
    try:
        parse_measures(wanted)
        return [m.strip() for m in wanted.split(",")], ""
    except ConfigError as exc:
        return list(FALLBACK_MEASURES), (f"the protocol's measures {wanted} are not all known here ({exc}); "
                                        f"used {', '.join(FALLBACK_MEASURES)}")


def _pick(measures: Sequence[str], prefix: str) -> str | None:
    return next((m for m in measures if m.startswith(prefix)), None)


def _train(settings: ReproduceSettings, collection, out: Path, historical: bool, say) -> tuple[Path, Path | None]:
    """Train the protocol's grid (Cranfield: every rating; historical: a split, with its qrels)."""
    from .. import api

    train = protocol_settings("train")
    opts = {"grid": settings.grid or train.get("grid", "penha2025-defaults"), "systems": settings.systems,
            "k": int(train.get("k", 100)), "device": settings.device, "epochs": settings.epochs,
            "sample_users": (settings.sample_users if settings.sample_users is not None
                             else train.get("sample_users")),
            "min_interactions": (settings.min_interactions if settings.min_interactions is not None
                                 else train.get("min_interactions"))}
    qrels = None
    if historical:
        qrels = out / "historical.qrels"
        opts.update(split=settings.historical_split, historical_qrels=os.fspath(qrels),
                    historical_mapping="half_stars")
    else:
        opts.update(split=train.get("split", "full"))
    folder = out / "runs" / ("historical" if historical else "cranfield")
    say(f"train {'historical' if historical else 'Cranfield'} systems into {folder}")
    api.train(collection=collection, out=os.fspath(folder), progress=lambda m: say(f"  {m}"), **opts)
    return folder, qrels


def _read_runs(path: Path) -> tuple[dict, list]:
    from ..data.trec import iter_run_files, read_runs

    files = iter_run_files([os.fspath(path)])
    return read_runs(files), files


def run_reproduce(settings: ReproduceSettings, progress: Callable[[str], None] | None = None) -> ReproduceResult:
    """Plan (``dry_run``) or run the reproduction; writes report.md, report.html, figures and one JSON."""
    from .. import api
    from .._io import check_output_dir
    from .published import load_published

    say = progress or print
    s = settings.resolved()
    published = load_published(STUDY)
    inputs = [p for p in (s.collection, s.runs, s.historical_runs, s.historical_qrels, s.groups) if p is not None]
    if not s.dry_run:
        check_output_dir(s.out, "--out", inputs)
    base, not_applied = base_judge(s)
    if s.max_cost is not None and not s.dry_run:
        from ..judge.budget import model_entry

        model_entry(base.replace(max_cost=s.max_cost))  # an unpriced model refused before training and judging
    collection = api.load_collection(s.collection)
    human = collection.qrels
    if human is None:
        raise ConfigError(f"{s.collection}: the collection has no human qrels (qrels/*interest*.qrels or "
                          "p2-ratings.csv); reproduce needs the participants' labels")
    history = collection.interactions
    cache = s.out / "judgments.sqlite"
    needs_runs = any(t in s.only for t in ("table1", "table4", "table5", "table9", "figure2", "figure5"))
    runs, run_files, unpriced = {}, [], ""
    if needs_runs:
        if s.runs is not None:
            runs, run_files = _read_runs(s.runs)
        elif not s.dry_run:
            folder, _ = _train(s, collection, s.out, False, say)
            runs, run_files = _read_runs(folder)
        else:
            unpriced = ("Table 5 and Figure 5 are not priced: their depth-100 pool needs the systems' runs "
                        "(give --runs)")
    historical = None
    if {"table1", "figure2"} & set(s.only) and not s.dry_run:
        # trained (or read) before any call, so a failure here costs nothing
        from ..data.trec import read_qrels

        if s.historical_runs is not None:
            historical = (_read_runs(s.historical_runs)[0], read_qrels(s.historical_qrels))
        else:
            folder, qrels_path = _train(s, collection, s.out, True, say)
            historical = (_read_runs(folder)[0], read_qrels(qrels_path))
    # a dry run without runs plans all but the pool (said in the plan)
    planned = s if runs or "pool" not in s.job_groups() else \
        dataclasses.replace(s, only=tuple(t for t in s.only if _JOBS_OF.get(t) != "pool"))
    jobs = plan_jobs(planned, human, base, collection, runs or None)
    say(f"{len(jobs)} judge jobs for {', '.join(s.only)}")
    rows = plan(jobs, collection, history, cache if cache.exists() else None, s.concurrency, s.call_seconds)
    plan_text = format_plan(rows, base.model, s.concurrency, s.call_seconds, published) + \
        (f"\n{unpriced}" if unpriced and "pool" in s.job_groups() else "")
    if s.dry_run:
        import pandas as pd

        return ReproduceResult(pd.DataFrame(), {}, {}, (), tuple(rows), False, None, {}, s.as_dict(), plan_text)
    say(plan_text)

    s.out.mkdir(parents=True, exist_ok=True)
    labels: dict[tuple[str, str, int], Any] = {}
    spent, stopped, failures = 0.0, None, Counter()
    for n, job in enumerate(jobs, 1):
        config = job.config
        if s.max_cost is not None:
            left = s.max_cost - spent
            if left <= 0:
                stopped = f"--max-cost ${s.max_cost:g} reached"
                break
            config = config.replace(max_cost=left)
        say(f"[{n}/{len(jobs)}] judge {job.group} {job.row} (experiment {job.experiment + 1}): {len(job.pairs):,} pairs")
        res = api.judge(job.pairs, collection, config, cache_path=cache, history=history, name=job.name).result
        failures.update(res.summary.failures)
        spent += res.summary.cost or 0.0
        if res.summary.stopped:
            stopped = res.summary.stopped
            say(f"  stopped: {stopped}; what is cached stays, run again to resume")
            break
        labels[(job.group, job.row, job.experiment)] = res.qrels()
    from .reproduce_tables import compute  # the cells, one function per target

    result = compute(s, collection, human, runs, run_files, labels, published, base, not_applied, rows, stopped, say,
                     historical)
    if failures:
        result.extras["judge_failures"] = dict(failures)
    from ..report.reproduce import write_reproduce_report

    paths = write_reproduce_report(result, s.out)
    say(f"report: {paths['md']}")
    return dataclasses.replace(result, paths=paths)
