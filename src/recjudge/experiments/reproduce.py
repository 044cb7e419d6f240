"""``recjudge reproduce penha2025``: every table and figure of Penha et al. 2025 from an ML-32M-ext
release folder, each cell beside the published number.

The protocol (``protocols/penha2025.toml``) gives the settings; :func:`plan_jobs` turns the chosen
targets into judge jobs (one judge configuration over a set of pairs); :func:`plan` prices them
without a call; :func:`run_reproduce` trains or reads the systems, judges through one shared cache
(a prompt two targets share is asked once; an interrupted run resumes with no repeated call),
computes the cells (:mod:`.reproduce_tables`) and hands them to :mod:`recjudge.report.reproduce`.

What each target computes, as the paper defines it (section numbers are the paper's):

- table1: Judged@100 per system group (pooled / non-pooled), historical runs under the held-out
  interactions of an 80/20 split vs Cranfield runs under the human qrels (Section 4);
- figure2: the same systems ranked by nDCG@100 in both settings: Kendall's τ, its p-value and
  the rank shifts of NCEPLRec, SimpleX, DGCF and MultiVAE (Section 4); every held-out interaction
  is relevant with label 1;
- table3: agreement / tie / disagreement over pairs of one participant's items the human labels
  0 and 1-7, on the LLM's raw labels, per metadata field set, K = 50 items per participant
  (Section 5.1); figure3: the same per profile size (number of history items); figure4: the
  same over every pair of distinct human labels, by label distance;
- table4: Kendall's τ and weighted τ between the system ranking under the LLM's labels of K
  random human-judged items per participant and the ranking under the complete human qrels, on
  Compat, nDCG@100 and Bpref, K = 10/50/100/200 (Section 5.2); figure5: each system's rank under
  the LLM's labels at K = 100 vs its human rank on nDCG@100, the ranks of SimpleX, DGCF and
  NCEPLRec and the median displacement (1 for the LLM, 8 for the train-test split);
- table5: the systems' depth-100 pool judged by the LLM; Human-only, LLM fills gaps (human labels,
  calibrated LLM labels for the unjudged top-100 items: calibration from the pool items both label)
  and Full LLM (the LLM's labels of the top-100 items only); τ on Compat between the three, and
  average Judged@100 (Section 5.2);
- table8: the baseline and the defined-scale prompt, item agreement as Table 3 (Appendix B);
  table9: both prompts at K = 100, τ on Compat, nDCG@100 and Bpref (Appendix B).
- Beyond the paper: significance agreement (paired sign-flip tests, Holm) on the pool; the
  judge's popularity bias; the release's statistics against Section 3.
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
_JOBS_OF = {"table3": ("base", "fields"), "figure3": ("base", "profiles"), "figure4": ("base",),
            "table8": ("base", "prompts"), "table4": ("base",), "table9": ("base", "prompts"),
            "figure5": ("base",), "table5": ("pool",)}
_TARGET_NAME = {"table1": "Table 1", "table3": "Table 3", "table4": "Table 4", "table5": "Table 5",
                "table8": "Table 8", "table9": "Table 9", "figure2": "Figure 2", "figure3": "Figure 3",
                "figure4": "Figure 4", "figure5": "Figure 5"}
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
    collection_config: Path | None = None    # loader options, e.g. database-movies.csv's column map
    prompt: str | None = None                # the baseline template (the paper's Figure 1 text, as a file)
    defined_scale_prompt: str = "defined-scale"  # Appendix B's defined-scale variant
    runs: Path | None = None                 # Cranfield runs (trained on every rating), else trained
    historical_runs: Path | None = None      # runs trained on a historical split (Table 1, Figure 2)
    historical_qrels: Path | None = None     # that split's held-out interactions as qrels
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
    profile_sizes: tuple[int, ...] = PROFILE_SIZES
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
        if not s.profile_sizes or any(n < 1 for n in s.profile_sizes):
            raise ConfigError(f"profile sizes must be positive, got {s.profile_sizes}")
        if s.max_cost is not None and not (math.isfinite(s.max_cost) and s.max_cost >= 0):
            raise ConfigError(f"--max-cost must be a number of USD ≥ 0, got {s.max_cost}")
        if not (math.isfinite(s.call_seconds) and s.call_seconds > 0):
            raise ConfigError(f"--call-seconds must be positive, got {s.call_seconds}")
        if (s.historical_runs is None) != (s.historical_qrels is None):
            raise ConfigError("--historical-runs and --historical-qrels go together: give both, or neither "
                              "(then the historical systems are trained)")
        return s

    def job_groups(self) -> list[str]:
        return list(dict.fromkeys(g for t in self.only for g in _JOBS_OF.get(t, ())))

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
        served = [_TARGET_NAME[t] for t in TARGETS if t in self.only and group in _JOBS_OF.get(t, ())]
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
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = os.fspath(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
        return out


# ----------------------------------------------------------------------------------- judge settings

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
              "tokens ≈ 4 characters each):"), ""]
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
    return "\n".join(lines)


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
        # the held-out interactions of the split: every one relevant (label 1), as a train-test split scores them
        qrels = out / "historical.qrels"
        opts.update(split=settings.historical_split, historical_qrels=os.fspath(qrels),
                    historical_mapping="binary")
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
    from ..judging import judge_pairs
    from .published import load_published

    say = progress or print
    s = settings.resolved()
    published = load_published(STUDY)
    inputs = [p for p in (s.collection, s.collection_config, s.runs, s.historical_runs, s.historical_qrels,
                          s.groups) if p is not None]
    if not s.dry_run:
        check_output_dir(s.out, "--out", inputs)
    base, not_applied = base_judge(s)
    from ..judging.prompts import load_template

    for template in (base.prompt, s.defined_scale_prompt):
        load_template(template)  # a missing or malformed template file stops here, before any work
    if s.max_cost is not None and not s.dry_run:
        from ..judging.budget import model_entry

        model_entry(base.replace(max_cost=s.max_cost))  # an unpriced model refused before training and judging
    collection = api.load_collection(s.collection, s.collection_config)
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
            unpriced = ("Table 5 is not priced: its depth-100 pool needs the systems' runs (give --runs, or run "
                        "without --dry-run to train them)")
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
        dataclasses.replace(s, only=tuple(t for t in s.only if "pool" not in _JOBS_OF.get(t, ())))
    jobs = plan_jobs(planned, human, base, collection, runs or None)
    say(f"{len(jobs)} judge jobs for {', '.join(s.only)}")
    rows = plan(jobs, collection, history, cache if cache.exists() else None, s.concurrency, s.call_seconds,
                {g: s.group_title(g) for g in s.job_groups()})
    plan_text = format_plan(rows, base.model, s.concurrency, s.call_seconds, published) + \
        (f"\n{unpriced}" if unpriced and "pool" in s.job_groups() else "")
    if s.dry_run:
        import pandas as pd

        return ReproduceResult(pd.DataFrame(columns=CELL_COLUMNS), {}, {}, (), tuple(rows), False, None, {},
                               s.as_dict(), plan_text)
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
        res = judge_pairs(job.pairs, collection, config, cache_path=cache, history=history, name=job.name)
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
