"""A lean HTTP/1.1 client for chat requests: asyncio streams, keep-alive connections, nothing else.

The openai SDK and its HTTP stack spend 2-4 ms of CPU per request (request models, header
building, a connection pool scanned per request, anyio layers); at 128 requests in flight against
a server answering in 200 ms that CPU, not the server, set the pace (under half the ideal rate).
This client sends the same POST with the same headers for a fraction of that. It does not do
proxies, redirects, HTTP/2 or compression: the judge uses the SDK's stack when a proxy is set in
the environment, and for files and batches.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

from ..errors import ConfigError

__all__ = ["LeanHTTP", "LeanResponse", "LeanTimeout", "LeanConnectionError", "proxy_configured"]

_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy")
_timeout = getattr(asyncio, "timeout", None)  # Python 3.11+
_MAX_HEADERS = 100


def proxy_configured() -> bool:
    """Whether the environment asks HTTP clients to go through a proxy (which only the SDK's stack
    honours)."""
    return any(os.environ.get(v) or os.environ.get(v.upper()) for v in _PROXY_VARS)


class LeanTimeout(Exception):
    pass


class LeanConnectionError(Exception):
    pass


class _Closed(Exception):
    """The server closed a connection before sending any byte of the answer."""


@dataclass(frozen=True)
class LeanResponse:
    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes


class LeanHTTP:
    """POSTs to one endpoint over a small set of keep-alive connections."""

    def __init__(self, base_url: str, headers: Mapping[str, str], timeout: float, keep: int = 64):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"not an http(s) URL: {base_url}; give the endpoint as http://host:port/v1")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.base_path = parts.path.rstrip("/")
        host_header = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        if parts.port:
            host_header += f":{parts.port}"
        self._fixed = (f"Host: {host_header}\r\n"
                       + "".join(f"{k}: {v}\r\n" for k, v in headers.items())).encode("latin-1")
        self.timeout = timeout
        self.keep = keep
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._ssl: ssl.SSLContext | None = None

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            try:
                import certifi  # the SDK's trust store, for the same verdicts
                self._ssl = ssl.create_default_context(cafile=certifi.where())
            except ImportError:  # pragma: no cover
                self._ssl = ssl.create_default_context()
        return self._ssl

    async def post(self, path: str, payload: bytes, content_type: str = "application/json") -> LeanResponse:
        head = (f"POST {self.base_path}{path} HTTP/1.1\r\n").encode("latin-1") + self._fixed + (
            f"Content-Type: {content_type}\r\nContent-Length: {len(payload)}\r\n\r\n").encode("latin-1")
        try:
            if _timeout is not None:  # no extra task per request, unlike wait_for before 3.12
                async with _timeout(self.timeout):
                    return await self._send(head + payload)
            return await asyncio.wait_for(self._send(head + payload), self.timeout)  # pragma: no cover
        except asyncio.TimeoutError:
            raise LeanTimeout(f"no answer within {self.timeout:g} s") from None

    async def _send(self, request: bytes) -> LeanResponse:
        while self._idle:
            conn = self._idle.pop()
            try:
                return await self._exchange(conn, request, reused=True)
            except _Closed:
                continue  # an idle connection the server had closed: the request never arrived
        conn = await self._connect()
        try:
            return await self._exchange(conn, request, reused=False)
        except _Closed:
            raise LeanConnectionError("the server closed the connection without answering") from None

    async def _connect(self):
        try:
            if self.tls:
                return await asyncio.open_connection(self.host, self.port, ssl=self._context(),
                                                     server_hostname=self.host)
            return await asyncio.open_connection(self.host, self.port)
        except (OSError, ssl.SSLError) as exc:
            raise LeanConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from None

    async def _exchange(self, conn, request: bytes, reused: bool) -> LeanResponse:
        reader, writer = conn
        keep = False
        try:
            try:
                writer.write(request)
                await writer.drain()
                line = await reader.readline()
            except (ConnectionResetError, BrokenPipeError):
                if reused:  # a kept connection the server had dropped: nothing was answered
                    raise _Closed() from None
                raise
            if not line:
                raise _Closed()
            status, keep = _status_line(line)
            headers: dict[str, str] = {}
            while True:
                h = await reader.readline()
                if h in (b"\r\n", b"\n"):
                    break
                if not h or len(headers) >= _MAX_HEADERS:
                    raise LeanConnectionError("the answer's headers are cut off or too many")
                name, _, value = h.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            if headers.get("connection", "").lower() == "close":
                keep = False
            if "chunked" in headers.get("transfer-encoding", "").lower():
                body = await _chunked(reader)
            elif "content-length" in headers:
                body = await reader.readexactly(int(headers["content-length"]))
            else:
                body = await reader.read()  # delimited by the end of the connection
                keep = False
            return LeanResponse(status, headers, body)
        except _Closed:
            keep = False
            raise
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            keep = False
            raise LeanConnectionError(f"connection error: {type(exc).__name__}: {exc}") from None
        except BaseException:  # cancelled (a timeout): the connection's state is unknown
            keep = False
            raise
        finally:
            if keep and len(self._idle) < self.keep:
                self._idle.append(conn)
            else:
                writer.close()

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()
        await asyncio.gather(*(writer.wait_closed() for _, writer in idle), return_exceptions=True)


def _status_line(line: bytes) -> tuple[int, bool]:
    parts = line.decode("latin-1").split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise LeanConnectionError(f"not an HTTP answer: {line[:80]!r}")
    return int(parts[1]), parts[0] == "HTTP/1.1"


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    out = bytearray()
    while True:
        size_line = await reader.readline()
        if not size_line:
            raise asyncio.IncompleteReadError(bytes(out), None)
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while await reader.readline() not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return bytes(out)
        out += await reader.readexactly(size)
        await reader.readexactly(2)  # the chunk's CRLF
