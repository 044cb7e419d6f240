"""What each kind of OpenAI-compatible server makes of a chat request, and how to tell which kind an
endpoint is.

Servers that speak the OpenAI API differ where a judge notices: how structured output is asked for
(OpenAI's ``json_schema``; llama.cpp's ``json_object`` with a ``schema``, whose grammar does not
enforce an integer range but does an enum), which name caps the answer's tokens (OpenAI's reasoning
models take only ``max_completion_tokens``; llama-cpp-python ignores it and honours ``max_tokens``),
which parameters are accepted and silently ignored, whether a tokenizer is exposed, and how many
requests are served at once. Each kind is one :class:`Dialect`, registered here; :func:`detect` picks
one by a few cheap GET requests (and one tokenizer call) on first contact, unless
``--endpoint-kind`` names it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping
from urllib.parse import urlsplit

from ..errors import ConfigError

__all__ = ["Dialect", "EndpointInfo", "DIALECTS", "ENDPOINT_KINDS", "register_dialect", "get_dialect", "detect",
           "grammar_schema", "TOKEN_CAPS", "window_from_message", "probe_session", "probe_key", "detect_shared",
           "say_once", "describe"]

TOKEN_CAPS = ("max_tokens", "max_completion_tokens")  # the two names of the output-token cap


@dataclass(frozen=True)
class Dialect:
    """One kind of server. ``structured``: json_schema (OpenAI's response_format), json_object_schema
    (llama.cpp: ``{"type": "json_object", "schema": ...}``, integer ranges given as enums for its
    grammar) or none; ``token_cap``: the name the output cap is sent under; ``ignored``: parameters
    the server accepts without effect (reported once); ``tokenizer``: how to count a prompt's tokens
    (see :func:`tokenize_request`); ``slots``: requests served at once when fixed by the server;
    ``default_temperature``: what it samples at when none is sent, when known."""

    name: str
    description: str
    structured: str = "json_schema"
    token_cap: str = "max_tokens"
    ignored: tuple[str, ...] = ()
    tokenizer: str | None = None
    slots: int | None = None
    default_temperature: float | None = None
    reports_cached_tokens: bool = True
    # the window check's estimate without a tokenizer: OpenAI's large vocabularies hold more text
    # per token than the small ones of local models (which split numbers digit by digit)
    chars_per_token: float = 2.5
    # it answers with the model it has loaded whatever name a request gives (a model it does not
    # list is no error)
    any_model: bool = False

    def structured_fields(self, schema: Mapping[str, Any]) -> tuple[dict, str]:
        """The request fields asking for ``schema`` (an OpenAI json_schema object: name, strict,
        schema), and the mode the provenance records."""
        if self.structured == "json_object_schema":
            return {"response_format": {"type": "json_object", "schema": grammar_schema(schema["schema"])}}, \
                "json_object+schema"
        if self.structured == "json_schema":
            return {"response_format": {"type": "json_schema", "json_schema": dict(schema)}}, "json_schema"
        return {}, "text"


@dataclass(frozen=True)
class EndpointInfo:
    """What the probe found: the kind, how it was decided, and what the server declares."""

    kind: str
    evidence: str                      # how the kind was decided, for the summary
    window: int | None = None          # the most tokens a request may hold, when the server says
    slots: int | None = None           # requests served at once, when the server says
    model_ids: tuple[str, ...] = ()
    models_status: int | None = None   # GET /v1/models: its HTTP status, 0 for no answer, None when not asked

    def as_dict(self) -> dict:
        return {"kind": self.kind, "evidence": self.evidence, "window": self.window, "slots": self.slots}


DIALECTS: dict[str, Dialect] = {}


def register_dialect(d: Dialect) -> Dialect:
    if d.name in DIALECTS:
        raise ConfigError(f"an endpoint kind named {d.name!r} is already registered; choose another name")
    DIALECTS[d.name] = d
    return d


register_dialect(Dialect(
    "openai", "the OpenAI API: json_schema structured output, max_completion_tokens (reasoning models take "
    "no max_tokens)", token_cap="max_completion_tokens", chars_per_token=3.0))
register_dialect(Dialect(
    "vllm", "vLLM: json_schema structured output (its guided decoding), max_tokens, a /tokenize route that "
    "applies the chat template, the window in /v1/models", tokenizer="vllm", reports_cached_tokens=False))
register_dialect(Dialect(
    "llama.cpp", "llama.cpp's llama-server: json_object with a schema (its grammar), max_tokens, /tokenize, "
    "window and slots in /props", structured="json_object_schema", ignored=("reasoning_effort", "verbosity"),
    tokenizer="llama.cpp", reports_cached_tokens=False, any_model=True))
register_dialect(Dialect(
    "llama-cpp-python", "llama-cpp-python's server: json_object with a schema (json_schema answers HTTP 500), "
    "max_tokens (max_completion_tokens is ignored), one request at a time, /extras/tokenize",
    structured="json_object_schema", ignored=("reasoning_effort", "verbosity"), tokenizer="llama-cpp-python",
    slots=1, default_temperature=0.8, reports_cached_tokens=False, any_model=True))
register_dialect(Dialect(
    "ollama", "Ollama's OpenAI-compatible API: json_schema structured output (Ollama 0.5+), max_tokens; its "
    "default context is small and longer prompts are cut silently (set num_ctx, give --context-tokens)",
    ignored=("verbosity",), reports_cached_tokens=False))
register_dialect(Dialect(
    "generic", "an OpenAI-compatible server of unknown kind: json_schema structured output (falling back to "
    "text when refused), max_tokens", reports_cached_tokens=False))

ENDPOINT_KINDS = ("auto", *DIALECTS)


def get_dialect(name: str) -> Dialect:
    try:
        return DIALECTS[name]
    except KeyError:
        raise ConfigError(f"unknown endpoint kind {name!r}; known: {', '.join(DIALECTS)}") from None


def grammar_schema(schema: Any) -> Any:
    """``schema`` with every small integer range written as an enum: llama.cpp's JSON-schema grammar
    ignores minimum/maximum (a 135M model answered ``{"label": 1092843675}``) but keeps to an enum."""
    if isinstance(schema, Mapping):
        out = {k: grammar_schema(v) for k, v in schema.items()}
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if schema.get("type") == "integer" and isinstance(lo, int) and isinstance(hi, int) and 0 <= hi - lo <= 100:
            out = {k: v for k, v in out.items() if k not in ("minimum", "maximum")}
            out["enum"] = list(range(lo, hi + 1))
        return out
    if isinstance(schema, list):
        return [grammar_schema(v) for v in schema]
    return schema


def is_openai_host(url: str | None) -> bool:
    if not url:
        return True
    host = (urlsplit(url).hostname or "").lower()
    return host == "api.openai.com"


_WINDOW = re.compile(r"(?:maximum context length is|context window of|context length of|n_ctx[ =:]*)\s*(\d[\d,]*)",
                     re.I)


def window_from_message(message: str) -> int | None:
    """The context window a context-overflow error states (OpenAI, vLLM and llama.cpp word it alike)."""
    m = _WINDOW.search(message or "")
    return int(m.group(1).replace(",", "")) if m else None


# -- detection ---------------------------------------------------------------------------------------

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
    from ..urls import DEFAULT_ENDPOINT
    from .transport import resolve_proxy

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


def tokenize_request(dialect: Dialect, model: str, system: str, user: str) -> tuple[str, dict] | None:
    """The request that counts a prompt's tokens on the server (path, JSON body), or None."""
    if dialect.tokenizer == "vllm":  # applies the chat template itself: the count is the request's
        return "//tokenize", {"model": model, "messages": [{"role": "system", "content": system},
                                                          {"role": "user", "content": user}]}
    text = system + "\n" + user
    if dialect.tokenizer == "llama.cpp":
        return "//tokenize", {"content": text, "add_special": True}
    if dialect.tokenizer == "llama-cpp-python":
        return "//extras/tokenize/count", {"input": text}
    return None


# chat-template tokens a raw-text count leaves out: role markers and separators around two messages
# and the assistant's opening (ChatML: <|im_start|>role\n ... <|im_end|>\n, 5 per message, 3 to open)
TEMPLATE_TOKENS = 13


def tokenize_count(dialect: Dialect, answer: Any) -> int | None:
    """The token count of a :func:`tokenize_request` answer (None when it has none)."""
    if not isinstance(answer, Mapping):
        return None
    if dialect.tokenizer == "vllm":
        n = answer.get("count")
        return n if isinstance(n, int) else None
    if dialect.tokenizer == "llama.cpp":
        tokens = answer.get("tokens")
        return len(tokens) + TEMPLATE_TOKENS if isinstance(tokens, list) else None
    n = answer.get("count")
    return n + TEMPLATE_TOKENS if isinstance(n, int) else None


def parse_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


@dataclass
class EndpointState:
    """What the run learned about one endpoint (kept by the client, reported in the summary)."""

    info: EndpointInfo | None = None
    dialect: Dialect | None = None
    mode: str | None = None                     # the structured-output mode in use (or text)
    fallback: str | None = None                 # why structured output was given up, with the server's words
    ignored: tuple[str, ...] = ()               # parameters sent that this kind ignores
    notes: list = field(default_factory=list)   # said once on stderr, kept for the summary
    learned_window: int | None = None           # from a context-overflow answer
    server_temperature: float | None = None     # the temperature the server samples at, none being sent

    def as_dict(self) -> dict:
        out = self.info.as_dict() if self.info else {"kind": None}
        if self.learned_window and not out.get("window"):
            out["window"] = self.learned_window
        out.update(structured=self.mode, fallback=self.fallback, ignored=list(self.ignored),
                   server_temperature=self.server_temperature,
                   tokenizer=self.dialect.tokenizer if self.dialect else None, notes=list(self.notes))
        return out

