"""Judging's records and outputs: judgments, the run summary, repeat aggregation and agreement, and
writing qrels, the judgments log and the summary."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .._io import atomic_write, remove_output, write_json
from ..data.trec import Qrels, write_qrels
from ..errors import ConfigError
from ..evaluation.calibration import round_half_up
from .cache import Usage
from .config import AGGREGATIONS

__all__ = ["read_judgments", "JUDGMENTS_FORMAT", "Judgment", "Agreement", "Overflow", "Summary", "JudgeResult", "output_paths", "aggregate_labels",
           "repeat_agreement", "alpha_interval"]

log = logging.getLogger("recjudge.judging")


@dataclass(frozen=True)
class Judgment:
    """One (user, item) pair: the aggregated label (None when every repeat failed) and its evidence."""

    qid: str
    docid: str
    label: int | None
    status: str                                  # ok | failed
    reason: str | None
    repeat_labels: tuple[int | None, ...]
    repeat_reasons: tuple[str | None, ...] = ()
    criteria: tuple[Mapping[str, int] | None, ...] = ()
    from_cache: int = 0                          # repeats answered from the cache
    usage: Usage = Usage()                       # this pair's share of its calls' tokens
    score: float | None = None                   # the offline judges' raw score
    endpoints: tuple[str | None, ...] = ()       # per repeat: the endpoint (public URL) that answered


@dataclass(frozen=True)
class Agreement:
    """Agreement between repeats over pairs with at least two successful repeats."""

    repeats: int
    pairs: int
    all_equal: float
    pairwise_exact: float
    alpha_interval: float

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Overflow:
    """A user whose prompt is estimated above the model's context window: its pairs were not asked."""

    user: str
    estimated_tokens: int   # the largest of the user's prompts, as the window check counts them
    window: int             # the most prompt tokens the model accepts (see JudgeSettings.context_tokens)
    pairs: int              # the user's pairs left unjudged (reason context_overflow)

    def describe(self) -> str:
        return (f"user {self.user}: prompt of ~{self.estimated_tokens:,} tokens exceeds the context window of "
                f"{self.window:,} tokens; {self.pairs:,} pair(s) not asked")


