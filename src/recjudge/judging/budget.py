"""What judging costs: token estimates, the price table (with each model's context limits), the cost of
used tokens, the --max-calls / --max-cost budget that decides whether a call may start or retry, the
plan shown (and confirmed) before the first paid call, and the breaker that stops a run whose calls fail."""

from __future__ import annotations

import json
import math
import os
import sys
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import ConfigError, InputError, NotConfirmed
from .cache import Usage
from .config import JudgeSettings
from .prompts import Template

__all__ = ["estimate_tokens", "estimate_messages_tokens", "safe_messages_tokens", "output_estimate", "load_prices",
           "load_models", "model_entry", "ModelEntry", "cost", "Budget", "Plan", "confirm_spend", "Breaker",
           "BREAKER_IGNORES"]


def estimate_tokens(text: str) -> int:
    """Input tokens without a tokenizer: ≈ 4 characters per token, OpenAI's rule of thumb for English
    text (it overestimates for plain English with BPE tokenizers of 200k vocabularies and
    underestimates for digits and non-Latin scripts; good to ±25% for budgeting)."""
    return (len(text) + 3) // 4


def estimate_messages_tokens(system: str, user: str) -> int:
    return estimate_tokens(system) + estimate_tokens(user) + 3 * 2 + 3  # per-message and reply priming


def safe_messages_tokens(system: str, user: str, chars_per_token: float = 3.0) -> int:
    """Prompt tokens for the context-window check when no tokenizer counts them, at ``chars_per_token``
    (each endpoint kind declares its own; see :class:`recjudge.judging.dialects.Dialect`). On judge
    prompts of titles with numbers and years the 4-character rule undercounted OpenAI's o200k
    tokenizer by 21% and SmolLM2's 49k vocabulary (digits one by one) by 33%; 3 and 2.5 characters
    per token overcounted them by 5% and 8%. tiktoken would download its BPE files at run time, so
    OpenAI models get the margin rather than a tokenizer."""
    return math.ceil((len(system) + len(user)) / chars_per_token) + 3 * 2 + 3


_PRICE_KEYS = ("input", "cached_input", "output")
_LIMIT_KEYS = ("context_tokens", "max_input_tokens")
_SHAPE = ('{"MODEL": {"input": USD_PER_MTOK, "output": USD_PER_MTOK}} (optionally cached_input, as_of, '
          'context_tokens, max_input_tokens; or {"ALIAS": {"alias_of": "MODEL"}})')


@dataclass(frozen=True)
class ModelEntry:
    """A model's row of the price table: USD per million tokens, when the prices were taken, and the
    context limits a prompt is checked against."""

    input: float
    output: float
    cached_input: float | None = None
    as_of: str | None = None
    context_tokens: int | None = None      # the whole window: prompt and answer
    max_input_tokens: int | None = None    # the most prompt tokens accepted (window less the answer's room)

    def price(self) -> dict[str, float]:
        out = {"input": self.input, "output": self.output}
        if self.cached_input is not None:
            out["cached_input"] = self.cached_input
        return out

    @property
    def input_window(self) -> int | None:
        """The most prompt tokens the model accepts: max_input_tokens, else the whole context window."""
        return self.max_input_tokens if self.max_input_tokens is not None else self.context_tokens


def load_models(path: str | os.PathLike | None = None) -> dict[str, ModelEntry]:
    """The built-in price table (``prices.json`` beside this module) updated with a user file of the
    same shape. Keys starting with ``_`` are comments; ``{"alias_of": "MODEL"}`` shares MODEL's row
    (resolved after the user file, so an alias follows a price the user overrides)."""
    builtin = Path(__file__).with_name("prices.json")
    rows, aliases = _read_table(builtin)
    if path is not None:
        user_rows, user_aliases = _read_table(Path(path))
        for model in user_rows:
            aliases.pop(model, None)
        for model in user_aliases:
            rows.pop(model, None)
        rows.update(user_rows)
        aliases.update(user_aliases)
    table = dict(rows)
    for alias, (target, source) in aliases.items():
        if target not in rows:
            raise InputError(source, f"model {alias!r}: alias_of names {target!r}, which has no prices",
                             "name a model the table prices (an alias of an alias is not followed)")
        table[alias] = rows[target]
    return table


