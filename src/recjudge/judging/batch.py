"""The batch backend: the OpenAI Batch API (upload, create, poll, download, each call under the judge's
retry policy), resubmitting failed
calls for up to ``max_attempts`` rounds; a batch an interrupted run submitted is collected, not sent
again."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from ..errors import ConfigError
from .backend import Job, OpenAIBackend, register_backend
from .cache import CallRecord, Usage
from .client import OpenAIJudgeClient, Request
from .parse import record_from_body
from .retry import FATAL_STATUS, RETRY_STATUS, Fatal, Retryable, error_text, fatal_message, retry_after

__all__ = ["BatchBackend", "BATCH_FILE_LIMIT", "submit_batch", "poll_batch", "batch_line"]

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
                batch_id, file_id = await submit_batch(client, part)
                cache.add_batch(batch_id, file_id, [r.key for r in part])
                log.info("batch %s submitted (%d calls, round %d)", batch_id, len(part), round_ + 1)
                await self._collect(job, batch_id, [r.key for r in part], by_key)

    async def _collect(self, job: Job, batch_id: str, keys, by_key: dict[str, Request]) -> None:
        client, cache = self.client, job.cache
        status, out, err = await poll_batch(
            client, batch_id, job.config.batch_poll,
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
                rec = batch_line(client, req, obj)
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


async def submit_batch(client: OpenAIJudgeClient, requests: Sequence[Request]) -> tuple[str, str]:
    """Upload a JSONL of chat requests and create a batch; returns (batch id, input file id)."""
    lines = []
    for req in requests:
        body = client.body(req)
        lines.append(json.dumps({"custom_id": req.key, "method": "POST", "url": "/v1/chat/completions",
                                 "body": body}, separators=(",", ":")))
    payload = ("\n".join(lines) + "\n").encode("utf-8")
    f = await _files_call(client, lambda: client.sdk.files.create(
        file=("recjudge-batch.jsonl", payload, "application/jsonl"), purpose="batch"))
    batch = await _files_call(client, lambda: client.sdk.batches.create(
        input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h"))
    return batch.id, f.id


async def poll_batch(client: OpenAIJudgeClient, batch_id: str, interval: float,
                     on_progress: Callable[[str, Any], None] | None = None):
    """Wait for a batch to end; returns (status, output text, error text)."""
    while True:
        batch = await _files_call(client, lambda: client.sdk.batches.retrieve(batch_id))
        if on_progress:
            on_progress(batch.status, getattr(batch, "request_counts", None))
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            break
        await asyncio.sleep(interval)
    out = err = ""
    if getattr(batch, "output_file_id", None):
        out = (await _files_call(client, lambda: client.sdk.files.content(batch.output_file_id))).text
    if getattr(batch, "error_file_id", None):
        err = (await _files_call(client, lambda: client.sdk.files.content(batch.error_file_id))).text
    return batch.status, out, err


async def _files_call(client: OpenAIJudgeClient, factory: Callable[[], Any]):
    """A files/batches call under the same retry policy as chat calls; other errors stop the run."""
    import openai

    async def once():
        client.attempts += 1
        try:
            return await factory()
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise Retryable("connection", client.redact(f"batch API call failed: {exc}")) from None
        except openai.APIStatusError as exc:
            text = client.redact(f"HTTP {exc.status_code}: {error_text(exc)}")
            if exc.status_code in RETRY_STATUS or exc.status_code >= 500:
                raise Retryable("rate_limited" if exc.status_code == 429 else "server_error",
                                f"batch API call failed: {text}",
                                retry_after(getattr(exc.response, "headers", None))) from None
            raise Fatal(fatal_message(exc.status_code, text, client.settings) if exc.status_code in FATAL_STATUS
                        else f"batch API call failed: {text}") from None

    message = None
    try:
        return await client.retrying()(once)
    except Retryable as exc:
        message = f"{exc} (after {client.settings.max_attempts} attempts)"
    except Fatal as exc:
        message = str(exc)
    raise ConfigError(message)  # outside the handler: no chained exception carries the raw answer


def batch_line(client: OpenAIJudgeClient, req: Request, line: Mapping) -> CallRecord:
    """A call record from one line of a batch's output or error file."""
    response = line.get("response") or {}
    error = line.get("error")
    code = response.get("status_code")
    body = response.get("body") or {}
    if error or code != 200:
        msg = client.redact(json.dumps(error or body.get("error") or body)[:500])
        reason = "rate_limited" if code == 429 else ("server_error" if code and code >= 500 else "batch_error")
        return CallRecord(req.key, req.qid, req.items, req.repeat, "failed", reason,
                          f"HTTP {code}: {msg}", attempts=1, via="batch", endpoint=client.endpoint)
    return replace(record_from_body(req, client.template, body, 0.0, "batch",
                                    "json_schema" if client.settings.structured != "off" else "text", None,
                                    client.redact), endpoint=client.endpoint, answered=1)