@dataclass(frozen=True)
class Summary:
    judge: str
    kind: str
    pairs: int
    judged: int
    failures: Mapping[str, int]
    planned_calls: int
    calls: int
    attempts: int
    cache_hits: int
    skipped_calls: int
    stopped: str | None
    usage: Usage
    cost: float | None
    estimated_input_tokens: int
    estimated_cost: float | None
    dry_run: bool
    elapsed: float
    agreement: Agreement | None = None
    # url -> requests, failures, and what the probe found: kind, evidence, structured mode, fallback,
    # ignored parameters, concurrency
    endpoints: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    context_tokens: int | None = None             # the window prompts were checked against (None: unchecked)
    context_overflow: tuple[Overflow, ...] = ()   # per user, the prompts above it (never cut, never sent)
    # the calls made, by outcome, and the planned requests not made: planned_calls = cache_hits +
    # shared_calls + answered_calls + partial_calls + failed_calls + skipped_calls + overflow_calls +
    # unasked_calls
    answered_calls: int = 0
    partial_calls: int = 0
    failed_calls: int = 0
    shared_calls: int = 0       # same prompt as another request of the run: asked once, answer shared
    unasked_calls: int = 0      # queued but never asked: the run was interrupted
    overflow_calls: int = 0     # queued, then not asked: above the window the endpoint revealed meanwhile
    probe_requests: int = 0     # endpoint probes and tokenizer calls (no generation)
    failure_messages: Mapping[str, str] = field(default_factory=dict)  # reason -> the first server message
    token_counts: Mapping[str, int] = field(default_factory=dict)      # how prompts were counted -> prompts
    halted_calls: int = 0       # queued, then not asked: the breaker had stopped the run (failing calls)
    stopped_early: str | None = None   # why the breaker stopped the run: the cause and what the server said
    paid_failed_calls: int = 0  # failed calls the server answered (HTTP 2xx): billed, yet no label
    paid_failed_usage: Usage = Usage()  # their tokens, as the answers report them
    # judged pairs whose candidate's shown text reads like an instruction to the judge (bias.InjectionCheck)
    injection: Mapping[str, Any] | None = None
    cache_invalid: tuple[str, ...] = ()  # cached rows read back as invalid (asked again): why, per row

    def call_counts(self) -> dict[str, int]:
        """The parts planned calls split into; they add up to ``planned_calls``."""
        return {"from cache": self.cache_hits, "same prompt as another": self.shared_calls,
                "answered": self.answered_calls, "partly answered": self.partial_calls,
                "failed": self.failed_calls, "not asked (budget)": self.skipped_calls,
                "not asked (above the window)": self.overflow_calls,
                "not asked (stopped: failing calls)": self.halted_calls,
                "not asked (interrupted)": self.unasked_calls}

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["usage"] = self.usage.as_dict()
        d["paid_failed_usage"] = self.paid_failed_usage.as_dict()
        return d

    def format(self) -> str:
        rows = [("pairs", f"{self.pairs:,}")] + self._outcome_rows()
        if self.kind == "llm":
            rows += self._call_rows()
        rows += self._note_rows()
        rows.append(("time", f"{self.elapsed:.1f} s"))
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)

    def _outcome_rows(self) -> list[tuple[str, str]]:
        """Judged and failed pairs, with each failure reason's first message (none in a dry run)."""
        rows: list[tuple[str, str]] = []
        failed = self.pairs - self.judged
        if not self.dry_run:
            rows.append(("judged", f"{self.judged:,}"))
            reasons = ", ".join(f"{r}: {n:,}" for r, n in sorted(self.failures.items(), key=lambda x: -x[1]))
            rows.append(("failed", f"{failed:,}" + (f" ({reasons})" if reasons else "")))
            for reason in sorted(self.failure_messages):
                rows.append((f"  {reason}", f"first message: {self.failure_messages[reason]}"))
        return rows

    def _call_rows(self) -> list[tuple[str, str]]:
        """An LLM judge's calls: planned and how each ended, tokens and cost, calls not asked."""
        parts = ", ".join(f"{n:,} {what}" for what, n in self.call_counts().items()
                          if n or what in ("answered", "from cache"))
        rows = [("calls planned", f"{self.planned_calls:,}" + ("" if self.dry_run else f" = {parts}")),
                ("cache hits", f"{self.cache_hits:,}")]
        if self.dry_run:
            rows += [("calls to make", f"{self.planned_calls - self.cache_hits - self.shared_calls:,}"),
                     ("est. input tokens", f"{self.estimated_input_tokens:,} (as the window check counts them: the "
                                                              "endpoint's tokenizer, else ≈3 characters per token "
                                                              "for OpenAI models, 2.5 for others)"),
                     ("est. cost", _money(self.estimated_cost)
                      + ("" if self.estimated_cost is None else " (prompts and labels; a reasoning model's "
                         "reasoning tokens come on top)"))]
        else:
            probes = f", {self.probe_requests:,} probe/tokenizer requests" if self.probe_requests else ""
            rows += [("calls made", f"{self.calls:,} ({self.attempts:,} HTTP requests{probes})"),
                     ("tokens", f"prompt {self.usage.prompt:,} (cached {self.usage.cached:,}), "
                                f"completion {self.usage.completion:,} (reasoning {self.usage.reasoning:,})"),
                     ("cost", _money(self.cost))]
        if self.skipped_calls:
            rows.append(("not asked", f"{self.skipped_calls:,} calls ({self.stopped})"))
        if self.stopped_early:
            rows.append(("stopped early", f"{self.stopped_early}; {self.halted_calls:,} calls not asked"))
        if self.paid_failed_calls:
            u = self.paid_failed_usage
            rows.append(("paid, failed", f"{self.paid_failed_calls:,} failed calls were answered (HTTP 2xx: "
                                         f"billed) without a usable label: prompt {u.prompt:,}, completion "
                                         f"{u.completion:,} tokens"))
        if self.context_overflow:
            over = self.context_overflow
            rows.append(("context overflow", f"{len(over):,} user(s), {sum(o.pairs for o in over):,} pairs not "
                                             f"asked: prompt above the {self.context_tokens:,}-token window"))
            rows += [(f"  {o.user}", f"~{o.estimated_tokens:,} tokens") for o in over[:20]]
            if len(over) > 20:
                rows.append(("  ...", f"{len(over) - 20:,} more in the summary JSON"))
        return rows

    def _note_rows(self) -> list[tuple[str, str]]:
        """Endpoints, token counting, repeat agreement and the warnings (injection, invalid cache)."""
        rows: list[tuple[str, str]] = []
        for url, v in self.endpoints.items():
            rows += _endpoint_rows(url, v, len(self.endpoints) > 1)
        if self.token_counts:
            rows.append(("prompt tokens", "counted by " + ", ".join(f"{how} ({n:,} prompts)"
                                                                    for how, n in self.token_counts.items())))
        if self.agreement is not None:
            a = self.agreement
            rows.append(("repeat agreement", f"{a.repeats} repeats over {a.pairs:,} pairs: all equal "
                                             f"{a.all_equal:.3f}, pairwise exact {a.pairwise_exact:.3f}, "
                                             f"Krippendorff alpha (interval) {a.alpha_interval:.3f}"))
        if self.injection:
            rows.append(("WARNING injection", self.injection["text"]))
        if self.cache_invalid:
            rows.append(("WARNING cache", f"{len(self.cache_invalid):,} cached answer(s) were invalid and asked again: "
                                          + "; ".join(self.cache_invalid[:3]) + (" …" if len(self.cache_invalid) > 3 else "")))
        return rows