def load_prices(path: str | os.PathLike | None = None) -> dict[str, dict[str, float]]:
    """Built-in prices (USD per million tokens) updated with a user file of the same shape."""
    return {model: entry.price() for model, entry in load_models(path).items()}


def model_entry(config: JudgeSettings) -> ModelEntry | None:
    """``config.model``'s row of the price table (``config.prices`` over the built-in one), None when
    unpriced; --max-cost without a price is refused here, so a caller can refuse it before any work."""
    entry = load_models(config.prices).get(config.model)
    if entry is None and config.max_cost is not None and not config.dry_run:
        raise ConfigError(f"--max-cost needs a price for model {config.model!r}; add it to a price table "
                          "passed with --prices (USD per million tokens: input, cached_input, output)")
    return entry


def _read_table(p: Path) -> tuple[dict[str, ModelEntry], dict[str, tuple[str, str]]]:
    """One price file's rows and aliases (alias -> (target, file)); every error names the file."""
    try:
        data = json.loads(p.read_text("utf-8"))
    except FileNotFoundError:
        raise InputError(str(p), "price table not found", "check the path") from None
    except json.JSONDecodeError as exc:
        raise InputError(str(p), f"invalid JSON: {exc.msg}", f"write {_SHAPE}", line=exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError(str(p), f"expected a JSON object of models, got a {type(data).__name__}", f"write {_SHAPE}")
    rows: dict[str, ModelEntry] = {}
    aliases: dict[str, tuple[str, str]] = {}
    for model, entry in data.items():
        if model.startswith("_"):
            continue
        if isinstance(entry, dict) and "alias_of" in entry:
            if set(entry) != {"alias_of"} or not isinstance(entry["alias_of"], str) or not entry["alias_of"]:
                raise InputError(str(p), f"model {model!r}: an alias holds only \"alias_of\": \"MODEL\"",
                                 "fix the entry")
            aliases[model] = (entry["alias_of"], str(p))
            continue
        if not isinstance(entry, dict) or not {"input", "output"} <= set(entry) or \
                set(entry) - {*_PRICE_KEYS, *_LIMIT_KEYS, "as_of"}:
            raise InputError(str(p), f"model {model!r}: expected keys input, output and optionally "
                             "cached_input (USD per million tokens), as_of, context_tokens, max_input_tokens",
                             "fix the entry")
        for k, v in entry.items():
            if k in _PRICE_KEYS and (isinstance(v, bool) or not isinstance(v, (int, float))
                                     or not math.isfinite(v) or v < 0):
                raise InputError(str(p), f"model {model!r}: {k} is {json.dumps(v)}, not a price",
                                 f"give {k} as a non-negative number of USD per million tokens, "
                                 f"e.g. \"{k}\": 0.15")
            if k in _LIMIT_KEYS and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise InputError(str(p), f"model {model!r}: {k} is {json.dumps(v)}, not a number of tokens",
                                 f"give {k} as a whole number of tokens, e.g. \"{k}\": 128000")
            if k == "as_of" and not isinstance(v, str):
                raise InputError(str(p), f"model {model!r}: as_of is {json.dumps(v)}, not a text",
                                 "give the date and source of the prices, e.g. \"as_of\": \"2025-08-07 "
                                 "launch price list\"")
        rows[model] = ModelEntry(
            float(entry["input"]), float(entry["output"]),
            None if "cached_input" not in entry else float(entry["cached_input"]), entry.get("as_of"),
            entry.get("context_tokens"), entry.get("max_input_tokens"))
    return rows, aliases


def cost(usage: Usage, price: Mapping[str, float] | None) -> float | None:
    """USD for ``usage`` at ``price`` (USD per million tokens); None without a price."""
    if price is None:
        return None
    cached_price = price.get("cached_input", price["input"])
    return ((usage.prompt - usage.cached) * price["input"] + usage.cached * cached_price
            + usage.completion * price["output"]) / 1e6


def output_estimate(template: Template, n_items: int) -> int:
    """Completion tokens a call of ``n_items`` candidates is expected to use (a label, maybe criteria)."""
    per_item = 8 + 6 * len(template.criteria)
    return 10 + per_item * n_items


class Budget:
    """--max-calls and --max-cost: calls take a reservation before they start and settle it after."""

    def __init__(self, config: JudgeSettings, price):
        self.max_calls = config.max_calls
        self.max_cost = config.max_cost
        self.price = price
        self.started = 0
        self.spent = 0.0
        self.reserved = 0.0
        self.stopped: str | None = None
        # the dearest single attempt seen so far: answers (reasoning above all) can be far longer
        # than the estimate, so reservations grow to what calls actually cost
        self.max_seen = 0.0
        # with no output cap (max_tokens) nothing bounds a call's cost before one is answered: the
        # first call under --max-cost goes alone, the others wait for its cost
        self.capped = any(config.params.get(k) for k in ("max_tokens", "max_completion_tokens"))
        self.needs_probe = self.max_cost is not None and not self.capped

    def reservation(self, est_cost: float) -> float:
        return max(est_cost, self.max_seen)

    def take(self, est_cost: float, retry: bool = False) -> bool:
        if self.stopped:
            return False
        if not retry and self.max_calls is not None and self.started >= self.max_calls:
            self.stopped = f"--max-calls {self.max_calls} reached"
            return False
        if self.max_cost is not None and self.spent + self.reserved + est_cost > self.max_cost:
            self.stopped = f"--max-cost ${self.max_cost:g} would be exceeded"
            return False
        self.started += not retry
        self.reserved += est_cost
        return True

    def allows_retry(self, used: Usage, attempts: int = 1) -> bool:
        """Whether a call that has already used ``used`` tokens in ``attempts`` attempts may try
        again within --max-cost."""
        if self.max_cost is None:
            return True
        used_cost = cost(used, self.price) or 0.0
        # the next attempt may cost as much as this call's attempts so far or the dearest one seen
        following = max(self.max_seen, used_cost / max(1, attempts))
        ok = self.spent + self.reserved + used_cost + following <= self.max_cost
        if not ok and not self.stopped:
            self.stopped = f"--max-cost ${self.max_cost:g} would be exceeded"
        return ok

    def settle(self, est_cost: float, usage: Usage, attempts: int = 1) -> None:
        self.reserved -= est_cost
        spent = cost(usage, self.price) or 0.0
        self.spent += spent
        self.max_seen = max(self.max_seen, spent / max(1, attempts))


@dataclass(frozen=True)
class Plan:
    """What a run is about to pay for (the dry run's figures), shown before its first call."""

    pairs: int
    calls: int              # calls to make: planned less the cache's answers and repeated prompts
    cached: int             # planned calls the cache answers
    endpoint: str           # public URL(s): never credentials
    model: str
    tokens: int             # estimated input tokens of the calls to make
    cost: float | None      # estimated USD; None when the model has no price
    what: str = "judge"     # the command or experiment, for the messages

    def cost_text(self, prices_flag: str = "--prices") -> str:
        if self.cost is not None:
            return f"est. cost ${self.cost:,.2f}"
        return f"est. cost unknown: no price for model {self.model!r} (give {prices_flag} with its price)"

    def format(self, prices_flag: str = "--prices") -> str:
        return (f"plan: {self.pairs:,} pairs; {self.calls:,} calls to make ({self.cached:,} answered by the cache) "
                f"to {self.endpoint}, model {self.model!r}; est. {self.tokens:,} input tokens, "
                f"{self.cost_text(prices_flag)}")


def _flag(settings: Any, name: str) -> str:
    """``name`` as the caller wrote settings (``--max-cost``, ``max_cost=``, key 'max_cost')."""
    name_of = getattr(settings, "name_of", None)
    return name_of(name) if callable(name_of) else "--" + name.replace("_", "-")


def _at_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stderr is not None and sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def _ask(question: str) -> str:
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline()


def confirm_spend(plan: Plan, settings: Any, say: Callable[[str], None] | None = None, *,
                  interactive: bool | None = None, ask: Callable[[str], str] | None = None) -> None:
    """Show ``plan`` (through ``say``) and decide whether its calls may start; raises
    :class:`~recjudge.errors.NotConfirmed` (nothing paid) when they may not.

    ``settings`` is any settings object with ``yes``, ``max_cost``, ``max_calls``, ``confirm_above_usd``
    and ``confirm_above_calls`` (missing ones take their defaults: False, None, None, 1.0, 1000), so
    every command that pays for calls (judge, audit, ablate, reproduce) gates them the same way. A plan
    above the threshold (its estimated cost above ``confirm_above_usd``; with no price, more calls than
    ``confirm_above_calls``) starts only with ``yes``, with a ``max_cost`` to cap it, or when the user
    at a terminal (stdin and stderr) answers y/yes to the question.
    """
    (say or (lambda m: print(m, file=sys.stderr)))(plan.format(_flag(settings, "prices")))
    if plan.calls == 0 or getattr(settings, "yes", False) or getattr(settings, "max_cost", None) is not None:
        return
    calls = plan.calls
    max_calls = getattr(settings, "max_calls", None)
    if max_calls is not None and max_calls < calls:
        calls = max_calls  # --max-calls caps what may be started
    above_usd = getattr(settings, "confirm_above_usd", 1.0)
    above_calls = getattr(settings, "confirm_above_calls", 1000)
    if plan.cost is not None:
        est = plan.cost * calls / plan.calls
        if est <= above_usd:
            return
        over = f"est. ${est:,.2f}, above {_flag(settings, 'confirm_above_usd')} {above_usd:g}"
        question = f"Start {calls:,} calls (est. ${est:,.2f})? [y/N] "
    else:
        if calls <= above_calls:
            return
        over = (f"of unknown cost (no price for model {plan.model!r}), more than {_flag(settings, 'confirm_above_calls')} "
                f"{above_calls:,}")
        question = f"Start {calls:,} calls (est. cost unknown)? [y/N] "
    if interactive is None:
        interactive = _at_terminal()
    if interactive:
        answer = (ask or _ask)(question)
        if (answer or "").strip().lower() in ("y", "yes"):
            return
        raise NotConfirmed(f"not started: {calls:,} calls were not confirmed; nothing was paid")
    price = "" if plan.cost is not None else f" (with {_flag(settings, 'prices')} giving the model's price)"
    raise NotConfirmed(f"not started: {calls:,} calls {over}, and no terminal to confirm them; nothing was paid. "
                       f"Give {_flag(settings, 'yes')} to start them, or {_flag(settings, 'max_cost')} USD{price} to "
                       "cap what they may cost")


# failures of one prompt, not of the endpoint or the settings: they never stop a run
BREAKER_IGNORES = frozenset({"context_overflow"})


class Breaker:
    """Stops a run whose calls fail: its first ``first`` calls all failing for one reason (a refused
    parameter, a model that answers in prose), or more than ``share`` of the last ``window`` calls
    failing. A call counts once its retries are done; partly answered calls count as answered."""

    def __init__(self, first: int = 8, window: int = 50, share: float = 0.5):
        self.first = first
        self.share = share
        self.recent: deque = deque(maxlen=window or 1)
        self.window = window
        self.seen = 0
        self.first_reasons: Counter = Counter()
        self.tripped: str | None = None   # why the run stopped
        self.reason: str | None = None    # the failure reason that stopped it

    def trip(self, why: str, reason: str | None = None) -> None:
        if self.tripped is None:
            self.tripped, self.reason = why, reason

    def observe(self, status: str, reason: str | None, sample: Callable[[str], str]) -> None:
        """One finished call; ``sample(reason)`` is what the endpoint said for that reason, for the message."""
        if self.tripped is not None or reason in BREAKER_IGNORES:
            return
        failed = status == "failed"
        reason = reason or "failed"
        self.seen += 1
        if self.seen <= self.first:
            if failed:
                self.first_reasons[reason] += 1
            if self.seen == self.first and len(self.first_reasons) == 1 \
                    and sum(self.first_reasons.values()) == self.first:
                (only,) = self.first_reasons
                self.trip(f"the first {self.first} calls all failed ({only}): {sample(only)}", only)
                return
        if not self.window:
            return
        self.recent.append(reason if failed else None)
        if len(self.recent) == self.window:
            fails = Counter(r for r in self.recent if r is not None)
            n = sum(fails.values())
            if n > self.share * self.window:
                top = fails.most_common(1)[0][0]
                parts = ", ".join(f"{r}: {k}" for r, k in fails.most_common())
                self.trip(f"{n} of the last {self.window} calls failed ({parts}); {top}: {sample(top)}", top)
