"""The same systems under two evaluation settings (Penha et al. 2025, Figure 2): τ and rank shifts.

Setting A is, for example, runs trained on a historical split scored with historical qrels;
setting B the Cranfield runs (trained on every rating) scored with human qrels. Systems are matched
by name; their users differ, so no user bootstrap applies: τ-b comes with scipy's p-value only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import pandas as pd

from ..errors import InputError

__all__ = ["SettingsComparison", "compare_settings"]


@dataclass(frozen=True, eq=False)
class SettingsComparison:
    """Per measure: τ-b (p), weighted τ, τ_AP, median and largest |rank shift|; per system: both ranks."""

    measures: pd.DataFrame  # one row per measure
    systems: pd.DataFrame  # system × (measure, setting) scores and ranks, and the rank shift B − A
    settings: Mapping[str, Any]
    protocol: Any = None  # the recjudge.protocol.ProtocolUse followed, stamped into the JSON

    def to_json(self) -> dict:
        rows = []
        for name in self.systems.index:
            row = {"system": name}
            for m in self.measures.index:
                row[m] = {k: _num(self.systems.loc[name, (m, k)]) for k in ("score_a", "score_b", "rank_a",
                                                                            "rank_b", "shift")}
            rows.append(row)
        out = {"measures": {m: {k: (v or None) if k == "undefined" else _num(v) for k, v in r.items()}
                            for m, r in self.measures.iterrows()},
               "systems": rows, "settings": dict(self.settings)}
        if self.protocol is not None:
            out["protocol"] = self.protocol.as_dict()
        return out

    def to_frame(self) -> pd.DataFrame:
        return self.measures

    def __str__(self) -> str:
        return self.format()

    def format(self) -> str:
        s = self.settings
        head = (f"{s['systems']} systems in both settings; A: {s['qrels_a']} on {s['runs_a']}; "
                f"B: {s['qrels_b']} on {s['runs_b']}; shift = rank in B − rank in A (1 = best)")
        shifts = self.systems.xs("shift", axis=1, level=1)
        numbers = self.measures.drop(columns="undefined")
        notes = [f"{m}: {why}" for m, why in self.measures["undefined"].items() if why]
        ranked = [m for m in self.measures.index if not self.measures.loc[m, "undefined"]]
        lines = [head, "", numbers.round(3).to_string(), *notes]
        if ranked:
            first = ranked[0]
            biggest = shifts[first].abs().sort_values(ascending=False).head(10).index
            table = self.systems.loc[biggest, first][["rank_a", "rank_b", "shift"]]
            lines += ["", f"largest rank shifts on {first}:", table.to_string()]
        return "\n".join(lines)


def _num(v):
    v = float(v)
    return v if math.isfinite(v) else None


def compare_settings(runs_a: Mapping, qrels_a, runs_b: Mapping, qrels_b, measures=None, tie_policy: str = "trec_eval",
                     seed: int = 0, labels: tuple[str, str] = ("A", "B")) -> SettingsComparison:
    """Rank the systems of ``runs_a`` (name → Run) under ``qrels_a`` and those of ``runs_b`` under
    ``qrels_b``; correlate the two rankings over the systems both hold (matched by run name).
    ``labels`` say where each setting's runs came from, for the output."""
    from scipy import stats

    from .metaeval import evaluate, kendall_tau, system_ranks, tau_ap, tied_ranking, weighted_tau

    ra, qa, rb, qb = dict(runs_a), qrels_a, dict(runs_b), qrels_b
    common = sorted(set(ra) & set(rb))
    if len(common) < 3:
        raise InputError("--runs-b", f"the two settings share {len(common)} system name(s) "
                         f"({', '.join(common) or 'none'}); at least 3 are needed for a rank correlation",
                         "name each system's run file the same in both settings")
    ea = evaluate({n: ra[n] for n in common}, qa, measures, tie_policy=tie_policy, seed=seed).table
    eb = evaluate({n: rb[n] for n in common}, qb, measures, tie_policy=tie_policy, seed=seed).table
    rows, cols = {}, {}
    for m in ea.measures:
        a, b = ea.means(m).reindex(common), eb.means(m).reindex(common)
        rank_a, rank_b = system_ranks(a), system_ranks(b)
        undefined = tied_ranking(a, f"setting A ({qa.name})", m) or tied_ranking(b, f"setting B ({qb.name})", m)
        if undefined:  # no ranking on one side: every shift would come from the average rank of a tie
            nan = float("nan")
            shift = pd.Series(nan, index=a.index)
            rows[m] = {"kendall_tau": nan, "kendall_tau_p": nan, "weighted_tau": nan, "tau_ap": nan,
                       "median_abs_rank_shift": nan, "max_abs_rank_shift": nan, "undefined": undefined}
        else:
            shift = rank_b - rank_a
            test = stats.kendalltau(a.to_numpy(), b.to_numpy(), variant="b")
            rows[m] = {"kendall_tau": kendall_tau(a, b), "kendall_tau_p": float(test.pvalue),
                       "weighted_tau": weighted_tau(a, b), "tau_ap": tau_ap(a, b, common),
                       "median_abs_rank_shift": float(shift.abs().median()),
                       "max_abs_rank_shift": float(shift.abs().max()), "undefined": ""}
        for key, values in (("score_a", a), ("score_b", b), ("rank_a", rank_a), ("rank_b", rank_b), ("shift", shift)):
            cols[(m, key)] = values
    only = sorted(set(ra) ^ set(rb))
    settings = {"runs_a": labels[0], "qrels_a": qa.name, "runs_b": labels[1], "qrels_b": qb.name,
                "systems": len(common), "systems_in_one_setting_only": only, "measures": list(ea.measures),
                "tie_policy": tie_policy, "seed": seed}
    return SettingsComparison(pd.DataFrame.from_dict(rows, orient="index"), pd.DataFrame(cols), settings)
