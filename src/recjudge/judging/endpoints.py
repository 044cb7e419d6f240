"""The endpoints of a judging run: each one's HTTP client, what its probe found, its requests in
flight (a limiter that keeps a queueing server's wait out of the deadline), and its health; the pool
sends each request to the healthy endpoint with the fewest in flight."""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from typing import Any, Callable, Sequence

from ..urls import DEFAULT_ENDPOINT, public_url
from .dialects import EndpointState
from .transport import httpx, url_under

__all__ = ["Limiter", "Endpoint", "pick", "another_is_healthy", "COOLDOWN_MAX", "RETRY_AFTER_MAX"]

COOLDOWN_MAX = 60.0
RETRY_AFTER_MAX = 600.0  # a server's Retry-After is honoured up to this many seconds


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



class Endpoint:
    """One server of the pool: its HTTP client (chat, probes, tokenizers), the openai client over it
    (files, batches), its kind, its limiter and what least-outstanding spreading needs."""

    def __init__(self, url: str | None, http, make_sdk: Callable[[Any], Any], concurrency: int):
        self.url = url
        self.base = url or DEFAULT_ENDPOINT
        self.public = public_url(url) or DEFAULT_ENDPOINT
        self.http = http
        self._chat_url = None
        self._make_sdk = make_sdk
        self._sdk = None
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
    def chat_url(self):
        """The chat route, parsed once (the HTTP client would parse a string on every request)."""
        if self._chat_url is None:
            self._chat_url = httpx().URL(url_under(self.base, "/chat/completions"))
        return self._chat_url

    @property
    def sdk(self):
        """The openai client for files and batches, made on first use."""
        if self._sdk is None:
            self._sdk = self._make_sdk(self.http)
        return self._sdk

    async def close(self) -> None:
        if self.probed is not None and not self.probed.done():
            self.probed.cancel()
            await asyncio.gather(self.probed, return_exceptions=True)
        await self.http.aclose()


def pick(endpoints: Sequence[Endpoint]) -> Endpoint:
    """The healthy endpoint with the fewest requests in flight (ties: the fewest sent); when every
    endpoint rests, the one whose rest ends first."""
    if len(endpoints) == 1:
        return endpoints[0]
    now = time.monotonic()
    healthy = [ep for ep in endpoints if ep.cool_until <= now]
    if not healthy:
        return min(endpoints, key=lambda ep: ep.cool_until)
    return min(healthy, key=lambda ep: (ep.outstanding, ep.requests))


def another_is_healthy(endpoints: Sequence[Endpoint]) -> bool:
    now = time.monotonic()
    return len(endpoints) > 1 and any(ep.cool_until <= now for ep in endpoints)
