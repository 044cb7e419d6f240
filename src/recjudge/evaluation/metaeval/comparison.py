"""What ``compare`` returns: per candidate and measure, how its system ranking agrees with the reference's."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from ..intervals import CI_FLAG, DEFAULT_TAU_METHOD, TAU_METHODS
from .ranks import SystemTable
from .text import estimate_hint, groups_json, groups_text, tie_line, wrapped

__all__ = ["RankAgreement", "UserOverlap", "CompareResult", "ci_cell", "ci_notes", "trivial_tau_lines"]


class RankAgreement(NamedTuple):
    """How a candidate label set's system ranking agrees with the reference's, for one measure."""

    measure: str
    n_systems: int
    n_users_reference: int
    n_users_candidate: int
    kendall_tau: float
    kendall_tau_ci: tuple[float, float]
    weighted_tau: float
    tau_ap: float
    median_abs_rank_displacement: float
    max_abs_rank_displacement: float
    most_displaced: tuple[tuple[str, float], ...]  # (system, candidate rank − reference rank)
    kendall_tau_p: float = math.nan  # scipy.stats.kendalltau's two-sided p-value (H0: no association)
    ci_method: str = DEFAULT_TAU_METHOD
    ci_note: str = ""                         # why the CI is flagged: its measured coverage is below nominal
    ci_summary: str = ""                      # that note in one line, printed under the table
    ci_missing: str = ""                      # why there is no CI (0 resamples, τ undefined, ...); '' when there is
    ci_coverage: float = math.nan             # coverage such intervals achieved in simulation (NaN: not measured)
    bootstrap_bias_sd: float = math.nan       # (τ − mean resampled τ) / SD of resampled τ
    undefined: str = ""  # why τ and the displacements are undefined (every system ties under a label set)

    def to_json(self) -> dict:
        return {
            "undefined": self.undefined or None,
            "kendall_tau": self.kendall_tau,
            "kendall_tau_p": self.kendall_tau_p,
            "kendall_tau_ci": None if self.ci_missing else list(self.kendall_tau_ci),
            "kendall_tau_ci_missing": self.ci_missing or None,
            "kendall_tau_ci_method": self.ci_method,
            "kendall_tau_ci_description": TAU_METHODS[self.ci_method].description,
            "kendall_tau_ci_coverage": None if math.isnan(self.ci_coverage) else self.ci_coverage,
            "kendall_tau_ci_note": self.ci_note,
            "kendall_tau_ci_summary": self.ci_summary,
            "kendall_tau_bootstrap_bias_sd": None if math.isnan(self.bootstrap_bias_sd) else self.bootstrap_bias_sd,
            "weighted_tau": self.weighted_tau,
            "tau_ap": self.tau_ap,
            "median_abs_rank_displacement": self.median_abs_rank_displacement,
            "max_abs_rank_displacement": self.max_abs_rank_displacement,
            "most_displaced": [{"system": s, "displacement": d} for s, d in self.most_displaced],
            "n_systems": self.n_systems,
            "n_users_reference": self.n_users_reference,
            "n_users_candidate": self.n_users_candidate,
        }


class UserOverlap(NamedTuple):
    """How many users the reference and one candidate judge, and how many both; ``note`` says what τ
    then compares ('' when both judge the same users)."""

    reference: int
    candidate: int
    both: int
    note: str = ""

    def to_json(self) -> dict:
        return {"reference": self.reference, "candidate": self.candidate, "both": self.both,
                "note": self.note or None}


@dataclass(frozen=True, eq=False)
class CompareResult:
    """How each candidate label set ranks the systems against the reference (``recjudge compare``), as JSON,
    a frame or text.

    ``reference`` covers the reference's own users; ``reference_for[c]`` is the reference table
    that candidate ``c`` was compared with (the shared users under ``queries="shared"``). The verb adds
    the means per system group, the report it wrote and the protocol followed."""

    reference: SystemTable
    candidates: Mapping[str, SystemTable]
    agreement: Mapping[str, Mapping[str, RankAgreement]]  # candidate → measure → agreement
    settings: Mapping[str, object]
    tie_share: Mapping[str, float] = field(default_factory=dict)
    reference_for: Mapping[str, SystemTable] = field(default_factory=dict)
    users: Mapping[str, UserOverlap] = field(default_factory=dict)  # candidate → users each and both judge
    tie_sensitivity: Mapping | None = None  # the tie note (recjudge.evaluation.ties.note.summarize)
    # candidate → measure → trivial judge → statistic (kendall_tau, weighted_tau) → Spread (evaluation.baselines)
    baselines: Mapping[str, Mapping[str, Mapping[str, Mapping]]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # said wherever the result is shown (a label set of one label, ...)
    groups: pd.DataFrame | None = None  # per label set and system group: systems and mean of each measure
    report_path: Path | None = None  # report.md, when one was written
    protocol: Any = None  # the recjudge.protocol.ProtocolUse followed, stamped into the JSON

    def user_notes(self) -> list[str]:
        """One line per candidate that judges other users than the reference: the counts and what τ compares."""
        return [u.note for u in self.users.values() if u.note]

    def estimate_hints(self) -> list[str]:
        """One line per candidate whose users include all the reference's and more: ``recjudge estimate``
        generalises the reference's means to the candidate's users."""
        ref = str(self.settings.get("reference", "the reference"))
        return [estimate_hint(ref, u.reference, cand, u.candidate) for cand, u in self.users.items()
                if 0 < u.both == u.reference < u.candidate]

    def reference_table(self, candidate: str) -> SystemTable:
        return self.reference_for.get(candidate, self.reference)

    def _systems_json(self) -> list[dict]:
        systems = []
        ref_scores = self.reference.scores_frame()
        for name in ref_scores.index:
            entry: dict = {
                "system": name,
                "reference": {m: float(ref_scores.loc[name, m]) for m in ref_scores.columns},
                "reference_rank": {m: float(self.reference.ranks(m)[name]) for m in ref_scores.columns},
                "tied_user_share": self.tie_share.get(name),
            }
            for cand, table in self.candidates.items():
                ref_t = self.reference_table(cand)
                entry.setdefault("candidates", {})[cand] = {
                    "scores": {m: float(table.means(m)[name]) for m in table.measures},
                    "ranks": {m: float(table.ranks(m)[name]) for m in table.measures},
                    "reference_scores": {m: float(ref_t.means(m)[name]) for m in ref_t.measures},
                    "reference_ranks": {m: float(ref_t.ranks(m)[name]) for m in ref_t.measures},
                }
            systems.append(entry)
        return systems

    def to_json(self) -> dict:
        per_candidate = {
            cand: {m: ra.to_json() for m, ra in by_measure.items()}
            for cand, by_measure in self.agreement.items()
        }
        first = next(iter(per_candidate.values()), {})
        baselines = {cand: {m: {judge: {k: v.to_json() for k, v in st.items()} for judge, st in by_judge.items()}
                            for m, by_judge in by_measure.items()} for cand, by_measure in self.baselines.items()}
        out = {
            "users": {cand: u.to_json() for cand, u in self.users.items()},
            "measures": first,
            "candidates": per_candidate,
            "systems": self._systems_json(),
            "settings": dict(self.settings),
            "baselines": baselines,
            "warnings": list(self.warnings),
        }
        if self.tie_sensitivity is not None:
            out["tie_sensitivity"] = dict(self.tie_sensitivity)
        out = groups_json(out, self.groups)
        if self.protocol is not None:
            out["protocol"] = self.protocol.as_dict()
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per candidate × measure: τ-b with its CI, weighted τ, τ_AP, rank displacement."""
        rows = []
        for cand, by_measure in self.agreement.items():
            for m, ra in by_measure.items():
                rows.append({"candidate": cand, "measure": m, "tau_b": ra.kendall_tau, "p": ra.kendall_tau_p,
                             "ci_low": ra.kendall_tau_ci[0], "ci_high": ra.kendall_tau_ci[1],
                             "weighted_tau": ra.weighted_tau, "tau_ap": ra.tau_ap,
                             "median_abs_rank_displacement": ra.median_abs_rank_displacement,
                             "max_abs_rank_displacement": ra.max_abs_rank_displacement})
        return pd.DataFrame(rows)

    def format(self) -> str:
        """What ``recjudge compare`` prints: per candidate its τ table and notes, then the reference's scores."""
        s = self.settings
        seeds = f"seed {s['seed']}"
        if s.get("bootstrap_seed", s["seed"]) != s["seed"]:
            seeds += f"; bootstrap seed {s['bootstrap_seed']}"
        # said first: a τ over different users is read differently
        lines = [*self.user_notes(), *self.estimate_hints(),
                 f"{len(self.reference.scores_frame())} systems; reference {s['reference']}; "
                 f"users: {s['queries']}; tie policy: {s['tie_policy']} ({seeds})"]
        for cand, by_measure in self.agreement.items():
            lines += ["", f"candidate: {cand}", _tau_table(by_measure, s), *ci_notes(by_measure)]
            lines += [wrapped(f"{m}: {ra.undefined}") for m, ra in by_measure.items() if ra.undefined]
            lines += trivial_tau_lines(self.baselines.get(cand, {}), s.get("baselines", {}).get("random_draws"))
        lines += [wrapped(f"warning: {w}") for w in self.warnings]
        scores = self.reference.scores_frame()
        lines += ["", "system scores under the reference:", scores.round(4).to_string()]
        return "\n".join(lines) + tie_line(self.tie_sensitivity) + groups_text(self.groups)

    def __str__(self) -> str:
        return self.format()


