"""The chat backend: one chat-completions request per call, ``concurrency`` in flight, answers cached
as they arrive; SIGINT/SIGTERM drain the calls in flight before the run stops."""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from ..errors import ConfigError
from .backend import Job, OpenAIBackend, register_backend

__all__ = ["ChatBackend"]

log = logging.getLogger("recjudge.judging")


class ChatBackend(OpenAIBackend):
    """Chat completions through :class:`~recjudge.judging.client.OpenAIJudgeClient`."""

    def __init__(self, job: Job):
        super().__init__(job)
        # with --max-cost and no output cap the first call goes alone (see Budget.needs_probe)
        self.probe: asyncio.Event | None = None

    async def run(self, job: Job) -> None:
        client = self.client
        queue: asyncio.Queue = asyncio.Queue(maxsize=job.config.concurrency * 4)
        workers_n = job.config.concurrency

        async def produce():
            async for missing in job.pending():
                for req in missing:
                    await queue.put(req)
            for _ in range(workers_n):
                await queue.put(None)

        async def work():
            while True:
                req = await queue.get()
                if req is None or job.interrupted is not None:
                    return
                if job.breaker.tripped is not None:  # failing calls stopped the run: ask nothing more
                    job.halted.add(req.key)
                    continue
                if job.budget.needs_probe:
                    if self.probe is None:
                        self.probe = asyncio.Event()
                    else:
                        await self.probe.wait()
                if not await job.fits(req):  # a window learned since this request was planned
                    continue
                est_cost = job.reserve(req)
                if not job.budget.take(est_cost):
                    job.skipped += 1
                    if self.probe is not None:
                        self.probe.set()
                    continue
                try:
                    rec = await client.call(req)
                except ConfigError as exc:
                    # a refused key or an unknown model: no other call can succeed; those in flight
                    # finish and are cached, then the run raises it
                    job.halt(exc)
                    job.halted.add(req.key)
                    continue
                finally:
                    if self.probe is not None:
                        job.budget.needs_probe = False
                        self.probe.set()
                job.budget.settle(est_cost, rec.usage, rec.attempts)
                job.store(rec, req)

        producer = asyncio.create_task(produce())
        workers = [asyncio.create_task(work()) for _ in range(workers_n)]
        tasks = [producer, *workers]
        stop = asyncio.Event()
        restore = _catch_signals(job, stop, tasks)
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
                            "to stop now)", job.config.drain_grace)
                await asyncio.wait(workers, timeout=job.config.drain_grace or None)
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
