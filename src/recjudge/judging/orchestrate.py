"""The LLM judge's run loop: plan the requests per user, answer what the cache holds, hand the rest
to a backend (chat or batch, see :mod:`recjudge.judging.backend`), and assemble judgments, summary and
provenance. Registers the ``openai`` judge.

Before a request is looked up or sent, its prompt's tokens are checked against the model's context
window (``JudgeSettings.context_tokens``, else the price table's limit for the model, else what the
endpoint declares when probed). They are counted by the endpoint's own tokenizer where it has one
(llama.cpp, llama-cpp-python, vLLM), else estimated with a safety margin per endpoint kind
(:data:`SAFE_CHARS_PER_TOKEN`; see :func:`~recjudge.judging.budget.safe_messages_tokens`). A prompt above the window
is never cut and never sent: its pairs fail with reason ``context_overflow``, and its user is
reported — in the summary (``context_overflow``: user, tokens, window, pairs), on the progress
stream, and by the command's incomplete exit status. A dry run (no network: the margin estimate)
reports the same users before anything is paid for.

Every request is planned (and its tokens counted) before the first call: the plan (pairs, calls to
make, endpoint, model, estimated tokens and cost) is shown and, above the confirmation thresholds,
confirmed (:func:`~recjudge.judging.budget.confirm_spend`). While the calls run, a breaker
(:class:`~recjudge.judging.budget.Breaker`) stops asking when the first calls all fail for one reason
or most calls of a recent window fail; an authentication or model-not-found answer stops at once. The
calls in flight finish and are cached either way.

The summary's call counts add up: planned = from the cache + same prompt as another request (asked
once) + answered + partly answered + failed + not asked (budget) + not asked (stopped: failing calls)
+ not asked (interrupted).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, AsyncIterator, Iterator, Mapping, Sequence

from ..errors import ConfigError
from ..progress import Meter, meter
from ..urls import public_url
from .assemble import judge_pairs, records_by_pair, unasked_reason
from .backend import make_backend
from .budget import (Breaker, Budget, Plan, confirm_spend, cost, estimate_messages_tokens, model_entry,
                     output_estimate, safe_messages_tokens)
from .cache import CacheWriteError, CallRecord, JudgeCache, Usage, cache_key, prompt_hash
from .dialects import DIALECTS, get_dialect, is_openai_host
from .client import Request
from .profile import candidates_block
from .prompts import Template, load_template, template_provenance
from .registry import JudgeContext, JudgeSpec, register_judge
from .results import JudgeResult, Judgment, Overflow, Summary, repeat_agreement
from .select import Pair

__all__ = ["LLMJob", "run_llm", "SAFE_CHARS_PER_TOKEN"]

SAFE_CHARS_PER_TOKEN = {name: d.chars_per_token for name, d in DIALECTS.items()}  # the estimate's margin

log = logging.getLogger("recjudge.judging")


def _requests_for_user(ctx: JudgeContext, template: Template, qid: str, items: Sequence[str],
                       key_params: Mapping) -> Iterator[Request]:
    m = ctx.config.items_per_call
    endpoint = ctx.config.endpoint_id()
    for start in range(0, len(items), m):
        chunk = tuple(items[start:start + m])
        keys = None if m == 1 else tuple(f"c{i + 1}" for i in range(len(chunk)))
        profile = ctx.profiles.profile_text(qid, exclude=chunk)
        cands = candidates_block([ctx.profiles.render_item(i, qid) for i in chunk], keys)
        messages = template.render(profile, cands, keys, getattr(ctx.profiles, "rating_scale", None))
        psha = prompt_hash(messages.system + "\x00" + messages.user)
        for r in range(ctx.config.repeats):
            key = cache_key(template.sha256, ctx.config.model, key_params, psha, r, endpoint)
            yield Request(key, qid, chunk, keys, r, messages, psha)


def run_llm(ctx: JudgeContext) -> JudgeResult:
    """The ``openai`` judge: ``ctx``'s pairs asked of an LLM, resumably through the cache."""
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
        job = LLMJob(ctx, template)
        result = asyncio.run(job.run())
        if job.interrupted is not None:
            # raised here, outside the event loop, once the calls in flight are cached
            _reraise_signal(job.interrupted, job.previous_handlers.get(job.interrupted))
        return result
    # called from inside an event loop (a notebook): run on a loop of our own in a worker thread
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(LLMJob(ctx, template).run())).result()


