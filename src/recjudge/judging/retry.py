"""The judge's one retry policy: which failures are retried and how long to wait (tenacity), what an
HTTP error answer is, and the messages of the errors that stop a run."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from ..urls import public_url
from .cache import CallRecord, Usage
from .endpoints import RETRY_AFTER_MAX
from .parse import union_records

__all__ = ["CallAttempts", "Status", "Retryable", "Fatal", "RetryWait", "retrying", "retry_after", "error_text",
           "body_error",
           "fatal_message", "RETRY_STATUS", "FATAL_STATUS", "COOL_REASONS"]

RETRY_STATUS = {408, 409, 429}
FATAL_STATUS = {401, 403, 404}

# failures that say the server (not the model) is unwell: the endpoint rests before it is asked again
COOL_REASONS = {"timeout", "connection", "server_error", "rate_limited"}


@dataclass(frozen=True)
class Status:
    """An HTTP error answer, whichever client received it."""

    code: int
    message: str
    headers: Any
    code_name: str | None = None  # the error's "code" field (e.g. context_length_exceeded)


class Retryable(Exception):
    """A failed attempt that the policy retries: its reason, the server's Retry-After, the answer it gave."""

    def __init__(self, reason: str, message: str, retry_after: float | None = None, outcome=None):
        super().__init__(message)
        self.reason = reason
        self.retry_after = retry_after
        self.outcome = outcome


class Fatal(Exception):
    """A failure no retry can mend (a refused key, an unknown model, a redirect)."""


def retry_after(headers) -> float | None:
    """The wait a server asks for (``retry-after-ms``, ``retry-after`` in seconds or as a date), if any."""
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
        if isinstance(exc, Retryable):
            if exc.retry_after is not None:
                return min(exc.retry_after, max(self.cap, RETRY_AFTER_MAX))
            if exc.reason in COOL_REASONS and self.another_is_healthy():
                return 0.0
        return self.backoff(retry_state)

def retrying(max_attempts: int, wait, stop_also: Callable[[Any], bool] | None = None):
    """tenacity, stopping after ``max_attempts`` attempts (or when ``stop_also`` says so), waiting by
    ``wait`` (a :class:`RetryWait`), retrying :class:`Retryable` only."""
    from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

    stop = stop_after_attempt(max_attempts)
    if stop_also is not None:
        stop = stop | stop_also
    return AsyncRetrying(stop=stop, wait=wait, retry=retry_if_exception_type(Retryable), sleep=asyncio.sleep,
                         reraise=True)


def error_text(exc) -> str:
    """The message of an openai error's body, else its text."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])[:300]
    return str(getattr(exc, "message", exc))[:300]


def body_error(raw: bytes, code: int) -> tuple[str, str | None]:
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


def fatal_message(code: int, text: str, s, where: str | None = None) -> str:
    """What a 401/403/404 answer to the settings ``s`` (a ClientSettings) means, and the way out, naming
    the settings as the caller wrote them."""
    where = where or public_url(s.urls[0]) or "the OpenAI API"
    if code in (401, 403):
        return (f"{where} refused the API key ({text}); set a valid key in the environment variable "
                f"named by {s.spelling('api_key_env')} (default OPENAI_API_KEY)")
    return f"{where} answered {text}; check {s.spelling('model')} (now {s.model!r}) and {s.spelling('base_url')}"


class CallAttempts:
    """What the attempts of one call have gathered so far: labels any attempt gave (a later failure
    does not lose them), tokens, attempts, and the answers the server gave."""

    __slots__ = ("req", "last", "kept", "usage", "attempts", "answered", "replies", "unusable")

    def __init__(self, req):
        self.req = req
        self.last: Retryable | None = None
        self.kept: CallRecord | None = None
        self.usage = Usage()
        self.attempts = 0
        self.answered = False  # whether the latest attempt gave an answer
        self.replies = 0       # attempts the server answered (2xx): each is billed
        self.unusable = 0      # of them, answers that added no label (unparseable, out of range)

    def failed(self, exc: Retryable) -> bool:
        """Take a failed attempt; True when the attempts together labelled every item."""
        self.last, self.answered = exc, exc.outcome is not None
        if exc.outcome is None:
            return False
        self.replies += 1
        before = len(self.kept.labels) if self.kept is not None else 0
        self.usage = self.usage + exc.outcome.usage
        self.kept = union_records(self.req, self.kept, exc.outcome)
        # an answer that labelled some more items made progress: only one that added nothing counts
        # against parse_retries
        self.unusable += len(self.kept.labels) == before
        return self.kept.status == "ok"

    def answered_with(self, rec: CallRecord, whole: bool) -> None:
        """Take an attempt's record (``whole``: it asked for every item of the call)."""
        self.usage = self.usage + rec.usage
        # a first answer to the whole request is already the call's record
        self.kept = rec if self.kept is None and whole else union_records(self.req, self.kept, rec)
        self.answered = True
        self.replies += rec.status == "ok"  # a failed record returned is a 4xx answer (not billed)

    def record(self, latency: float) -> CallRecord:
        """The call's record: what its attempts gathered, or the last failure's reason."""
        req, kept, last = self.req, self.kept, self.last
        if kept is None or (kept.status != "ok" and not self.answered):
            # the last attempt gave no answer (timeout, 5xx, budget): its reason is the call's
            kept = union_records(req, kept, CallRecord(req.key, req.qid, req.items, req.repeat, "failed",
                                                       last.reason, str(last)))
        return replace(kept, usage=self.usage, attempts=self.attempts, latency=latency, answered=self.replies)
