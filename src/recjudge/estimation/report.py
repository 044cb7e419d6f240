"""What ``recjudge estimate`` gives back: the numbers as JSON, a frame, and terminal text."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .engine import MeasureEstimate
from .text import FLAT_NOTE, LLM_ONLY_NOTE, WORTH_NOTE, assumptions, format_report, methods
from .validity import warnings_for

__all__ = ["EstimateReport"]

@dataclass(frozen=True, eq=False)
class EstimateReport:
    """Per measure, a :class:`~recjudge.estimation.engine.MeasureEstimate`; the sample's sizes."""

    systems: list[str]
    measures: dict[str, MeasureEstimate]
    n_human: int
    n_llm: int
    population: str
    weighted: bool
    plan: dict[str, Any] = field(default_factory=dict)
    settings: Any = None
    inputs: dict[str, str] = field(default_factory=dict)
    partial: int = 0  # human users judged by hand on part of their pool
    refused: dict[str, str] = field(default_factory=dict)  # measure -> why partly judged pools cannot give it

    @property
    def level(self) -> float:
        return 1 - next(iter(self.measures.values())).alpha if self.measures else math.nan

    def _system_json(self, m: MeasureEstimate, j: int) -> dict:
        (lo, hi), (hlo, hhi) = m.ci(), m.human_ci()
        return {"estimate": m.ppi.estimate[j], "ci": [lo[j], hi[j]], "se": m.ppi.se[j], "lambda": m.ppi.lam[j],
                "human_only": {"estimate": m.human.estimate[j], "ci": [hlo[j], hhi[j]], "se": m.human.se[j]},
                "llm_only": {"estimate": m.llm_only[j], "note": LLM_ONLY_NOTE},
                "effective_human_users": m.effective[j],
                "degenerate": bool(m.ppi.se[j] == 0 and (self.n_human < self.n_llm or self.partial > 0)),
                "rank_set": [int(m.ranks.lo[j]), int(m.ranks.hi[j])], "can_be_best": bool(m.ranks.can_be_best[j])}

    def _pairs_json(self, m: MeasureEstimate) -> list[dict]:
        lo, hi = m.pair_ci()
        out = []
        for p, (a, b) in enumerate(m.pairs):
            ahead = self.systems[a] if lo[p] > 0 else self.systems[b] if hi[p] < 0 else None
            out.append({"a": self.systems[a], "b": self.systems[b], "estimate": m.pair_means.estimate[p],
                        "ci": [lo[p], hi[p]], "ahead": ahead})
        return out

    def _measure_json(self, m: MeasureEstimate) -> dict:
        return {"systems": {s: self._system_json(m, j) for j, s in enumerate(self.systems)},
                "effective_human_users": float(np.nanmedian(m.effective)) if np.isfinite(m.effective).any()
                else None,
                "pairs": self._pairs_json(m), "simultaneous_critical_value": m.pair_crit,
                "rank_sets": {s: [int(m.ranks.lo[j]), int(m.ranks.hi[j])] for j, s in enumerate(self.systems)},
                "can_be_best": [s for j, s in enumerate(self.systems) if m.ranks.can_be_best[j]]}

    def _json(self) -> dict:
        per = {name: self._measure_json(m) for name, m in self.measures.items()}
        data = {"command": "estimate", "level": self.level, "population": self.population,
                "n_human_users": self.n_human, "n_llm_users": self.n_llm,
                "effective_human_users": {k: v["effective_human_users"] for k, v in per.items()},
                "rank_sets": {k: v["rank_sets"] for k, v in per.items()},
                "measures": per, "assumptions": assumptions(self.population, self.weighted, self.partial),
                "partly_judged_users": self.partial, "methods": methods(self), "refused": dict(self.refused),
                "notes": {"llm_only": LLM_ONLY_NOTE, "degenerate": FLAT_NOTE, "effective_human_users": WORTH_NOTE
                          + " (median over the systems per measure)"},
                "warnings": warnings_for(self.n_human, self.partial), "inputs": dict(self.inputs)}
        if self.plan:
            data["plan"] = self.plan
        return data

    def to_json(self) -> dict:
        data = self._json()
        stamp = getattr(self.settings, "stamp", None)
        return stamp(data) if stamp is not None else data

    def to_frame(self) -> pd.DataFrame:
        rows = []
        for name, m in self.measures.items():
            for j, s in enumerate(self.systems):
                d = self._system_json(m, j)
                rows.append({"measure": name, "system": s, "estimate": d["estimate"], "ci_lo": d["ci"][0],
                             "ci_hi": d["ci"][1], "human_only": d["human_only"]["estimate"],
                             "human_ci_lo": d["human_only"]["ci"][0], "human_ci_hi": d["human_only"]["ci"][1],
                             "llm_only": d["llm_only"]["estimate"], "effective_human_users": m.effective[j],
                             "rank_lo": d["rank_set"][0], "rank_hi": d["rank_set"][1]})
        return pd.DataFrame(rows)

    def format(self) -> str:
        return format_report(self)

    def __str__(self) -> str:
        return self.format()
