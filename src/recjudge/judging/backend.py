"""How the LLM judge's calls are made: the small protocol a backend implements (the run loop gives it
a :class:`Job`; it asks the model and stores each answer), and the backend registry.

A new backend (another provider's SDK, a local inference engine) is one module that defines a class
with ``run``/``close``/``attempts``/``endpoint_stats`` and calls :func:`register_backend`; list it
in :data:`BUILTIN_BACKEND_MODULES` or import it before judging. Nothing else changes.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, AsyncIterator, Callable, Mapping, Protocol

from ..errors import ConfigError
from .budget import Budget
from .cache import CallRecord, JudgeCache
from .client import ClientSettings, OpenAIJudgeClient, Request
from .config import JudgeSettings
from .prompts import Template

__all__ = ["Job", "Backend", "OpenAIBackend", "register_backend", "make_backend", "backend_names", "openai_client",
           "BUILTIN_BACKEND_MODULES"]

# imported by name on first use: they import this module, never the other way round
BUILTIN_BACKEND_MODULES = ("recjudge.judging.chat", "recjudge.judging.batch")


class Job(Protocol):
    """The run loop's side: the requests to make, the budget, and where answers go."""

    config: JudgeSettings
    template: Template
    budget: Budget
    cache: JudgeCache
    results: dict[str, CallRecord]    # answers by request key (cached ones included)
    skipped: int                      # calls the budget did not allow
    breaker: Any                      # budget.Breaker: stops asking once calls fail (see its rules)
    halted: set[str]                  # keys of calls not started: the breaker had stopped the run
    outcomes: Any                     # calls made, by status (ok, partial, failed)
    hits: int                         # requests the cache answered
    interrupted: int | None           # the signal that stopped the run, if one did
    previous_handlers: dict[int, Any]
    progress: Callable[[str], None] | None

    def pending(self) -> AsyncIterator[list[Request]]:
        """Per user, the requests the cache cannot answer (an async generator)."""

    def reserve(self, req: Request) -> float:
        """The cost --max-cost sets aside for ``req`` (0 without a cost budget)."""

    def store(self, rec: CallRecord, req: Request) -> None:
        """Cache ``rec``, the answer to ``req``, and count the call."""

    def narrow(self, req: Request, items: tuple[str, ...]) -> Request:
        """``req`` asking only for ``items`` (to retry a partial answer)."""

    def halt(self, error: Exception) -> None:
        """Stop asking, ``error`` (raised once the calls in flight are stored) being fatal to every call."""

    async def fits(self, req: Request) -> bool:
        """Whether ``req``'s prompt fits the context window as known now (an endpoint may reveal it
        after the request was planned); one that does not is recorded as not asked."""


class Backend(Protocol):
    """Makes the calls of a :class:`Job`: every answer (or failure) goes to ``job.store``."""

    attempts: int  # HTTP requests sent, retries included

    async def run(self, job: Job) -> None: ...

    async def close(self) -> None: ...

    def endpoint_stats(self) -> Mapping[str, Mapping[str, int]]: ...


BackendFactory = Callable[[Job], Backend]
_BACKENDS: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> BackendFactory:
    """Add a backend under ``name``; a second backend of the same name is refused."""
    if name in _BACKENDS:
        raise ConfigError(f"a judge backend named {name!r} is already registered; choose another name")
    _BACKENDS[name] = factory
    return factory


def backend_names() -> tuple[str, ...]:
    _load_builtin()
    return tuple(_BACKENDS)


def make_backend(name: str, job: Job) -> Backend:
    _load_builtin()
    try:
        factory = _BACKENDS[name]
    except KeyError:
        raise ConfigError(f"unknown judge backend {name!r}; registered: {', '.join(_BACKENDS)}") from None
    return factory(job)


def _load_builtin() -> None:
    for module in BUILTIN_BACKEND_MODULES:  # cheap once imported: sys.modules answers
        importlib.import_module(module)


def api_key(config: JudgeSettings) -> str:
    """The key from the environment variable ``config.api_key_env``; never logged or stored."""
    key = os.environ.get(config.api_key_env)
    if key:
        return key
    if config.base_url:
        return "not-needed"  # local servers (vLLM, Ollama, llama.cpp) usually ignore the key
    raise ConfigError(f"no API key: set the environment variable {config.api_key_env} (or name another with "
                      f"{config.name_of('api_key_env')}), or point {config.name_of('base_url')} at a server that "
                      "needs none")


def openai_client(job: Job) -> OpenAIJudgeClient:
    """The OpenAI-compatible client of ``job``'s endpoints, its retries bounded by the job's budget."""
    config = job.config
    urls = config.endpoints()
    client = OpenAIJudgeClient(ClientSettings(
        config.model, urls if len(urls) > 1 else urls[0], api_key(config), config.timeout, config.max_attempts,
        config.backoff_initial, config.backoff_max, config.structured, config.params, config.endpoint_cooldown,
        config.concurrency, config.endpoint_kind, config.parse_retries, config.name_of), job.template)
    client.allow_retry = job.budget.allows_retry
    client.narrow = job.narrow
    return client


class OpenAIBackend:
    """What the chat and batch backends share: an OpenAI-compatible client and its accounting."""

    def __init__(self, job: Job):
        self.client = openai_client(job)

    @property
    def attempts(self) -> int:
        return self.client.attempts

    def endpoint_stats(self) -> Mapping[str, Mapping[str, int]]:
        return self.client.endpoint_stats()

    async def close(self) -> None:
        await self.client.close()
