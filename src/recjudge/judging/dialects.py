"""What each kind of OpenAI-compatible server makes of a chat request, and how to tell which kind an
endpoint is.

Servers that speak the OpenAI API differ where a judge notices: how structured output is asked for
(OpenAI's ``json_schema``; llama.cpp's ``json_object`` with a ``schema``, whose grammar does not
enforce an integer range but does an enum), which name caps the answer's tokens (OpenAI's reasoning
models take only ``max_completion_tokens``; llama-cpp-python ignores it and honours ``max_tokens``),
which parameters are accepted and silently ignored, whether a tokenizer is exposed, and how many
requests are served at once. Each kind is one :class:`Dialect`, registered here;
:mod:`recjudge.judging.probe` tells which one an endpoint is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlsplit

from ..errors import ConfigError

__all__ = ["Dialect", "EndpointInfo", "EndpointState", "DIALECTS", "ENDPOINT_KINDS", "register_dialect",
           "get_dialect", "grammar_schema", "TOKEN_CAPS", "window_from_message", "is_openai_host", "tokenize_request",
           "tokenize_count", "parse_json"]

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

