"""The definitions of ``recjudge reproduce penha2025`` (see :mod:`.reproduce`): the study's targets and
their K values, the settings, the judge jobs the targets need and their price (:func:`plan_jobs`,
:func:`plan`), and the cells every target writes. The run (:mod:`.reproduce`) and the tables
(:mod:`.reproduce_tables`) both build on this module; it imports neither."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import field_validator, model_validator

from ..errors import ConfigError
from ..judging.config import confirm_above_calls_option, confirm_above_usd_option, yes_option
from ..settings import Cli, Conflict, Count, PathText, Positive, Seed, Settings, checked, comma_list, option

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "STUDY",
    "training_positives",
    "TARGETS",
    "K_VALUES",
    "PROFILE_SIZES",
    "TABLE9_K",
    "FIELD_ROWS",
    "JOBS_OF",
    "CELL_COLUMNS",
    "Cells",
    "JudgeJob",
    "PlanRow",
    "ReproduceResult",
    "ReproduceSettings",
    "base_judge",
    "field_sets",
    "format_plan",
    "pick_measure",
    "plan",
    "plan_jobs",
    "protocol_settings",
    "samples",
    "target_measures",
]

STUDY = "penha2025"
TARGETS = ("table1", "table3", "table4", "table5", "table8", "table9",
           "figure2", "figure3", "figure4", "figure5")
K_VALUES = (10, 50, 100, 200)                 # Table 4's rows
TABLE9_K = 100                                # Table 9 and Figure 5: "100 predictions per user"
PROFILE_SIZES = (10, 50, 100, 500, 1000)      # Figure 3 (the image with its sizes is not in our copy)
# Table 3's rows (the paper's names) and the field set each shows
FIELD_ROWS = {
    "Title + Average rating": "title+avg_rating",
    "Title": "title",
    "Title + Genres": "title+genres",
    "Title + Directors": "title+directors",
    "Title + Overview": "title+overview",
    "Title + Cast": "title+cast",
    "Title + Runtime": "title+runtime",
    "Title + Number ratings": "title+num_ratings",
    "Title + Year": "title+year",
    "Title + Languages": "title+languages",
    "Title + All metadata": "all",
}
FALLBACK_MEASURES = ("Judged@100", "Compat(p=0.95)", "nDCGexp@100", "Bpref")
# which judge jobs a target needs: "base" is the protocol's judge, which every alignment and
# ranking target reads on its own sample (nested: the K = 50 items are among the K = 100 ones)
JOBS_OF = {"table3": ("base", "fields"), "figure3": ("base", "profiles"), "figure4": ("base",),
            "table8": ("base", "prompts"), "table4": ("base",), "table9": ("base", "prompts"),
            "figure5": ("base",), "table5": ("pool",)}
_TARGET_NAME = {"table1": "Table 1", "table3": "Table 3", "table4": "Table 4", "table5": "Table 5",
                "table8": "Table 8", "table9": "Table 9", "figure2": "Figure 2", "figure3": "Figure 3",
                "figure4": "Figure 4", "figure5": "Figure 5"}
# judge settings that change neither a prompt nor its answer: they stay out of a job's identity
_NOT_PROMPT = {"concurrency", "timeout", "max_attempts", "backoff_initial", "backoff_max", "max_calls",
               "max_cost", "prices", "batch", "batch_poll", "dry_run", "drain_grace", "endpoint_cooldown",
               "backend", "api_key_env", "context_tokens", "yes", "confirm_above_usd",
               "confirm_above_calls", "parse_retries", "stop_after_first", "stop_window", "stop_share"}


def protocol_settings(command: str) -> dict[str, Any]:
    """The study protocol's option values for ``command`` (train, judge, compare, evaluate, fill, ablate)."""
    from ..protocol import load_protocol

    return load_protocol(STUDY).settings(command)