class LLMJob:
    """One LLM judging run: the :class:`~recjudge.judging.backend.Job` its backend works for."""

    def __init__(self, ctx: JudgeContext, template: Template):
        self.ctx = ctx
        self.config = ctx.config
        self.template = template
        entry = model_entry(self.config)  # refuses --max-cost without a price
        self.price = entry.price() if entry is not None else None
        self.price_as_of = entry.as_of if entry is not None else None
        # the window each prompt must fit: the config's, else what the price table declares
        if self.config.context_tokens is not None:
            self.window, self.window_from = self.config.context_tokens, "context_tokens"
        elif entry is not None and entry.input_window is not None:
            self.window, self.window_from = entry.input_window, "price table"
        else:
            self.window, self.window_from = None, None
        self.overflow: list[Overflow] = []
        self.key_params = self.config.key_params()
        # answers by cache key; requests with the same rendered prompt share one answer, which
        # _result maps onto each request's own (qid, items) by candidate position
        self.results: dict[str, CallRecord] = {}
        self.requests: list[Request] = []
        self._queued: set[str] = set()
        self.hits = 0          # planned requests the cache answered
        self.shared = 0        # planned requests whose prompt another request of this run asks
        self.planned = 0
        self.skipped = 0       # not started: the budget (--max-calls / --max-cost) refused them
        self.overflowed = 0    # not started: above a window the endpoint revealed after they were planned
        self._late_window = False  # the window became known after requests were planned
        self.est_tokens = 0
        self.est_cost = 0.0
        self.calls = 0         # calls made (answered, partly answered or failed)
        self.outcomes: Counter = Counter()  # calls made by status: ok, partial, failed
        self._stored: dict[str, str] = {}   # request key -> its latest status
        self.client = None     # the backend's OpenAI-compatible client, when it has one
        self.counted: dict[str, tuple[int, str]] = {}  # prompt hash -> (tokens, how counted)
        self.pre_failed: dict[Pair, str] = {}
        self.budget = Budget(self.config, self.price)
        self.breaker = Breaker(self.config.stop_after_first, self.config.stop_window, self.config.stop_share)
        self.halted: set[str] = set()  # keys of requests not started: the breaker had stopped the run
        self.cache_error: str | None = None  # why the cache could not keep an answer (the run then stops)
        self.fatal: Exception | None = None  # an answer no call can get past (refused key, unknown model)
        self._paid_failed: dict[str, Usage] = {}  # failed calls the server answered (billed): their tokens
        self._planned_reqs: list[list[Request]] | None = None  # every user's requests to make, once planned
        self.interrupted: int | None = None  # the signal that stopped the run
        self.previous_handlers: dict[int, Any] = {}
        self.progress = ctx.progress
        self.meter: Meter | None = None  # the calls' progress while they run
        self.cache: JudgeCache | None = None  # open while the run lasts

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

    def narrow(self, req: Request, items: tuple[str, ...]) -> Request:
        """``req`` asking only for ``items`` (a retry of a partial answer): the same profile (it leaves
        out every candidate of the full request) and the same candidate keys, so answers map back."""
        profiles = self.ctx.profiles
        keys = tuple(k for k, i in zip(req.keys, req.items) if i in items)
        items = tuple(i for i in req.items if i in items)
        cands = candidates_block([profiles.render_item(i, req.qid) for i in items], keys)
        messages = self.template.render(profiles.profile_text(req.qid, exclude=req.items), cands, keys,
                                        getattr(profiles, "rating_scale", None))
        return dataclasses.replace(req, items=items, keys=keys, messages=messages)

    def _est(self, req: Request) -> tuple[int, float]:
        # costs and budgets count prompts as the window check does (the endpoint's tokenizer, else the
        # safety margin): the plain 4-character rule undercounted OpenAI's tokenizer by ~21%
        counted = self.counted.get(req.prompt_sha)
        tokens = counted[0] if counted else safe_messages_tokens(req.messages.system, req.messages.user,
                                                                 self._chars_per_token())
        out = output_estimate(self.template, len(req.items))
        return tokens, cost(Usage(tokens, 0, out, 0), self.price) or 0.0

    def reserve(self, req: Request) -> float:
        """What --max-cost sets aside for a call: the output cap when one is set, else the estimate
        or the dearest attempt seen, whichever is more."""
        if self.config.max_cost is None:
            return 0.0  # nothing to reserve against
        tokens, est = self._est(req)
        cap = max((int(self.config.params.get(k) or 0) for k in ("max_tokens", "max_completion_tokens")),
                  default=0)
        if cap:
            est = max(est, cost(Usage(tokens, 0, cap, 0), self.price) or 0.0)
        return self.budget.reservation(est)

    async def run(self) -> JudgeResult:
        started = time.perf_counter()
        path = self.ctx.cache_path
        if path is None or (self.config.dry_run and not Path(path).exists()):
            path = ":memory:"  # a dry run reads an existing cache and creates none
        self.cache = JudgeCache(path, scale=self.template.scale)
        backend = None
        try:
            if self.config.dry_run:
                async for _ in self.pending():  # counts calls, hits and estimates; asks nothing
                    pass
            else:
                backend = make_backend(self.config.backend_name(), self)
                self.client = getattr(backend, "client", None)
                if self.client is not None and hasattr(self.client, "probe") and not self.config.batch:
                    self.client.notify = self._say
                    await self.client.probe()  # the endpoint's kind, window and tokenizer before planning
                    if self.window is None and self.client.window() is not None:
                        self.window, self.window_from = self.client.window(), "endpoint"
                # everything is planned before the first call: the plan is shown, and confirmed when
                # it is large (the requests are kept for the summary anyway)
                self._planned_reqs = [missing async for missing in self._pending()]
                confirm_spend(self.plan(), self.config, self.progress or log.info)
                self.meter = meter(self.progress or log.info, "judge", len(self._queued), "calls")
                await backend.run(self)
                if self.fatal is not None:
                    raise self.fatal  # once the calls in flight are cached
        finally:
            if self.meter is not None:
                self.meter.close()
            if backend is not None:
                await backend.close()
            self.cache.close()
        return self._result(time.perf_counter() - started, backend.attempts if backend else 0,
                            backend.endpoint_stats() if backend else {})

    def _say(self, message: str) -> None:
        (self.progress or log.warning)(message)

    def _chars_per_token(self) -> float:
        """The safety margin of the endpoint's kind; a dry run asks nothing: the OpenAI API's figure
        for its host, a local model's otherwise."""
        if self.client is not None:
            return self.client.chars_per_token()
        return get_dialect("openai" if is_openai_host(self.config.endpoints()[0]) else "generic").chars_per_token

    async def _tokens(self, r: Request) -> int:
        """``r``'s prompt tokens as the window check counts them: the endpoint's tokenizer when it has
        one and the prompt could come near the window, else the safety-margin estimate."""
        if r.prompt_sha in self.counted:
            return self.counted[r.prompt_sha][0]
        client = self.client
        per = self._chars_per_token()
        tokens = safe_messages_tokens(r.messages.system, r.messages.user, per)
        how = f"estimate (about {per:g} characters per token)"
        if client is not None and not self.config.dry_run and client.has_tokenizer() \
                and 2 * estimate_messages_tokens(r.messages.system, r.messages.user) >= self.window:
            exact = await client.count_tokens(r.messages)
            if exact is not None:
                tokens, how = exact, "the endpoint's tokenizer"
        self.counted[r.prompt_sha] = (tokens, how)
        return tokens

    async def _fitting(self, qid: str, reqs: list[Request]) -> list[Request]:
        """``reqs`` whose prompts fit the context window; the pairs of the others fail as
        ``context_overflow`` and the user is reported (checked before the cache, so whether a pair
        is judged never depends on what an earlier run with another window cached)."""
        if self.window is None and self.client is not None:
            learned = self.client.window()  # an endpoint's overflow answer told it
            if learned is not None:
                self.window, self.window_from = learned, "endpoint"
        if self.window is None:
            return reqs
        fits, worst, lost = [], 0, set()
        for r in reqs:
            tokens = await self._tokens(r)
            if tokens > self.window:
                worst = max(worst, tokens)
                lost.update(r.items)
            else:
                fits.append(r)
        if lost:
            self._overflow(qid, worst, lost)
        return fits

    async def fits(self, req: Request) -> bool:
        """False (and its pairs recorded as ``context_overflow``, not asked) when a window learned
        after ``req`` was planned cannot hold its prompt."""
        if self.window is None:
            if self.client is None or self.client.window() is None:
                return True
            self.window, self.window_from = self.client.window(), "endpoint"
            self._late_window = True
        if not self._late_window:
            return True  # planned against this window already
        tokens = await self._tokens(req)
        if tokens <= self.window:
            return True
        self.overflowed += 1
        self._overflow(req.qid, tokens, req.items)
        return False

    def _overflow(self, qid: str, tokens: int, items) -> None:
        """Record ``qid``'s ``items`` as not asked, their prompt of ``tokens`` being above the window."""
        for item in items:
            self.pre_failed[Pair(qid, item)] = "context_overflow"
        lost = {i for (q, i), why in self.pre_failed.items() if q == qid and why == "context_overflow"}
        earlier = next((o for o in self.overflow if o.user == qid), None)
        over = Overflow(qid, max(tokens, earlier.estimated_tokens if earlier else 0), self.window, len(lost))
        self.overflow = [o for o in self.overflow if o.user != qid] + [over]
        self._say("context overflow: " + over.describe())

    def plan(self) -> Plan:
        """What the planned requests will cost (the dry run's figures)."""
        return Plan(len(self.ctx.pairs), len(self._queued), self.hits, ", ".join(self.config.public_endpoints()),
                    self.config.model, self.est_tokens, self.est_cost if self.price is not None else None)

    def halt(self, error: Exception) -> None:
        """Stop asking: ``error`` (a refused key, an unknown model) stops every call alike."""
        if self.fatal is None:
            self.fatal = error
        self.breaker.trip(str(error))

    async def pending(self) -> AsyncIterator[list[Request]]:
        """Per user: the requests the cache cannot answer (hits are recorded on the way)."""
        if self._planned_reqs is not None:
            for missing in self._planned_reqs:
                yield missing
            return
        async for missing in self._pending():
            yield missing

    async def _pending(self) -> AsyncIterator[list[Request]]:
        for qid, items in self._plan():
            reqs = await self._fitting(qid, list(_requests_for_user(self.ctx, self.template, qid, items,
                                                                    self.key_params)))
            self.planned += len(reqs)
            found = self.cache.get_ok([r.key for r in reqs])
            self.requests.extend(reqs)
            self.results.update({k: dataclasses.replace(v, via="cache") for k, v in found.items()})
            missing = []
            for r in reqs:
                if r.key in found:
                    self.hits += 1
                elif r.key in self._queued:  # same prompt as another request: asked once
                    self.shared += 1
                else:
                    self._queued.add(r.key)
                    missing.append(r)
            for r in missing:
                tokens, est = self._est(r)
                self.est_tokens += tokens
                self.est_cost += est
            yield missing

    def store(self, rec: CallRecord, req: Request) -> None:
        # the cache merges labels an earlier partial answer gave; keep what it holds
        try:
            stored = self.cache.put(rec, self.template.sha256, self.config.model, self.key_params, req.prompt_sha)
        except CacheWriteError as exc:
            # a paid answer the cache cannot keep is kept here, written to the outputs, and nothing
            # more is asked (every further answer would meet the same locked or full file)
            stored = rec
            if self.cache_error is None:
                self.cache_error = str(exc)
                log.error("%s", exc)
                self.breaker.trip(str(exc))
        self.results[req.key] = rec if stored.status == rec.status and stored.labels == rec.labels else \
            stored.rekeyed(req.qid, req.items) or rec
        # a call stored again (a batch's next round) counts once, by its latest outcome
        if req.key in self._stored:
            self.outcomes[self._stored[req.key]] -= 1
        else:
            self.calls += 1
        self._stored[req.key] = rec.status
        self.outcomes[rec.status] += 1
        if rec.status == "failed" and rec.answered:
            self._paid_failed[req.key] = rec.usage
        else:
            self._paid_failed.pop(req.key, None)
        first_errors = getattr(self.client, "first_errors", None) or {}
        self.breaker.observe(rec.status, rec.reason, lambda reason: first_errors.get(reason) or rec.error or "")
        if self.meter is not None:
            self.meter.update(self.calls, self._counts(), self.budget.spent if self.price is not None else None)

    def _counts(self) -> dict[str, int]:
        """The calls made by outcome, then the cache's answers (a failed call is never an answer)."""
        counts = {"answered": self.outcomes["ok"]}
        if self.outcomes["partial"]:
            counts["partly answered"] = self.outcomes["partial"]
        return {**counts, "failed": self.outcomes["failed"], "from cache": self.hits}

    def _result(self, elapsed: float, attempts: int, endpoint_stats: Mapping | None = None) -> JudgeResult:
        config = self.config
        judgments, failures = judge_pairs(self.ctx.pairs, records_by_pair(self.requests, self.results),
                                          self.pre_failed, config.repeats, config.aggregate,
                                          unasked_reason(self.requests, self.halted, config.dry_run))
        summary = self._summary(judgments, failures, elapsed, attempts, endpoint_stats)
        return JudgeResult(self.ctx.name, tuple(judgments), summary, self._provenance(endpoint_stats))

    def _summary(self, judgments: Sequence[Judgment], failures: Mapping[str, int], elapsed: float,
                 attempts: int, endpoint_stats: Mapping | None) -> Summary:
        """The run's counts, tokens and cost, failures, agreement over repeats and context overflows."""
        config = self.config
        asked = [rec.usage for rec in self.results.values() if rec.via != "cache"]
        usage = Usage(sum(u.prompt for u in asked), sum(u.cached for u in asked), sum(u.completion for u in asked),
                      sum(u.reasoning for u in asked))
        client = self.client
        first_errors = dict(getattr(client, "first_errors", {}) or {})
        counted = Counter(how for _, how in self.counted.values())
        return Summary(
            judge=config.judge, kind="llm", pairs=len(self.ctx.pairs),
            judged=sum(j.label is not None for j in judgments), failures=dict(failures),
            planned_calls=self.planned, calls=self.calls, attempts=attempts, cache_hits=self.hits,
            skipped_calls=self.skipped, stopped=self.budget.stopped, usage=usage,
            halted_calls=len(self.halted), stopped_early=self.breaker.tripped,
            cache_invalid=tuple(f"{why} (key {key[:12]})" for key, why in self.cache.invalid),
            paid_failed_calls=len(self._paid_failed), paid_failed_usage=sum(self._paid_failed.values(), Usage()),
            answered_calls=self.outcomes["ok"], partial_calls=self.outcomes["partial"],
            failed_calls=self.outcomes["failed"], shared_calls=self.shared,
            unasked_calls=len(self._queued) - self.calls - self.skipped - self.overflowed - len(self.halted),
            overflow_calls=self.overflowed,
            probe_requests=getattr(client, "probe_requests", 0),
            failure_messages={r: first_errors[r] for r in failures if r in first_errors},
            token_counts=dict(counted),
            cost=cost(usage, self.price), estimated_input_tokens=self.est_tokens,
            estimated_cost=self.est_cost if self.price is not None else None, dry_run=config.dry_run,
            elapsed=elapsed,
            # a pair failed before any call has no label, so its row adds no unit of agreement
            agreement=repeat_agreement([j.repeat_labels for j in judgments]) if config.repeats > 1 else None,
            endpoints=dict(endpoint_stats or {}), context_tokens=self.window,
            context_overflow=tuple(self.overflow))

    def _provenance(self, endpoint_stats: Mapping | None) -> dict[str, Any]:
        """What produced the labels: judge, model, endpoints, template, parameters, profiles, prices."""
        config = self.config
        return {
            "judge": config.judge, "kind": "llm", "model": config.model, "base_url": (config.public_endpoints() if len(config.endpoints()) > 1
                                                                 else public_url(config.base_url)),
            "template": template_provenance(self.template), "params": self.key_params,
            "profiles": self.ctx.profiles.provenance(), "items_per_call": config.items_per_call,
            "repeats": config.repeats, "aggregate": config.aggregate, "seed": config.seed,
            "timeout": config.timeout, "context_tokens": self.window, "context_tokens_from": self.window_from,
            "endpoint_kind": config.endpoint_kind,
            "endpoints": {url: {k: v.get(k) for k in ("kind", "evidence", "structured", "fallback", "ignored")}
                          for url, v in (endpoint_stats or {}).items()},
            "prices_as_of": self.price_as_of,
        }


def _reraise_signal(signum: int, previous) -> None:
    """Raise what the interrupted program expects: the handler it had installed for ``signum`` (the
    CLI turns SIGTERM into its ``Terminated``), else KeyboardInterrupt."""
    import signal

    if signum != signal.SIGINT and callable(previous):
        previous(signum, None)
    raise KeyboardInterrupt()


register_judge(JudgeSpec("openai", "llm", "an LLM behind any OpenAI-compatible endpoint", run_llm))
