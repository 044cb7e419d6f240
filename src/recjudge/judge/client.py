"""Calling an OpenAI-compatible endpoint: retries, timeouts, structured output, usage, Batch API.

Retries cover 408/409/429/5xx, timeouts, connection errors and answers that do not
parse into in-range labels; waits grow exponentially with full jitter unless the server sends
``Retry-After``, which is honoured. Authentication and not-found errors stop the whole run. The API
key is kept in memory only and scrubbed from every error text recjudge stores or raises.
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
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from ..errors import ConfigError
from ..urls import DEFAULT_ENDPOINT, public_url, url_secrets
from .cache import CallRecord, Usage
from .parse import SINGLE, ParseResult, parse_answer
from .prompts import Messages, Template
from .transport import LeanConnectionError, LeanHTTP, LeanTimeout, proxy_configured

__all__ = ["ClientSettings", "OpenAIJudgeClient", "Redactor", "Request", "GENERATION_PARAMS",
           "quiet_http_loggers", "union_records"]

log = logging.getLogger(__name__)

# the HTTP stack logs every request at DEBUG (headers included in some versions); at -v they would
# flood stderr and could print credentials
_HTTP_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "h11", "h2", "hpack")


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
    transport: str = "sdk"            # chat requests: sdk (openai client) | lean | auto (lean unless a proxy)

    @property
    def urls(self) -> tuple[str | None, ...]:
        return self.base_url if isinstance(self.base_url, tuple) else (self.base_url,)

    def __repr__(self) -> str:  # never print the key
        urls = [public_url(u) for u in self.urls]
        return f"ClientSettings(model={self.model!r}, base_url={urls!r}, api_key='[redacted]')"


# failures that say the server (not the model) is unwell: the endpoint rests before it is asked again
_COOL_REASONS = {"timeout", "connection", "server_error", "rate_limited"}


class _Stop(Exception):
    """A budget (``allow_retry``) refused the next attempt."""


class _RetryState:
    """What the attempts of one call have gathered so far."""

    __slots__ = ("last", "kept", "usage", "attempts", "answered")

    def __init__(self, first: _Retryable):
        self.last = first
        self.kept = first.outcome  # labels any attempt gave: a later failure does not lose them
        self.usage = first.outcome.usage if first.outcome is not None else Usage()
        self.attempts = 1
        self.answered = first.outcome is not None  # whether the latest attempt gave an answer
COOLDOWN_MAX = 60.0
SHARD = 16  # requests in flight per HTTP client (connection pool) of an endpoint


class _Endpoint:
    """One server of the pool, with what least-outstanding-requests spreading needs.

    Its requests go through several small HTTP clients (shards of :data:`SHARD` connections):
    the HTTP library's pool scans every connection for every request, so one pool of 128
    connections spent more CPU on bookkeeping than on the calls themselves.
    """

    def __init__(self, url: str | None, make_client: Callable[[], Any], shards: int):
        self.url = url
        self.public = public_url(url) or DEFAULT_ENDPOINT
        self._make = make_client
        self._shards = shards
        self._clients: list | None = None
        self.shard_load = [0] * shards
        self.lean: LeanHTTP | None = None  # the chat client, when the lean transport is used
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
        """The SDK's clients, made on first use (each loads a TLS trust store: ~60 ms)."""
        if self._clients is None:
            self._clients = [self._make() for _ in range(self._shards)]
        return self._clients

    @property
    def client(self):
        """The SDK client for files and batches."""
        return self.clients[0]

    async def close(self) -> None:
        if self.lean is not None:
            await self.lean.close()
        for c in self._clients or ():
            await c.close()