def _endpoint_rows(url: str, v: Mapping[str, Any], several: bool) -> list[tuple[str, str]]:
    rows = []
    if several:
        rows.append((f"  {url}", f"{v.get('requests', 0):,} requests, {v.get('failures', 0):,} server failures"))
    if v.get("kind"):
        window = f", window {v['window']:,} tokens" if v.get("window") else ""
        rows.append(("endpoint", f"{url}: {v['kind']} ({v.get('evidence')}){window}; structured output "
                                 f"{v.get('structured')}"))
    if v.get("fallback"):
        rows.append(("  fallback", v["fallback"]))
    if v.get("server_temperature") is not None:
        rows.append(("  temperature", f"not sent: the server samples at its default {v['server_temperature']:g} "
                                      "(--temperature sets it)"))
    if v.get("ignored"):
        rows.append(("  ignored", f"{', '.join(v['ignored'])}: accepted by the server without effect"))
    for change in v.get("concurrency_changes") or ():
        rows.append(("  concurrency", change))
    return rows


def _money(x: float | None) -> str:
    return "unknown (no price for this model; see --prices)" if x is None else f"${x:,.4f}"


@dataclass(frozen=True)
class JudgeResult:
    name: str
    judgments: tuple[Judgment, ...]
    summary: Summary
    provenance: Mapping[str, Any]

    @property
    def labels(self) -> dict[tuple[str, str], int]:
        return {(j.qid, j.docid): j.label for j in self.judgments if j.label is not None}

    def qrels(self) -> Qrels | None:
        """Integer labels of the judged pairs; failed pairs are absent (never 0)."""
        rows = [(j.qid, j.docid, int(j.label)) for j in self.judgments if j.label is not None]
        if not rows:
            return None
        return Qrels.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "label"]), self.name)

    def write(self, qrels_path: str | os.PathLike, judgments_path: str | os.PathLike | None = None,
              summary_path: str | os.PathLike | None = None, protocol=None) -> dict[str, Path]:
        """Write qrels, the judgments JSONL and a summary JSON, each atomically; the summary names
        ``protocol`` (a ProtocolUse) when the judging followed one."""
        from ..outputs import output_set

        with output_set():  # qrels, log and summary replace the old ones together
            return self._write(qrels_path, judgments_path, summary_path, protocol)

    def _write(self, qrels_path, judgments_path, summary_path, protocol) -> dict[str, Path]:
        qrels_path = Path(qrels_path)
        default_judgments, default_summary = output_paths(qrels_path)
        judgments_path = Path(judgments_path or default_judgments)
        summary_path = Path(summary_path or default_summary)
        out: dict[str, Path] = {}
        qrels = self.qrels()
        if qrels is not None:
            out["qrels"] = write_qrels(qrels, qrels_path)
        elif qrels_path.exists():
            # nothing judged: an older qrels file here would pass for this run's labels, and an
            # empty qrels file is not valid input either
            remove_output(qrels_path)
            log.warning("no pair was judged: removed the earlier %s", qrels_path)
            out["removed_qrels"] = qrels_path
        prov = dict(self.provenance)
        with atomic_write(judgments_path) as fh:
            # the run's details once, on the first line; then one line per pair (read_judgments)
            fh.write(json.dumps({"format": JUDGMENTS_FORMAT, "provenance": prov}, separators=(",", ":")) + "\n")
            for j in self.judgments:
                fh.write(json.dumps({
                    "qid": j.qid, "docid": j.docid, "label": j.label, "status": j.status, "reason": j.reason,
                    "repeat_labels": list(j.repeat_labels), "repeat_reasons": list(j.repeat_reasons),
                    **({"criteria": list(j.criteria)} if any(c for c in j.criteria) else {}),
                    **({"score": j.score} if j.score is not None else {}),
                    **({"repeat_endpoints": list(j.endpoints)} if any(j.endpoints) else {}),
                    "from_cache": j.from_cache, "usage": j.usage.as_dict(),
                }, separators=(",", ":")) + "\n")
        out["judgments"] = judgments_path
        write_json(summary_path, {"summary": self.summary.as_dict(), "provenance": prov,
                                  **({"protocol": protocol.as_dict()} if protocol is not None else {})})
        out["summary"] = summary_path
        return out


