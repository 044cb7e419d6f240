"""Judging pairs: configuration, the judge registry, the LLM run loop, aggregation and outputs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import os
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

from .._io import atomic_write, write_json
from ..data.trec import Qrels, write_qrels
from ..errors import ConfigError, InputError
from ..urls import DEFAULT_ENDPOINT, has_userinfo, public_url
from .cache import CallRecord, JudgeCache, Usage, cache_key, prompt_hash
from .client import GENERATION_PARAMS, ClientSettings, OpenAIJudgeClient, Request
from .profile import HistoryProfiles, ProfileSource, QueryProfiles, candidates_block
from .prompts import Template, load_template, template_provenance
from .select import Pair

__all__ = [
    "JudgeConfig", "Judgment", "JudgeResult", "Summary", "Agreement", "JudgeSpec", "JudgeContext",
    "register_judge", "get_judge", "judge_names", "judge_pairs", "aggregate_labels", "repeat_agreement",
    "estimate_tokens", "load_prices", "AGGREGATIONS",
]

log = logging.getLogger("recjudge.judge")
AGGREGATIONS = ("mean", "mode")
STRUCTURED = ("auto", "on", "off")
TRANSPORTS = ("auto", "lean", "sdk")


# ------------------------------------------------------------------------------------ configuration

@dataclass(frozen=True)
class JudgeConfig:
    """Everything that decides a judgment. Unknown keys are rejected (:meth:`from_dict`)."""

    judge: str = "openai"
    model: str = "gpt-4o-mini"
    base_url: str | Sequence[str] | None = None  # several: servers of the same model, one cache
    api_key_env: str = "OPENAI_API_KEY"
    prompt: str = "baseline"
    fields: str = "title+genres"
    profile_size: int = 50
    sampling: str = "random"
    seed: int = 0
    repeats: int = 1
    aggregate: str = "mean"
    items_per_call: int = 1
    concurrency: int = 8
    timeout: float = 60.0
    max_attempts: int = 6
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    structured: str = "auto"
    params: Mapping[str, Any] = field(default_factory=dict)
    max_calls: int | None = None
    max_cost: float | None = None
    prices: str | None = None
    batch: bool = False
    batch_poll: float = 30.0
    dry_run: bool = False
    drain_grace: float = 10.0  # on SIGINT/SIGTERM: seconds to let calls in flight finish and be cached
    endpoint_cooldown: float = 1.0  # first rest of a failing endpoint, doubling per failure (to 60 s)
    transport: str = "sdk"  # chat requests: sdk (the openai client) | lean (built-in HTTP/1.1) | auto

    def __post_init__(self):
        if self.base_url is not None and not isinstance(self.base_url, str):
            urls = tuple(self.base_url)
            if not urls or not all(isinstance(u, str) and u for u in urls):
                raise ConfigError(f"base_url must be a URL or a list of URLs, got {self.base_url!r}")
            if len(set(urls)) != len(urls):
                raise ConfigError("an endpoint URL is given twice; give each server once")
            object.__setattr__(self, "base_url", urls[0] if len(urls) == 1 else urls)
        checks = [
            (self.profile_size >= 1, f"profile_size must be at least 1, got {self.profile_size}"),
            (self.repeats >= 1, f"repeats must be at least 1, got {self.repeats}"),
            (self.items_per_call >= 1, f"items_per_call must be at least 1, got {self.items_per_call}"),
            (self.concurrency >= 1, f"concurrency must be at least 1, got {self.concurrency}"),
            (self.max_attempts >= 1, f"max_attempts must be at least 1, got {self.max_attempts}"),
            (self.timeout > 0, f"timeout must be positive, got {self.timeout}"),
            (self.drain_grace >= 0, f"drain_grace must be 0 or more, got {self.drain_grace}"),
            (self.endpoint_cooldown >= 0, f"endpoint_cooldown must be 0 or more, got {self.endpoint_cooldown}"),
            (not (self.batch and len(self.endpoints()) > 1), "the Batch API takes one endpoint: give one "
             "--base-url with --batch"),
            (self.aggregate in AGGREGATIONS, f"aggregate must be one of {', '.join(AGGREGATIONS)}"),
            (self.structured in STRUCTURED, f"structured must be one of {', '.join(STRUCTURED)}"),
            (self.transport in TRANSPORTS, f"transport must be one of {', '.join(TRANSPORTS)}"),
            (self.max_calls is None or self.max_calls >= 0, "max_calls must be 0 or more"),
            (self.max_cost is None or self.max_cost >= 0, "max_cost must be 0 or more"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        for url in self.endpoints():
            if has_userinfo(url):
                # the HTTP layer would send them as Basic auth instead of the key, and the URL is
                # written to caches, logs and reports; the message shows the URL without them
                raise ConfigError(f"the endpoint URL {public_url(url)} carries credentials (user:password@ "
                                  "before the host); remove them and put the key in the environment variable "
                                  f"named by --api-key-env (now {self.api_key_env})")
            if url and urlsplit(url).query:
                # the openai client appends paths after the query string (POST /v1?x=1/chat/...);
                # a key passed this way would also be written wherever the URL is
                raise ConfigError(f"the endpoint URL {public_url(url)} carries a query string; give the URL "
                                  "without it (e.g. http://host:8000/v1) and the key through --api-key-env")
        unknown = sorted(set(self.params) - set(GENERATION_PARAMS))
        if unknown:
            raise ConfigError(f"unknown generation parameter(s) {', '.join(unknown)}; "
                              f"pass-through parameters are {', '.join(GENERATION_PARAMS)}")
        extra = self.params.get("extra_body")
        if extra is not None and not (isinstance(extra, Mapping) and all(isinstance(k, str) for k in extra)):
            raise ConfigError(f"generation parameter extra_body must be a JSON object of request fields, got "
                              f"{extra!r}; e.g. --param 'extra_body={{\"top_k\": 20}}'")
        object.__setattr__(self, "params", dict(self.params))

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> JudgeConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown judge setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**values)

    def replace(self, **changes) -> JudgeConfig:
        return dataclasses.replace(self, **changes)

    def endpoints(self) -> tuple[str | None, ...]:
        """The endpoint URLs (``base_url`` is one URL or several); (None,) is the OpenAI API."""
        if self.base_url is None or isinstance(self.base_url, str):
            return (self.base_url,)
        return tuple(self.base_url)

    def public_endpoints(self) -> list[str]:
        return [public_url(u) or DEFAULT_ENDPOINT for u in self.endpoints()]

    def endpoint_id(self) -> str:
        """The endpoint part of the cache key: public URLs, sorted (several endpoints serve as one)."""
        return " ".join(sorted({public_url(u) or DEFAULT_ENDPOINT for u in self.endpoints()}))

    def key_params(self) -> dict[str, Any]:
        """The generation parameters that enter the cache key."""
        return {"structured": self.structured, **self.params}


# ------------------------------------------------------------------------------------------ records

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
    endpoints: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # url -> requests, failures

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["usage"] = self.usage.as_dict()
        return d

    def format(self) -> str:
        rows = [("pairs", f"{self.pairs:,}")]
        failed = self.pairs - self.judged
        if not self.dry_run:
            rows.append(("judged", f"{self.judged:,}"))
            reasons = ", ".join(f"{r}: {n:,}" for r, n in sorted(self.failures.items(), key=lambda x: -x[1]))
            rows.append(("failed", f"{failed:,}" + (f" ({reasons})" if reasons else "")))
        if self.kind == "llm":
            rows += [("calls planned", f"{self.planned_calls:,}"), ("cache hits", f"{self.cache_hits:,}")]
            if self.dry_run:
                rows += [("calls to make", f"{self.planned_calls - self.cache_hits:,}"),
                         ("est. input tokens", f"{self.estimated_input_tokens:,} (≈4 characters per token)"),
                         ("est. cost", _money(self.estimated_cost))]
            else:
                rows += [("calls made", f"{self.calls:,} ({self.attempts:,} HTTP requests)"),
                         ("tokens", f"prompt {self.usage.prompt:,} (cached {self.usage.cached:,}), "
                                    f"completion {self.usage.completion:,} (reasoning {self.usage.reasoning:,})"),
                         ("cost", _money(self.cost))]
            if self.skipped_calls:
                rows.append(("not asked", f"{self.skipped_calls:,} calls ({self.stopped})"))
        if len(self.endpoints) > 1:
            rows += [(f"  {url}", f"{v['requests']:,} requests, {v['failures']:,} server failures")
                     for url, v in self.endpoints.items()]
        if self.agreement is not None:
            a = self.agreement
            rows.append(("repeat agreement", f"{a.repeats} repeats over {a.pairs:,} pairs: all equal "
                                             f"{a.all_equal:.3f}, pairwise exact {a.pairwise_exact:.3f}, "
                                             f"Krippendorff alpha (interval) {a.alpha_interval:.3f}"))
        rows.append(("time", f"{self.elapsed:.1f} s"))
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


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
              summary_path: str | os.PathLike | None = None) -> dict[str, Path]:
        """Write qrels, the judgments JSONL and a summary JSON, each atomically."""
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
            qrels_path.unlink()
            log.warning("no pair was judged: removed the earlier %s", qrels_path)
            out["removed_qrels"] = qrels_path
        prov = dict(self.provenance)
        with atomic_write(judgments_path) as fh:
            for j in self.judgments:
                fh.write(json.dumps({
                    "qid": j.qid, "docid": j.docid, "label": j.label, "status": j.status, "reason": j.reason,
                    "repeat_labels": list(j.repeat_labels), "repeat_reasons": list(j.repeat_reasons),
                    **({"criteria": list(j.criteria)} if any(c for c in j.criteria) else {}),
                    **({"score": j.score} if j.score is not None else {}),
                    **({"repeat_endpoints": list(j.endpoints)} if any(j.endpoints) else {}),
                    "from_cache": j.from_cache, "usage": j.usage.as_dict(), "provenance": prov,
                }, separators=(",", ":")) + "\n")
        out["judgments"] = judgments_path
        write_json(summary_path, {"summary": self.summary.as_dict(), "provenance": prov})
        out["summary"] = summary_path
        return out


def output_paths(qrels_path: str | os.PathLike) -> tuple[Path, Path]:
    """The judgments log and summary written beside ``qrels_path`` by default (NAME.judgments.jsonl,
    NAME.summary.json), so that callers can check them before any work."""
    qrels_path = Path(qrels_path)
    stem = qrels_path.name[: -len(".qrels")] if qrels_path.name.endswith(".qrels") else qrels_path.stem
    return qrels_path.with_name(stem + ".judgments.jsonl"), qrels_path.with_name(stem + ".summary.json")


# ---------------------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class JudgeContext:
    pairs: tuple[Pair, ...]
    collection: Any
    profiles: ProfileSource
    config: JudgeConfig
    cache_path: Path | None
    name: str
    history: pd.DataFrame | None = None
    progress: Callable[[str], None] | None = None


@dataclass(frozen=True)
class JudgeSpec:
    """A judge: ``kind`` is ``llm`` or ``baseline`` (a non-LLM reference, declared as such in outputs)."""

    name: str
    kind: str
    description: str
    run: Callable[[JudgeContext], JudgeResult]


_JUDGES: dict[str, JudgeSpec] = {}


def register_judge(spec: JudgeSpec) -> JudgeSpec:
    if spec.name in _JUDGES:
        raise ValueError(f"a judge named {spec.name!r} is already registered")
    if spec.kind not in ("llm", "baseline"):
        raise ValueError(f"judge kind must be 'llm' or 'baseline', got {spec.kind!r}")
    _JUDGES[spec.name] = spec
    return spec


def get_judge(name: str) -> JudgeSpec:
    _ensure_builtin()
    try:
        return _JUDGES[name]
    except KeyError:
        raise ConfigError(f"unknown judge {name!r}; choose one of {', '.join(judge_names())}") from None


def judge_names() -> tuple[str, ...]:
    _ensure_builtin()
    return tuple(_JUDGES)


def _ensure_builtin() -> None:
    if "openai" not in _JUDGES:
        register_judge(JudgeSpec("openai", "llm", "an LLM behind any OpenAI-compatible endpoint", _run_llm))
        from . import baselines  # noqa: F401  (registers overlap and popularity)


# ------------------------------------------------------------------------------------------ entry

def judge_pairs(pairs: Iterable[Pair | tuple[str, str]], collection=None, config: JudgeConfig | None = None,
                *, cache_path: str | os.PathLike | None = None, history: pd.DataFrame | None = None,
                topics: Mapping[str, str] | None = None, topics_source: str = "<topics>",
                name: str = "judge", progress: Callable[[str], None] | None = None) -> JudgeResult:
    """Judge (user, item) pairs with the judge ``config.judge`` names.

    ``history`` is the interactions used as profiles (a split's ``train``; default: all of the
    collection's). ``topics`` (qid -> text) replaces histories with queries. ``cache_path`` is the
    SQLite cache that makes re-runs resume; without it answers are kept in memory only.
    """
    config = config or JudgeConfig()
    spec = get_judge(config.judge)
    pairs = tuple(Pair(str(q), str(d)) for q, d in pairs)
    if len(set(pairs)) != len(pairs):
        raise ConfigError("the pairs to judge hold duplicates; select them with select_pairs")
    if collection is None:
        raise ConfigError("judging needs a collection (item metadata)")
    if topics is not None:
        profiles: ProfileSource = QueryProfiles(topics, collection, config.fields, source=topics_source)
    else:
        profiles = HistoryProfiles(collection, config.fields, config.profile_size, history=history,
                                   sampling=config.sampling, seed=config.seed, users={p.qid for p in pairs})
    ctx = JudgeContext(pairs, collection, profiles, config, Path(cache_path) if cache_path else None, name,
                       history, progress)
    return spec.run(ctx)


# ------------------------------------------------------------------------------------- aggregation

def aggregate_labels(labels: Sequence[int], how: str = "mean") -> int:
    """``mean``: the mean rounded half up (2.5 -> 3). ``mode``: the most frequent label; among tied
    modes the one closest to the mean, then the lower."""
    if not labels:
        raise ValueError("no labels to aggregate")
    mean = sum(labels) / len(labels)
    if how == "mean":
        return int(math.floor(mean + 0.5))
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
    values = np.concatenate([np.asarray(u, dtype=float) for u in units])
    n = len(values)
    # sum over ordered pairs i != j of (a - b)^2 = 2 (m * sum(v^2) - (sum v)^2)
    d_o = sum(2 * (len(u) * np.sum(np.square(u)) - np.sum(u) ** 2) / (len(u) - 1) for u in
              (np.asarray(x, dtype=float) for x in units)) / n
    d_e = 2 * (n * np.sum(values ** 2) - np.sum(values) ** 2) / (n * (n - 1))
    alpha = 1.0 - d_o / d_e if d_e > 0 else (1.0 if d_o == 0 else float("nan"))
    return Agreement(max(len(r) for r in rows), len(units), all_equal, float(np.mean(exact)), float(alpha))


# ------------------------------------------------------------------------------------ cost and tokens

def estimate_tokens(text: str) -> int:
    """Input tokens without a tokenizer: ≈ 4 characters per token, OpenAI's rule of thumb for English
    text (it overestimates for plain English with BPE tokenizers of 200k vocabularies and
    underestimates for digits and non-Latin scripts; good to ±25% for budgeting)."""
    return (len(text) + 3) // 4


def estimate_messages_tokens(system: str, user: str) -> int:
    return estimate_tokens(system) + estimate_tokens(user) + 3 * 2 + 3  # per-message and reply priming


def load_prices(path: str | os.PathLike | None = None) -> dict[str, dict[str, float]]:
    """Built-in prices (USD per million tokens) updated with a user file of the same shape."""
    builtin = json.loads((Path(__file__).with_name("prices.json")).read_text("utf-8"))
    table = {k: v for k, v in builtin.items() if not k.startswith("_")}
    if path is not None:
        p = Path(path)
        try:
            user = json.loads(p.read_text("utf-8"))
        except FileNotFoundError:
            raise InputError(str(p), "price table not found", "check the path") from None
        except json.JSONDecodeError as exc:
            raise InputError(str(p), f"invalid JSON: {exc.msg}", "write {\"MODEL\": {\"input\": USD_PER_MTOK, "
                             "\"output\": USD_PER_MTOK}}", line=exc.lineno) from None
        shape = "{\"MODEL\": {\"input\": USD_PER_MTOK, \"output\": USD_PER_MTOK}}"
        if not isinstance(user, dict):
            raise InputError(str(p), f"expected a JSON object of models, got a {type(user).__name__}",
                             f"write {shape}")
        for model, entry in user.items():
            if model.startswith("_"):
                continue
            if not isinstance(entry, dict) or not {"input", "output"} <= set(entry) or \
                    set(entry) - {"input", "cached_input", "output"}:
                raise InputError(str(p), f"model {model!r}: expected keys input, output and optionally "
                                 "cached_input (USD per million tokens)", "fix the entry")
            for k, v in entry.items():
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                    raise InputError(str(p), f"model {model!r}: {k} is {json.dumps(v)}, not a price",
                                     f"give {k} as a non-negative number of USD per million tokens, "
                                     f"e.g. \"{k}\": 0.15")
            table[model] = {k: float(v) for k, v in entry.items()}
    return table


def _cost(usage: Usage, price: Mapping[str, float] | None) -> float | None:
    if price is None:
        return None
    cached_price = price.get("cached_input", price["input"])
    return ((usage.prompt - usage.cached) * price["input"] + usage.cached * cached_price
            + usage.completion * price["output"]) / 1e6


# --------------------------------------------------------------------------------------- LLM judge

def _api_key(config: JudgeConfig) -> str:
    key = os.environ.get(config.api_key_env)
    if key:
        return key
    if config.base_url:
        return "not-needed"  # local servers (vLLM, Ollama, llama.cpp) usually ignore the key
    raise ConfigError(f"no API key: set the environment variable {config.api_key_env} "
                      "(or name another with --api-key-env), or point --base-url at a server that needs none")


def _output_estimate(template: Template, n_items: int) -> int:
    per_item = 8 + 6 * len(template.criteria)
    return 10 + per_item * n_items


class _Budget:
    def __init__(self, config: JudgeConfig, price):
        self.max_calls = config.max_calls
        self.max_cost = config.max_cost
        self.price = price
        self.started = 0
        self.spent = 0.0
        self.reserved = 0.0
        self.stopped: str | None = None
        # the dearest single attempt seen so far: answers (reasoning above all) can be far longer
        # than the estimate, so reservations grow to what calls actually cost
        self.max_seen = 0.0
        # with no output cap (max_tokens) nothing bounds a call's cost before one is answered: the
        # first call under --max-cost goes alone, the others wait for its cost
        self.capped = any(config.params.get(k) for k in ("max_tokens", "max_completion_tokens"))
        self.needs_probe = self.max_cost is not None and not self.capped

    def reservation(self, est_cost: float) -> float:
        return max(est_cost, self.max_seen)

    def take(self, est_cost: float, retry: bool = False) -> bool:
        if self.stopped:
            return False
        if not retry and self.max_calls is not None and self.started >= self.max_calls:
            self.stopped = f"--max-calls {self.max_calls} reached"
            return False
        if self.max_cost is not None and self.spent + self.reserved + est_cost > self.max_cost:
            self.stopped = f"--max-cost ${self.max_cost:g} would be exceeded"
            return False
        self.started += not retry
        self.reserved += est_cost
        return True

    def allows_retry(self, used: Usage, attempts: int = 1) -> bool:
        """Whether a call that has already used ``used`` tokens in ``attempts`` attempts may try
        again within --max-cost."""
        if self.max_cost is None:
            return True
        used_cost = _cost(used, self.price) or 0.0
        # the next attempt may cost as much as this call's attempts so far or the dearest one seen
        following = max(self.max_seen, used_cost / max(1, attempts))
        ok = self.spent + self.reserved + used_cost + following <= self.max_cost
        if not ok and not self.stopped:
            self.stopped = f"--max-cost ${self.max_cost:g} would be exceeded"
        return ok

    def settle(self, est_cost: float, usage: Usage, attempts: int = 1) -> None:
        self.reserved -= est_cost
        cost = _cost(usage, self.price) or 0.0
        self.spent += cost
        self.max_seen = max(self.max_seen, cost / max(1, attempts))


def _requests_for_user(ctx: JudgeContext, template: Template, qid: str, items: Sequence[str],
                       key_params: Mapping) -> Iterator[Request]:
    m = ctx.config.items_per_call
    endpoint = ctx.config.endpoint_id()
    for start in range(0, len(items), m):
        chunk = tuple(items[start:start + m])
        keys = None if m == 1 else tuple(f"c{i + 1}" for i in range(len(chunk)))
        profile = ctx.profiles.profile_text(qid, exclude=chunk)
        cands = candidates_block([ctx.profiles.render_item(i, qid) for i in chunk], keys)
        messages = template.render(profile, cands, keys)
        psha = prompt_hash(messages.system + "\x00" + messages.user)
        for r in range(ctx.config.repeats):
            key = cache_key(template.sha256, ctx.config.model, key_params, psha, r, endpoint)
            yield Request(key, qid, chunk, keys, r, messages, psha)


def _run_llm(ctx: JudgeContext) -> JudgeResult:
    config = ctx.config
    template = load_template(config.prompt)
    if template.profile_kind != ctx.profiles.kind:
        need = "--topics (queries as profiles)" if template.profile_kind == "query" else "user histories"
        raise ConfigError(f"prompt template {template.name!r} expects {template.profile_kind} profiles: "
                          f"use it with {need}, or choose a template for {ctx.profiles.kind} profiles")
    try:
        asyncio.get_running_loop()
        in_loop = True
    except RuntimeError:
        in_loop = False
    if not in_loop:
        llm_run = _LLMRun(ctx, template)
        result = asyncio.run(llm_run.run())
        if llm_run.interrupted is not None:
            # raised here, outside the event loop, once the calls in flight are cached
            _reraise_signal(llm_run.interrupted, llm_run.previous_handlers.get(llm_run.interrupted))
        return result
    # called from inside an event loop (a notebook): run on a loop of our own in a worker thread
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(_LLMRun(ctx, template).run())).result()


class _LLMRun:
    def __init__(self, ctx: JudgeContext, template: Template):
        self.ctx = ctx
        self.config = ctx.config
        self.template = template
        self.prices = load_prices(self.config.prices)
        self.price = self.prices.get(self.config.model)
        if self.config.max_cost is not None and self.price is None and not self.config.dry_run:
            raise ConfigError(f"--max-cost needs a price for model {self.config.model!r}; add it to a price table "
                              "passed with --prices (USD per million tokens: input, cached_input, output)")
        self.key_params = self.config.key_params()
        # answers by cache key; requests with the same rendered prompt share one answer, which
        # _result maps onto each request's own (qid, items) by candidate position
        self.results: dict[str, CallRecord] = {}
        self.requests: list[Request] = []
        self._queued: set[str] = set()
        self.hits = 0
        self.planned = 0
        self.skipped = 0
        self.est_tokens = 0
        self.est_cost = 0.0
        self.calls = 0
        self.pre_failed: dict[Pair, str] = {}
        self.budget = _Budget(self.config, self.price)
        self._reserved: dict[str, float] = {}
        self._probe: asyncio.Event | None = None
        self.interrupted: int | None = None  # the signal that stopped the run
        self.previous_handlers: dict[int, Any] = {}

    def _plan(self) -> Iterator[tuple[str, list[str]]]:
        by_user: dict[str, list[str]] = defaultdict(list)
        for p in self.ctx.pairs:
            if not self.ctx.profiles.has(p.qid):
                self.pre_failed[p] = "no_profile"
            elif not self.ctx.profiles.knows_item(p.docid):
                self.pre_failed[p] = "unknown_item"
            else:
                by_user[p.qid].append(p.docid)
        yield from by_user.items()

    def _narrow(self, req: Request, items: tuple[str, ...]) -> Request:
        """``req`` asking only for ``items`` (a retry of a partial answer): the same profile (it leaves
        out every candidate of the full request) and the same candidate keys, so answers map back."""
        profiles = self.ctx.profiles
        keys = tuple(k for k, i in zip(req.keys, req.items) if i in items)
        items = tuple(i for i in req.items if i in items)
        cands = candidates_block([profiles.render_item(i, req.qid) for i in items], keys)
        messages = self.template.render(profiles.profile_text(req.qid, exclude=req.items), cands, keys)
        return dataclasses.replace(req, items=items, keys=keys, messages=messages)

    def _est(self, req: Request) -> tuple[int, float]:
        tokens = estimate_messages_tokens(req.messages.system, req.messages.user)
        out = _output_estimate(self.template, len(req.items))
        cost = _cost(Usage(tokens, 0, out, 0), self.price)
        return tokens, cost or 0.0

    def _reserve(self, req: Request) -> float:
        """What --max-cost sets aside for a call: the output cap when one is set, else the estimate
        or the dearest attempt seen, whichever is more."""
        if self.config.max_cost is None:
            return 0.0  # nothing to reserve against
        tokens, est = self._est(req)
        cap = max((int(self.config.params.get(k) or 0) for k in ("max_tokens", "max_completion_tokens")),
                  default=0)
        if cap:
            est = max(est, _cost(Usage(tokens, 0, cap, 0), self.price) or 0.0)
        return self.budget.reservation(est)

    async def run(self) -> JudgeResult:
        started = time.perf_counter()
        path = self.ctx.cache_path
        if path is None or (self.config.dry_run and not Path(path).exists()):
            path = ":memory:"  # a dry run reads an existing cache and creates none
        cache = JudgeCache(path)
        client = None
        try:
            if not self.config.dry_run:
                urls = self.config.endpoints()
                client = OpenAIJudgeClient(ClientSettings(
                    self.config.model, urls if len(urls) > 1 else urls[0], _api_key(self.config),
                    self.config.timeout, self.config.max_attempts, self.config.backoff_initial,
                    self.config.backoff_max, self.config.structured, self.config.params,
                    self.config.endpoint_cooldown, self.config.concurrency, self.config.transport),
                    self.template)
                client.allow_retry = self.budget.allows_retry
                client.narrow = self._narrow
            if self.config.batch and not self.config.dry_run:
                await self._run_batch(cache, client)
            else:
                await self._run_chat(cache, client)
        finally:
            if client is not None:
                await client.close()
            cache.close()
        return self._result(time.perf_counter() - started, client.attempts if client else 0,
                            client.endpoint_stats() if client else {})

    def _pending(self, cache: JudgeCache) -> Iterator[list[Request]]:
        """Per user: the requests the cache cannot answer (hits are recorded on the way)."""
        for qid, items in self._plan():
            reqs = list(_requests_for_user(self.ctx, self.template, qid, items, self.key_params))
            self.planned += len(reqs)
            found = cache.get_ok([r.key for r in reqs])
            self.hits += len(found)
            self.requests.extend(reqs)
            self.results.update({k: dataclasses.replace(v, via="cache") for k, v in found.items()})
            missing = []
            for r in reqs:
                if r.key not in found and r.key not in self._queued:  # same prompt asked once
                    self._queued.add(r.key)
                    missing.append(r)
            for r in missing:
                tokens, cost = self._est(r)
                self.est_tokens += tokens
                self.est_cost += cost
            yield missing

    def _store(self, cache: JudgeCache, rec: CallRecord, req: Request) -> None:
        # the cache merges labels an earlier partial answer gave; keep what it holds
        stored = cache.put(rec, self.template.sha256, self.config.model, self.key_params, req.prompt_sha)
        self.results[req.key] = rec if stored.status == rec.status and stored.labels == rec.labels else \
            _for_request(stored, req) or rec
        self.calls += 1

    async def _run_chat(self, cache: JudgeCache, client: OpenAIJudgeClient | None) -> None:
        queue: asyncio.Queue = asyncio.Queue(maxsize=self.config.concurrency * 4)
        workers_n = self.config.concurrency
        progress = _Progress(self.ctx.progress)

        async def produce():
            for missing in self._pending(cache):
                for req in missing:
                    await queue.put(req)
            for _ in range(workers_n):
                await queue.put(None)

        async def work():
            while True:
                req = await queue.get()
                if req is None or self.interrupted is not None:
                    return
                if client is None:  # dry run: counted in _pending
                    continue
                if self.budget.needs_probe:
                    if self._probe is None:
                        self._probe = asyncio.Event()
                    else:
                        await self._probe.wait()
                est_cost = self._reserve(req)
                if not self.budget.take(est_cost):
                    self.skipped += 1
                    if self._probe is not None:
                        self._probe.set()
                    continue
                try:
                    rec = await client.call(req)
                finally:
                    if self._probe is not None:
                        self.budget.needs_probe = False
                        self._probe.set()
                self.budget.settle(est_cost, rec.usage, rec.attempts)
                self._store(cache, rec, req)
                progress.tick(self.calls, self.hits)

        if client is None:
            for _ in self._pending(cache):
                pass
            return
        producer = asyncio.create_task(produce())
        workers = [asyncio.create_task(work()) for _ in range(workers_n)]
        tasks = [producer, *workers]
        stop = asyncio.Event()
        restore = self._catch_signals(stop, tasks)
        try:
            everything = asyncio.ensure_future(asyncio.gather(*tasks))
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait({everything, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if stop.is_set() and not everything.done():
                # SIGINT/SIGTERM: ask nothing new; calls in flight finish (and are cached) within
                # the grace period, the rest are cancelled and re-asked by the next run
                producer.cancel()
                await asyncio.gather(producer, return_exceptions=True)
                while not queue.empty():  # idle workers take a sentinel and leave
                    queue.get_nowait()
                for _ in range(workers_n):
                    queue.put_nowait(None)
                log.warning("interrupted: letting the calls in flight finish (at most %g s; interrupt again "
                            "to stop now)", self.config.drain_grace)
                await asyncio.wait(workers, timeout=self.config.drain_grace or None)
                for t in tasks:
                    t.cancel()
                await asyncio.gather(everything, return_exceptions=True)
                return
            stopped.cancel()
            await everything
        except BaseException:
            # a fatal error (refused key, unknown model) stops every worker and the producer, which
            # would otherwise wait forever on a full queue
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            restore()

    def _catch_signals(self, stop: asyncio.Event, tasks: list) -> Callable[[], None]:
        """Turn SIGINT/SIGTERM into a drain of the calls in flight; a second signal stops at once.
        Returns the function that restores the previous handlers."""
        import signal

        loop = asyncio.get_running_loop()
        installed = []

        def on_signal(signum: int) -> None:
            if self.interrupted is None:
                self.interrupted = signum
                stop.set()
            else:  # impatient: cancel what is in flight
                for t in tasks:
                    t.cancel()

        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                previous = signal.getsignal(signum)
                if previous in (signal.SIG_IGN, None):
                    continue
                loop.add_signal_handler(signum, on_signal, signum)
            except (ValueError, RuntimeError, NotImplementedError):  # not the main thread, or no support
                continue
            self.previous_handlers[signum] = previous
            installed.append(signum)

        def restore() -> None:
            for signum in installed:
                loop.remove_signal_handler(signum)
                signal.signal(signum, self.previous_handlers[signum])
        return restore

    async def _run_batch(self, cache: JudgeCache, client: OpenAIJudgeClient) -> None:
        by_key: dict[str, Request] = {}
        todo: list[Request] = []
        for missing in self._pending(cache):
            for req in missing:
                by_key[req.key] = req
                todo.append(req)
        # a batch submitted by an interrupted run is collected, not submitted again
        for batch_id, keys in cache.pending_batches():
            mine = [k for k in keys if k in by_key]
            if mine:
                log.info("resuming batch %s (%d calls)", batch_id, len(mine))
                await self._collect(cache, client, batch_id, keys, by_key)
        for round_ in range(self.config.max_attempts):
            todo = [r for r in todo if r.key not in self.results or self.results[r.key].status != "ok"]
            if not todo:
                return
            allowed = []
            for req in todo:
                est = self._reserve(req)
                # resubmitting a failed call is a retry: --max-calls counts first submissions only
                if self.budget.take(est, retry=round_ > 0):
                    allowed.append(req)
                    self._reserved[req.key] = est
                else:
                    self.skipped += len(todo) - len(allowed)
                    break
            todo = allowed
            if not allowed:
                return
            for start in range(0, len(allowed), 50_000):  # the Batch API's per-file request limit
                part = allowed[start:start + 50_000]
                batch_id, file_id = await client.submit_batch(part)
                cache.add_batch(batch_id, file_id, [r.key for r in part])
                log.info("batch %s submitted (%d calls, round %d)", batch_id, len(part), round_ + 1)
                await self._collect(cache, client, batch_id, [r.key for r in part], by_key)

    async def _collect(self, cache, client, batch_id, keys, by_key) -> None:
        status, out, err = await client.poll_batch(
            batch_id, self.config.batch_poll,
            lambda s, counts: log.info("batch %s: %s %s", batch_id, s, counts or ""))
        seen = set()
        for text in (out, err):
            for line in text.splitlines():
                if not line.strip():
                    continue
                obj = json.loads(line)
                req = by_key.get(obj.get("custom_id"))
                if req is None:
                    continue
                rec = client.batch_line(req, obj)
                self.budget.settle(self._reserved.pop(req.key, 0.0), rec.usage, rec.attempts)
                prev = self.results.get(req.key)
                if prev is not None and prev.via != "cache":
                    # an earlier round of this run: its tokens were billed too (failed lines
                    # included), so the call's record carries the sum over rounds
                    rec = dataclasses.replace(rec, usage=prev.usage + rec.usage,
                                              attempts=prev.attempts + rec.attempts)
                self._store(cache, rec, req)
                seen.add(req.key)
        for k in keys:
            if k not in seen and k in by_key:
                req = by_key[k]
                self.budget.settle(self._reserved.pop(k, 0.0), Usage())
                self._store(cache, CallRecord(k, req.qid, req.items, req.repeat, "failed", f"batch_{status}",
                                              f"batch {batch_id} ended {status} without this request",
                                              via="batch"), req)
        cache.close_batch(batch_id, status)

    def _result(self, elapsed: float, attempts: int, endpoint_stats: Mapping | None = None) -> JudgeResult:
        config = self.config
        per_pair: dict[Pair, list[tuple[int, CallRecord | None]]] = defaultdict(list)
        for req in self.requests:
            rec = self.results.get(req.key)
            if rec is None:
                continue
            rec = _for_request(rec, req)
            if rec is not None:
                for item in req.items:
                    per_pair[Pair(req.qid, item)].append((req.repeat, rec))
        judgments = []
        failures: Counter = Counter()
        rows_for_agreement = []
        for p in self.ctx.pairs:
            if p in self.pre_failed:
                reason = self.pre_failed[p]
                failures[reason] += 1
                judgments.append(Judgment(p.qid, p.docid, None, "failed", reason, (None,) * config.repeats,
                                          (reason,) * config.repeats))
                continue
            by_repeat = {r: rec for r, rec in per_pair.get(p, [])}
            labels: list[int | None] = []
            reasons: list[str | None] = []
            crits: list[Mapping[str, int] | None] = []
            endpoints: list[str | None] = []
            usage = Usage()
            from_cache = 0
            for r in range(config.repeats):
                rec = by_repeat.get(r)
                if rec is None:
                    labels.append(None)
                    reasons.append("not_asked" if not config.dry_run else "dry_run")
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
            rows_for_agreement.append(labels)
            if ok:
                judgments.append(Judgment(p.qid, p.docid, aggregate_labels(ok, config.aggregate), "ok", None,
                                          tuple(labels), tuple(reasons), tuple(crits), from_cache, usage,
                                          endpoints=tuple(endpoints)))
            else:
                reason = next((r for r in reasons if r), "unknown")
                failures[reason] += 1
                judgments.append(Judgment(p.qid, p.docid, None, "failed", reason, tuple(labels), tuple(reasons),
                                          tuple(crits), from_cache, usage, endpoints=tuple(endpoints)))
        asked = [rec.usage for rec in self.results.values() if rec.via != "cache"]
        usage = Usage(sum(u.prompt for u in asked), sum(u.cached for u in asked), sum(u.completion for u in asked),
                      sum(u.reasoning for u in asked))
        summary = Summary(
            judge=config.judge, kind="llm", pairs=len(self.ctx.pairs),
            judged=sum(j.label is not None for j in judgments), failures=dict(failures),
            planned_calls=self.planned, calls=self.calls, attempts=attempts, cache_hits=self.hits,
            skipped_calls=self.skipped, stopped=self.budget.stopped, usage=usage,
            cost=_cost(usage, self.price), estimated_input_tokens=self.est_tokens,
            estimated_cost=self.est_cost if self.price is not None else None, dry_run=config.dry_run,
            elapsed=elapsed,
            agreement=repeat_agreement(rows_for_agreement) if config.repeats > 1 else None,
            endpoints=dict(endpoint_stats or {}))
        prov = {
            "judge": config.judge, "kind": "llm", "model": config.model, "base_url": (config.public_endpoints() if len(config.endpoints()) > 1
                                                                 else public_url(config.base_url)),
            "template": template_provenance(self.template), "params": self.key_params,
            "profiles": self.ctx.profiles.provenance(), "items_per_call": config.items_per_call,
            "repeats": config.repeats, "aggregate": config.aggregate, "seed": config.seed,
        }
        return JudgeResult(self.ctx.name, tuple(judgments), summary, prov)


def _reraise_signal(signum: int, previous) -> None:
    """Raise what the interrupted program expects: the handler it had installed for ``signum`` (the
    CLI turns SIGTERM into its ``Terminated``), else KeyboardInterrupt."""
    import signal

    if signum != signal.SIGINT and callable(previous):
        previous(signum, None)
    raise KeyboardInterrupt()


def _for_request(rec: CallRecord, req: Request) -> CallRecord | None:
    """``rec`` (an answer to the same rendered prompt) re-keyed to ``req``'s own qid and items.

    Identical prompts show the same candidates in the same order, so the i-th item of the stored
    call is the i-th item of this request; the stored qid and items are never trusted.
    """
    if rec.qid == req.qid and rec.items == req.items:
        return rec
    if len(rec.items) != len(req.items):
        return None
    to_req = dict(zip(rec.items, req.items))
    return dataclasses.replace(
        rec, qid=req.qid, items=req.items,
        labels={to_req[k]: v for k, v in rec.labels.items() if k in to_req},
        criteria={to_req[k]: v for k, v in rec.criteria.items() if k in to_req},
        item_errors={to_req[k]: v for k, v in rec.item_errors.items() if k in to_req})


class _Progress:
    def __init__(self, sink: Callable[[str], None] | None, every: float = 5.0):
        self.sink = sink
        self.every = every
        self.last = time.monotonic()

    def tick(self, calls: int, hits: int) -> None:
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            message = f"{calls:,} calls answered, {hits:,} from cache"
            (self.sink or log.info)(message)
