"""The batch backend: the OpenAI Batch API (upload, create, poll, download), resubmitting failed
calls for up to ``max_attempts`` rounds; a batch an interrupted run submitted is collected, not sent
again."""

from __future__ import annotations

import dataclasses
import json
import logging

from .backend import Job, OpenAIBackend, register_backend
from .cache import CallRecord, Usage
from .client import Request

__all__ = ["BatchBackend", "BATCH_FILE_LIMIT"]

log = logging.getLogger("recjudge.judging")
BATCH_FILE_LIMIT = 50_000  # the Batch API's per-file request limit


class BatchBackend(OpenAIBackend):
    """Batches through :class:`~recjudge.judging.client.OpenAIJudgeClient`."""

    def __init__(self, job: Job):
        super().__init__(job)
        self.reserved: dict[str, float] = {}  # --max-cost reservations of submitted calls, by key

    async def run(self, job: Job) -> None:
        client, cache = self.client, job.cache
        by_key: dict[str, Request] = {}
        todo: list[Request] = []
        async for missing in job.pending():
            for req in missing:
                by_key[req.key] = req
                todo.append(req)
        # a batch submitted by an interrupted run is collected, not submitted again
        for batch_id, keys in cache.pending_batches():
            mine = [k for k in keys if k in by_key]
            if mine:
                log.info("resuming batch %s (%d calls)", batch_id, len(mine))
                await self._collect(job, batch_id, keys, by_key)
        for round_ in range(job.config.max_attempts):
            todo = [r for r in todo if r.key not in job.results or job.results[r.key].status != "ok"]
            if not todo or job.breaker.tripped is not None:  # failing calls are not resubmitted
                return
            allowed = []
            for req in todo:
                est = job.reserve(req)
                # resubmitting a failed call is a retry: --max-calls counts first submissions only
                if job.budget.take(est, retry=round_ > 0):
                    allowed.append(req)
                    self.reserved[req.key] = est
                else:
                    if round_ == 0:  # a later round's refusal leaves failed calls failed, not unasked
                        job.skipped += len(todo) - len(allowed)
                    break
            todo = allowed
            if not allowed:
                return
            for start in range(0, len(allowed), BATCH_FILE_LIMIT):
                part = allowed[start:start + BATCH_FILE_LIMIT]
                batch_id, file_id = await client.submit_batch(part)
                cache.add_batch(batch_id, file_id, [r.key for r in part])
                log.info("batch %s submitted (%d calls, round %d)", batch_id, len(part), round_ + 1)
                await self._collect(job, batch_id, [r.key for r in part], by_key)

    async def _collect(self, job: Job, batch_id: str, keys, by_key: dict[str, Request]) -> None:
        client, cache = self.client, job.cache
        status, out, err = await client.poll_batch(
            batch_id, job.config.batch_poll,
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
                job.budget.settle(self.reserved.pop(req.key, 0.0), rec.usage, rec.attempts)
                prev = job.results.get(req.key)
                if prev is not None and prev.via != "cache":
                    # an earlier round of this run: its tokens were billed too (failed lines
                    # included), so the call's record carries the sum over rounds
                    rec = dataclasses.replace(rec, usage=prev.usage + rec.usage,
                                              attempts=prev.attempts + rec.attempts)
                job.store(rec, req)
                seen.add(req.key)
        for k in keys:
            if k not in seen and k in by_key:
                req = by_key[k]
                job.budget.settle(self.reserved.pop(k, 0.0), Usage())
                job.store(CallRecord(k, req.qid, req.items, req.repeat, "failed", f"batch_{status}",
                                              f"batch {batch_id} ended {status} without this request",
                                              via="batch"), req)
        cache.close_batch(batch_id, status)


register_backend("batch", BatchBackend)