class ReproduceSettings(Settings):
    """``recjudge reproduce penha2025``: what it runs. None means the protocol's value; every field is
    checked on construction (see :mod:`recjudge.settings`)."""

    command: ClassVar[str] = "reproduce"
    study: Literal[STUDY] = option(STUDY, "the study to reproduce", cli=Cli(positional=True))
    collection: PathText = option(help="the ML-32M-ext release folder", cli=Cli(metavar="PATH"))
    out: PathText = option(help="report, figures, JSON, runs and the judge cache", cli=Cli(metavar="DIR"))
    model: str | None = option(None, "judge model (default: the protocol's, gpt-5-2025-08-07)")
    base_url: str | None = option(None, "OpenAI-compatible endpoint, key from OPENAI_API_KEY (default: the OpenAI "
                                        "API)", cli=Cli(metavar="URL"))
    collection_config: PathText | None = option(
        None, "loader options, e.g. [movie_columns] when database-movies.csv names its columns otherwise (default: "
              "the release's own names)", cli=Cli(metavar="TOML"))
    prompt: str | None = option(None, "the baseline prompt: the paper's Figure 1 text as a template file "
                                      "(prompts/README.md); default: the protocol's, recjudge's wording of its design",
                                cli=Cli(metavar="TEMPLATE"))
    defined_scale_prompt: str = option("defined-scale", "the defined-scale variant of Tables 8 and 9 (a name or a "
                                                        "template file)", cli=Cli(metavar="TEMPLATE"))
    dry_run: bool = option(False, "print the plan per job group; no call, nothing written")
    only: tuple[Literal[TARGETS], ...] = option(TARGETS, f"targets to compute, among {','.join(TARGETS)} "
                                                         "(default: all)", min_length=1,
                                                cli=Cli(metavar="LIST", parse=comma_list(str)))
    max_cost: float | None = option(None, "stop cleanly before the judge's estimated spend exceeds USD; rerun to "
                                          "resume (default: no limit)", ge=0, le=1e9, cli=Cli(metavar="USD"))
    prices: str | None = option(None, "price table overriding or adding models, USD per Mtok (default: the shipped "
                                      "table)", cli=Cli(metavar="JSON"))
    # the whole plan is confirmed once, before the first job (see recjudge.judging.budget.confirm_spend)
    yes: bool = yes_option()
    confirm_above_usd: float = confirm_above_usd_option()
    confirm_above_calls: int = confirm_above_calls_option()
    concurrency: int = option(8, "judge requests in flight", ge=1, le=4096, cli=Cli(metavar="C"))
    context_tokens: Positive | None = option(None, "the most prompt tokens the model accepts (default: the price "
                                                   "table's limit); a longer prompt is never cut or sent, its user "
                                                   "reported", cli=Cli(metavar="N"))
    call_seconds: float = option(30.0, "assumed seconds per call for the plan's wall time", gt=0, le=86400,
                                 cli=Cli(metavar="S"))
    runs: PathText | None = option(None, "Cranfield runs already trained (default: the protocol's grid is trained)",
                                   cli=Cli(metavar="DIR"))
    historical_runs: PathText | None = option(None, "runs trained on a historical split, for Table 1 and Figure 2 "
                                                    "(default: trained here)", cli=Cli(metavar="DIR"))
    historical_qrels: PathText | None = option(None, "that split's held-out interactions, every one relevant with "
                                                     "label 1 (default: made from the split)",
                                               cli=Cli(metavar="QRELS"))
    groups: PathText | None = option(None, "'system group' lines (pooled / non-pooled) for Table 1; default: the "
                                           "groups the grid file gave the runs", cli=Cli(metavar="FILE"))
    grid: str | None = option(None, "grid name or file, e.g. the paper's 52 configurations (default: the "
                                    "protocol's)")
    systems: str | None = option(None, "comma-separated system names of the grid (default: all of them)")
    epochs: int | None = option(None, "override epochs, for quick checks (default: each system's own)", ge=1,
                                le=10_000, cli=Cli(metavar="N"))
    device: str = option("cpu", "cpu, cuda or cuda:N")
    sample_users: Positive | None = option(None, "ML-32M users sampled for training, the participants always "
                                                 "added (default: the protocol's 10000)",
                                           cli=Cli(metavar="N"))
    min_interactions: Positive | None = option(None, "ratings a sampled user needs (default: the protocol's 20)",
                                               cli=Cli(metavar="N"))
    min_rating: float | None = option(None, "training positives: the ratings at or above R (default: the protocol's "
                                            "4, the rule of the release's implicit-ratings.csv; 0: every rating, "
                                            "0.5 stars included)", ge=0, le=5, cli=Cli(metavar="R"))
    historical_split: str = option("user_ratio", "split of the historical setting, 80/20")
    experiments: int | None = option(None, "repeated experiments (default: the protocol's 3)", ge=1, le=100,
                                     cli=Cli(metavar="N"))
    per_user: Positive | None = option(None, "items per participant of Tables 3 and 8, Figures 3 and 4 (default: "
                                             "the protocol's 50)", cli=Cli(metavar="K"))
    k_values: tuple[Positive, ...] = option(K_VALUES, "Table 4's K values", min_length=1,
                                            cli=Cli(metavar="LIST", parse=comma_list(int)))
    depth: Positive = option(100, "pool depth of Table 5", cli=Cli(metavar="D"))
    field_sets: tuple[str, ...] | None = option(None, "Table 3's rows (default: the paper's 11 that the collection "
                                                      "can show)", min_length=1,
                                                cli=Cli(metavar="LIST", parse=comma_list(str)))
    profile_sizes: tuple[Positive, ...] = option(PROFILE_SIZES, "Figure 3's history sizes", min_length=1,
                                                 cli=Cli(metavar="LIST", parse=comma_list(int)))
    profile_size: Positive | None = option(None, "history items per profile (default: the protocol's 1000)",
                                           cli=Cli(metavar="N"))
    fields: str | None = option(None, "the judge's base field set (default: the protocol's 'all')")
    seed: Seed = option(0, "seed of experiment 1 (experiment e uses seed + e - 1): samples, history, ties")
    permutations: Positive = option(10_000, "sign flips per significance test", cli=Cli(metavar="N"))
    bootstrap: Count = option(1000, "resamples of the agreement CIs (0: none)", cli=Cli(metavar="N"))
    allow_weak_calibration: bool = option(False, "compute Table 5's LLM fills gaps column even when the calibration "
                                                 "is weak (too few shared pairs in a grade, under 3 levels, not "
                                                 "monotone, no association), with the warning beside its cells")
    alpha: float = option(0.05, "significance level", gt=0, lt=1, cli=Cli(hidden=True))

    @field_validator("collection", "out", "collection_config", "runs", "historical_runs", "historical_qrels",
                     "groups", mode="after")
    @classmethod
    def _paths(cls, value):
        return None if value is None else Path(value)

    @field_validator("prompt", "defined_scale_prompt")
    @classmethod
    def _templates(cls, value: str | None) -> str | None:
        # a missing or malformed template stops here, before anything is trained or judged
        from ..judging.prompts import check_template

        return value if value is None else checked(check_template, value)

    @model_validator(mode="after")
    def _historical_pair(self):
        if (self.historical_runs is None) != (self.historical_qrels is None):
            raise Conflict("{historical_runs} and {historical_qrels} go together: give both, or neither (then the "
                           "historical systems are trained)", "historical_runs", "historical_qrels")
        return self

    def resolved(self) -> ReproduceSettings:
        """The protocol's values for what was left None."""
        ablate = protocol_settings("ablate")
        return self.replace(experiments=self.experiments or int(ablate.get("experiments", 3)),
                            per_user=self.per_user or int(ablate.get("per_user", 50)))

    def job_groups(self) -> list[str]:
        return list(dict.fromkeys(g for t in self.only for g in JOBS_OF.get(t, ())))

    def base_k(self) -> int:
        """Items per participant the protocol's judge labels: the largest sample a chosen target reads."""
        only = set(self.only)
        ks = [self.per_user] if only & {"table3", "table8", "figure3", "figure4"} else []
        if "table4" in only:
            ks += list(self.k_values)
        if only & {"table9", "figure5"}:
            ks.append(TABLE9_K)
        return max(ks, default=self.per_user)

    def prompts_k(self) -> int:
        """Items per participant the defined-scale prompt labels (Table 9's K = 100, Table 8's K = 50)."""
        only = set(self.only)
        return max([TABLE9_K] * ("table9" in only) + [self.per_user] * ("table8" in only), default=self.per_user)

    def targets_of(self, group: str) -> str:
        """The chosen targets a job group serves, as the paper names them ("Tables 3, 4, Figure 5")."""
        served = [_TARGET_NAME[t] for t in TARGETS if t in self.only and group in JOBS_OF.get(t, ())]
        parts = []
        for kind in ("Table", "Figure"):
            numbers = [n.split()[1] for n in served if n.startswith(kind)]
            if numbers:
                parts.append(f"{kind}{'s' if len(numbers) > 1 else ''} {', '.join(numbers)}")
        return ", ".join(parts)

    def group_title(self, group: str) -> str:
        """A job group as the plan names it, with the targets it serves."""
        what = {"base": f"the protocol's judge, K = {self.base_k()} per participant",
                "fields": f"metadata field sets, K = {self.per_user}",
                "profiles": f"profile sizes, K = {self.per_user}",
                "prompts": f"the defined-scale prompt, K = {self.prompts_k()}",
                "pool": f"the systems' depth-{self.depth} pool"}[group]
        return f"{what} ({self.targets_of(group)})"

    def as_dict(self) -> dict[str, Any]:
        return {k: os.fspath(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
                for k, v in self.given().items()}


# ----------------------------------------------------------------------------------- judge settings

def training_positives(settings: ReproduceSettings) -> float:
    """The rating at or above which a rating trains the systems (0: every rating)."""
    if settings.min_rating is not None:
        return float(settings.min_rating)
    return float(protocol_settings("train").get("min_rating") or 0.0)


def base_judge(settings: ReproduceSettings) -> tuple[Any, dict[str, Any]]:
    """The protocol's judge as a JudgeSettings with this run's overrides; and the protocol settings this
    recjudge's judge has no field for (reported, never silently dropped)."""
    from ..judging import JudgeSettings

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


def _identity(config) -> tuple:
    """What makes two jobs' prompts (and answers) the same, apart from the pair."""
    return tuple((name, repr(getattr(config, name))) for name in type(config).model_fields
                 if name not in _NOT_PROMPT)


def field_sets(settings: ReproduceSettings, collection) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Table 3's rows: {paper row: field set} for the rows the collection can show, and the rows it
    cannot (row → missing fields); field sets given explicitly must all be shown (each is its own row,
    named by the paper where it is one of the paper's)."""
    from ..judging.profile import DERIVED_FIELDS, parse_fields

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
    from ..judging import select_pairs

    return select_pairs(reference=human, per_user=k, seed=settings.seed + experiment)


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
        return f"{self.group}-{self.row}-e{self.experiment}".replace(" ", "_").replace("+", "_")


def plan_jobs(settings: ReproduceSettings, human, base, collection, pool_runs: Mapping | None = None
              ) -> list[JudgeJob]:
    """The judge jobs the chosen targets need, in the order they run. Every alignment and ranking
    target reads one sample per experiment, nested across K (Table 3's K = 50 items are among Table 9's
    K = 100), so the protocol's judge labels each pair once; the field sets, profile sizes and the
    defined-scale prompt then ask only what differs. The depth-100 pool is judged once."""
    from ..judging import select_pairs

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


PLAN_CHUNK_PAIRS = 2000


def _by_users(pairs: Sequence, size: int) -> list[list]:
    """``pairs`` in chunks of whole users, each of about ``size`` pairs (a user's prompts are built
    from that user's history alone, so pricing a chunk at a time prices the same prompts)."""
    by_user: dict[str, list] = {}
    for p in pairs:
        by_user.setdefault(p.qid, []).append(p)
    chunks, current = [], []
    for user_pairs in by_user.values():
        if current and len(current) + len(user_pairs) > size:
            chunks.append(current)
            current = []
        current = current + user_pairs
    return chunks + ([current] if current else [])


def plan(jobs: Sequence[JudgeJob], collection, history, cache_path: Path | None, concurrency: int,
         call_seconds: float, titles: Mapping[str, str] | None = None) -> list[PlanRow]:
    """Price every job group without a call: each distinct prompt once, the cache's answers free;
    ``titles`` names each group (default: its key)."""
    from ..judging import judge_pairs
    from ..judging.budget import output_estimate
    from ..judging.prompts import load_template

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
        # priced a few users at a time: a dry run builds every prompt, and at the paper's size one
        # job's prompts (~130k tokens each) would not fit in memory together
        for chunk in _by_users(new, PLAN_CHUNK_PAIRS):
            s = judge_pairs(chunk, collection, job.config.replace(dry_run=True), cache_path=cache_path,
                            history=history, name=job.name).summary
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
        out.append(PlanRow(group, (titles or {}).get(group, group), r["pairs"], r["shared"], r["calls"], r["hits"], r["tokens"],
                           r["out"], r["cost"] if r["priced"] else None,
                           math.ceil(r["calls"] / concurrency) * call_seconds, r["over"], tuple(sorted(r["users"]))))
    return out


def format_plan(rows: Sequence[PlanRow], model: str, concurrency: int, call_seconds: float, published) -> str:
    """The plan as a table, with the totals and the paper's own figures beside them."""
    from ..report.reproduce import format_duration

    lines = [(f"Plan for {model} at concurrency {concurrency} (assumed {call_seconds:g} s per call; "
              "tokens ≈ 3 characters each, the margin OpenAI models get):"), ""]
    width = max([len("jobs")] + [len(r.tables) for r in rows])
    head = f"{'jobs':<{width}} {'pairs':>8} {'shared':>7} {'calls':>8} {'cached':>7} {'input tok':>15} " \
           f"{'output tok':>11} {'USD':>11} {'wall':>9}"
    lines.append(head)
    for r in rows:
        cost = "unknown" if r.cost is None else f"{r.cost:,.2f}" if r.cost >= 1 else f"{r.cost:.4f}"
        lines.append(f"{r.tables:<{width}} {r.pairs:>8,} {r.shared_pairs:>7,} {r.calls:>8,} {r.cache_hits:>7,} "
                     f"{r.input_tokens:>15,} {r.output_tokens:>11,} {cost:>11} {format_duration(r.wall_seconds):>9}")
    calls = sum(r.calls for r in rows)
    tokens = sum(r.input_tokens for r in rows)
    costs = [r.cost for r in rows]
    total_cost = "unknown (no price for this model; see --prices)" if any(c is None for c in costs) \
        else f"${sum(costs):,.2f}"
    lines += ["", (f"total: {calls:,} calls, {tokens:,} input tokens, {sum(r.output_tokens for r in rows):,} "
                   f"output tokens, {total_cost}, about {format_duration(math.ceil(calls / concurrency) * call_seconds)}")]
    if calls:
        lines.append(f"input tokens per call: {tokens / calls:,.0f} on average; output tokens are the labels' only "
                     "(a reasoning model's reasoning tokens come on top, so the cost is a lower bound)")
    over = sorted({u for r in rows for u in r.overflow_users})
    if over:
        lines.append(f"over the model's context window (never cut, never sent): {sum(r.over_context for r in rows):,} "
                     f"pairs of {len(over)} user(s): {', '.join(over[:10])}" + (" …" if len(over) > 10 else ""))
    paper_calls = published.cell("section3", "LLM judge", "calls of one full run")
    paper_tokens = published.cell("section5.1", "profiles", "mean tokens, full profile, all fields")
    if paper_calls is not None and paper_tokens is not None:
        lines.append(f"the paper: judging every human-labelled pair three times would be {paper_calls.shown()} calls "
                     f"(Section 3); a participant's full profile with every field averages {paper_tokens.shown()} "
                     "tokens (Section 5.1; the protocol shows 1,000 of its items)")
        lines.append(f"{paper_calls.shown()} is one configuration over every human-labelled pair, not the paper's "
                     "total: each table's other configurations (field sets, profile sizes, the defined-scale "
                     "prompt) and the pool's unjudged pairs are calls of their own")
    lines += [""] + sharing_lines(rows)
    return "\n".join(lines)


def sharing_lines(rows: Sequence[PlanRow]) -> list[str]:
    """What the job groups share, and why no cheaper plan computes the same tables."""
    shared = [r for r in rows if r.shared_pairs]
    out = ["shared between job groups (each such prompt asked once): " + ("; ".join(
        f"{r.tables.split(' (')[0]}: {r.shared_pairs:,} of {r.pairs:,} pairs" for r in shared) if shared else "none")]
    out.append("every sample is nested across K (K = 50 within K = 100 within K = 200 of one experiment), so a "
               "field set or profile size equal to the protocol judge's, and the pool's human-judged pairs, reuse "
               "its answers; the remaining calls are distinct prompts (another field set, profile size or "
               "prompt, another experiment's sample), and no plan that shares more computes the same tables. "
               "Fewer calls change a table: --experiments 1 (no interval across experiments) or a smaller "
               "--k-values / --profile-sizes / --field-sets")
    return out


# ------------------------------------------------------------------------------------------ run

@dataclass(frozen=True, eq=False)
class ReproduceResult:
    """Every computed cell (with its published value), the figures' data, and where the report is."""

    cells: pd.DataFrame                      # target, row, column, ours, published, difference, inside, note
    figures: Mapping[str, Any]
    extras: Mapping[str, Any]
    differences: tuple[Mapping[str, str], ...]
    plan: tuple[PlanRow, ...]
    complete: bool
    stopped: str | None
    paths: Mapping[str, Path] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    plan_text: str = ""


CELL_COLUMNS = ["target", "row", "column", "ours", "published", "published_value", "difference", "inside",
                "cite", "note", "unit"]


class Cells:
    """Computed cells collected beside their published values."""

    def __init__(self, published):
        self.published = published
        self.rows: list[dict] = []

    def add(self, target: str, row: str, column: str, ours: float | None, note: str = "",
            published_as: tuple[str, str, str] | None = None) -> None:
        """A cell of ``target``; its published value is the cell (target, row, column) of the published
        file, or ``published_as`` where the paper prints it elsewhere (e.g. in the text)."""
        from .published import NOT_PUBLISHED

        cell = self.published.cell(*(published_as or (target, row, column)))
        pub = None if cell is None else cell.value
        value = None if ours is None or (isinstance(ours, float) and math.isnan(ours)) else float(ours)
        if value is not None and cell is not None:
            value = cell.comparable(value)  # on the published cell's scale
        diff = None if value is None or pub is None else value - pub
        self.rows.append({"target": target, "row": row, "column": column, "ours": value,
                          "published": NOT_PUBLISHED if cell is None else cell.shown(), "published_value": pub,
                          "difference": diff, "inside": None if cell is None else cell.inside(value),
                          "cite": "" if cell is None else cell.cite, "note": note,
                          "unit": "share" if cell is None else cell.unit})

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows, columns=CELL_COLUMNS)


def target_measures() -> tuple[list[str], str]:
    """The protocol's measures when this recjudge knows them all, else the ir-measures ones (noted)."""
    from ..evaluation.measures import parse_measures

    wanted = str(protocol_settings("compare").get("measures", ",".join(FALLBACK_MEASURES)))
    try:
        parse_measures(wanted)
        return [m.strip() for m in wanted.split(",")], ""
    except ConfigError as exc:
        return list(FALLBACK_MEASURES), (f"the protocol's measures {wanted} are not all known here ({exc}); "
                                        f"used {', '.join(FALLBACK_MEASURES)}")


def pick_measure(measures: Sequence[str], prefix: str) -> str | None:
    return next((m for m in measures if m.startswith(prefix)), None)
