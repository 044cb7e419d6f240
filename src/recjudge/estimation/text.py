"""``recjudge estimate``'s terminal text: per measure a table of systems, the pairs, the assumptions."""

from __future__ import annotations

import numpy as np

from ..report.terminal import prose, table
from .engine import MeasureEstimate
from .pools import POOL_ASSUMPTION
from .validity import warnings_for

__all__ = ["format_report", "assumptions", "methods", "LLM_ONLY_NOTE", "WORTH_NOTE", "FLAT_NOTE"]

LLM_ONLY_NOTE = "the mean under the LLM labels alone: biased by the judge's errors, no interval"
WORTH_NOTE = "the human users a human-only interval would need for the same width"
_PAIRS_SHOWN = 10  # systems up to which every pair is printed (beyond, the counts; the JSON has them all)


def methods(report) -> dict[str, str]:
    """Per measure, how its per-user values under human labels were obtained."""
    how = ("PPI++ over users on per-user Horvitz-Thompson values (human-judged pairs weighted by m/K), "
           "variance in two stages (users, then pairs within a user)" if report.partial else
           "PPI++ over users on per-user values")
    return {name: how for name in report.measures}


def assumptions(population: str, weighted: bool, partial: int = 0) -> list[str]:
    """What the intervals assume, as printed beside them."""
    sample = ("the human users were drawn from the N users with the inclusion probabilities given"
              if weighted else "the human users are a uniform random sample of the N users the LLM judged")
    target = ("the target is the mean over the N users the LLM judged (a finite population)"
              if population == "judged" else
              "the N users are themselves a random sample of a larger population, the target its mean")
    pool = (POOL_ASSUMPTION if partial else
            "each human user was judged by humans on the same pool the LLM judged for that user")
    return [sample, target, pool,
            "users are independent; a user's pairs are not (the user is the unit of every interval)",
            "the intervals are large-sample (t quantile, n - 1 degrees of freedom); the pairwise ones and the "
            "rank sets hold simultaneously (max-t over every pair)"]


def _ci(lo: float, hi: float) -> str:
    return f"[{lo:.3f}, {hi:.3f}]"


def _rank(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _worth(value: float) -> str:
    return "-" if not np.isfinite(value) else f"{value:.0f}"


FLAT_NOTE = ("every human user gave the same residual (or, partly judged, no judged pair moved the value), "
             "so the interval has no width: it is no interval (judge more users or pairs by hand)")


def _flat(report, m: MeasureEstimate) -> np.ndarray:
    """Systems whose interval has zero width though not every user was judged by hand."""
    return (m.ppi.se == 0) & (report.n_human < report.n_llm or report.partial > 0)


def _systems_table(report, m: MeasureEstimate) -> str:
    (lo, hi), (hlo, hhi) = m.ci(), m.human_ci()
    pct = f"{round(100 * (1 - m.alpha), 1):g}%"
    order = np.argsort(-m.ppi.estimate, kind="stable")
    flat = _flat(report, m)
    rows = [[report.systems[j], f"{m.ppi.estimate[j]:.3f}", _ci(lo[j], hi[j]) + ("!" if flat[j] else ""),
             f"{m.human.estimate[j]:.3f}",
             _ci(hlo[j], hhi[j]), f"{m.llm_only[j]:.3f}", _worth(m.effective[j]),
             _rank(int(m.ranks.lo[j]), int(m.ranks.hi[j]))] for j in order]
    header = ["system", "estimate", f"{pct} CI", "human only", f"its {pct} CI", "LLM only*", "worth", "rank set"]
    return table(rows, header)


def _pairs_text(report, m: MeasureEstimate) -> list[str]:
    if not m.pairs:
        return []
    lo, hi = m.pair_ci()
    separated = int(((lo > 0) | (hi < 0)).sum())
    lines = [f"pairs told apart (simultaneous intervals over all {len(m.pairs)} pairs): {separated}"]
    if len(report.systems) <= _PAIRS_SHOWN:
        rows = [[f"{report.systems[a]} - {report.systems[b]}", f"{m.pair_means.estimate[p]:.3f}",
                 _ci(lo[p], hi[p]), "yes" if lo[p] > 0 or hi[p] < 0 else "no"]
                for p, (a, b) in enumerate(m.pairs)]
        lines.append(table(rows, ["pair", "difference", "simultaneous CI", "apart"]))
    best = [report.systems[j] for j in np.flatnonzero(m.ranks.can_be_best)]
    lines.append(prose(f"can be the best ({len(best)}): {', '.join(best)}"))
    return lines


def _plan_text(plan: dict) -> list[str]:
    lines = ["", "Plan (from this pilot):"]
    for item in plan.get("items", []):
        lines.append(prose("  " + item["text"]))
    return lines


def format_report(report) -> str:
    head = (f"{report.n_human} of {report.n_llm} users judged by hand (the LLM judged all {report.n_llm}); "
            f"{len(report.systems)} systems; prediction-powered (PPI++) estimates of the mean under human labels")
    if report.partial:
        head += (f"; {report.partial} of the {report.n_human} human users judged on part of their pool: "
                 f"{methods(report)[next(iter(report.measures))]}")
    out = [prose(head)] + [prose(f"warning: {w}") for w in warnings_for(report.n_human, report.partial)]
    for reason in dict.fromkeys(report.refused.values()):
        names = ", ".join(n for n, r in report.refused.items() if r == reason)
        out.append(prose(f"not estimated: {names}: {reason}"))
    for name, m in report.measures.items():
        out += ["", f"{name}", _systems_table(report, m), *_pairs_text(report, m)]
    out += ["", prose(f"* LLM only: {LLM_ONLY_NOTE}."), prose(f"worth: {WORTH_NOTE}.")]
    if any(_flat(report, m).any() for m in report.measures.values()):
        out.append(prose(f"! {FLAT_NOTE}."))
    out += ["", "Assumptions:"]
    out += [prose(f"- {a}") for a in assumptions(report.population, report.weighted, report.partial)]
    if report.plan:
        out += _plan_text(report.plan)
    return "\n".join(out)
