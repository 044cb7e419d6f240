"""Calling an OpenAI-compatible endpoint: endpoint kinds, retries, deadlines, structured output,
usage, Batch API.

Every attempt of every call (chat, files, batches) goes through one tenacity policy: retries on
408/409/429/5xx, timeouts, connection errors and answers that do not parse into in-range labels (those
at most ``--parse-retries`` times: each is billed, and a model mostly answers a prompt the same way);
the wait is the server's ``Retry-After`` when it sends one, else exponential with full jitter, and
none when another endpoint of the pool is healthy. Every attempt is one HTTP request counted
against ``--retries`` and ``--max-cost``: nothing is resent behind the caller's back. Each attempt
has one deadline (``--timeout``) over its whole time, connect to last byte, on either transport,
measured from when it leaves recjudge's own queue. Authentication and not-found errors stop the
whole run (once the calls in flight are stored). The API key is kept in memory only and scrubbed from every error text recjudge stores
or raises.

On first contact each endpoint is probed for its kind (:mod:`recjudge.judging.dialects`), which
decides how structured output and the output-token cap are sent, which parameters are reported as
ignored, how many requests it serves at once, and which tokenizer counts prompts.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import logging
import math
import re
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from ..errors import ConfigError
from ..urls import DEFAULT_ENDPOINT, public_url, url_secrets
from .cache import CallRecord, Usage
from .dialects import (TOKEN_CAPS, EndpointInfo, EndpointState, describe, detect_shared, get_dialect, parse_json,
                       probe_key, say_once, tokenize_count,
                       tokenize_request, window_from_message)
from .parse import SINGLE, ParseResult, parse_answer
from .prompts import Messages, Template
from .transport import MAX_BODY, HTTPClient, TransportError, ssl_context

__all__ = ["ClientSettings", "OpenAIJudgeClient", "Redactor", "Request", "GENERATION_PARAMS",
           "quiet_http_loggers", "union_records", "within", "probe_endpoints"]

log = logging.getLogger(__name__)

# the HTTP stack logs every request at DEBUG (headers included in some versions); at -v they would
# flood stderr and could print credentials
_HTTP_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "h11", "h2", "hpack", "aiohttp",
                 "aiohttp.client", "aiohttp.internal")


def quiet_http_loggers() -> None:
    """Hold the HTTP stack's loggers at WARNING or above, whatever -v or OPENAI_LOG set."""
    for name in _HTTP_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.WARNING or logger.level < logging.WARNING:
            logger.setLevel(logging.WARNING)

# generation parameters passed through to chat completions; anything else is a typo or unsupported
GENERATION_PARAMS = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "reasoning_effort",
                     "seed", "frequency_penalty", "presence_penalty", "verbosity", "extra_body")
_RETRY_STATUS = {408, 409, 429}
_FATAL_STATUS = {401, 403, 404}
RETRY_AFTER_MAX = 600.0  # a server's Retry-After is honoured up to this many seconds
PROBE_TIMEOUT = 10.0     # seconds one probe request may take
_timeout = getattr(asyncio, "timeout", None)  # Python 3.11+


async def within(seconds: float, awaitable):
    """``awaitable``'s result, or asyncio.TimeoutError once ``seconds`` have passed (its whole time)."""
    if _timeout is not None:
        async with _timeout(seconds):
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)  # pragma: no cover - Python 3.10


class Redactor:
    """Scrubs the API key (and anything shaped like an OpenAI key) from text."""

    _KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{6})[A-Za-z0-9_\-]+")

    def __init__(self, *secrets: str | None):
        self.secrets = tuple(s for s in secrets if s and len(s) >= 4)

    def __call__(self, text: str | None) -> str | None:
        if text is None:
            return None
        for s in self.secrets:
            text = text.replace(s, "[redacted]")
        return self._KEYLIKE.sub(r"\1…[redacted]", text)


@dataclass(frozen=True)
class Request:
    """One call: a user's profile with one or more candidates, for one repetition."""

    key: str
    qid: str
    items: tuple[str, ...]
    keys: tuple[str, ...] | None     # candidate keys in the prompt (None: one candidate)
    repeat: int
    messages: Messages
    prompt_sha: str


@dataclass(frozen=True)
class ClientSettings:
    model: str
    base_url: str | None | tuple[str | None, ...]  # one endpoint, or several serving the same model
    api_key: str
    timeout: float = 60.0
    max_attempts: int = 6
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    structured: str = "auto"          # auto | on | off
    params: Mapping[str, Any] = None  # type: ignore[assignment]
    cooldown: float = 1.0             # first rest of a failing endpoint (doubles per failure, to 60 s)
    concurrency: int = 8              # requests in flight: sizes the connection pools
    transport: str = "sdk"            # chat requests: sdk (openai client) | aiohttp
    endpoint_kind: str = "auto"       # auto (probed) or a kind of recjudge.judging.dialects
    parse_retries: int = 1            # retries after answers received but unusable (within max_attempts)

    @property
    def urls(self) -> tuple[str | None, ...]:
        return self.base_url if isinstance(self.base_url, tuple) else (self.base_url,)

    def __repr__(self) -> str:  # never print the key
        urls = [public_url(u) for u in self.urls]
        return f"ClientSettings(model={self.model!r}, base_url={urls!r}, api_key='[redacted]')"


# failures that say the server (not the model) is unwell: the endpoint rests before it is asked again
_COOL_REASONS = {"timeout", "connection", "server_error", "rate_limited"}


class _RetryState:
    """What the attempts of one call have gathered so far."""

    __slots__ = ("last", "kept", "usage", "attempts", "answered", "replies", "unusable")

    def __init__(self):
        self.last: _Retryable | None = None
        self.kept: CallRecord | None = None  # labels any attempt gave: a later failure does not lose them
        self.usage = Usage()
        self.attempts = 0
        self.answered = False  # whether the latest attempt gave an answer
        self.replies = 0       # attempts the server answered (2xx): each is billed
        self.unusable = 0      # of them, answers that added no label (unparseable, out of range)


