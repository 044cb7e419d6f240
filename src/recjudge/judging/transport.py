"""The judge's own HTTP client (aiohttp): chat requests with ``--transport aiohttp``, and for every
transport the endpoint probes and tokenizer calls.

What a judge needs from it, and aiohttp's defaults do not all give:
- the proxy is resolved once per endpoint from the environment (``HTTPS_PROXY``, ``HTTP_PROXY``,
  ``NO_PROXY``), not per request (aiohttp's ``trust_env`` resolves it per request, which cost a
  fifth of the throughput at 128 requests in flight);
- TLS trusts ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set (private CAs), else certifi's store, as the
  openai client does;
- no redirects are followed (a POST redirected is a misconfigured ``--base-url``);
- an answer's body is capped (:data:`MAX_BODY`): a hostile or broken server cannot fill memory;
- a header value holding CR or LF (a key or organisation id pasted with a line break) is refused
  before anything is sent, so it cannot inject headers;
- nothing is ever sent twice: aiohttp does not resend a POST, so every request is an attempt the
  caller counts.
The caller bounds each request's whole time (connect, send, wait, read) with one deadline.
"""

from __future__ import annotations

import os
import ssl
import urllib.request
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from ..errors import ConfigError

__all__ = ["HTTPClient", "Response", "TransportError", "BodyTooLarge", "resolve_proxy", "ssl_context",
           "check_header_values", "MAX_BODY"]

MAX_BODY = 32 * 1024 * 1024  # a chat answer is a few KB; 32 MiB leaves room for any honest one


class TransportError(Exception):
    """The request got no usable HTTP answer (connection refused or dropped, malformed answer)."""


class BodyTooLarge(TransportError):
    pass


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


class HTTPClient:
    """Requests to one endpoint over aiohttp keep-alive connections. Made in the event loop that uses
    it; :meth:`close` it there."""

    def __init__(self, base_url: str, headers: Mapping[str, str], connections: int = 100,
                 header_sources: Mapping[str, str] | None = None):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"not an http(s) URL: {base_url}; give the endpoint as http://host:port/v1")
        check_header_values(headers, header_sources)
        self.base_url = base_url.rstrip("/")
        self.root = _root(self.base_url)
        self.headers = dict(headers)
        self.connections = max(1, connections)
        self.proxy = resolve_proxy(base_url)
        self._ssl = ssl_context() if parts.scheme == "https" or (self.proxy or "").startswith("https") else None
        self._session = None
        self._urls: dict = {}  # path -> parsed URL: aiohttp parses a str URL on every request

    def _open(self):
        import aiohttp

        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.connections, limit_per_host=0,
                                             ssl=self._ssl if self._ssl is not None else True)
            # trust_env off: the proxy is resolved once (above) and passed with each request; every
            # body sent is JSON, so its type is a session header rather than one merged per request
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False,
                                                  headers={**self.headers, "Content-Type": "application/json"},
                                                  timeout=aiohttp.ClientTimeout(total=None))
        return self._session

    def url(self, path: str) -> str:
        """``path`` under the base URL (``/chat/completions``), or under the server's root when it starts
        with ``//`` (``//props``: llama.cpp's extra routes sit beside ``/v1``)."""
        if path.startswith("//"):
            return self.root + path[1:]
        return self.base_url + path

    def _url(self, path: str):
        url = self._urls.get(path)
        if url is None:
            import yarl

            url = self._urls[path] = yarl.URL(self.url(path))
        return url

    async def request(self, method: str, path: str, payload: bytes | None = None) -> Response:
        """One request (a JSON body, if any), never repeated; redirects are answers (3xx), not followed."""
        import aiohttp

        session = self._open()
        try:
            async with session.request(method, self._url(path), data=payload, proxy=self.proxy,
                                       allow_redirects=False) as resp:
                length = resp.content_length
                if length is not None:
                    if length > MAX_BODY:
                        raise BodyTooLarge(f"the answer announces {length:,} bytes, more than the {MAX_BODY:,} "
                                           "accepted")
                    return Response(resp.status, resp.headers, await resp.read())  # exactly `length` bytes
                body = bytearray()
                async for chunk in resp.content.iter_chunked(1 << 16):
                    body += chunk
                    if len(body) > MAX_BODY:
                        raise BodyTooLarge(f"the answer exceeds {MAX_BODY:,} bytes")
                return Response(resp.status, resp.headers, bytes(body))
        except aiohttp.ClientError as exc:
            raise TransportError(_describe(exc)) from None
        except ssl.SSLError as exc:  # pragma: no cover - aiohttp wraps most of them
            raise TransportError(f"TLS error: {exc}") from None

    async def post_json(self, path: str, body: Any) -> Response:
        import json

        return await self.request("POST", path, json.dumps(body, separators=(",", ":")).encode("utf-8"))

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


def _root(base_url: str) -> str:
    """The server's root: the base URL less a trailing ``/v1``."""
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url


def _describe(exc: BaseException) -> str:
    """A connection error in one line, without aiohttp's repr of the request."""
    name = type(exc).__name__
    text = str(exc).strip() or name
    return text if name in text else f"{name}: {text}"
