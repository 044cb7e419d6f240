"""The plan of a reproduction: every job group priced without a call (:func:`plan`) and shown as a table."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .jobs import JudgeJob
from .judges import prompt_identity

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
    from ...judging import judge_pairs
    from ...judging.budget import output_estimate
    from ...judging.prompts import load_template

    seen: dict[tuple, set] = {}
    rows: dict[str, dict] = {}
    for job in jobs:
        ident = prompt_identity(job.config)
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
    from ...report.reproduce import format_duration

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