COOLDOWN_MAX = 60.0
SHARD = 16  # requests in flight per openai client (connection pool) of an endpoint


class Limiter:
    """The requests in flight to one endpoint: at most ``limit``. It starts at the configured
    concurrency, or at the slots the server declares. When the server's capacity is unknown it is
    checked once: if a window of requests at full concurrency has a median latency over twice its
    fastest (a queue's first answers come early), a few requests are timed alone; a server whose
    latency under load is many times a lone request's queues them, and gets as many in flight as
    keep latency within 1.5 lone requests, so that ``--timeout`` measures a request rather than its
    wait in the server's queue. Waiting here does not count against the deadline."""

    WINDOW_MIN = 8
    SOLO = 2       # lone requests timed

    def __init__(self, ceiling: int, adaptive: bool):
        self.ceiling = max(1, ceiling)
        self.limit = self.ceiling
        self.adaptive = adaptive
        self.inflight = 0
        self._waiters: deque = deque()
        self._window: list[float] = []
        self._solo: list[float] = []
        self._phase = "measure"     # measure -> alone -> done
        self._busy = math.nan       # median latency at full concurrency
        self.changes: list[str] = []  # why the limit changed, for the summary

    def set_limit(self, limit: int, why: str | None = None) -> None:
        limit = max(1, min(self.ceiling, limit))
        if limit != self.limit:
            if why is not None:
                self.changes.append(f"{self.limit} -> {limit} ({why})")
            self.limit = limit
            self._wake()

    async def acquire(self) -> bool:
        """Wait for a place; True when the request goes alone (nothing else in flight)."""
        if self.inflight < self.limit and not self._waiters:
            self.inflight += 1
            return self.inflight == 1
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut  # the releaser hands its place over (inflight already counts us)
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()
            else:
                self._waiters.remove(fut)
            raise
        return self.inflight == 1

    def release(self) -> None:
        self.inflight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.inflight < self.limit:
            fut = self._waiters.popleft()
            if not fut.done():
                self.inflight += 1
                fut.set_result(None)

    def observe(self, latency: float, alone: bool) -> None:
        """One answered request's latency (``alone``: nothing else was in flight when it was sent)."""
        if not self.adaptive or self._phase == "done" or self.ceiling == 1:
            return
        if self._phase == "measure":
            self._window.append(latency)
            if len(self._window) >= max(self.WINDOW_MIN, 2 * self.ceiling):
                window = sorted(self._window)
                self._busy = window[len(window) // 2]
                # a server that answers at once whatever the load shows no spread: nothing to do;
                # a spread (the first answers of a queue come early) is checked by lone requests
                self._phase = "alone" if self._busy > 2 * window[0] else "done"
                if self._phase == "alone":
                    self.limit = 1
            return
        if self._phase == "alone" and alone:
            self._solo.append(latency)
            if len(self._solo) >= self.SOLO:
                self._phase = "done"
                lone = min(self._solo)
                self.limit = self.ceiling
                # a queue makes latency grow with every request in it: many times a lone request's,
                # in proportion to the requests in flight (a client short of CPU is slower too, but
                # by far less than that)
                if lone > 0 and self._busy > max(3.0, self.ceiling / 4) * lone:
                    self.set_limit(int(self.ceiling * 1.5 * lone / self._busy),
                                   f"latency grew with requests in flight: {self._busy:.2f} s at "
                                   f"{self.ceiling} against {lone:.2f} s alone")
                self._wake()


class _Endpoint:
    """One server of the pool: its kind, clients, limiter and what least-outstanding spreading needs.

    With the openai transport its requests go through several small clients (shards of
    :data:`SHARD` connections): the HTTP library's pool scans every connection for every request,
    so one pool of 128 connections spent more CPU on bookkeeping than on the calls themselves.
    """

    def __init__(self, url: str | None, make_client: Callable[[], Any], shards: int, http: HTTPClient,
                 concurrency: int):
        self.url = url
        self.public = public_url(url) or DEFAULT_ENDPOINT
        self._make = make_client
        self._shards = shards
        self._clients: list | None = None
        self.shard_load = [0] * shards
        self.http = http               # aiohttp: probes, tokenizers, and chat with --transport aiohttp
        self.state = EndpointState()
        self.probed: asyncio.Task | None = None
        self.limiter = Limiter(concurrency, adaptive=False)
        self.outstanding = 0
        self.requests = 0
        self.failures = 0        # consecutive: the cooldown doubles with each
        self.errors = 0          # all server-side failures, for the summary
        self.cool_until = 0.0

    def failed(self, base: float, retry_after: float | None) -> None:
        self.failures += 1
        self.errors += 1
        rest = min(COOLDOWN_MAX, base * 2.0 ** min(self.failures - 1, 32))  # long outages: no float overflow
        if retry_after is not None:
            rest = max(rest, min(retry_after, RETRY_AFTER_MAX))
        self.cool_until = time.monotonic() + rest

    def answered(self) -> None:
        self.failures = 0
        self.cool_until = 0.0

    @property
    def clients(self) -> list:
        """The openai clients, made on first use (each loads a TLS trust store: ~60 ms)."""
        if self._clients is None:
            self._clients = [self._make() for _ in range(self._shards)]
        return self._clients

    @property
    def client(self):
        """The openai client for files and batches."""
        return self.clients[0]

    async def close(self) -> None:
        if self.probed is not None and not self.probed.done():
            self.probed.cancel()
            await asyncio.gather(self.probed, return_exceptions=True)
        await self.http.close()
        for c in self._clients or ():
            await c.close()


@dataclass(frozen=True)
class _Status:
    """An HTTP error answer, whichever client received it."""

    code: int
    message: str
    headers: Any
    code_name: str | None = None  # the error's "code" field (e.g. context_length_exceeded)


class _Retryable(Exception):
    def __init__(self, reason: str, message: str, retry_after: float | None = None, outcome=None):
        super().__init__(message)
        self.reason = reason
        self.retry_after = retry_after
        self.outcome = outcome


class _Fatal(Exception):
    pass


def _retry_after(headers) -> float | None:
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class RetryWait:
    """tenacity's wait for every retry of the judge: the server's Retry-After (up to
    :data:`RETRY_AFTER_MAX`) when it sent one, none when another endpoint can take the retry at once,
    else exponential backoff with full jitter (tenacity's ``wait_random_exponential``)."""

    def __init__(self, initial: float, cap: float, another_is_healthy: Callable[[], bool] = lambda: False):
        from tenacity import wait_random_exponential

        self.cap = cap
        self.another_is_healthy = another_is_healthy
        self.backoff = wait_random_exponential(multiplier=initial, max=cap)

    def __call__(self, retry_state) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome is not None else None
        if isinstance(exc, _Retryable):
            if exc.retry_after is not None:
                return min(exc.retry_after, max(self.cap, RETRY_AFTER_MAX))
            if exc.reason in _COOL_REASONS and self.another_is_healthy():
                return 0.0
        return self.backoff(retry_state)


def _count(value) -> int:
    """A token count; anything that is not a non-negative number counts 0."""
    if type(value) is int and value >= 0:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return 0
    return int(value)


def _usage(resp_usage) -> Usage:
    if not isinstance(resp_usage, Mapping):
        return Usage()
    pt = resp_usage.get("prompt_tokens_details")
    ct = resp_usage.get("completion_tokens_details")
    pt = pt if isinstance(pt, Mapping) else {}
    ct = ct if isinstance(ct, Mapping) else {}
    return Usage(_count(resp_usage.get("prompt_tokens")), _count(pt.get("cached_tokens")),
                 _count(resp_usage.get("completion_tokens")), _count(ct.get("reasoning_tokens")))


def outcome_from_answer(req: Request, template: Template, content: str | None, finish: str | None,
                        refusal: str | None, usage: Usage, latency: float, attempts: int, via: str,
                        mode: str, endpoint: str | None = None) -> CallRecord:
    """Parse an answer into a call record keyed by item id (status ok, partial or failed)."""
    if refusal:
        parsed = ParseResult({}, {k: "refused" for k in (req.keys or [SINGLE])})
    else:
        parsed = parse_answer(content, template.scale, req.keys, template.criteria, finish)
    to_item = dict(zip(req.keys, req.items)) if req.keys is not None else {SINGLE: req.items[0]}
    labels = {to_item[k]: v for k, v in parsed.labels.items() if k in to_item}
    criteria = {to_item[k]: v for k, v in parsed.criteria.items() if k in to_item}
    errors = {to_item[k]: v for k, v in parsed.errors.items() if k in to_item}
    status = "ok" if not errors and len(labels) == len(req.items) else ("partial" if labels else "failed")
    reason = None if status == "ok" else next(iter(errors.values()), "unparseable")
    return CallRecord(req.key, req.qid, req.items, req.repeat, status, reason,
                      None if status == "ok" else f"answer not usable: {reason}",
                      content if content is not None else refusal, labels, criteria, errors, usage, latency,
                      attempts, via, mode, endpoint)



class OpenAIJudgeClient:
    """Async chat-completions client with bounded retries; one instance per judging run."""

    def __init__(self, settings: ClientSettings, template: Template):
        try:
            import openai  # noqa: F401
        except ImportError:  # pragma: no cover - a core dependency
            from ..errors import MissingExtraError
            raise MissingExtraError("openai", "llm", "the LLM judge") from None
        from openai import AsyncOpenAI

        quiet_http_loggers()  # after the import: openai sets its logger from OPENAI_LOG on import
        if settings.transport not in ("sdk", "aiohttp"):
            raise ConfigError(f"transport must be sdk or aiohttp, got {settings.transport!r}")
        if settings.endpoint_kind != "auto":
            get_dialect(settings.endpoint_kind)  # an unknown kind is refused before any request
        self.settings = settings
        self.template = template
        self.redact = Redactor(settings.api_key, *(s for u in settings.urls for s in url_secrets(u)))
        self.params = dict(settings.params or {})
        # its check of every header value guards both transports: nothing is sent with a line break
        headers, sources = _headers(settings.api_key)
        self._aiohttp = settings.transport == "aiohttp"
        # the openai clients serve files and batches, and chat requests with --transport sdk
        shards = 1 if self._aiohttp else -(-max(1, settings.concurrency) // SHARD)
        self._endpoints = [
            _Endpoint(url, functools.partial(_sdk_client, AsyncOpenAI, settings, url), shards,
                      HTTPClient(url or DEFAULT_ENDPOINT, headers, max(1, settings.concurrency) + 8, sources),
                      settings.concurrency)
            for url in settings.urls]
        self.endpoint = self._endpoints[0].public
        self.attempts = 0        # chat and batch HTTP requests sent, retries included
        self.probe_requests = 0  # endpoint probes and tokenizer calls (no generation)
        # asked before each retry with the tokens the call has used so far and its attempts; False
        # stops retrying (a cost budget: unusable answers cost tokens too)
        self.allow_retry: Callable[[Usage, int], bool] = lambda usage, attempts: True
        # renders a request for a subset of a multi-item request's items (same profile, same
        # candidate keys); None re-sends the whole request
        self.narrow: Callable[[Request, tuple[str, ...]], Request] | None = None
        # where notes meant for the user go (once each): the endpoint's kind, fallbacks, ignored
        # parameters, the first server message of each failure reason
        self.notify: Callable[[str], None] = lambda message: log.warning("%s", message)
        self.first_errors: dict[str, str] = {}  # failure reason -> the first message the server gave
        self.wait = RetryWait(settings.backoff_initial, settings.backoff_max, self._another_is_healthy)

    async def close(self) -> None:
        for ep in self._endpoints:
            await ep.close()

    def endpoint_stats(self) -> dict[str, dict[str, Any]]:
        """Per endpoint: requests sent (retries included), server-side failures, and what the probe found."""
        out = {}
        for ep in self._endpoints:
            row: dict[str, Any] = {"requests": ep.requests, "failures": ep.errors, **ep.state.as_dict()}
            row["concurrency"] = ep.limiter.limit
            if ep.limiter.changes:
                row["concurrency_changes"] = list(ep.limiter.changes)
            out[ep.public] = row
        return out

    def _pick(self) -> _Endpoint:
        """The healthy endpoint with the fewest requests in flight (ties: the fewest sent); when
        every endpoint rests, the one whose rest ends first."""
        if len(self._endpoints) == 1:
            return self._endpoints[0]
        now = time.monotonic()
        healthy = [ep for ep in self._endpoints if ep.cool_until <= now]
        if not healthy:
            return min(self._endpoints, key=lambda ep: ep.cool_until)
        return min(healthy, key=lambda ep: (ep.outstanding, ep.requests))

    def _another_is_healthy(self) -> bool:
        now = time.monotonic()
        return len(self._endpoints) > 1 and any(ep.cool_until <= now for ep in self._endpoints)

    def _note(self, ep: _Endpoint, message: str, once: bool = False) -> None:
        """``message`` in the summary, and said (``once``: unless said of this endpoint in the probe session)."""
        ep.state.notes.append(message)
        if not once or say_once(ep.url, message):
            self.notify(message)

    # first contact ------------------------------------------------------------------------------
    async def _ready(self, ep: _Endpoint) -> None:
        """Probe ``ep`` once (concurrent callers wait for the same probe)."""
        if ep.state.dialect is not None:
            return
        if ep.probed is None:
            ep.probed = asyncio.ensure_future(self._probe(ep))
        await asyncio.shield(ep.probed)

    async def _fetch(self, ep: _Endpoint, method: str, path: str, body: Any) -> tuple[int, Any]:
        """One probe request: (status, parsed JSON); (0, None) when nothing usable came back."""
        self.probe_requests += 1
        return (await _probe_fetch(ep.http, min(PROBE_TIMEOUT, self.settings.timeout), method, path, body))[:2]

    async def _probe(self, ep: _Endpoint) -> None:
        s = self.settings
        forced = None if s.endpoint_kind == "auto" else s.endpoint_kind
        info = await detect_shared(probe_key(ep.url, s.model, forced, s.api_key), ep.url, s.model,
                                   functools.partial(self._fetch, ep), forced)
        dialect = get_dialect(info.kind)
        state = ep.state
        state.info, state.dialect = info, dialect
        state.mode = "text" if s.structured == "off" else dialect.structured_fields(self.template.json_schema(None))[1]
        state.ignored = tuple(k for k in dialect.ignored if k in self.params)
        slots = info.slots or dialect.slots
        if slots is not None and slots < ep.limiter.ceiling:
            ep.limiter.set_limit(slots, f"the server serves {slots} request(s) at once")
        # a server of unknown capacity (not OpenAI's) is watched for queueing
        ep.limiter.adaptive = slots is None and dialect.name != "openai"
        self._note(ep, describe(ep.public, info), once=True)
        if state.ignored:
            self._note(ep, f"endpoint {ep.public} ({dialect.name}) ignores {', '.join(state.ignored)}: sent, "
                           "without effect", once=True)
        if "temperature" not in self.params and dialect.default_temperature is not None:
            state.server_temperature = dialect.default_temperature
            self._note(ep, f"no --temperature given: {dialect.name} samples at its default "
                           f"{dialect.default_temperature:g}", once=True)

    def window(self) -> int | None:
        """The smallest context window an endpoint declared or revealed (None: none known)."""
        known = [w for ep in self._endpoints for w in (ep.state.info.window if ep.state.info else None,
                                                       ep.state.learned_window) if w]
        return min(known) if known else None

    def kinds(self) -> dict[str, str | None]:
        return {ep.public: ep.state.dialect.name if ep.state.dialect else None for ep in self._endpoints}

    async def probe(self) -> None:
        """Probe every endpoint now (before counting tokens or planning)."""
        await asyncio.gather(*(self._ready(ep) for ep in self._endpoints))

    async def count_tokens(self, messages: Messages) -> int | None:
        """The prompt's tokens by the endpoint's own tokenizer (chat-template tokens included), or None
        when the endpoint has none (or it failed)."""
        ep = self._endpoints[0]
        await self._ready(ep)
        ask = tokenize_request(ep.state.dialect, self.settings.model, messages.system, messages.user)
        if ask is None:
            return None
        status, answer = await self._fetch(ep, "POST", ask[0], ask[1])
        return tokenize_count(ep.state.dialect, answer) if status == 200 else None

    def chars_per_token(self) -> float:
        """The estimate's characters per token for the first endpoint's kind (OpenAI's before a probe)."""
        ep = self._endpoints[0]
        return (ep.state.dialect or get_dialect("openai")).chars_per_token

    def has_tokenizer(self) -> bool:
        ep = self._endpoints[0]
        return ep.state.dialect is not None and ep.state.dialect.tokenizer is not None

    # chat ---------------------------------------------------------------------------------------
    def body(self, req: Request, ep: _Endpoint | None = None, structured: bool | None = None) -> dict:
        """The chat request ``req`` as endpoint ``ep``'s kind takes it (no endpoint: the OpenAI API's)."""
        dialect = ep.state.dialect if ep is not None and ep.state.dialect is not None else get_dialect("openai")
        mode = ep.state.mode if ep is not None and ep.state.mode is not None else \
            ("text" if self.settings.structured == "off" else "json_schema")
        body: dict[str, Any] = {"model": self.settings.model, "messages": req.messages.as_openai()}
        for k, v in self.params.items():
            if k == "extra_body":
                continue
            # the output cap goes under the name this kind honours (llama-cpp-python ignores
            # max_completion_tokens; OpenAI's reasoning models refuse max_tokens)
            body[dialect.token_cap if k in TOKEN_CAPS else k] = v
        if (mode != "text") if structured is None else structured:
            fields, _ = dialect.structured_fields(self.template.json_schema(req.keys))
            body.update(fields)
        if self.params.get("extra_body"):
            body.update(self.params["extra_body"])
        return body

    async def _attempt(self, req: Request) -> CallRecord:
        """One request to the endpoint :meth:`_pick` chooses; the record names that endpoint."""
        ep = self._pick()
        await self._ready(ep)
        ep.outstanding += 1
        try:
            alone = await ep.limiter.acquire()  # queueing here is not the request's time
        except BaseException:
            ep.outstanding -= 1
            raise
        try:
            ep.requests += 1
            start = time.perf_counter()
            try:
                rec = await within(self.settings.timeout, self._attempt_on(ep, req))
            except asyncio.TimeoutError:
                raise _Retryable("timeout", f"no answer within {self.settings.timeout:g} s (the whole request: "
                                            "connect, send, wait, read)") from None
            ep.limiter.observe(time.perf_counter() - start, alone)
        except _Retryable as exc:
            if exc.reason in _COOL_REASONS:
                ep.failed(self.settings.cooldown, exc.retry_after)
            else:  # the server answered; what the model said is not the server's fault
                ep.answered()
            if exc.outcome is not None:
                exc.outcome = replace(exc.outcome, endpoint=ep.public)
            self._first_error(exc.reason, str(exc) if exc.outcome is None else _answer_excerpt(exc.outcome))
            raise
        finally:
            ep.limiter.release()
            ep.outstanding -= 1
        ep.answered()
        if rec.status != "ok":
            self._first_error(rec.reason or "failed", rec.error or "")
        return rec if rec.endpoint == ep.public else replace(rec, endpoint=ep.public)

    def _first_error(self, reason: str, message: str) -> None:
        if reason not in self.first_errors:
            self.first_errors[reason] = message
            self.notify(f"first {reason}: {message}")

    async def _attempt_on(self, ep: _Endpoint, req: Request) -> CallRecord:
        """One request to ``ep``; the record it gives names ``ep``."""
        body = self.body(req, ep)
        self.attempts += 1
        start = time.perf_counter()
        resp = await (self._post_http(ep, body) if self._aiohttp else self._post_sdk(ep, body))
        mode = ep.state.mode if "response_format" in body else "text"
        if isinstance(resp, _Status):
            return self._status(ep, req, body, resp)
        if not isinstance(resp, Mapping):
            raise _Retryable("bad_response", f"the answer is not a JSON object but {type(resp).__name__}")
        rec = self._from_body(req, resp, time.perf_counter() - start, "chat", mode, ep.public)
        if rec.status != "ok":
            raise _Retryable(rec.reason or "unparseable", rec.error or "answer not usable", outcome=rec)
        return rec

    def _status(self, ep: _Endpoint, req: Request, body: Mapping, resp: _Status) -> CallRecord:
        """What an HTTP error answer means: retry, fall back to text, stop the run, or a failed call."""
        code, text = resp.code, self.redact(f"HTTP {resp.code}: {resp.message}")
        # a refusal of structured output, whatever its status (llama-cpp-python answers 500):
        # decided from this request's own body, and counted as an attempt like any other
        if "response_format" in body and self.settings.structured == "auto" and code >= 400 \
                and code not in _FATAL_STATUS and _mentions_structured(resp.message):
            if ep.state.mode != "text":
                ep.state.mode = "text"
                ep.state.fallback = (f"{body['response_format'].get('type')} refused ({_clip(text, 200)}): text "
                                     "answers parsed")
                self._note(ep, f"endpoint {ep.public} refused structured output; parsing text answers instead "
                               f"({_clip(text, 200)})")
            raise _Retryable("structured_refused", text, retry_after=0.0)
        if code in (400, 413, 422) and (resp.code_name == "context_length_exceeded"
                                         or window_from_message(resp.message) is not None):
            window = window_from_message(resp.message)
            if window and not ep.state.learned_window:
                ep.state.learned_window = window
            return CallRecord(req.key, req.qid, req.items, req.repeat, "failed", "context_overflow", text,
                              attempts=1)
        if code in _RETRY_STATUS or code >= 500:
            reason = "rate_limited" if code == 429 else ("server_error" if code >= 500 else f"http_{code}")
            raise _Retryable(reason, text, _retry_after(resp.headers))
        if 300 <= code < 400:
            where = public_url(resp.headers.get("location")) if resp.headers is not None else None
            raise _Fatal(f"{ep.public} answered HTTP {code}, a redirect{f' to {where}' if where else ''}, which "
                         "is not followed; give the final URL as --base-url")
        if code < 200:
            raise _Retryable("bad_response", f"{text}: an interim answer given as the final one")
        if code in _FATAL_STATUS:
            raise _Fatal(_fatal_message(code, text, self.settings, ep.public))
        return CallRecord(req.key, req.qid, req.items, req.repeat, "failed", "bad_request", text, attempts=1)

    async def _post_http(self, ep: _Endpoint, body: dict):
        """The chat POST through aiohttp: the answer's JSON, or a :class:`_Status` (HTTP error)."""
        try:
            resp = await ep.http.post_json("/chat/completions", body)
        except TransportError as exc:
            raise _Retryable("connection", self.redact(str(exc))) from None
        if not 200 <= resp.status < 300:
            message, code_name = _body_error(resp.body, resp.status)
            return _Status(resp.status, message, resp.headers, code_name)
        try:
            return json.loads(resp.body)
        except ValueError as exc:  # an HTTP 200 whose body is not JSON (truncated, an HTML page)
            raise _Retryable("bad_response", self.redact(f"the answer is not a JSON object: "
                                                         f"{type(exc).__name__}: {exc}")[:300]) from None

    async def _post_sdk(self, ep: _Endpoint, body: dict):
        """The chat POST through the openai client's HTTP stack (``transport='sdk'``)."""
        import openai

        shard = min(range(len(ep.clients)), key=ep.shard_load.__getitem__)
        ep.shard_load[shard] += 1
        try:
            # the client's generic POST: same auth, base URL, timeout and error classes as
            # chat.completions.create, without re-validating our own request and answer through
            # pydantic models
            return await ep.clients[shard].post("/chat/completions", body=body, cast_to=dict)
        except openai.APITimeoutError:
            raise _Retryable("timeout", f"no answer within {self.settings.timeout:g} s") from None
        except openai.APIConnectionError as exc:
            # the openai client says only "Connection error."; what happened is its cause
            raise _Retryable("connection", self.redact(f"connection error: {exc.__cause__ or exc}")) from None
        except ValueError as exc:
            raise _Retryable("bad_response", self.redact(f"the answer is not a JSON object: "
                                                         f"{type(exc).__name__}: {exc}")[:300]) from None
        except openai.APIStatusError as exc:
            body_obj = getattr(exc, "body", None)
            inner = body_obj.get("error", body_obj) if isinstance(body_obj, Mapping) else None
            code_name = inner.get("code") if isinstance(inner, Mapping) and isinstance(inner.get("code"), str) else None
            return _Status(exc.status_code, _error_text(exc), exc.response.headers, code_name)
        finally:
            ep.shard_load[shard] -= 1

    def _from_body(self, req: Request, body: Mapping, latency: float, via: str, mode: str,
                   endpoint: str | None = None) -> CallRecord:
        """A call record from a chat completion body; a body of the wrong shape is ``bad_response``."""
        choices = body.get("choices") if isinstance(body, Mapping) else None
        choice = choices[0] if isinstance(choices, list) and choices else None
        message = choice.get("message") if isinstance(choice, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        refusal = message.get("refusal") if isinstance(message, Mapping) else None
        usage = _usage(body.get("usage")) if isinstance(body, Mapping) else Usage()
        if not isinstance(message, Mapping) or not isinstance(content, (str, type(None))) \
                or not isinstance(refusal, (str, type(None))):
            return CallRecord(req.key, req.qid, req.items, req.repeat, "failed", "bad_response",
                              "the answer has no chat message (choices[0].message)",
                              self.redact(json.dumps(body, default=str)[:2000]), usage=usage, latency=latency,
                              attempts=1, via=via, mode=mode, endpoint=endpoint)
        finish = choice.get("finish_reason")
        rec = outcome_from_answer(req, self.template, content, finish if isinstance(finish, str) else None,
                                  refusal, usage, latency, 1, via, mode, endpoint)
        # the raw answer is stored: a model that echoes the key must not put it in the cache
        raw = self.redact(rec.raw)
        return rec if raw == rec.raw else replace(rec, raw=raw)

    def _retrying(self, stop_also: Callable[[Any], bool] | None = None, done: int = 0):
        """The one retry policy: tenacity, stopping after ``max_attempts`` attempts (or when
        ``stop_also`` says so), waiting by :class:`RetryWait`, retrying :class:`_Retryable` only.
        ``done``: attempts already made (0 or 1) before tenacity takes over, which it counts on from."""
        from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

        stop = stop_after_attempt(self.settings.max_attempts - done)
        if stop_also is not None:
            stop = stop | stop_also
        wait = self.wait if not done else RetryWait(self.settings.backoff_initial * 2 ** done,
                                                    self.settings.backoff_max, self._another_is_healthy)
        return AsyncRetrying(stop=stop, wait=wait, retry=retry_if_exception_type(_Retryable),
                             sleep=asyncio.sleep, reraise=True)

    def _first_wait(self, exc: _Retryable) -> float:
        """The policy's wait after a first attempt that failed with ``exc`` (tenacity's own state)."""
        from tenacity import RetryCallState

        state = RetryCallState(None, None, (), {})  # attempt 1
        state.set_exception((type(exc), exc, None))
        return self.wait(state)

    async def call(self, req: Request) -> CallRecord:
        """Ask until an answer parses or the attempts run out; never raises for one call's failure.
        Labels are kept across attempts by item; a multi-item call whose attempts together answered
        every item is done, and a retry asks only for the items still missing (when :attr:`narrow`
        can render such a request)."""
        started = time.perf_counter()
        st = _RetryState()
        fatal = None

        async def attempt() -> None:
            ask = self._missing_only(req, st.kept)
            st.attempts += 1
            try:
                rec = await self._attempt(ask)
            except _Retryable as exc:
                st.last, st.answered = exc, exc.outcome is not None
                log.debug("%s attempt %d: %s", req.qid, st.attempts, exc)
                if exc.outcome is not None:
                    st.replies += 1
                    before = len(st.kept.labels) if st.kept is not None else 0
                    st.usage = st.usage + exc.outcome.usage
                    st.kept = union_records(req, st.kept, exc.outcome)
                    # an answer that labelled some more items made progress: only one that added
                    # nothing counts against --parse-retries
                    st.unusable += len(st.kept.labels) == before
                    if st.kept.status == "ok":
                        return  # the attempts together labelled every item
                raise
            st.usage = st.usage + rec.usage
            # a first answer to the whole request is already the call's record
            st.kept = rec if st.kept is None and ask is req else union_records(req, st.kept, rec)
            st.answered = True
            st.replies += rec.status == "ok"  # a failed record returned is a 4xx answer (not billed)

        def over_budget(_retry_state) -> bool:
            # a model that answered unusably is asked again at most --parse-retries times: it mostly
            # answers the same prompt the same way, and every answer is billed
            if st.unusable > self.settings.parse_retries:
                return True
            return not self.allow_retry(st.usage, st.attempts)

        try:
            first = None
            try:
                await attempt()  # most calls need no retry: tenacity's machinery is built for the others
            except _Retryable as exc:
                first = exc
            if first is not None and self.settings.max_attempts > 1 and not over_budget(None):
                await asyncio.sleep(self._first_wait(first))
                try:
                    await self._retrying(over_budget, done=1)(attempt)
                except _Retryable:
                    pass
        except _Fatal as exc:
            fatal = str(exc)
        if fatal is not None:
            # raised outside the handler so that no chained exception (holding the server's raw
            # answer, which may echo the key) travels with it
            raise ConfigError(fatal)
        kept, last = st.kept, st.last
        if kept is None or (kept.status != "ok" and not st.answered):
            # the last attempt gave no answer (timeout, 5xx, budget): its reason is the call's
            kept = union_records(req, kept, CallRecord(req.key, req.qid, req.items, req.repeat, "failed",
                                                       last.reason, str(last)))
        return replace(kept, usage=st.usage, attempts=st.attempts, latency=time.perf_counter() - started,
                       answered=st.replies)

    def _missing_only(self, req: Request, kept: CallRecord | None) -> Request:
        if kept is None or not kept.labels or req.keys is None or self.narrow is None:
            return req
        missing = tuple(i for i in req.items if i not in kept.labels)
        return self.narrow(req, missing) if 0 < len(missing) < len(req.items) else req

    # batch --------------------------------------------------------------------------------------
    async def submit_batch(self, requests: Sequence[Request]) -> tuple[str, str]:
        """Upload a JSONL of chat requests and create a batch; returns (batch id, input file id)."""
        lines = []
        for req in requests:
            body = self.body(req)
            lines.append(json.dumps({"custom_id": req.key, "method": "POST", "url": "/v1/chat/completions",
                                     "body": body}, separators=(",", ":")))
        payload = ("\n".join(lines) + "\n").encode("utf-8")
        f = await self._files_call(lambda: self._endpoints[0].client.files.create(
            file=("recjudge-batch.jsonl", payload, "application/jsonl"), purpose="batch"))
        batch = await self._files_call(lambda: self._endpoints[0].client.batches.create(
            input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h"))
        return batch.id, f.id

    async def poll_batch(self, batch_id: str, interval: float,
                         on_progress: Callable[[str, Any], None] | None = None):
        """Wait for a batch to end; returns (status, output text, error text)."""
        while True:
            batch = await self._files_call(lambda: self._endpoints[0].client.batches.retrieve(batch_id))
            if on_progress:
                on_progress(batch.status, getattr(batch, "request_counts", None))
            if batch.status in ("completed", "failed", "expired", "cancelled"):
                break
            await asyncio.sleep(interval)
        out = err = ""
        if getattr(batch, "output_file_id", None):
            out = (await self._files_call(lambda: self._endpoints[0].client.files.content(batch.output_file_id))).text
        if getattr(batch, "error_file_id", None):
            err = (await self._files_call(lambda: self._endpoints[0].client.files.content(batch.error_file_id))).text
        return batch.status, out, err

    async def _files_call(self, factory: Callable[[], Any]):
        """A files/batches call under the same retry policy as chat calls; other errors stop the run."""
        import openai

        async def once():
            self.attempts += 1
            try:
                return await factory()
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                raise _Retryable("connection", self.redact(f"batch API call failed: {exc}")) from None
            except openai.APIStatusError as exc:
                text = self.redact(f"HTTP {exc.status_code}: {_error_text(exc)}")
                if exc.status_code in _RETRY_STATUS or exc.status_code >= 500:
                    raise _Retryable("rate_limited" if exc.status_code == 429 else "server_error",
                                     f"batch API call failed: {text}",
                                     _retry_after(getattr(exc.response, "headers", None))) from None
                raise _Fatal(_fatal_message(exc.status_code, text, self.settings) if exc.status_code in _FATAL_STATUS
                             else f"batch API call failed: {text}") from None

        message = None
        try:
            return await self._retrying()(once)
        except _Retryable as exc:
            message = f"{exc} (after {self.settings.max_attempts} attempts)"
        except _Fatal as exc:
            message = str(exc)
        raise ConfigError(message)  # outside the handler: no chained exception carries the raw answer

    def batch_line(self, req: Request, line: Mapping) -> CallRecord:
        """A call record from one line of a batch's output or error file."""
        response = line.get("response") or {}
        error = line.get("error")
        code = response.get("status_code")
        body = response.get("body") or {}
        if error or code != 200:
            msg = self.redact(json.dumps(error or body.get("error") or body)[:500])
            reason = "rate_limited" if code == 429 else ("server_error" if code and code >= 500 else "batch_error")
            return CallRecord(req.key, req.qid, req.items, req.repeat, "failed", reason,
                              f"HTTP {code}: {msg}", attempts=1, via="batch", endpoint=self.endpoint)
        return replace(self._from_body(req, body, 0.0, "batch",
                                       "json_schema" if self.settings.structured != "off" else "text"),
                       endpoint=self.endpoint, answered=1)


async def _probe_fetch(http: HTTPClient, timeout: float, method: str, path: str,
                       body: Any) -> tuple[int, Any, str | None]:
    """One probe request: (status, parsed JSON, None); (0, None, why) when nothing usable came back."""
    try:
        payload = None if body is None else json.dumps(body).encode("utf-8")
        resp = await within(timeout, http.request(method, path, payload))
    except TransportError as exc:
        return 0, None, str(exc)
    except asyncio.TimeoutError:
        return 0, None, f"no answer within {timeout:g} s"
    return resp.status, parse_json(resp.body) if resp.status < 300 else None, None


async def probe_endpoints(settings: ClientSettings) -> list[tuple[str, EndpointInfo, str | None]]:
    """What each endpoint of ``settings`` answers to the free probe (GET and tokenizer requests, no
    generation) as the run's own probe will find it — within a probe session it is that probe's
    answer — with ``GET /v1/models`` always asked: (public URL, what was found, why it did not answer)."""
    headers, sources = _headers(settings.api_key)
    forced = None if settings.endpoint_kind == "auto" else settings.endpoint_kind
    timeout = min(PROBE_TIMEOUT, settings.timeout)
    out = []
    for url in settings.urls:
        http = HTTPClient(url or DEFAULT_ENDPOINT, headers, 2, sources)
        why: list[str] = []

        async def fetch(method, path, body, http=http, why=why):
            status, answer, reason = await _probe_fetch(http, timeout, method, path, body)
            if reason and path == "/models":
                why.append(reason)
            return status, answer

        try:
            info = await detect_shared(probe_key(url, settings.model, forced, settings.api_key), url, settings.model,
                                       fetch, forced)
            if info.models_status is None:  # the OpenAI API is known by its host: ask for its models anyway
                status, models = await fetch("GET", "/models", None)
                data = models.get("data") if isinstance(models, Mapping) else None
                ids = tuple(str(m.get("id")) for m in data or () if isinstance(m, Mapping) and m.get("id") is not None)
                info = replace(info, model_ids=ids, models_status=status)
        finally:
            await http.close()
        out.append((public_url(url) or DEFAULT_ENDPOINT, info, why[0] if why else None))
    return out


def _headers(api_key: str) -> tuple[dict[str, str], dict[str, str]]:
    """What the openai client sends that matters to a server: the key, and organisation/project
    when set; with where each value came from, for errors that must not show it."""
    import os

    from .. import __version__

    headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json",
               "User-Agent": f"recjudge/{__version__}"}
    sources = {"Authorization": "the API key (the environment variable named by --api-key-env)"}
    for var, name in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
        if os.environ.get(var):
            headers[name] = os.environ[var]
            sources[name] = f"the environment variable {var}"
    return headers, sources


def _sdk_client(cls, settings: ClientSettings, url: str | None):
    return cls(api_key=settings.api_key, base_url=url, timeout=settings.timeout, max_retries=0,
               http_client=_http_client(settings.timeout, url))


def _http_client(timeout: float, url: str | None = None):
    """The HTTP client of one shard: every connection it opens is kept alive for the next call; no
    redirect is followed and an answer's body is capped, as on the aiohttp transport. Its proxy is
    the one the endpoint's probe uses (:func:`~recjudge.judging.transport.resolve_proxy`): an explicit
    transport would otherwise ignore the environment's proxy, and the probe would find another server."""
    import openai

    from .transport import resolve_proxy

    httpx = _httpx()
    room = SHARD + 4  # its share of the calls in flight and a few retries
    limits = httpx.Limits(max_connections=room, max_keepalive_connections=room)
    proxy = resolve_proxy(url or DEFAULT_ENDPOINT)
    inner = httpx.AsyncHTTPTransport(limits=limits, verify=ssl_context(), proxy=proxy)
    transport = _capped_transport(httpx, inner)
    return openai.DefaultAsyncHttpxClient(timeout=timeout, limits=limits, follow_redirects=False,
                                          transport=transport)


def _capped_transport(httpx, inner):
    """``inner`` with every answer's body cut off past :data:`~recjudge.judging.transport.MAX_BODY`
    (an error the openai client reports as a connection error)."""

    class Capped(httpx.AsyncByteStream):
        def __init__(self, stream):
            self.stream = stream

        async def __aiter__(self):
            total = 0
            async for chunk in self.stream:
                total += len(chunk)
                if total > MAX_BODY:
                    raise httpx.ReadError(f"the answer exceeds {MAX_BODY:,} bytes")
                yield chunk

        async def aclose(self):
            await self.stream.aclose()

    class CappedTransport(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request):
            response = await inner.handle_async_request(request)
            length = response.headers.get("content-length")
            if length and length.isdigit() and int(length) > MAX_BODY:
                await response.aclose()
                raise httpx.ReadError(f"the answer announces {int(length):,} bytes, more than the {MAX_BODY:,} "
                                      "accepted")
            response.stream = Capped(response.stream)
            return response

        async def aclose(self):
            await inner.aclose()

    return CappedTransport()


def _httpx():
    try:
        import httpx2 as httpx  # the HTTP library of current openai releases
    except ImportError:  # pragma: no cover - older openai releases
        import httpx
    return httpx


def _answer_excerpt(rec: CallRecord) -> str:
    raw = (rec.raw or "").strip().replace("\n", " ")
    return f"{rec.error or 'answer not usable'}; the answer began {raw[:160]!r}" if raw else \
        (rec.error or "answer not usable")


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def union_records(req: Request, a: CallRecord | None, b: CallRecord) -> CallRecord:
    """What two answers to ``req`` (or to requests for subsets of its items) say together, keyed by
    item id: ``ok`` once every item of ``req`` has a label."""
    labels = {**(a.labels if a else {}), **b.labels}
    criteria = {**(a.criteria if a else {}), **b.criteria}
    # the latest word on an item wins: its own error, the latest attempt's reason, an earlier error
    errors = {i: b.item_errors.get(i) or b.reason or (a.item_errors.get(i) if a else None) or "unparseable"
              for i in req.items if i not in labels}
    raw = "\n\n".join(r for r in ((a.raw if a else None), b.raw) if r) if a is not None and a is not b else b.raw
    if not errors:
        return replace(b, key=req.key, qid=req.qid, items=req.items, status="ok", reason=None, error=None,
                       labels=labels, criteria=criteria, item_errors={}, raw=raw)
    return replace(b, key=req.key, qid=req.qid, items=req.items, status="partial" if labels else "failed",
                   reason=b.reason or next(iter(errors.values())), labels=labels, criteria=criteria,
                   item_errors=errors, raw=raw)


def _error_text(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])[:300]
    return str(getattr(exc, "message", exc))[:300]


def _body_error(raw: bytes, code: int) -> tuple[str, str | None]:
    """The message of an error body (``{"error": {"message": ..., "code": ...}}``), else its start;
    and its ``code`` field."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return raw[:300].decode("utf-8", "replace") or f"status {code}", None
    inner = obj.get("error", obj) if isinstance(obj, Mapping) else obj
    code_name = inner.get("code") if isinstance(inner, Mapping) and isinstance(inner.get("code"), str) else None
    if isinstance(inner, Mapping) and inner.get("message"):
        return str(inner["message"])[:300], code_name
    if isinstance(inner, str):
        return inner[:300], code_name
    return json.dumps(obj)[:300], code_name


_STRUCTURED_WORDS = ("response_format", "json_schema", "json schema", "structured output", "guided", "grammar")


def _mentions_structured(message: str) -> bool:
    low = message.lower()
    return any(w in low for w in _STRUCTURED_WORDS)


def _fatal_message(code: int, text: str, s: ClientSettings, where: str | None = None) -> str:
    where = where or public_url(s.urls[0]) or "the OpenAI API"
    if code in (401, 403):
        return (f"{where} refused the API key ({text}); set a valid key in the environment variable "
                "named by --api-key-env (default OPENAI_API_KEY)")
    return f"{where} answered {text}; check --model {s.model!r} and --base-url"