JUDGMENTS_FORMAT = "recjudge-judgments/2"  # 2: the provenance on a header line, not on every pair's


def read_judgments(path: str | os.PathLike) -> tuple[dict, list[dict]]:
    """A judgments log: (the run's provenance, one dict per pair). A log written before the header
    (each line carrying the provenance) reads the same."""
    from ..errors import InputError

    provenance: dict = {}
    rows: list[dict] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise InputError(str(path), f"not JSON ({exc.msg})", "a judgments log is JSON Lines as "
                                 "recjudge judge writes it", line=n) from None
            if n == 1 and "format" in row and "qid" not in row:
                provenance = dict(row.get("provenance") or {})
                continue
            if "provenance" in row:
                provenance = provenance or dict(row.pop("provenance"))
            rows.append(row)
    return provenance, rows


def output_paths(qrels_path: str | os.PathLike) -> tuple[Path, Path]:
    """The judgments log and summary written beside ``qrels_path`` by default (NAME.judgments.jsonl,
    NAME.summary.json), so that callers can check them before any work."""
    qrels_path = Path(qrels_path)
    stem = qrels_path.name[: -len(".qrels")] if qrels_path.name.endswith(".qrels") else qrels_path.stem
    return qrels_path.with_name(stem + ".judgments.jsonl"), qrels_path.with_name(stem + ".summary.json")


def aggregate_labels(labels: Sequence[int], how: str = "mean") -> int:
    """``mean``: the mean rounded half up (2.5 -> 3). ``mode``: the most frequent label; among tied
    modes the one closest to the mean, then the lower."""
    if not labels:
        raise ConfigError("no labels to aggregate: give at least one label")
    if len(labels) == 1:
        return int(labels[0])  # one repeat (the default): nothing to combine
    mean = sum(labels) / len(labels)
    if how == "mean":
        return round_half_up(mean)
    if how == "mode":
        counts = Counter(labels)
        top = max(counts.values())
        return min((v for v, n in counts.items() if n == top), key=lambda v: (abs(v - mean), v))
    raise ConfigError(f"aggregate must be one of {', '.join(AGGREGATIONS)}")


def repeat_agreement(rows: Sequence[Sequence[int | None]]) -> Agreement | None:
    """Share of pairs whose repeats all agree, mean pairwise exact agreement, Krippendorff's alpha
    (interval metric) over units with at least two values."""
    units = [[v for v in r if v is not None] for r in rows]
    units = [u for u in units if len(u) >= 2]
    if not units:
        return None
    all_equal = float(np.mean([len(set(u)) == 1 for u in units]))
    exact = []
    for u in units:
        m = len(u)
        same = sum(c * (c - 1) for c in Counter(u).values())
        exact.append(same / (m * (m - 1)))
    alpha = alpha_interval(units)
    return Agreement(max(len(r) for r in rows), len(units), all_equal, float(np.mean(exact)), float(alpha))


def alpha_interval(units: Sequence[Sequence[float]]) -> float:
    """Krippendorff's α, interval metric, for any number of coders: ``units`` holds each unit's values
    (missing ones left out; units with fewer than two values carry no pairs and are skipped).

    :func:`recjudge.evaluation.agreement.krippendorff_alpha` takes exactly two complete coders;
    repeats and repeated experiments have more, so this is the m-coder form (equal to it for two
    coders, which the tests check). No variation at all (every value the same) counts as 1.0."""
    arrays = [np.asarray(u, dtype=float) for u in units if len(u) >= 2]
    if not arrays:
        return float("nan")
    values = np.concatenate(arrays)
    n = len(values)
    # sum over ordered pairs i != j of (a - b)^2 = 2 (m * sum(v^2) - (sum v)^2)
    d_o = sum(2 * (len(u) * np.sum(np.square(u)) - np.sum(u) ** 2) / (len(u) - 1) for u in arrays) / n
    d_e = 2 * (n * np.sum(values ** 2) - np.sum(values) ** 2) / (n * (n - 1))
    return float(1.0 - d_o / d_e) if d_e > 0 else (1.0 if d_o == 0 else float("nan"))
