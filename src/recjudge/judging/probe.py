"""Endpoint probing: which kind of OpenAI-compatible server an endpoint is (a few cheap GET requests
and one tokenizer call on first contact, unless the ``endpoint_kind`` setting names it), asked once per
endpoint within a probe session, through the same HTTP client as the calls themselves."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from dataclasses import replace
from typing import Any, Awaitable, Callable, Mapping

from ..urls import DEFAULT_ENDPOINT, public_url
from .dialects import EndpointInfo, get_dialect, is_openai_host, parse_json
from .transport import TransportError, http_client, request_headers, resolve_proxy, send, url_under

__all__ = ["detect", "detect_shared", "describe", "probe_session", "probe_key", "say_once", "fetch",
           "probe_endpoints", "PROBE_TIMEOUT", "KEY_SOURCE"]

PROBE_TIMEOUT = 10.0  # seconds one probe request may take
KEY_SOURCE = "the API key (the environment variable the api_key_env setting names)"

Fetch = Callable[[str, str, Any], Awaitable[tuple[int, Any]]]  # (method, path, json body) -> (status, json)


async def detect(url: str | None, model: str, fetch: Fetch, forced: str | None = None) -> EndpointInfo:
    """The kind of the endpoint at ``url``: ``forced`` when given, the OpenAI API for its own host, else
    the first of these that answers as only that server does:
    ``GET /v1/models`` (vLLM: ``owned_by: vllm``; llama.cpp: ``owned_by: llamacpp``), ``GET /props``
    (llama.cpp), ``GET /api/version`` (Ollama), ``POST /extras/tokenize/count`` (llama-cpp-python);
    none of them: ``generic``. ``fetch`` makes one request and returns (status, parsed JSON or None);
    paths starting ``//`` are relative to the server's root."""
    if forced is None and is_openai_host(url):
        return EndpointInfo("openai", "the OpenAI API's host")
    models_status, models = await fetch("GET", "/models", None)
    data = models.get("data") if isinstance(models, Mapping) else None
    rows = [m for m in data if isinstance(m, Mapping)] if isinstance(data, list) else []
    ids = tuple(str(m.get("id")) for m in rows if m.get("id") is not None)
    owners = {str(m.get("owned_by", "")).lower() for m in rows}
    mine = next((m for m in rows if m.get("id") == model), rows[0] if rows else {})
    kind, evidence, window, slots = None, None, None, None
    if forced is not None:
        kind, evidence = forced, "--endpoint-kind"
    elif "vllm" in owners:
        kind, evidence = "vllm", "GET /v1/models: owned_by vllm"
    elif "llamacpp" in owners:
        kind, evidence = "llama.cpp", "GET /v1/models: owned_by llamacpp"
    if kind in (None, "vllm") and isinstance(mine.get("max_model_len"), int):
        window = mine["max_model_len"]
    if kind in (None, "llama.cpp"):
        status, props = await fetch("GET", "//props", None)
        if status == 200 and isinstance(props, Mapping) and "default_generation_settings" in props:
            kind, evidence = kind or "llama.cpp", evidence or "GET /props answers as llama-server"
            settings = props.get("default_generation_settings") or {}
            n_ctx = settings.get("n_ctx") if isinstance(settings, Mapping) else None
            window = n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None
            total = props.get("total_slots")
            slots = total if isinstance(total, int) and total > 0 else None
    if kind in (None, "ollama"):
        status, version = await fetch("GET", "//api/version", None)
        if status == 200 and isinstance(version, Mapping) and "version" in version:
            kind, evidence = kind or "ollama", evidence or f"GET /api/version: Ollama {version['version']}"
    if kind is None:
        status, count = await fetch("POST", "//extras/tokenize/count", {"input": "probe"})
        if status == 200 and isinstance(count, Mapping) and isinstance(count.get("count"), int):
            kind, evidence = "llama-cpp-python", "POST /extras/tokenize/count answers as llama-cpp-python"
    if kind is None:
        seen = f"GET /v1/models answered {models_status}" if models_status else "GET /v1/models gave no answer"
        kind, evidence = "generic", f"no known server answered the probes; {seen}"
    if kind == "llama-cpp-python":
        slots = 1
    return EndpointInfo(kind, evidence, window, slots, ids, models_status)


def describe(public: str, info: EndpointInfo) -> str:
    """What the probe of the endpoint at ``public`` found, as said on first contact."""
    said = f"endpoint {public}: {info.kind} ({info.evidence})"
    slots = info.slots or get_dialect(info.kind).slots
    if info.window:
        said += f"; context window {info.window:,} tokens"
    if slots is not None:
        said += f"; {slots} request(s) at a time"
    return said


