"""The judge's one HTTP stack: the openai package's client on its aiohttp backend, made to keep the
judge's guarantees, for chat requests, probes, tokenizer calls, files and batches alike.

What a judge needs from it, and the client's defaults do not all give:
- the proxy is the environment's (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``),
  resolved once when the client is made, for every request of the endpoint: the probe and the
  calls go the same way;
- TLS trusts ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set (private CAs), else certifi's store;
- no redirects are followed (a POST redirected is a misconfigured ``--base-url``);
- an answer's body is capped (:data:`MAX_BODY`; batch result files :data:`MAX_FILE`): a hostile or
  broken server cannot fill memory;
- a header value holding CR or LF (a key or organisation id pasted with a line break) is refused
  before anything is sent, so it cannot inject headers;
- nothing is ever sent twice: the openai client's retries are off and aiohttp does not resend a POST,
  so every request is an attempt the caller counts.
The caller bounds each request's whole time (connect, send, wait, read) with one deadline.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import ssl
import urllib.request
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from ..errors import ConfigError

__all__ = ["Redactor", "within", "Response", "TransportError", "BodyTooLarge", "resolve_proxy", "ssl_context",
           "check_header_values",
           "request_headers", "http_client", "sdk_client", "send", "url_under", "httpx", "MAX_BODY", "MAX_FILE"]

MAX_BODY = 2 * 1024 * 1024    # a chat answer is a few KB, a probe's list of models some more
MAX_FILE = 1024 ** 3          # a Batch API result file: up to 50,000 answers


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


class TransportError(Exception):
    """The request got no usable HTTP answer (connection refused or dropped, malformed answer)."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]  # case-insensitive
    body: bytes


def check_header_values(headers: Mapping[str, str], sources: Mapping[str, str] | None = None) -> None:
    """Refuse a header value with CR, LF or NUL (header injection); the error names where the value
    came from (``sources``: header -> e.g. the environment variable), never the value."""
    for name, value in headers.items():
        if any(c in value for c in "\r\n\x00"):
            where = (sources or {}).get(name, f"the {name} header")
            raise ConfigError(f"{where} holds a line break or NUL character; remove it (a value pasted with "
                              "a trailing newline is the usual cause)")


