"""Endpoint URLs as they may be shown or stored: without credentials.

Every writer of a URL (cache, logs, errors, reports, judgment logs, summaries) goes through
:func:`public_url`, so a password in ``user:pass@`` or a key in the query string never leaves memory.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["public_url", "has_userinfo", "url_secrets", "DEFAULT_ENDPOINT"]

DEFAULT_ENDPOINT = "https://api.openai.com/v1"  # what the openai client calls without a base URL

# query parameters that carry secrets (Azure's api-key, signed URLs, tokens); others such as
# api-version are kept, since they decide what the endpoint answers
_SECRET_PARAM = re.compile(r"key|token|secret|passw|pwd|sig|auth|credential|session|cookie", re.I)


def has_userinfo(url: str | None) -> bool:
    """Whether ``url`` carries ``user[:password]@`` before its host."""
    if not url:
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return "@" in url
    return "@" in parts.netloc


def public_url(url: str | None) -> str | None:
    """``url`` without userinfo, without secret query parameters and without a fragment.

    A URL that does not parse is shown as ``[unparseable URL]``: echoing it could echo a secret.
    """
    if not url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "[unparseable URL]"
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = host + (f":{port}" if port else "")
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _SECRET_PARAM.search(k)]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query), ""))


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The secret parts of ``url`` (userinfo, values of secret query parameters), for redacting
    texts that may quote the full URL (connection errors)."""
    if not url:
        return ()
    try:
        parts = urlsplit(url)
    except ValueError:
        return (url,)
    found = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        found += [userinfo, *userinfo.split(":", 1)]
    found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if _SECRET_PARAM.search(k)]
    return tuple(s for s in found if s)
