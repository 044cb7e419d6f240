"""The judge's configuration: one validated, frozen record whose fields declare name, type, default,
range, choices and help, so that the library and every CLI built from it share one source."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..urls import DEFAULT_ENDPOINT, has_userinfo, public_url
from .client import GENERATION_PARAMS
from .dialects import ENDPOINT_KINDS
from .profile import HISTORY_ORDERS, SAMPLINGS

__all__ = ["JudgeConfig", "Setting", "AGGREGATIONS", "STRUCTURED", "TRANSPORTS"]

AGGREGATIONS = ("mean", "mode")
STRUCTURED = ("auto", "on", "off")
TRANSPORTS = ("sdk", "aiohttp")


@dataclass(frozen=True)
class Setting:
    """What a JudgeConfig field accepts. ``kind`` is str, int, float, bool, urls or params; ``lo``/``hi``
    bound numbers (``lo_open``: lo itself excluded); ``cli`` False keeps a field out of the commands."""

    kind: str
    help: str = ""
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    choices: tuple[str, ...] | None = None
    optional: bool = False       # None accepted
    flag: str | None = None      # the CLI option when it is not --field-name
    metavar: str | None = None
    what: str = "a number"       # how the CLI names a bad number
    cli: bool = True

    def check(self, name: str, value: Any) -> Any:
        """``value`` checked (and ints widened to float for float settings); ConfigError names ``name``."""
        if value is None:
            if self.optional:
                return None
            raise ConfigError(f"judge setting {name} must not be None")
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ConfigError(f"judge setting {name} must be true or false, got {value!r}")
            return value
        if self.kind == "str":
            if not isinstance(value, str):
                raise ConfigError(f"judge setting {name} must be a string, got {value!r}")
            if self.choices is not None and value not in self.choices:
                raise ConfigError(f"{name} must be one of {', '.join(self.choices)}, got {value!r}")
            return value
        if self.kind in ("int", "float"):
            # bool is an int subclass and "50" is no number: both are mistakes, not values
            ok = isinstance(value, int) if self.kind == "int" else isinstance(value, (int, float))
            if isinstance(value, bool) or not ok:
                noun = "a whole number" if self.kind == "int" else "a number"
                raise ConfigError(f"judge setting {name} must be {noun}, got {value!r}")
            if self.kind == "float":
                value = float(value)
                if not math.isfinite(value):
                    raise ConfigError(f"judge setting {name} must be finite, got {value!r}")
            low_ok = self.lo is None or (value > self.lo if self.lo_open else value >= self.lo)
            if not low_ok or (self.hi is not None and value > self.hi):
                raise ConfigError(f"{name} must be {self.describe_range()}, got {value}")
            return value
        return value  # urls and params: checked by JudgeConfig, which knows their shape

    def describe_range(self) -> str:
        if self.hi is None:
            if self.lo_open:
                return "positive" if self.lo == 0 else f"more than {self.lo:g}"
            return "0 or more" if self.lo == 0 else f"at least {self.lo:g}"
        return f"in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"


def _setting(default: Any, kind: str, help: str = "", **kw) -> Any:
    meta = {"setting": Setting(kind, help, **kw)}
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class JudgeConfig:
    """Everything that decides a judgment. Unknown keys are rejected (:meth:`from_dict`); every value
    is type- and range-checked on construction."""

    judge: str = _setting("openai", "str", "openai (LLM) or a non-LLM baseline: overlap, popularity")
    model: str = _setting("gpt-4o-mini", "str", "model name the endpoint serves")
    # several: servers of the same model, one cache
    base_url: str | Sequence[str] | None = _setting(
        None, "urls", "OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, ...); repeat it for several servers "
        "of the same model: requests go to the healthy one with the fewest in flight, a failing one rests and "
        "is retried, answers share one cache. No user:password@ in the URL: the key comes from --api-key-env "
        "(default: the OpenAI API)",
        optional=True, metavar="URL")
    api_key_env: str = _setting("OPENAI_API_KEY", "str", "environment variable holding the API key",
                                metavar="VAR")
    prompt: str = _setting("baseline", "str", "baseline, defined-scale, criteria, relevance, or a template file",
                           metavar="NAME_OR_PATH")
    # "all": every text field the collection holds (posters and external ids left out), then the
    # derived average rating and number of ratings
    fields: str = _setting("title+genres", "str", "item fields shown: a field set, 'all' (every text field "
                           "the collection holds, plus average and number of ratings) or fields joined by '+'",
                           metavar="SET")
    profile_size: int = _setting(50, "int", "rated items per profile", lo=1, metavar="N")
    sampling: str = _setting("random", "str", "which history items: seeded random sample or most recent",
                             choices=SAMPLINGS)
    # a user whose ratings share one timestamp (or have none) has no chronology: chronological then
    # shows them in the seeded random order, and the provenance counts those users
    history_order: str = _setting("chronological", "str", "order the sampled history is shown in: oldest "
                                  "first (users without distinct timestamps: seeded random order), or seeded "
                                  "random", choices=HISTORY_ORDERS)
    seed: int = _setting(0, "int", "seed of every sample", lo=0, hi=2**63 - 1, what="a seed")
    repeats: int = _setting(1, "int", "ask each pair R times and aggregate the answers (the paper's three "
                            "repeated experiments are ablate's experiments, each with its own samples)", lo=1,
                            hi=1000, metavar="R", what="a number of repeats")
    aggregate: str = _setting("mean", "str", "combine repeats: mean rounded half up, or mode",
                              choices=AGGREGATIONS)
    items_per_call: int = _setting(1, "int", "candidates per request", lo=1, hi=1000, metavar="M",
                                   what="a number of items")
    concurrency: int = _setting(8, "int", "requests in flight", lo=1, hi=4096, metavar="C",
                                what="a number of requests")
    # one deadline over each attempt's whole time (connect, send, wait, read), either transport,
    # counted from when the request leaves recjudge's queue; ~170k-token prompts to a reasoning
    # model take minutes
    timeout: float = _setting(60.0, "float", "seconds one request may take from connect to its last byte, "
                              "per attempt (long prompts to reasoning models need minutes, e.g. 900)", lo=0,
                              hi=86400, lo_open=True, metavar="S", what="seconds")
    # None: the price table's max_input_tokens (else context_tokens) for the model, else what the
    # endpoint declares (vLLM, llama.cpp) or reveals in its first overflow answer. Prompts are
    # counted by the endpoint's tokenizer where it has one, else ≈3 characters per token
    context_tokens: int | None = _setting(None, "int", "the most prompt tokens the model accepts; a prompt "
                                          "above it is never sent and its user is reported (default: the price "
                                          "table's limit for the model, else the window the endpoint declares, "
                                          "else unchecked)", lo=1, optional=True, metavar="N",
                                          what="a number of tokens")
    max_attempts: int = _setting(6, "int", "attempts per request", lo=1, hi=100, flag="--retries", metavar="N",
                                 what="a number of attempts")
    backoff_initial: float = _setting(1.0, "float", "first retry wait in s", lo=0, cli=False)
    backoff_max: float = _setting(60.0, "float", "longest retry wait in s", lo=0, cli=False)
    structured: str = _setting("auto", "str", "structured output in the form the endpoint's kind takes (OpenAI's "
                               "json_schema, llama.cpp's json_object with a schema): auto falls back to parsing "
                               "text when the server refuses it, whatever its status code", choices=STRUCTURED)
    params: Mapping[str, Any] = _setting({}, "params", "generation parameters passed through", cli=False)
    max_calls: int | None = _setting(None, "int", "start at most N new calls (default: no limit)", lo=0, optional=True,
                                     metavar="N")
    max_cost: float | None = _setting(None, "float", "stop before the estimated cost exceeds USD "
                                      "(default: no limit)", lo=0, hi=1e9,
                                      optional=True, metavar="USD", what="USD")
    prices: str | None = _setting(None, "str", "price table: {MODEL: {input, cached_input, output}} "
                                  "USD/Mtok (default: the built-in table)",
                                  optional=True, metavar="JSON")
    batch: bool = _setting(False, "bool", "use the Batch API (upload, create, poll, download)")
    batch_poll: float = _setting(30.0, "float", "seconds between polls", lo=0, hi=86400, lo_open=True,
                                 metavar="S", what="seconds")
    dry_run: bool = _setting(False, "bool", "count calls and estimate input tokens and cost; no network, "
                             "nothing written")
    # on SIGINT/SIGTERM: seconds to let calls in flight finish and be cached
    drain_grace: float = _setting(10.0, "float", "seconds the calls in flight get to finish on an interrupt",
                                  lo=0, cli=False)
    # first rest of a failing endpoint, doubling per failure (to 60 s)
    endpoint_cooldown: float = _setting(1.0, "float", "first rest of a failing endpoint in s", lo=0, cli=False)
    # None: chat, or batch with batch=True; another registered backend (a provider SDK, a local engine) by name
    backend: str | None = _setting(None, "str", "the registered backend that makes the calls", optional=True,
                                   cli=False)
    transport: str = _setting("sdk", "str", "HTTP client of chat requests: sdk (the openai package's client) "
                              "or aiohttp (less CPU per request: for concurrency of ~100 and more)",
                              choices=TRANSPORTS)
    # how the endpoint takes structured output and the token cap, what it ignores, its tokenizer
    # and slots (recjudge.judging.dialects); auto probes it on first contact
    endpoint_kind: str = _setting("auto", "str", "the kind of server behind --base-url; auto asks it on first "
                                  "contact (GET /v1/models and a few routes only that kind has)",
                                  choices=ENDPOINT_KINDS)

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = f.metadata["setting"].check(f.name, getattr(self, f.name))
            object.__setattr__(self, f.name, value)
        self._check_urls()
        self._check_params()
        if self.batch and self.backend not in (None, "batch"):
            raise ConfigError(f"batch=True asks for the batch backend, but backend is {self.backend!r}; give one")
        if self.batch and len(self.endpoints()) > 1:
            raise ConfigError("the Batch API takes one endpoint: give one --base-url with --batch")

    def _check_urls(self) -> None:
        if self.base_url is not None and not isinstance(self.base_url, str):
            if isinstance(self.base_url, (bytes, Mapping)) or not isinstance(self.base_url, Sequence):
                raise ConfigError(f"base_url must be a URL or a list of URLs, got {self.base_url!r}")
            urls = tuple(self.base_url)
            if not urls or not all(isinstance(u, str) and u for u in urls):
                raise ConfigError(f"base_url must be a URL or a list of URLs, got {self.base_url!r}")
            if len(set(urls)) != len(urls):
                raise ConfigError("an endpoint URL is given twice; give each server once")
            object.__setattr__(self, "base_url", urls[0] if len(urls) == 1 else urls)
        for url in self.endpoints():
            if has_userinfo(url):
                # the HTTP layer would send them as Basic auth instead of the key, and the URL is
                # written to caches, logs and reports; the message shows the URL without them
                raise ConfigError(f"the endpoint URL {public_url(url)} carries credentials (user:password@ "
                                  "before the host); remove them and put the key in the environment variable "
                                  f"named by --api-key-env (now {self.api_key_env})")
            if url and urlsplit(url).query:
                # the openai client appends paths after the query string (POST /v1?x=1/chat/...);
                # a key passed this way would also be written wherever the URL is
                raise ConfigError(f"the endpoint URL {public_url(url)} carries a query string; give the URL "
                                  "without it (e.g. http://host:8000/v1) and the key through --api-key-env")

    def _check_params(self) -> None:
        if not isinstance(self.params, Mapping) or not all(isinstance(k, str) for k in self.params):
            raise ConfigError(f"judge setting params must map parameter names to values, got {self.params!r}")
        unknown = sorted(set(self.params) - set(GENERATION_PARAMS))
        if unknown:
            raise ConfigError(f"unknown generation parameter(s) {', '.join(unknown)}; "
                              f"pass-through parameters are {', '.join(GENERATION_PARAMS)}")
        extra = self.params.get("extra_body")
        if extra is not None and not (isinstance(extra, Mapping) and all(isinstance(k, str) for k in extra)):
            raise ConfigError(f"generation parameter extra_body must be a JSON object of request fields, got "
                              f"{extra!r}; e.g. --param 'extra_body={{\"top_k\": 20}}'")
        object.__setattr__(self, "params", dict(self.params))

    @classmethod
    def settings(cls) -> dict[str, tuple[Setting, Any]]:
        """Field name -> (its Setting, its default), in declaration order: what CLIs are built from."""
        out = {}
        for f in dataclasses.fields(cls):
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default
            out[f.name] = (f.metadata["setting"], default)
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> JudgeConfig:
        if not isinstance(values, Mapping):
            raise ConfigError(f"judge settings must be a table of key = value, got {type(values).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown judge setting(s) {', '.join(map(str, unknown))}; "
                              f"known: {', '.join(sorted(known))}")
        return cls(**values)

    def replace(self, **changes) -> JudgeConfig:
        return dataclasses.replace(self, **changes)

    def endpoints(self) -> tuple[str | None, ...]:
        """The endpoint URLs (``base_url`` is one URL or several); (None,) is the OpenAI API."""
        if self.base_url is None or isinstance(self.base_url, str):
            return (self.base_url,)
        return tuple(self.base_url)

    def public_endpoints(self) -> list[str]:
        return [public_url(u) or DEFAULT_ENDPOINT for u in self.endpoints()]

    def endpoint_id(self) -> str:
        """The endpoint part of the cache key: public URLs, sorted (several endpoints serve as one)."""
        return " ".join(sorted({public_url(u) or DEFAULT_ENDPOINT for u in self.endpoints()}))

    def key_params(self) -> dict[str, Any]:
        """The generation parameters that enter the cache key."""
        return {"structured": self.structured, **self.params}

    def backend_name(self) -> str:
        """The registered backend that makes the calls (see :mod:`recjudge.judging.backend`)."""
        return self.backend or ("batch" if self.batch else "chat")

