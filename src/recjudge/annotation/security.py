"""The page's guards: loopback by default, an access token off it, CSRF tokens on POSTs, strict headers.

Bound to a loopback address the server answers only requests whose Host header names that address
(a page elsewhere cannot reach it through DNS rebinding). Bound to any other address, every request
needs the random access token the printed URL carries (kept afterwards in an HttpOnly cookie). Every
POST carries the server's CSRF token, which only a page it served can read. Every answer forbids
inline scripts (Content-Security-Policy: scripts and styles from the server's own files only),
framing, sniffing, caching and referrers (the token must not leave the page).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets

from aiohttp import web

from ..errors import ConfigError

__all__ = ["Guard", "is_loopback", "check_name", "MAX_NAME", "HEADERS", "TOKEN_COOKIE"]

MAX_NAME = 64
TOKEN_COOKIE = "recjudge_annotate_token"
CSRF_HEADER = "X-CSRF-Token"
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                               "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_name(name: str) -> str:
    """An assessor's name, stripped: 1-64 printable characters without slashes (shown, logged, hashed
    into a file name, never a path)."""
    text = str(name).strip()
    if not text or len(text) > MAX_NAME or not text.isprintable() or "/" in text or "\\" in text:
        raise ConfigError(f"an assessor's name is 1-{MAX_NAME} printable characters without '/' or '\\', "
                          f"not {str(name)[:80]!r}")
    return text


class Guard:
    """The tokens of one server run and the checks every request passes."""

    def __init__(self, host: str):
        self.host = host
        self.loopback = is_loopback(host)
        self.token = None if self.loopback else secrets.token_urlsafe(24)
        self.csrf = secrets.token_urlsafe(24)
        self.hosts: set[str] = set()

    def listening(self, port: int) -> None:
        """The Host headers a loopback server answers, once its port is known."""
        names = ("127.0.0.1", "localhost", "[::1]") if self.loopback else ()
        self.hosts = {f"{n}:{port}" for n in (*names, self._bracketed())}

    def _bracketed(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host

    def url(self, port: int, path: str = "/") -> str:
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self._bracketed()
        return f"http://{shown}:{port}{path}" + (f"?token={self.token}" if self.token else "")

    def refusal(self, request: web.Request) -> web.Response | None:
        """Why ``request`` is refused (a 4xx answer), or None."""
        if self.loopback and request.host not in self.hosts:
            return web.Response(status=421, text="this server answers requests for its loopback address only")
        if self.token is not None:
            given = request.query.get("token") or request.cookies.get(TOKEN_COOKIE) or ""
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return web.Response(status=403, text="an access token is required: open the URL the server printed")
        return None

    async def csrf_refusal(self, request: web.Request) -> web.Response | None:
        if request.method in ("GET", "HEAD"):
            return None
        given = request.headers.get(CSRF_HEADER)
        if given is None and request.content_type == "application/x-www-form-urlencoded":
            given = (await request.post()).get("csrf")
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), self.csrf.encode()):
            return web.json_response({"error": "csrf", "message": "the page's CSRF token is missing or stale: "
                                      "reload the page"}, status=403)
        return None

    def middleware(self):
        @web.middleware
        async def guard(request: web.Request, handler):
            refused = self.refusal(request) or await self.csrf_refusal(request)
            try:
                response = refused if refused is not None else await handler(request)
            except web.HTTPException as exc:  # a redirect, a 404: the same headers
                exc.headers.update(HEADERS)
                raise
            response.headers.update(HEADERS)
            if self.token is not None and refused is None and request.query.get("token"):
                response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="Strict", path="/")
            return response

        return guard
