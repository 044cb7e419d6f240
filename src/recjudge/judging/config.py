"""The judge's settings: one frozen, validated model whose fields declare name, type, default, range,
choices and help, so that the library, the judge and audit commands, ablation files and protocols
share one source (see :mod:`recjudge.settings`)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Mapping
from urllib.parse import urlsplit

from pydantic import AfterValidator, field_validator, model_validator

from ..settings import Cli, Conflict, Settings, checked, option
from ..urls import DEFAULT_ENDPOINT, has_userinfo, public_url
from .client import GENERATION_PARAMS
from .dialects import ENDPOINT_KINDS
from .profile import HISTORY_ORDERS, SAMPLINGS, parse_fields

__all__ = ["JudgeSettings", "FieldSet", "AGGREGATIONS", "STRUCTURED", "JUDGE_HELP", "yes_option",
           "confirm_above_usd_option", "confirm_above_calls_option"]

AGGREGATIONS = ("mean", "mode")
STRUCTURED = ("auto", "on", "off")
MAX_SEED = 2**63 - 1
# a field set the collections can show ("title+genres", "all", …): the judge's, the demo's
FieldSet = Annotated[str, AfterValidator(lambda value: checked(parse_fields, value))]
JUDGE_HELP = ("openai: an LLM through any OpenAI-compatible endpoint; overlap, popularity: offline non-LLM "
              "baselines (declared as such in every output)")


def yes_option():
    """``--yes``: the confirmation of paid calls given in advance (the judge's, reproduce's)."""
    return option(False, "start the planned calls without asking, whatever their estimated cost")


def confirm_above_usd_option():
    return option(1.0, "ask before starting calls estimated above USD (a run without a terminal refuses them "
                       "without --yes or --max-cost)", ge=0, le=1e9, cli=Cli(metavar="USD"))


def confirm_above_calls_option():
    return option(1000, "ask before starting more than N calls of unknown cost (a model the price table does not "
                        "price)", ge=0, cli=Cli(metavar="N"))


class JudgeSettings(Settings):
    """Everything that decides a judgment. Unknown keys are refused; every value is type- and
    range-checked on construction, and refusals name the setting as the caller wrote it."""

    command: ClassVar[str] = "judge"
    judge: str = option("openai", JUDGE_HELP)
    model: str = option("gpt-4o-mini", "model name the endpoint serves")
    # several: servers of the same model, one cache
    base_url: str | tuple[str, ...] | None = option(
        None, "OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, ...); repeat it for several servers of the "
              "same model: requests go to the healthy one with the fewest in flight, a failing one rests and is "
              "retried, answers share one cache. No user:password@ in the URL: the key comes from --api-key-env "
              "(default: the OpenAI API)", cli=Cli(metavar="URL", action="append"))
    api_key_env: str = option("OPENAI_API_KEY", "environment variable holding the API key", cli=Cli(metavar="VAR"))
    prompt: str = option("baseline", "baseline, defined-scale, criteria, relevance, or a template file",
                         cli=Cli(metavar="NAME_OR_PATH"))
    # "all": every text field the collection holds (posters and external ids left out), then the
    # derived average rating and number of ratings
    fields: FieldSet = option("title+genres", "item fields shown: a field set (title, title+genres, title+directors, "
                                         "…), 'all' (every text field the collection holds, plus average and number "
                                         "of ratings) or fields joined by '+'", cli=Cli(metavar="SET"))
    profile_size: int = option(50, "rated items per profile", ge=1, le=2**31 - 1, cli=Cli(metavar="N"))
    sampling: Literal[SAMPLINGS] = option("random", "which history items: seeded random sample or most recent")
    # a user whose ratings share one timestamp (or have none) has no chronology: chronological then
    # shows them in the seeded random order, and the provenance counts those users
    history_order: Literal[HISTORY_ORDERS] = option(
        "chronological", "order the sampled history is shown in: oldest first (users without distinct timestamps: "
                         "seeded random order), or seeded random")
    seed: int = option(0, "seed of every sample", ge=0, le=MAX_SEED)
    repeats: int = option(1, "ask each pair R times and aggregate the answers (the paper's three repeated "
                             "experiments are ablate's experiments, each with its own samples)", ge=1, le=1000,
                          cli=Cli(metavar="R"))
    aggregate: Literal[AGGREGATIONS] = option("mean", "combine repeats: mean rounded half up, or mode")
    items_per_call: int = option(1, "candidates per request", ge=1, le=1000, cli=Cli(metavar="M"))
    concurrency: int = option(8, "requests in flight", ge=1, le=4096, cli=Cli(metavar="C"))
    # one deadline over each attempt's whole time (connect, send, wait, read),
    # counted from when the request leaves recjudge's queue; ~170k-token prompts to a reasoning
    # model take minutes
    timeout: float = option(60.0, "seconds one request may take from connect to its last byte, per attempt (long "
                                  "prompts to reasoning models need minutes, e.g. 900)", gt=0, le=86400,
                            cli=Cli(metavar="S"))
    # None: the price table's max_input_tokens (else context_tokens) for the model, else what the
    # endpoint declares (vLLM, llama.cpp) or reveals in its first overflow answer. Prompts are
    # counted by the endpoint's tokenizer where it has one, else ≈3 characters per token
    context_tokens: int | None = option(None, "the most prompt tokens the model accepts; a prompt above it is "
                                              "never sent and its user is reported (default: the price table's "
                                              "limit for the model, else the window the endpoint declares, else "
                                              "unchecked)", ge=1, cli=Cli(metavar="N"))
    max_attempts: int = option(6, "attempts per request", ge=1, le=100, cli=Cli(flag="--retries", metavar="N"))
    backoff_initial: float = option(1.0, "first retry wait in s", ge=0, cli=Cli(hidden=True))
    backoff_max: float = option(60.0, "longest retry wait in s", ge=0, cli=Cli(hidden=True))
    structured: Literal[STRUCTURED] = option(
        "auto", "structured output in the form the endpoint's kind takes (OpenAI's json_schema, llama.cpp's "
                "json_object with a schema): auto falls back to parsing text when the server refuses it, whatever "
                "its status code")
    params: dict[str, Any] = option(help="generation parameters passed through (temperature, reasoning_effort, …)",
                                    cli=Cli(hidden=True), default_factory=dict)
    max_calls: int | None = option(None, "start at most N new calls (default: no limit)", ge=0, cli=Cli(metavar="N"))
    max_cost: float | None = option(None, "stop before the estimated cost exceeds USD (default: no limit)", ge=0,
                                    le=1e9, cli=Cli(metavar="USD"))
    # the plan is printed before the first paid call; above these thresholds a terminal is asked and a
    # non-interactive run needs --yes or --max-cost (an unpriced model's cost, local servers' included,
    # is unknown, not zero)
    yes: bool = yes_option()
    confirm_above_usd: float = confirm_above_usd_option()
    confirm_above_calls: int = confirm_above_calls_option()
    # an answer that does not parse costs what a good one does, and a model that answers one prompt
    # unusably mostly answers it so again
    parse_retries: int = option(1, "retries of a call whose answer was received but unusable (unparseable, out of "
                                   "range), within --retries", ge=0, le=99, cli=Cli(metavar="N"))
    # the run stops when its first calls all fail with one reason, or most calls of a recent window fail
    stop_after_first: int = option(8, "stop when the first N calls all fail for the same reason (0: never)", ge=0,
                                   cli=Cli(hidden=True))
    stop_window: int = option(50, "calls of the window whose failures stop the run (0: never)", ge=0,
                              cli=Cli(hidden=True))
    stop_share: float = option(0.5, "stop when more than this share of the window's calls failed", gt=0, le=1,
                               cli=Cli(hidden=True))
    prices: str | None = option(None, "price table: {MODEL: {input, cached_input, output}} USD/Mtok (default: the "
                                      "built-in table)", cli=Cli(metavar="JSON"))
    batch: bool = option(False, "use the Batch API (upload, create, poll, download)")
    batch_poll: float = option(30.0, "seconds between polls", gt=0, le=86400, cli=Cli(metavar="S"))
    dry_run: bool = option(False, "count calls and estimate input tokens and cost; no network, nothing written")
    # on SIGINT/SIGTERM: seconds to let calls in flight finish and be cached
    drain_grace: float = option(10.0, "seconds the calls in flight get to finish on an interrupt", ge=0,
                                cli=Cli(hidden=True))
    # first rest of a failing endpoint, doubling per failure (to 60 s)
    endpoint_cooldown: float = option(1.0, "first rest of a failing endpoint in s", ge=0, cli=Cli(hidden=True))
    # None: chat, or batch with batch=True; another registered backend (a provider SDK, a local engine) by name
    backend: str | None = option(None, "the registered backend that makes the calls", cli=Cli(hidden=True))
    # how the endpoint takes structured output and the token cap, what it ignores, its tokenizer
    # and slots (recjudge.judging.dialects); auto probes it on first contact
    endpoint_kind: Literal[ENDPOINT_KINDS] = option(
        "auto", "the kind of server behind --base-url; auto asks it on first contact (GET /v1/models and a few "
                "routes only that kind has)")

    @field_validator("judge")
    @classmethod
    def _known_judge(cls, value: str) -> str:
        from .registry import judge_names

        if value not in judge_names():
            raise ValueError(f"must be one of {', '.join(judge_names())}, not {value!r}")
        return value

    @field_validator("prompt")
    @classmethod
    def _known_prompt(cls, value: str) -> str:
        from .prompts import check_template

        return checked(check_template, value)

    @field_validator("base_url", mode="before")
    @classmethod
    def _urls(cls, value: Any) -> Any:
        # one URL, or several (a list from a file or the repeated flag): one alone is that URL
        if isinstance(value, (list, tuple)):
            if not value or not all(isinstance(u, str) and u for u in value):
                raise ValueError(f"must be a URL or a list of URLs, not {value!r}")
            if len(set(value)) != len(value):
                raise ValueError("an endpoint URL is given twice; give each server once")
            return value[0] if len(value) == 1 else tuple(value)
        return value

    @field_validator("params", mode="before")
    @classmethod
    def _params(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise ValueError(f"must map parameter names to values, not {value!r}")
        unknown = sorted(set(value) - set(GENERATION_PARAMS))
        if unknown:
            raise ValueError(f"unknown generation parameter(s) {', '.join(unknown)}; pass-through parameters are "
                             f"{', '.join(GENERATION_PARAMS)}")
        extra = value.get("extra_body")
        if extra is not None and not (isinstance(extra, Mapping) and all(isinstance(k, str) for k in extra)):
            raise ValueError(f"extra_body must be a JSON object of request fields, not {extra!r}; e.g. --param "
                             "'extra_body={\"top_k\": 20}'")
        return dict(value)

    @model_validator(mode="after")
    def _endpoints_and_backend(self):
        for url in self.endpoints():
            if has_userinfo(url):
                # the HTTP layer would send them as Basic auth instead of the key, and the URL is
                # written to caches, logs and reports; the message shows the URL without them
                raise Conflict(f"the endpoint URL {public_url(url)} carries credentials (user:password@ before the "
                               f"host); remove them from {{base_url}} and put the key in the environment variable "
                               f"named by {{api_key_env}} (now {self.api_key_env})", "base_url", "api_key_env")
            if url and (urlsplit(url).fragment or "#" in url):
                # a fragment is never sent: the probe's GET /v1/models#x and the chat calls would
                # go to different places, and a key written after # would land in caches and logs
                raise Conflict(f"the endpoint URL {public_url(url).split('#', 1)[0]}#… carries a #fragment; give "
                               "{base_url} without it (e.g. http://host:8000/v1)", "base_url")
            if url and urlsplit(url).query:
                # the openai client appends paths after the query string (POST /v1?x=1/chat/...);
                # a key passed this way would also be written wherever the URL is
                raise Conflict(f"the endpoint URL {public_url(url)} carries a query string; give {{base_url}} "
                               "without it (e.g. http://host:8000/v1) and the key through {api_key_env}",
                               "base_url", "api_key_env")
        if self.batch and self.backend not in (None, "batch"):
            raise Conflict(f"{{batch}} asks for the batch backend, but {{backend}} is {self.backend!r}; give one",
                           "batch", "backend")
        if self.batch and len(self.endpoints()) > 1:
            raise Conflict("the Batch API takes one endpoint: give one {base_url} with {batch}", "base_url", "batch")
        return self

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str | None = None):
        """Judge settings from a table (an ablation file's [judge], a protocol's); errors name ``source``'s
        keys when given, else the parameters."""
        if source is not None:
            return cls.from_file(values, source)
        if not isinstance(values, Mapping):
            from ..errors import ConfigError

            raise ConfigError(f"judge settings must be a table of key = value, not {type(values).__name__}")
        return cls.build(dict(values))

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

