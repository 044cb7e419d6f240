"""Judgments from an LLM judge's call records: each pair's labels over the repeats, aggregated.

A call judges several items, so its record is re-keyed from candidate positions to items and its
tokens shared among them; a repeat that was never answered says why (dry run, stopped early, not
asked)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Callable, Collection, Mapping, Sequence

from .cache import CallRecord, Usage
from .client import Request
from .results import Judgment, aggregate_labels
from .select import Pair

__all__ = ["records_by_pair", "unasked_reason", "judge_pairs", "pair_judgment"]


def records_by_pair(requests: Sequence[Request],
                    results: Mapping[str, CallRecord]) -> dict[Pair, dict[int, CallRecord]]:
    """Each pair's call record per repeat, re-keyed from its request's candidate positions to items."""
    per_pair: dict[Pair, dict[int, CallRecord]] = defaultdict(dict)
    for req in requests:
        rec = results.get(req.key)
        if rec is None:
            continue
        rec = rec.rekeyed(req.qid, req.items)
        if rec is not None:
            for item in req.items:
                per_pair[Pair(req.qid, item)][req.repeat] = rec
    return per_pair


def unasked_reason(requests: Sequence[Request], halted: Collection[str],
                   dry_run: bool) -> Callable[[Pair, int], str]:
    """Why a pair's repeat has no answer: a dry run, a request the breaker stopped, or not asked."""
    req_keys = {(Pair(req.qid, item), req.repeat): req.key for req in requests
                for item in req.items} if halted else {}

    def reason(pair: Pair, repeat: int) -> str:
        return ("dry_run" if dry_run else
                "stopped_early" if req_keys.get((pair, repeat)) in halted else "not_asked")
    return reason


def judge_pairs(pairs: Sequence[Pair], per_pair: Mapping[Pair, Mapping[int, CallRecord]],
                pre_failed: Mapping[Pair, str], repeats: int, aggregate: str,
                unasked: Callable[[Pair, int], str]) -> tuple[list[Judgment], Counter]:
    """A judgment per pair, in order, and the failures counted by reason; a pair failed before any
    call (``pre_failed``: its prompt above the window) fails with that reason on every repeat."""
    judgments = []
    failures: Counter = Counter()
    for p in pairs:
        if p in pre_failed:
            reason = pre_failed[p]
            judgments.append(Judgment(p.qid, p.docid, None, "failed", reason, (None,) * repeats,
                                      (reason,) * repeats))
        else:
            judgments.append(pair_judgment(p, per_pair.get(p, {}), repeats, aggregate, unasked))
        if judgments[-1].status == "failed":
            failures[judgments[-1].reason] += 1
    return judgments, failures


def pair_judgment(p: Pair, by_repeat: Mapping[int, CallRecord], repeats: int, aggregate: str,
                  unasked: Callable[[Pair, int], str]) -> Judgment:
    """One pair's labels, reasons, criteria and endpoints per repeat, its share of the calls' tokens,
    and the aggregated label (failed, with the first reason, when no repeat gave one)."""
    labels: list[int | None] = []
    reasons: list[str | None] = []
    crits: list[Mapping[str, int] | None] = []
    endpoints: list[str | None] = []
    usage = Usage()
    from_cache = 0
    for r in range(repeats):
        rec = by_repeat.get(r)
        if rec is None:
            labels.append(None)
            reasons.append(unasked(p, r))
            crits.append(None)
            endpoints.append(None)
            continue
        n = len(rec.items)
        share = rec.usage if n == 1 else Usage(*(round(v / n) for v in rec.usage.as_dict().values()))
        usage = usage + share
        from_cache += rec.via == "cache"
        label = rec.labels.get(p.docid)
        labels.append(label)
        reasons.append(None if label is not None else (rec.item_errors.get(p.docid) or rec.reason))
        crits.append(rec.criteria.get(p.docid))
        endpoints.append(rec.endpoint)
    ok = [v for v in labels if v is not None]
    if ok:
        return Judgment(p.qid, p.docid, aggregate_labels(ok, aggregate), "ok", None, tuple(labels),
                        tuple(reasons), tuple(crits), from_cache, usage, endpoints=tuple(endpoints))
    reason = next((r for r in reasons if r), "unknown")
    return Judgment(p.qid, p.docid, None, "failed", reason, tuple(labels), tuple(reasons), tuple(crits),
                    from_cache, usage, endpoints=tuple(endpoints))
