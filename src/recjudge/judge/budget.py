"""What judging costs: token estimates, the price table, the cost of used tokens, and the
--max-calls / --max-cost budget that decides whether a call may start or retry."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Mapping

from ..errors import InputError
from .cache import Usage
from .config import JudgeConfig
from .prompts import Template

__all__ = ["estimate_tokens", "estimate_messages_tokens", "output_estimate", "load_prices", "cost", "Budget"]


def estimate_tokens(text: str) -> int:
    """Input tokens without a tokenizer: ≈ 4 characters per token, OpenAI's rule of thumb for English
    text (it overestimates for plain English with BPE tokenizers of 200k vocabularies and
    underestimates for digits and non-Latin scripts; good to ±25% for budgeting)."""
    return (len(text) + 3) // 4


def estimate_messages_tokens(system: str, user: str) -> int:
    return estimate_tokens(system) + estimate_tokens(user) + 3 * 2 + 3  # per-message and reply priming


def load_prices(path: str | os.PathLike | None = None) -> dict[str, dict[str, float]]:
    """Built-in prices (USD per million tokens) updated with a user file of the same shape."""
    builtin = json.loads((Path(__file__).with_name("prices.json")).read_text("utf-8"))
    table = {k: v for k, v in builtin.items() if not k.startswith("_")}
    if path is not None:
        p = Path(path)
        try:
            user = json.loads(p.read_text("utf-8"))
        except FileNotFoundError:
            raise InputError(str(p), "price table not found", "check the path") from None
        except json.JSONDecodeError as exc:
            raise InputError(str(p), f"invalid JSON: {exc.msg}", "write {\"MODEL\": {\"input\": USD_PER_MTOK, "
                             "\"output\": USD_PER_MTOK}}", line=exc.lineno) from None
        shape = "{\"MODEL\": {\"input\": USD_PER_MTOK, \"output\": USD_PER_MTOK}}"
        if not isinstance(user, dict):
            raise InputError(str(p), f"expected a JSON object of models, got a {type(user).__name__}",
                             f"write {shape}")
        for model, entry in user.items():
            if model.startswith("_"):
                continue
            if not isinstance(entry, dict) or not {"input", "output"} <= set(entry) or \
                    set(entry) - {"input", "cached_input", "output"}:
                raise InputError(str(p), f"model {model!r}: expected keys input, output and optionally "
                                 "cached_input (USD per million tokens)", "fix the entry")
            for k, v in entry.items():
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                    raise InputError(str(p), f"model {model!r}: {k} is {json.dumps(v)}, not a price",
                                     f"give {k} as a non-negative number of USD per million tokens, "
                                     f"e.g. \"{k}\": 0.15")
            table[model] = {k: float(v) for k, v in entry.items()}
    return table


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

    def __init__(self, config: JudgeConfig, price):
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