# -- one probe per endpoint ------------------------------------------------------------------------

# what the probes of the current session found, and the notes already said (None: no session)
_SESSION: dict | None = None


@contextlib.contextmanager
def probe_session():
    """Within it each endpoint is probed once and what its probe says is said once: an ablation's
    variants × experiments all judge through the same server, which printed the same kind 18 times.
    Outside a session every run probes afresh (a server may be restarted between runs)."""
    global _SESSION
    if _SESSION is not None:  # nested: the outer session's
        yield
        return
    _SESSION = {"found": {}, "said": set()}
    try:
        yield
    finally:
        _SESSION = None


def _route(url: str | None) -> tuple:
    """What decides how ``url`` is reached: the URL, the proxy the environment sets for it, the trust store."""
    return (url, resolve_proxy(url or DEFAULT_ENDPOINT), os.environ.get("SSL_CERT_FILE"),
            os.environ.get("SSL_CERT_DIR"))


def probe_key(url: str | None, model: str, forced: str | None, api_key: str) -> tuple:
    """What a probe's answer depends on: the route to ``url``, the model asked about, a forced kind and
    the key presented (a digest: the key itself is kept nowhere)."""
    return (*_route(url), model, forced, hashlib.sha256(api_key.encode("utf-8")).hexdigest())


async def detect_shared(key: tuple, url: str | None, model: str, fetch: Fetch,
                        forced: str | None = None) -> EndpointInfo:
    """:func:`detect`, answered from the session when an endpoint of the same ``key`` (:func:`probe_key`)
    was probed in it. Only a server that listed its models is remembered: one that was down or
    refused the key is asked again."""
    found = _SESSION["found"] if _SESSION is not None else None
    if found is not None and key in found:
        return found[key]
    info = await detect(url, model, fetch, forced)
    if found is not None and info.models_status in (None, 200):
        found.setdefault(key, info)
    return info


def say_once(url: str | None, message: str) -> bool:
    """Whether ``message`` about the endpoint at ``url`` is yet to be said in this session (always, outside one)."""
    if _SESSION is None:
        return True
    key = (*_route(url), message)
    if key in _SESSION["said"]:
        return False
    _SESSION["said"].add(key)
    return True


async def fetch(http, base_url: str, timeout: float, method: str, path: str,
                body: Any) -> tuple[int, Any, str | None]:
    """One probe request: (status, parsed JSON, None); (0, None, why) when nothing usable came back."""
    try:
        resp = await asyncio.wait_for(send(http, method, url_under(base_url, path), body), timeout)
    except TransportError as exc:
        return 0, None, str(exc)
    except (asyncio.TimeoutError, TimeoutError):
        return 0, None, f"no answer within {timeout:g} s"
    return resp.status, parse_json(resp.body) if resp.status < 300 else None, None


async def probe_endpoints(settings) -> list[tuple[str, EndpointInfo, str | None]]:
    """What each endpoint of ``settings`` (a :class:`~recjudge.judging.client.ClientSettings`) answers to
    the free probe (GET and tokenizer requests, no generation) as the run's own probe will find it —
    within a probe session it is that probe's answer — with ``GET /v1/models`` always asked: (public
    URL, what was found, why it did not answer)."""
    headers = request_headers(settings.api_key, KEY_SOURCE)
    forced = None if settings.endpoint_kind == "auto" else settings.endpoint_kind
    timeout = min(PROBE_TIMEOUT, settings.timeout)
    out = []
    for url in settings.urls:
        base = url or DEFAULT_ENDPOINT
        http = http_client(base, headers, 2, timeout)
        why: list[str] = []

        async def ask(method, path, body, http=http, base=base, why=why):
            status, answer, reason = await fetch(http, base, timeout, method, path, body)
            if reason and path == "/models":
                why.append(reason)
            return status, answer

        try:
            info = await detect_shared(probe_key(url, settings.model, forced, settings.api_key), url, settings.model,
                                       ask, forced)
            if info.models_status is None:  # the OpenAI API is known by its host: ask for its models anyway
                status, models = await ask("GET", "/models", None)
                data = models.get("data") if isinstance(models, Mapping) else None
                ids = tuple(str(m.get("id")) for m in data or () if isinstance(m, Mapping) and m.get("id") is not None)
                info = replace(info, model_ids=ids, models_status=status)
        finally:
            await http.aclose()
        out.append((public_url(url) or DEFAULT_ENDPOINT, info, why[0] if why else None))
    return out