def resolve_proxy(url: str) -> str | None:
    """The proxy the environment sets for ``url`` (``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY``,
    upper or lower case), or None when there is none or ``NO_PROXY`` exempts the host."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    return proxy


def ssl_context() -> ssl.SSLContext:
    """TLS trust: ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set, else certifi's store (the openai
    client's), else the system's."""
    cafile, capath = os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None
    if cafile and not os.path.isfile(cafile):
        raise ConfigError(f"SSL_CERT_FILE names {cafile}, which is not a file; point it at a PEM bundle or unset it")
    if cafile is None and capath is None:
        try:
            import certifi
            cafile = certifi.where()
        except ImportError:  # pragma: no cover - certifi comes with the openai client
            pass
    return ssl.create_default_context(cafile=cafile, capath=capath)


def request_headers(api_key: str, key_source: str) -> dict[str, str]:
    """What every request sends that matters to a server: the key, and organisation/project when set;
    a value with a line break is refused, naming where it came from (``key_source`` for the key)."""
    from .. import __version__

    headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json",
               "User-Agent": f"recjudge/{__version__}"}
    sources = {"Authorization": key_source}
    for var, name in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
        if os.environ.get(var):
            headers[name] = os.environ[var]
            sources[name] = f"the environment variable {var}"
    check_header_values(headers, sources)
    return headers


def http_client(base_url: str, headers: Mapping[str, str], connections: int, timeout: float):
    """The HTTP client of one endpoint (the openai package's aiohttp-backed client): keep-alive
    connections for ``connections`` requests in flight, the environment's proxy, no redirects, capped
    bodies. Made in the event loop that uses it; close it there (``aclose``)."""
    import openai

    httpx2 = httpx()
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"not an http(s) URL: {base_url}; give the endpoint as http://host:port/v1")
    proxy = resolve_proxy(base_url) or ""
    verify: Any = ssl_context() if parts.scheme == "https" or proxy.startswith("https") else True
    room = max(1, connections)
    return openai.DefaultAioHttpClient(
        timeout=timeout, limits=httpx2.Limits(max_connections=room, max_keepalive_connections=room),
        follow_redirects=False, verify=verify, trust_env=True, headers=dict(headers),
        event_hooks={"response": [_cap_body]})


def sdk_client(http, api_key: str, base_url: str | None, timeout: float):
    """The openai client (files, batches) over ``http``; its own retries off: every attempt is ours."""
    from openai import AsyncOpenAI

    return AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0, http_client=http)


class BodyTooLarge(TransportError):
    pass


async def _cap_body(response) -> None:
    """Refuse an answer that announces more than the cap; cut off one that sends more."""
    httpx2 = httpx()
    cap = MAX_FILE if response.request.url.path.endswith("/content") else MAX_BODY
    length = response.headers.get("content-length")
    if length and length.isdigit() and int(length) > cap:
        raise httpx2.ReadError(f"the answer announces {int(length):,} bytes, more than the {cap:,} accepted")
    response.stream = _capped(response.stream, cap)


@functools.lru_cache(maxsize=None)
def _capped_class():
    """The stream class of :func:`_capped` (the HTTP library is imported on first use)."""
    httpx2 = httpx()

    class Capped(httpx2.AsyncByteStream):
        def __init__(self, stream, cap: int):
            self.stream, self.cap = stream, cap

        async def __aiter__(self):
            total = 0
            async for chunk in self.stream:
                total += len(chunk)
                if total > self.cap:
                    raise httpx2.ReadError(f"the answer exceeds {self.cap:,} bytes")
                yield chunk

        async def aclose(self) -> None:
            await self.stream.aclose()

    return Capped


def _capped(stream, cap: int):
    """``stream`` stopping past ``cap`` bytes (an httpx2 read error)."""
    return _capped_class()(stream, cap)


@functools.lru_cache(maxsize=None)
def httpx():
    """The HTTP library under the openai client: httpx2 in current releases, httpx before."""
    try:
        import httpx2
    except ImportError:  # pragma: no cover - older openai releases
        import httpx as httpx2
    return httpx2


def url_under(base_url: str, path: str) -> str:
    """``path`` under the base URL (``/chat/completions``), or under the server's root when it starts
    with ``//`` (``//props``: llama.cpp's extra routes sit beside ``/v1``)."""
    base = base_url.rstrip("/")
    if path.startswith("//"):
        return (base[: -len("/v1")] if base.endswith("/v1") else base) + path[1:]
    return base + path


async def send(http, method: str, url, body: Any = None) -> Response:
    """One request (a JSON body, if any) to ``url`` (a string or an ``httpx2.URL``, parsed once by the
    caller for a route it asks often) through ``http``, never repeated; a redirect is an answer
    (3xx). No usable answer raises :class:`TransportError` (:class:`TimeoutError` for a timeout)."""
    import aiohttp

    httpx2 = httpx()
    content = None if body is None else json.dumps(body, separators=(",", ":")).encode("utf-8")
    try:
        resp = await http.request(method, url, content=content, headers=None if content is None else _JSON)
    except httpx2.TimeoutException as exc:
        if _timed_out(exc):
            raise TimeoutError(str(exc)) from None
        raise TransportError(_describe(exc)) from None
    except (httpx2.HTTPError, aiohttp.ClientError, ssl.SSLError) as exc:
        raise TransportError(_describe(exc)) from None
    return Response(resp.status_code, resp.headers, resp.content)


_JSON = {"Content-Type": "application/json"}  # not a client header: the openai client uploads files as multipart


def _timed_out(exc: BaseException) -> bool:
    """Whether a timeout error of the client is one (its aiohttp backend reports a dropped connection
    as a connect timeout)."""
    import aiohttp

    cause = exc.__cause__
    return cause is None or isinstance(cause, (TimeoutError, aiohttp.ServerTimeoutError)) or \
        not isinstance(cause, aiohttp.ClientError)


def _describe(exc: BaseException) -> str:
    """A connection error in one line: the library's words, else those of what it wraps."""
    inner = exc.__cause__ or exc.__context__
    text = str(exc).strip()
    if inner is not None and (not text or text == str(inner).strip()):
        exc, text = inner, str(inner).strip()
    name = type(exc).__name__
    text = text or name
    return text if name in text else f"{name}: {text}"
