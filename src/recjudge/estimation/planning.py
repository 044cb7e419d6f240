"""The plan ``recjudge estimate`` prints: per measure, the human users (labels, cost) for the target
half-width, and for separating the pair asked for (formulas in :mod:`recjudge.estimation.planner`)."""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .engine import MeasureEstimate
from .planner import Pilot, pilot, users_for_width, users_to_separate
from .ranks import pair_matrix
from .sample import Sample

__all__ = ["make_plan", "pilots", "check_pair", "llm_price"]


def pilots(sample: Sample, name: str, lams, population: str, pairs=None) -> list[Pilot]:
    """Per column (system, or pair when ``pairs`` given) the pilot's variances at its λ."""
    y, f, fa = sample.y[name], sample.f_human[name], sample.f_all[name]
    if pairs is not None:
        y, f, fa = pair_matrix(y, pairs), pair_matrix(f, pairs), pair_matrix(fa, pairs)
    big_n = len(sample.llm_users)
    rest = np.delete(fa, sample.human_rows, axis=0)
    out = []
    for j, lam in enumerate(lams):
        if population == "judged":
            out.append(pilot(y[:, j], f[:, j], lam, big_n))
        else:
            out.append(pilot(y[:, j], f[:, j], lam, None, lam ** 2 * rest[:, j].var() / len(rest)))
    return out


def _priced(n: int | None, have: int, pool: float, s) -> dict:
    if n is None:
        return {"human_users": None}
    more = max(0, n - have)
    item = {"human_users": n, "more_human_users": more, "more_human_labels": round(more * pool)}
    if s.cost_human is not None:
        item["cost"] = (more if s.cost_per == "user" else round(more * pool)) * s.cost_human
    return item


def _words(item: dict, what: str, big_n: int, population: str) -> str:
    if item["human_users"] is None:
        where = f" (of the N = {big_n})" if population == "judged" else ""
        return f"{what}: not reachable with these LLM labels{where}"
    text = (f"{what}: {item['human_users']} human users ({item['more_human_users']} more, about "
            f"{item['more_human_labels']:,} human labels")
    text += f", cost {item['cost']:,.2f})" if "cost" in item else ")"
    return text + ("; no more LLM calls (the LLM judged all N)" if population == "judged" else "")


def _width_items(sample, results, s, pool) -> list[dict]:
    out = []
    for name, m in results.items():
        ns = [users_for_width(p, s.target_width, m.alpha) for p in pilots(sample, name, m.ppi.lam, s.population)]
        n = None if any(v is None for v in ns) else max(ns)
        item = {"measure": name, "goal": f"every system's half-width <= {s.target_width:g}",
                **_priced(n, len(sample.human_users), pool, s)}
        item["text"] = _words(item, f"{name}, half-width <= {s.target_width:g} for every system",
                              len(sample.llm_users), s.population)
        out.append(item)
    return out


def check_pair(s, systems: list[str]) -> None:
    """Refuse, before any scoring, a --separate pair that names a system the runs do not have."""
    for given in s.pair() or ():
        if given not in systems:
            raise ConfigError(f"{s.name_of('separate')}: no system {given!r} among the runs "
                              f"({', '.join(systems[:5])}{', ...' if len(systems) > 5 else ''})")


def _pair_items(sample, results: dict[str, MeasureEstimate], s, pool) -> list[dict]:
    a, b = s.pair()
    ia, ib = sample.systems.index(a), sample.systems.index(b)
    pair = [(min(ia, ib), max(ia, ib))]
    out = []
    for name, m in results.items():
        p = m.pairs.index(pair[0])
        delta = float(m.pair_means.estimate[p])
        pil = pilots(sample, name, m.pair_means.lam[[p]], s.population, pair)[0]
        n = users_to_separate(pil, delta, m.alpha, s.power)
        item = {"measure": name, "goal": f"tell {a} and {b} apart with power {s.power:g}", "difference": delta,
                **_priced(n, len(sample.human_users), pool, s)}
        item["text"] = _words(item, f"{name}, {a} vs {b} (difference {delta:+.3f}) apart with power {s.power:g}",
                              len(sample.llm_users), s.population)
        out.append(item)
    return out


def llm_price(path) -> dict:
    """What the LLM labels cost, from the summary ``recjudge judge`` wrote: the calls their labels
    took and the price per call the judge paid (or estimated, for a dry run)."""
    import json

    from .._io import read_text

    name, text = read_text(path, "judge summary")
    try:
        summary = json.loads(text)["summary"]
        calls, planned = int(summary["calls"]), int(summary["planned_calls"])
        spent = summary["estimated_cost" if summary["dry_run"] else "cost"]
        paid = planned - int(summary["cache_hits"]) - int(summary.get("shared_calls", 0)) if summary["dry_run"] else calls
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"{name}: not a judge summary ({err}); give the NAME.summary.json recjudge judge wrote "
                          "beside the LLM qrels") from None
    if spent is None or paid <= 0:
        why = "the model has no price in prices.json" if spent is None else "every call came from the cache"
        raise ConfigError(f"{name}: no price per call to read ({why}); give the summary of a run that paid for "
                          "its calls, or leave --judge-summary out")
    return {"source": name, "calls": planned, "cost_per_call": spent / paid, "cost": planned * spent / paid}


def _llm_items(results: dict[str, MeasureEstimate], s, pool: float, price: dict) -> list[dict]:
    text = (f"LLM labels: {price['calls']:,} calls at {price['cost_per_call']:,.4f} each, about "
            f"{price['cost']:,.2f} in all (from {price['source']})")
    out = [{"goal": "price the LLM labels", **price, "text": text}]
    for name, m in results.items():
        worth = float(np.nanmedian(m.effective)) if np.isfinite(m.effective).any() else None
        if worth is None or s.cost_human is None:
            continue
        human = worth * (1 if s.cost_per == "user" else pool) * s.cost_human
        out.append({"measure": name, "goal": "the human labels the LLM labels were worth", "worth_users": worth,
                    "worth_cost": human, "text": f"{name}: worth {worth:.0f} human users (median over the systems), "
                                                 f"whose labels would cost {human:,.2f}"})
    return out


def make_plan(sample: Sample, results: dict[str, MeasureEstimate], s, pairs_per_user: float,
              price: dict | None = None) -> dict:
    """The plan the settings ask for ({} when none): items per goal and measure; ``price``: what the
    LLM labels cost (:func:`llm_price`)."""
    items = []
    if s.target_width is not None:
        items += _width_items(sample, results, s, pairs_per_user)
    if s.separate is not None:
        items += _pair_items(sample, results, s, pairs_per_user)
    if price is not None:
        items += _llm_items(results, s, pairs_per_user, price)
    if not items:
        return {}
    note = ("from the pilot's λ and variances; separating a pair is planned for one marginal test at the "
            "command's level (the simultaneous intervals over every pair need more users)")
    return {"items": items, "pairs_per_user": pairs_per_user, "cost_human": s.cost_human, "cost_per": s.cost_per,
            "note": note}