@dataclass(frozen=True)
class _Status:
    """An HTTP error answer, whichever client received it."""

    code: int
    message: str
    headers: Any


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
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _count(value) -> int:
    """A token count; anything that is not a non-negative number counts 0."""
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
                        mode: str) -> CallRecord:
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
                      attempts, via, mode)


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
        self.settings = settings
        self.template = template
        self.redact = Redactor(settings.api_key, *(s for u in settings.urls for s in url_secrets(u)))
        self.params = dict(settings.params or {})
        self._structured = settings.structured != "off"
        # one client per endpoint for the whole run (its connection pool is reused by every call);
        # our own retry policy (_retry) replaces the SDK's
        lean = settings.transport == "lean" or (settings.transport == "auto" and not proxy_configured())
        # the SDK's clients serve files and batches, and chat requests when the lean client does not
        shards = 1 if lean else -(-max(1, settings.concurrency) // SHARD)
        self._endpoints = [_Endpoint(url, functools.partial(_sdk_client, AsyncOpenAI, settings, url), shards)
                           for url in settings.urls]
        if lean:
            headers = _lean_headers(settings.api_key)
            for ep in self._endpoints:
                ep.lean = LeanHTTP(ep.url or DEFAULT_ENDPOINT, headers, settings.timeout,
                                   keep=max(1, settings.concurrency) + 8)
        self.endpoint = self._endpoints[0].public
        self.attempts = 0  # HTTP requests sent, retries included
        # asked before each retry with the tokens the call has used so far and its attempts; False
        # stops retrying (a cost budget: unusable answers cost tokens too)
        self.allow_retry: Callable[[Usage, int], bool] = lambda usage, attempts: True
        # renders a request for a subset of a multi-item request's items (same profile, same
        # candidate keys); None re-sends the whole request
        self.narrow: Callable[[Request, tuple[str, ...]], Request] | None = None

    async def close(self) -> None:
        for ep in self._endpoints:
            await ep.close()

    def endpoint_stats(self) -> dict[str, dict[str, int]]:
        """Requests sent to each endpoint (retries included) and the server-side failures among them."""
        return {ep.public: {"requests": ep.requests, "failures": ep.errors} for ep in self._endpoints}

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

    # chat ---------------------------------------------------------------------------------------
    def body(self, req: Request, structured: bool | None = None) -> dict:
        structured = self._structured if structured is None else structured
        body: dict[str, Any] = {"model": self.settings.model, "messages": req.messages.as_openai()}
        body.update({k: v for k, v in self.params.items() if k != "extra_body"})
        if structured:
            body["response_format"] = {"type": "json_schema", "json_schema": self.template.json_schema(req.keys)}
        return body

    async def _attempt(self, req: Request) -> CallRecord:
        """One request to the endpoint :meth:`_pick` chooses; the record names that endpoint."""
        ep = self._pick()
        ep.outstanding += 1
        ep.requests += 1
        try:
            rec = await self._attempt_on(ep, req)
        except _Retryable as exc:
            if exc.reason in _COOL_REASONS:
                ep.failed(self.settings.cooldown, exc.retry_after)
            else:  # the server answered; what the model said is not the server's fault
                ep.answered()
            if exc.outcome is not None:
                exc.outcome = replace(exc.outcome, endpoint=ep.public)
            raise
        finally:
            ep.outstanding -= 1
        ep.answered()
        return replace(rec, endpoint=ep.public)

    async def _attempt_on(self, ep: _Endpoint, req: Request, structured: bool | None = None) -> CallRecord:
        body = self.body(req, structured)
        if self.params.get("extra_body"):
            body.update(self.params["extra_body"])
        self.attempts += 1
        start = time.perf_counter()
        resp = await (self._post_lean(ep, body) if ep.lean is not None else self._post_sdk(ep, body))
        if isinstance(resp, _Status):
            code, text = resp.code, self.redact(f"HTTP {resp.code}: {resp.message}")
            if code in _RETRY_STATUS or code >= 500:
                reason = "rate_limited" if code == 429 else ("server_error" if code >= 500 else f"http_{code}")
                raise _Retryable(reason, text, _retry_after(resp.headers))
            # decided from this request's own body: with concurrent calls in flight, other
            # requests sent with response_format are refused after the first refusal too
            if code in (400, 422) and "response_format" in body and self.settings.structured == "auto" \
                    and _mentions_response_format(resp.message):
                if self._structured:
                    log.warning("the endpoint rejected structured output (response_format); parsing text "
                                "answers instead")
                self._structured = False
                return await self._attempt_on(ep, req, structured=False)
            if code in _FATAL_STATUS:
                raise _Fatal(_fatal_message(code, text, self.settings, ep.public))
            return CallRecord(req.key, req.qid, req.items, req.repeat, "failed", "bad_request", text,
                              attempts=1)
        if not isinstance(resp, Mapping):
            raise _Retryable("bad_response", f"the answer is not a JSON object but {type(resp).__name__}")
        rec = self._from_body(req, resp, time.perf_counter() - start,
                              "chat", "json_schema" if "response_format" in body else "text")
        if rec.status != "ok":
            raise _Retryable(rec.reason or "unparseable", rec.error or "answer not usable", outcome=rec)
        return rec

    async def _post_lean(self, ep: _Endpoint, body: dict):
        """The chat POST through the lean client: the answer's JSON, or a :class:`_Status` (HTTP error)."""
        try:
            resp = await ep.lean.post("/chat/completions", json.dumps(body, separators=(",", ":")).encode("utf-8"))
        except LeanTimeout:
            raise _Retryable("timeout", f"no answer within {self.settings.timeout:g} s") from None
        except LeanConnectionError as exc:
            raise _Retryable("connection", self.redact(str(exc))) from None
        if not 200 <= resp.status < 300:
            return _Status(resp.status, _body_error_text(resp.body, resp.status), resp.headers)
        try:
            return json.loads(resp.body)
        except ValueError as exc:  # an HTTP 200 whose body is not JSON (truncated, an HTML page)
            raise _Retryable("bad_response", self.redact(f"the answer is not a JSON object: "
                                                         f"{type(exc).__name__}: {exc}")[:300]) from None

    async def _post_sdk(self, ep: _Endpoint, body: dict):
        """The chat POST through the openai SDK's HTTP stack (proxies, or ``transport='sdk'``)."""
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
            raise _Retryable("connection", self.redact(f"connection error: {exc}")) from None
        except ValueError as exc:
            raise _Retryable("bad_response", self.redact(f"the answer is not a JSON object: "
                                                         f"{type(exc).__name__}: {exc}")[:300]) from None
        except openai.APIStatusError as exc:
            return _Status(exc.status_code, _error_text(exc), exc.response.headers)
        finally:
            ep.shard_load[shard] -= 1

    def _from_body(self, req: Request, body: Mapping, latency: float, via: str, mode: str) -> CallRecord:
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
                              attempts=1, via=via, mode=mode)
        finish = choice.get("finish_reason")
        rec = outcome_from_answer(req, self.template, content, finish if isinstance(finish, str) else None,
                                  refusal, usage, latency, 1, via, mode)
        # the raw answer is stored: a model that echoes the key must not put it in the cache
        return replace(rec, raw=self.redact(rec.raw))

    async def call(self, req: Request) -> CallRecord:
        """Ask until an answer parses or the attempts run out; never raises for one call's failure."""
        started = time.perf_counter()
        fatal = None
        try:
            try:
                rec = await self._attempt(req)  # the common case pays for no retry machinery
                return replace(rec, attempts=1, latency=time.perf_counter() - started)
            except _Retryable as exc:
                log.debug("%s attempt 1: %s", req.qid, exc)
                return await self._retry(req, exc, started)
        except _Fatal as exc:
            fatal = str(exc)
        # raised outside the handler so that no chained exception (holding the server's raw
        # answer, which may echo the key) travels with it
        raise ConfigError(fatal)

    async def _retry(self, req: Request, first: _Retryable, started: float) -> CallRecord:
        """Attempts 2.. of a call, driven by tenacity. Labels are kept across attempts by item; a
        multi-item call whose attempts together answered every item is done, and a retry asks only
        for the items still missing (when :attr:`narrow` can render such a request)."""
        from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

        st = _RetryState(first)

        def pause(_state=None) -> float:
            # a failing endpoint rests; when another is healthy the retry goes there at once
            away = st.last.reason in _COOL_REASONS and self._another_is_healthy()
            return 0.0 if away else self._delay(st.last, st.attempts)

        async def attempt() -> None:
            if not self.allow_retry(st.usage, st.attempts):
                raise _Stop()
            ask = self._missing_only(req, st.kept)
            st.attempts += 1
            try:
                rec = await self._attempt(ask)
            except _Retryable as exc:
                st.last, st.answered = exc, exc.outcome is not None
                log.debug("%s attempt %d: %s", req.qid, st.attempts, exc)
                if exc.outcome is not None:
                    st.usage = st.usage + exc.outcome.usage
                    st.kept = union_records(req, st.kept, exc.outcome)
                    if st.kept.status == "ok":
                        return  # the attempts together labelled every item
                raise
            st.usage = st.usage + rec.usage
            st.kept = union_records(req, st.kept, rec)
            st.answered = True

        if self.settings.max_attempts > 1:
            retrying = AsyncRetrying(stop=stop_after_attempt(self.settings.max_attempts - 1), wait=pause,
                                     retry=retry_if_exception_type(_Retryable), sleep=asyncio.sleep,
                                     reraise=True)
            await asyncio.sleep(pause())  # tenacity waits between its attempts, not before the first
            try:
                await retrying(attempt)
            except (_Retryable, _Stop):
                pass
        kept, last = st.kept, st.last
        if kept is None or (kept.status != "ok" and not st.answered):
            # the last attempt gave no answer (timeout, 5xx, budget): its reason is the call's
            kept = union_records(req, kept, CallRecord(req.key, req.qid, req.items, req.repeat, "failed",
                                                       last.reason, str(last)))
        return replace(kept, usage=st.usage, attempts=st.attempts, latency=time.perf_counter() - started)

    def _missing_only(self, req: Request, kept: CallRecord | None) -> Request:
        if kept is None or not kept.labels or req.keys is None or self.narrow is None:
            return req
        missing = tuple(i for i in req.items if i not in kept.labels)
        return self.narrow(req, missing) if 0 < len(missing) < len(req.items) else req

    def _delay(self, exc: BaseException | None, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failed attempt."""
        import random

        cap = self.settings.backoff_max
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return min(exc.retry_after, max(cap, RETRY_AFTER_MAX))
        # full jitter: uniform in [0, initial * 2^(n-1)], capped
        return random.uniform(0, min(cap, self.settings.backoff_initial * 2 ** (failures - 1)))

    # batch --------------------------------------------------------------------------------------
    async def submit_batch(self, requests: Sequence[Request]) -> tuple[str, str]:
        """Upload a JSONL of chat requests and create a batch; returns (batch id, input file id)."""
        lines = []
        structured = self.settings.structured != "off"
        for req in requests:
            body = self.body(req, structured)
            if self.params.get("extra_body"):
                body.update(self.params["extra_body"])
            lines.append(json.dumps({"custom_id": req.key, "method": "POST", "url": "/v1/chat/completions",
                                     "body": body}, separators=(",", ":")))
        payload = ("\n".join(lines) + "\n").encode("utf-8")
        f = await self._guard(lambda: self._endpoints[0].client.files.create(
            file=("recjudge-batch.jsonl", payload, "application/jsonl"), purpose="batch"))
        batch = await self._guard(lambda: self._endpoints[0].client.batches.create(
            input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h"))
        return batch.id, f.id

    async def poll_batch(self, batch_id: str, interval: float,
                         on_progress: Callable[[str, Any], None] | None = None):
        """Wait for a batch to end; returns (status, output text, error text)."""
        while True:
            batch = await self._guard(lambda: self._endpoints[0].client.batches.retrieve(batch_id))
            if on_progress:
                on_progress(batch.status, getattr(batch, "request_counts", None))
            if batch.status in ("completed", "failed", "expired", "cancelled"):
                break
            await asyncio.sleep(interval)
        out = err = ""
        if getattr(batch, "output_file_id", None):
            out = (await self._guard(lambda: self._endpoints[0].client.files.content(batch.output_file_id))).text
        if getattr(batch, "error_file_id", None):
            err = (await self._guard(lambda: self._endpoints[0].client.files.content(batch.error_file_id))).text
        return batch.status, out, err

    async def _guard(self, factory: Callable[[], Any]):
        """Run a files/batches call with retries on transient errors; other errors stop the run."""
        import openai

        message = "batch API call failed"
        for attempt in range(1, self.settings.max_attempts + 1):
            self.attempts += 1
            try:
                return await factory()
            except (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError,
                    openai.InternalServerError) as exc:
                if attempt == self.settings.max_attempts:
                    message = self.redact(f"batch API call failed after {attempt} attempts: {exc}")
                    break
                headers = getattr(getattr(exc, "response", None), "headers", None)
                wait = _retry_after(headers)
                await asyncio.sleep(min(self.settings.backoff_max, wait if wait is not None else
                                        self.settings.backoff_initial * 2 ** (attempt - 1)))
            except openai.APIStatusError as exc:
                text = self.redact(f"HTTP {exc.status_code}: {_error_text(exc)}")
                message = (_fatal_message(exc.status_code, text, self.settings) if exc.status_code in _FATAL_STATUS
                           else f"batch API call failed: {text}")
                break
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
                       endpoint=self.endpoint)


def _lean_headers(api_key: str) -> dict[str, str]:
    """What the SDK sends that matters to a server: the key, and organisation/project when set."""
    import os

    from .. import __version__

    headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json",
               "User-Agent": f"recjudge/{__version__}"}
    for var, name in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
        if os.environ.get(var):
            headers[name] = os.environ[var]
    return headers


def _sdk_client(cls, settings: ClientSettings, url: str | None):
    return cls(api_key=settings.api_key, base_url=url, timeout=settings.timeout, max_retries=0,
               http_client=_http_client(settings.timeout))


def _http_client(timeout: float):
    """The HTTP client of one shard: every connection it opens is kept alive for the next call."""
    import openai

    httpx = _httpx()
    room = SHARD + 4  # its share of the calls in flight and a few retries
    return openai.DefaultAsyncHttpxClient(
        timeout=timeout, limits=httpx.Limits(max_connections=room, max_keepalive_connections=room))


def _httpx():
    try:
        import httpx2 as httpx  # the HTTP library of current openai releases
    except ImportError:  # pragma: no cover - older openai releases
        import httpx
    return httpx


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


def _body_error_text(raw: bytes, code: int) -> str:
    """The message of an error body (``{"error": {"message": ...}}``), else its start."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return raw[:300].decode("utf-8", "replace") or f"status {code}"
    inner = obj.get("error", obj) if isinstance(obj, Mapping) else obj
    if isinstance(inner, Mapping) and inner.get("message"):
        return str(inner["message"])[:300]
    if isinstance(inner, str):
        return inner[:300]
    return json.dumps(obj)[:300]


def _mentions_response_format(message: str) -> bool:
    return "response_format" in message.lower() or "json_schema" in message.lower()


def _fatal_message(code: int, text: str, s: ClientSettings, where: str | None = None) -> str:
    where = where or public_url(s.urls[0]) or "the OpenAI API"
    if code in (401, 403):
        return (f"{where} refused the API key ({text}); set a valid key in the environment variable "
                "named by --api-key-env (default OPENAI_API_KEY)")
    return f"{where} answered {text}; check --model {s.model!r} and --base-url"
