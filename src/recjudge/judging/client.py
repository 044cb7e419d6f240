"""Calling an OpenAI-compatible endpoint: retries, deadlines, structured output, usage, Batch API.

Every attempt of every call (chat, files, batches) goes through one tenacity policy: retries on
408/409/429/5xx, timeouts, connection errors and answers that do not parse into in-range labels (those
at most ``parse_retries`` times: each is billed, and a model mostly answers a prompt the same way);
the wait is the server's ``Retry-After`` when it sends one, else exponential with full jitter, and
none when another endpoint of the pool is healthy. Every attempt is one HTTP request counted
against the attempts and the cost budget: nothing is resent behind the caller's back. Each attempt
has one deadline (``timeout``) over its whole time, connect to last byte, measured from when it
leaves recjudge's own queue. Authentication and not-found errors stop the whole run (once the calls
in flight are stored). The API key is kept in memory only and scrubbed from every error text
recjudge stores or raises.

Requests go through one HTTP stack (:mod:`recjudge.judging.transport`). On first contact each
endpoint is probed for its kind (:mod:`recjudge.judging.probe`), which decides how structured output
and the output-token cap are sent, which parameters are reported as ignored, how many requests it
serves at once, and which tokenizer counts prompts.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from ..errors import ConfigError
from ..urls import public_url, url_secrets
from .cache import CallRecord, Usage
from .dialects import TOKEN_CAPS, get_dialect, tokenize_count, tokenize_request, window_from_message
from .endpoints import Endpoint, another_is_healthy, pick
from .parse import record_from_body, union_records
from .probe import KEY_SOURCE, PROBE_TIMEOUT, describe, detect_shared, fetch, probe_endpoints, probe_key, say_once
from .prompts import Messages, Template
from .retry import (COOL_REASONS, FATAL_STATUS, RETRY_STATUS, CallAttempts, Fatal, Retryable, RetryWait, Status,
                    body_error, fatal_message, retry_after, retrying)
from .transport import Redactor, TransportError, http_client, request_headers, sdk_client, send, within

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
    concurrency: int = 8              # requests in flight: sizes the connection pool
    endpoint_kind: str = "auto"       # auto (probed) or a kind of recjudge.judging.dialects
    parse_retries: int = 1            # retries after answers received but unusable (within max_attempts)
    # how the caller wrote a judge setting (JudgeSettings.name_of); None: as the judge command's flags
    name_of: Callable[[str], str] | None = None

    def spelling(self, name: str) -> str:
        """The setting ``name`` as the caller wrote it, for the errors raised during calls."""
        return self.name_of(name) if self.name_of is not None else "--" + name.replace("_", "-")

    @property
    def urls(self) -> tuple[str | None, ...]:
        return self.base_url if isinstance(self.base_url, tuple) else (self.base_url,)

    def __repr__(self) -> str:  # never print the key
        urls = [public_url(u) for u in self.urls]
        return f"ClientSettings(model={self.model!r}, base_url={urls!r}, api_key='[redacted]')"


class OpenAIJudgeClient:
    """Async chat-completions client with bounded retries; one instance per judging run."""

    def __init__(self, settings: ClientSettings, template: Template):
        try:
            import openai  # noqa: F401
        except ImportError:  # pragma: no cover - a core dependency
            from ..errors import MissingExtraError
            raise MissingExtraError("openai", "llm", "the LLM judge") from None

        quiet_http_loggers()  # after the import: openai sets its logger from OPENAI_LOG on import
        if settings.endpoint_kind != "auto":
            get_dialect(settings.endpoint_kind)  # an unknown kind is refused before any request
        self.settings = settings
        self.template = template
        self.redact = Redactor(settings.api_key, *(s for u in settings.urls for s in url_secrets(u)))
        self.params = dict(settings.params or {})
        headers = request_headers(settings.api_key, KEY_SOURCE)  # nothing is sent with a line break
        room = max(1, settings.concurrency) + 8  # the calls in flight and a few probes
        self._endpoints = [
            Endpoint(url, http_client(url or "https://api.openai.com/v1", headers, room, settings.timeout),
                     functools.partial(_sdk, settings.api_key, url, settings.timeout), settings.concurrency)
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

    def _pick(self) -> Endpoint:
        return pick(self._endpoints)

    def _another_is_healthy(self) -> bool:
        return another_is_healthy(self._endpoints)

    def _note(self, ep: Endpoint, message: str, once: bool = False) -> None:
        """``message`` in the summary, and said (``once``: unless said of this endpoint in the probe session)."""
        ep.state.notes.append(message)
        if not once or say_once(ep.url, message):
            self.notify(message)

    # first contact ------------------------------------------------------------------------------
    async def _ready(self, ep: Endpoint) -> None:
        """Probe ``ep`` once (concurrent callers wait for the same probe)."""
        if ep.state.dialect is not None:
            return
        if ep.probed is None:
            ep.probed = asyncio.ensure_future(self._probe(ep))
        await asyncio.shield(ep.probed)

    async def _fetch(self, ep: Endpoint, method: str, path: str, body: Any) -> tuple[int, Any]:
        """One probe request: (status, parsed JSON); (0, None) when nothing usable came back."""
        self.probe_requests += 1
        return (await fetch(ep.http, ep.base, min(PROBE_TIMEOUT, self.settings.timeout), method, path, body))[:2]

    async def _probe(self, ep: Endpoint) -> None:
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
    def body(self, req: Request, ep: Endpoint | None = None, structured: bool | None = None) -> dict:
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
            except (asyncio.TimeoutError, TimeoutError):
                raise Retryable("timeout", f"no answer within {self.settings.timeout:g} s (the whole request: "
                                            "connect, send, wait, read)") from None
            ep.limiter.observe(time.perf_counter() - start, alone)
        except Retryable as exc:
            if exc.reason in COOL_REASONS:
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

    async def _attempt_on(self, ep: Endpoint, req: Request) -> CallRecord:
        """One request to ``ep``; the record it gives names ``ep``."""
        body = self.body(req, ep)
        self.attempts += 1
        start = time.perf_counter()
        resp = await self._post(ep, body)
        mode = ep.state.mode if "response_format" in body else "text"
        if isinstance(resp, Status):
            return self._status(ep, req, body, resp)
        if not isinstance(resp, Mapping):
            raise Retryable("bad_response", f"the answer is not a JSON object but {type(resp).__name__}")
        rec = record_from_body(req, self.template, resp, time.perf_counter() - start, "chat", mode, ep.public,
                               self.redact)
        if rec.status != "ok":
            raise Retryable(rec.reason or "unparseable", rec.error or "answer not usable", outcome=rec)
        return rec

    def _status(self, ep: Endpoint, req: Request, body: Mapping, resp: Status) -> CallRecord:
        """What an HTTP error answer means: retry, fall back to text, stop the run, or a failed call."""
        code, text = resp.code, self.redact(f"HTTP {resp.code}: {resp.message}")
        # a refusal of structured output, whatever its status (llama-cpp-python answers 500):
        # decided from this request's own body, and counted as an attempt like any other
        if "response_format" in body and self.settings.structured == "auto" and code >= 400 \
                and code not in FATAL_STATUS and _mentions_structured(resp.message):
            if ep.state.mode != "text":
                ep.state.mode = "text"
                ep.state.fallback = (f"{body['response_format'].get('type')} refused ({_clip(text, 200)}): text "
                                     "answers parsed")
                self._note(ep, f"endpoint {ep.public} refused structured output; parsing text answers instead "
                               f"({_clip(text, 200)})")
            raise Retryable("structured_refused", text, retry_after=0.0)
        if code in (400, 413, 422) and (resp.code_name == "context_length_exceeded"
                                         or window_from_message(resp.message) is not None):
            window = window_from_message(resp.message)
            if window and not ep.state.learned_window:
                ep.state.learned_window = window
            return CallRecord(req.key, req.qid, req.items, req.repeat, "failed", "context_overflow", text,
                              attempts=1)
        if code in RETRY_STATUS or code >= 500:
            reason = "rate_limited" if code == 429 else ("server_error" if code >= 500 else f"http_{code}")
            raise Retryable(reason, text, retry_after(resp.headers))
        if 300 <= code < 400:
            where = public_url(resp.headers.get("location")) if resp.headers is not None else None
            raise Fatal(f"{ep.public} answered HTTP {code}, a redirect{f' to {where}' if where else ''}, which "
                         f"is not followed; give the final URL as {self.settings.spelling('base_url')}")
        if code < 200:
            raise Retryable("bad_response", f"{text}: an interim answer given as the final one")
        if code in FATAL_STATUS:
            raise Fatal(fatal_message(code, text, self.settings, ep.public))
        return CallRecord(req.key, req.qid, req.items, req.repeat, "failed", "bad_request", text, attempts=1)

    async def _post(self, ep: Endpoint, body: dict):
        """The chat POST: the answer's JSON, or a :class:`Status` (HTTP error)."""
        try:
            resp = await send(ep.http, "POST", ep.chat_url, body)
        except TransportError as exc:
            raise Retryable("connection", self.redact(str(exc))) from None
        if not 200 <= resp.status < 300:
            message, code_name = body_error(resp.body, resp.status)
            return Status(resp.status, message, resp.headers, code_name)
        try:
            return json.loads(resp.body)
        except ValueError as exc:  # an HTTP 200 whose body is not JSON (truncated, an HTML page)
            raise Retryable("bad_response", self.redact(f"the answer is not a JSON object: "
                                                         f"{type(exc).__name__}: {exc}")[:300]) from None

    def retrying(self, stop_also: Callable[[Any], bool] | None = None, done: int = 0):
        """The one retry policy (:func:`~recjudge.judging.retry.retrying`) for this client's settings.
        ``done``: attempts already made (0 or 1) before tenacity takes over, which it counts on from."""
        s = self.settings
        wait = self.wait if not done else RetryWait(s.backoff_initial * 2 ** done, s.backoff_max,
                                                    self._another_is_healthy)
        return retrying(s.max_attempts - done, wait, stop_also)

    @property
    def sdk(self):
        """The openai client of the first endpoint (files and batches)."""
        return self._endpoints[0].sdk

    def _first_wait(self, exc: Retryable) -> float:
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
        st = CallAttempts(req)
        fatal = None

        async def attempt() -> None:
            ask = self._missing_only(req, st.kept)
            st.attempts += 1
            try:
                rec = await self._attempt(ask)
            except Retryable as exc:
                log.debug("%s attempt %d: %s", req.qid, st.attempts, exc)
                if st.failed(exc):
                    return  # the attempts together labelled every item
                raise
            st.answered_with(rec, whole=ask is req)

        def over_budget(_retry_state) -> bool:
            # a model that answered unusably is asked again at most parse_retries times: it mostly
            # answers the same prompt the same way, and every answer is billed
            if st.unusable > self.settings.parse_retries:
                return True
            return not self.allow_retry(st.usage, st.attempts)

        try:
            first = None
            try:
                await attempt()  # most calls need no retry: tenacity's machinery is built for the others
            except Retryable as exc:
                first = exc
            if first is not None and self.settings.max_attempts > 1 and not over_budget(None):
                await asyncio.sleep(self._first_wait(first))
                try:
                    await self.retrying(over_budget, done=1)(attempt)
                except Retryable:
                    pass
        except Fatal as exc:
            fatal = str(exc)
        if fatal is not None:
            # raised outside the handler so that no chained exception (holding the server's raw
            # answer, which may echo the key) travels with it
            raise ConfigError(fatal)
        return st.record(time.perf_counter() - started)

    def _missing_only(self, req: Request, kept: CallRecord | None) -> Request:
        if kept is None or not kept.labels or req.keys is None or self.narrow is None:
            return req
        missing = tuple(i for i in req.items if i not in kept.labels)
        return self.narrow(req, missing) if 0 < len(missing) < len(req.items) else req

def _sdk(api_key: str, url: str | None, timeout: float, http):
    return sdk_client(http, api_key, url, timeout)


def _answer_excerpt(rec: CallRecord) -> str:
    raw = (rec.raw or "").strip().replace("\n", " ")
    return f"{rec.error or 'answer not usable'}; the answer began {raw[:160]!r}" if raw else \
        (rec.error or "answer not usable")


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


_STRUCTURED_WORDS = ("response_format", "json_schema", "json schema", "structured output", "guided", "grammar")


def _mentions_structured(message: str) -> bool:
    low = message.lower()
    return any(w in low for w in _STRUCTURED_WORDS)


