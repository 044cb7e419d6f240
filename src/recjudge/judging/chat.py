"""The chat backend: one chat-completions request per call, ``concurrency`` in flight, answers cached
as they arrive; SIGINT/SIGTERM drain the calls in flight before the run stops."""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from ..errors import ConfigError
from .backend import Job, OpenAIBackend, register_backend
from .client import Request

__all__ = ["ChatBackend"]

log = logging.getLogger("recjudge.judging")


class ChatBackend(OpenAIBackend):
    """Chat completions through :class:`~recjudge.judging.client.OpenAIJudgeClient`."""

    def __init__(self, job: Job):
        super().__init__(job)
        # with --max-cost and no output cap the first call goes alone (see Budget.needs_probe)
        self.probe: asyncio.Event | None = None

    async def run(self, job: Job) -> None:
        queue: asyncio.Queue = asyncio.Queue(maxsize=job.config.concurrency * 4)
        workers_n = job.config.concurrency
        producer = asyncio.create_task(_produce(job, queue, workers_n))
        workers = [asyncio.create_task(self._work(job, queue)) for _ in range(workers_n)]
        tasks = [producer, *workers]
        stop = asyncio.Event()
        restore = _catch_signals(job, stop, tasks)
        try:
            everything = asyncio.ensure_future(asyncio.gather(*tasks))
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait({everything, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if stop.is_set() and not everything.done():
                await _drain(job, queue, tasks, everything)
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

    async def _work(self, job: Job, queue: asyncio.Queue) -> None:
        """One worker: ask the queued requests one at a time until the sentinel or an interrupt."""
        while True:
            req = await queue.get()
            if req is None or job.interrupted is not None:
                return
            await self._ask(job, req)

    async def _ask(self, job: Job, req: Request) -> None:
        """One request, unless the breaker has tripped, it no longer fits the window or the budget
        refuses it; its answer is settled against the budget and stored."""
        if job.breaker.tripped is not None:  # failing calls stopped the run: ask nothing more
            job.halted.add(req.key)
            return
        if job.budget.needs_probe:
            if self.probe is None:
                self.probe = asyncio.Event()
            else:
                await self.probe.wait()
        if not await job.fits(req):  # a window learned since this request was planned
            return
        est_cost = job.reserve(req)
        if not job.budget.take(est_cost):
            job.skipped += 1
            if self.probe is not None:
                self.probe.set()
            return
        try:
            rec = await self.client.call(req)
        except ConfigError as exc:
            # a refused key or an unknown model: no other call can succeed; those in flight
            # finish and are cached, then the run raises it
            job.halt(exc)
            job.halted.add(req.key)
            return
        finally:
            if self.probe is not None:
                job.budget.needs_probe = False
                self.probe.set()
        job.budget.settle(est_cost, rec.usage, rec.attempts)
        job.store(rec, req)


async def _produce(job: Job, queue: asyncio.Queue, workers_n: int) -> None:
    """Queue the requests the cache cannot answer, then one sentinel per worker."""
    async for missing in job.pending():
        for req in missing:
            await queue.put(req)
    for _ in range(workers_n):
        await queue.put(None)


async def _drain(job: Job, queue: asyncio.Queue, tasks: list, everything: asyncio.Future) -> None:
    """SIGINT/SIGTERM: ask nothing new; calls in flight finish (and are cached) within the grace
    period, the rest are cancelled and re-asked by the next run. ``tasks`` is the producer, then
    the workers."""
    producer, *workers = tasks
    producer.cancel()
    await asyncio.gather(producer, return_exceptions=True)
    while not queue.empty():  # idle workers take a sentinel and leave
        queue.get_nowait()
    for _ in workers:
        queue.put_nowait(None)
    log.warning("interrupted: letting the calls in flight finish (at most %g s; interrupt again "
                "to stop now)", job.config.drain_grace)
    await asyncio.wait(workers, timeout=job.config.drain_grace or None)
    for t in tasks:
        t.cancel()
    await asyncio.gather(everything, return_exceptions=True)


def _catch_signals(job: Job, stop: asyncio.Event, tasks: list) -> Callable[[], None]:
    """Turn SIGINT/SIGTERM into a drain of the calls in flight; a second signal stops at once.
    Returns the function that restores the previous handlers."""
    import signal

    loop = asyncio.get_running_loop()
    installed = []

    def on_signal(signum: int) -> None:
        if job.interrupted is None:
            job.interrupted = signum
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
        job.previous_handlers[signum] = previous
        installed.append(signum)

    def restore() -> None:
        for signum in installed:
            loop.remove_signal_handler(signum)
            signal.signal(signum, job.previous_handlers[signum])
    return restore


register_backend("chat", ChatBackend)