def _tau_table(by_measure: Mapping[str, RankAgreement], settings: Mapping) -> str:
    """One candidate's τ table as ``recjudge compare`` prints it, one row per measure."""
    ci_header = f"95% CI ({settings.get('ci_method', 'percentile')})"
    rows = []
    for m, ra in by_measure.items():
        if ra.undefined:
            rows.append({"measure": m, **{k: "–" for k in ("tau_b", "p", ci_header, "weighted_tau", "tau_ap",
                                                           "med|Δrank|", "max|Δrank|")}})
            continue
        rows.append({
            "measure": m,
            "tau_b": f"{ra.kendall_tau:.3f}",
            "p": f"{ra.kendall_tau_p:.2g}",
            ci_header: ci_cell(ra),
            "weighted_tau": f"{ra.weighted_tau:.3f}",
            "tau_ap": f"{ra.tau_ap:.3f}",
            "med|Δrank|": f"{ra.median_abs_rank_displacement:g}",
            "max|Δrank|": f"{ra.max_abs_rank_displacement:g}",
        })
    return pd.DataFrame(rows).to_string(index=False)


def ci_cell(ra, digits: int = 3) -> str:
    """A τ interval as printed, flagged when its note says the measured coverage is below nominal; "–" when
    τ itself is undefined (its reason is said beside the table); why there is none (``no interval (0
    resamples)``) when there is none."""
    if getattr(ra, "undefined", ""):
        return "–"
    missing = getattr(ra, "ci_missing", "")
    if missing:
        return missing
    lo, hi = ra.kendall_tau_ci
    return f"[{lo:.{digits}f}, {hi:.{digits}f}]" + (CI_FLAG if getattr(ra, "ci_note", "") else "")


def ci_notes(by_measure: Mapping[str, object]) -> list[str]:
    """One short line per flagged interval, ``* measure: summary`` (the full note is in the JSON)."""
    return [f"{CI_FLAG} {m}: {getattr(ra, 'ci_summary', '') or ra.ci_note}" for m, ra in by_measure.items()
            if getattr(ra, "ci_note", "") and not getattr(ra, "ci_missing", "")]


def trivial_tau_lines(by_measure: Mapping[str, Mapping[str, Mapping]], draws: int | None) -> list[str]:
    """Under a candidate's τ table: per measure, the τ of the trivial judges on the same pairs."""
    from ..baselines import TRIVIAL_NOTE, format_spread

    if not by_measure:
        return []
    lines = [wrapped(f"τ of {TRIVIAL_NOTE.format(draws=draws)}; – : the judge ties every system, so τ is "
                     "undefined:")]
    for m, by_judge in by_measure.items():
        lines.append(f"  {m}: " + ", ".join(f"{judge} τ {format_spread(st['kendall_tau'])}"
                                             for judge, st in by_judge.items()))
    return lines
