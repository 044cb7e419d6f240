"""One interface for every verb's result: ``to_json()``, ``to_frame()`` and ``format()``.

Thin adapters over the library's records (metaeval's EvaluationResult and CompareResult, the judge's
JudgeResult, ties' TieAudit, training's TrainResult list, ablate's rows, fill's parts); each keeps
the record it wraps as ``.result`` (or its parts as fields), so nothing is lost. The text of
``format()`` is what the matching command prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd


from ..report.terminal import prose, table

__all__ = ["Result", "EvaluateReport", "CompareReport", "AgreementReport", "FillReport", "JudgeReport",
           "TrainReport", "TiesReport", "AblateReport", "per_query_frame"]


class Result:
    """What every verb returns. ``settings`` (the verb's settings model) stamps the JSON with the
    protocol followed, when there is one."""

    def to_json(self) -> dict | list:
        data = self._json()
        settings = getattr(self, "settings", None)
        return settings.stamp(data) if isinstance(data, dict) and hasattr(settings, "stamp") else data

    def _json(self) -> dict | list:
        raise NotImplementedError

    def to_frame(self) -> pd.DataFrame:
        raise NotImplementedError

    def format(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.format()


@dataclass(frozen=True, eq=False)
class EvaluateReport(Result):
    result: Any  # metaeval.EvaluationResult
    source: str  # where the qrels came from (path, or their name)
    report_path: Path | None = None  # report.md, when one was written
    groups: pd.DataFrame | None = None  # per system group: number of systems and mean of each measure
    settings: Any = None  # EvaluateSettings

    @property
    def table(self):
        return self.result.table

    def _json(self) -> dict:
        data = _with_groups(self.result.to_json(), self.groups)
        if getattr(self.settings, "per_query", None):
            data["per_query"] = self.to_frame(per_query=True).to_dict(orient="records")
        return data

    def to_frame(self, per_query: bool = False) -> pd.DataFrame:
        """Systems × measures, best first under the ranking measure (the first effectiveness measure,
        ``settings["ranked_by"]``), with that measure's rank: whole numbers, but the mean of their ranks
        for systems with equal means (7.5).

        ``per_query=True``: one row per run, user and measure (``run, query, measure, value``; trec_eval
        ``-q``, ir-measures ``iter_calc``), users in the order of their ids. Every user the qrels judge
        has a row: one a run does not rank scores 0 (trec_eval ``-c``), so each run's mean is the
        table's; a CompatHM value its script leaves out of the mean has no row."""
        if per_query:
            return per_query_frame(self.table.matrices)
        scores = self.table.scores_frame()
        by = self.result.settings["ranked_by"]
        ranked = scores.sort_values(by, ascending=False, kind="stable")
        ranks = self.table.ranks(by).reindex(ranked.index)
        ranked.insert(0, "rank", ranks.astype("int64") if (ranks == ranks.round()).all() else ranks)
        return ranked

    def format(self) -> str:
        s = self.result.settings
        frame = self.to_frame()
        ranks = frame["rank"]
        tied = ranks != ranks.round()
        frame["rank"] = [f"{r:g}" for r in ranks]  # 1, 2, … and 7.5 for two systems tied at 7 and 8
        note = (f"\nrank {', '.join(dict.fromkeys(frame['rank'][tied]))}: systems with equal {s['ranked_by']} "
                "share the mean of their ranks" if tied.any() else "")
        return (_wrapped(f"{len(frame)} systems under {self.source}; ranked by {s['ranked_by']} "
                         f"({s['ranked_by_note']}); tie policy {s['tie_policy']}") + "\n"
                + table(frame.round(4).reset_index()) + note + _tie_line(self.result) + _groups_text(self.groups))


def per_query_frame(matrices) -> pd.DataFrame:
    """``{measure: users × runs}`` as rows ``run, query, measure, value``: run by run, user by user, the
    measures in their order (trec_eval ``-q``'s order); NaN values (left out of a mean) dropped."""
    import numpy as np

    names = list(matrices)
    if not names:
        return pd.DataFrame(columns=["run", "query", "measure", "value"])
    first = matrices[names[0]]
    runs, queries = np.asarray(first.columns, dtype=object), np.asarray(first.index, dtype=object)
    values = np.stack([matrices[m].reindex(index=first.index, columns=first.columns).to_numpy(dtype=float)
                       for m in names])  # measure × user × run
    n_m, n_q, n_r = values.shape
    frame = pd.DataFrame({"run": np.repeat(runs, n_q * n_m),
                          "query": np.tile(np.repeat(queries, n_m), n_r),
                          "measure": np.tile(np.asarray(names, dtype=object), n_r * n_q),
                          "value": values.transpose(2, 1, 0).ravel()})
    return frame[frame["value"].notna()].reset_index(drop=True)


def _tie_line(result) -> str:
    """The tie note's one line (recjudge.evaluation.ties.note), when the ties could change the result."""
    note = (getattr(result, "tie_sensitivity", None) or {}).get("note")
    return f"\n{_wrapped(note)}" if note else ""


def _with_groups(data: dict, groups: pd.DataFrame | None) -> dict:
    if groups is None:
        return data
    return {**data, "groups": groups.reset_index().to_dict(orient="records")}


def _groups_text(groups: pd.DataFrame | None) -> str:
    if groups is None:
        return ""
    return "\n\nmeans per system group:\n" + groups.round(4).to_string()


@dataclass(frozen=True, eq=False)
class CompareReport(Result):
    result: Any  # metaeval.CompareResult
    report_path: Path | None = None  # report.md, when one was written
    groups: pd.DataFrame | None = None  # per label set and system group: systems and mean of each measure
    settings: Any = None  # CompareSettings

    @property
    def agreement(self):
        return self.result.agreement

    def _json(self) -> dict:
        return _with_groups(self.result.to_json(), self.groups)

    def to_frame(self) -> pd.DataFrame:
        """One row per candidate × measure: τ-b with its CI, weighted τ, τ_AP, rank displacement."""
        rows = []
        for cand, by_measure in self.result.agreement.items():
            for m, ra in by_measure.items():
                rows.append({"candidate": cand, "measure": m, "tau_b": ra.kendall_tau, "p": ra.kendall_tau_p,
                             "ci_low": ra.kendall_tau_ci[0], "ci_high": ra.kendall_tau_ci[1],
                             "weighted_tau": ra.weighted_tau, "tau_ap": ra.tau_ap,
                             "median_abs_rank_displacement": ra.median_abs_rank_displacement,
                             "max_abs_rank_displacement": ra.max_abs_rank_displacement})
        return pd.DataFrame(rows)

    def format(self) -> str:
        result = self.result
        s = result.settings
        seeds = f"seed {s['seed']}"
        if s.get("bootstrap_seed", s["seed"]) != s["seed"]:
            seeds += f"; bootstrap seed {s['bootstrap_seed']}"
        # said first: a τ over different users is read differently
        lines = [*result.user_notes(),
                 f"{len(result.reference.scores_frame())} systems; reference {s['reference']}; "
                 f"users: {s['queries']}; tie policy: {s['tie_policy']} ({seeds})"]
        from ..report.evaluation import ci_cell, ci_notes

        ci_header = f"95% CI ({s.get('ci_method', 'percentile')})"
        for cand, by_measure in result.agreement.items():
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
            lines += ["", f"candidate: {cand}", pd.DataFrame(rows).to_string(index=False), *ci_notes(by_measure)]
            lines += [_wrapped(f"{m}: {ra.undefined}") for m, ra in by_measure.items() if ra.undefined]
            lines += trivial_tau_lines(result.baselines.get(cand, {}), s.get("baselines", {}).get("random_draws"))
        lines += [_wrapped(f"warning: {w}") for w in getattr(result, "warnings", ())]
        scores = result.reference.scores_frame()
        lines += ["", "system scores under the reference:", scores.round(4).to_string()]
        return "\n".join(lines) + _tie_line(result) + _groups_text(self.groups)


def trivial_tau_lines(by_measure: Mapping[str, Mapping[str, Mapping]], draws: int | None) -> list[str]:
    """Under a candidate's τ table: per measure, the τ of the trivial judges on the same pairs."""
    from ..evaluation.baselines import TRIVIAL_NOTE, format_spread

    if not by_measure:
        return []
    lines = [_wrapped(f"τ of {TRIVIAL_NOTE.format(draws=draws)}; – : the judge ties every system, so τ is "
                      "undefined:")]
    for m, by_judge in by_measure.items():
        lines.append(f"  {m}: " + ", ".join(f"{judge} τ {format_spread(st['kendall_tau'])}"
                                             for judge, st in by_judge.items()))
    return lines


def _wrapped(text: str, width: int = 100) -> str:
    return prose(text, width, indent="    ")


AGREEMENT_LEGEND = (
    "columns: pairs = reference pairs compared; missing = reference pairs the candidate lacks (and the rule that "
    "counted them); cand-only = pairs the candidate labels and the reference does not (never compared);",
    "kappa = Cohen's κ; kappa_lin = κ with linear weights |i − j| over the sorted labels (a near miss costs "
    "less); alpha_ord / alpha_int = Krippendorff's α, ordinal / interval (0 = chance, 1 = perfect);",
    "agree / tie / disagree = over pairs of one user's items whose reference labels differ: the share the "
    "candidate orders the same way / labels equal / orders the other way (95% CI);",
    "binary agree = the same on labels binarised (0 vs ≥ 1, both sides); rel>non agree/tie = pairs of a "
    "reference-relevant (≥ 1) and a reference-non-relevant (0) item of one user: the share the candidate labels "
    "the relevant one higher / equal, on its raw labels (Penha et al. 2025, Table 3)",
)


@dataclass(frozen=True, eq=False)
class AgreementReport(Result):
    """Item-level agreement of each candidate with one reference (``results``: name → AgreementResult)."""

    reference: str
    results: Mapping[str, Any]
    sources: Mapping[str, str]
    options: Mapping[str, Any]
    settings: Any = None  # AgreementSettings
    baselines: Mapping[str, Any] = field(default_factory=dict)  # candidate → trivial judge → statistic → Spread

    def __getitem__(self, candidate: str):
        return self.results[candidate]

    def _json(self) -> dict:
        out = {}
        for name, res in self.results.items():
            entry = res.to_json()
            entry["path"] = self.sources.get(name)
            entry["settings"]["reference_path"] = self.options.get("reference_path")
            if name in self.baselines:
                entry["baselines"] = {judge: {k: v.to_json() for k, v in st.items()}
                                      for judge, st in self.baselines[name].items()}
            entry["warnings"] = [w for w in self.warnings if w.startswith(f"label set {name!r} ")]
            out[name] = entry
        return out

    def to_frame(self) -> pd.DataFrame:
        return pd.concat([res.to_frame() for res in self.results.values()], ignore_index=True)

    def format(self) -> str:
        s = self.options
        rows = [res.summary_row() for res in self.results.values()]
        missing = s["missing"] or "zero up to 1% missing, else refused"
        if self.baselines:
            from ..evaluation.baselines import trivial_agreement_rows

            rows = [r for name, res in self.results.items()
                    for r in [res.summary_row(), *trivial_agreement_rows(name, self.baselines.get(name, {}))]]
            width = max(len(str(r["candidate"])) for r in rows)  # left-aligned, so the trivial rows show indented
            rows = [{**r, "candidate": str(r["candidate"]).ljust(width)} for r in rows]
        notes = "".join(f"\n{line}" for res in self.results.values() for line in res.notes())  # missing, CI coverage
        if self.baselines:
            draws = len(next(iter(next(iter(self.baselines.values()))["random"].values())).values)
            from ..evaluation.baselines import TRIVIAL_NOTE_AGREEMENT

            notes += "\n" + _wrapped(TRIVIAL_NOTE_AGREEMENT.format(draws=draws))
        notes += "".join(f"\n{_wrapped('warning: ' + w)}" for w in self.warnings)
        return (_wrapped(f"reference: {self.reference} ({s.get('reference_path')}; missing={missing}, "
                         f"clip={s['clip'] or 'none'})") + "\n" + table(pd.DataFrame(rows)) + notes
                + "\n\n" + "\n".join(_wrapped(line) for line in AGREEMENT_LEGEND))

    @property
    def warnings(self) -> list[str]:
        """A candidate that gives every compared pair one label (after any clip): κ is 0 by construction."""
        from ..evaluation.baselines import single_label_warning

        return [single_label_warning(name, int(res.confusion.columns[0]), "agreement")
                for name, res in self.results.items() if len(res.confusion.columns) == 1]


@dataclass(frozen=True, eq=False)
class FillReport(Result):
    calibration: Any      # calibration.Calibration
    filled: Any           # calibration.FillResult
    scenarios: Any        # calibration.ScenarioReport
    validation: Any       # calibration.ValidationReport | None
    options: Mapping[str, Any]
    paths: Mapping[str, Path] = field(default_factory=dict)  # qrels and sources, once written
    validate: float | None = None  # the share of human labels hidden for the validation, if any
    settings: Any = None  # FillSettings

    @property
    def qrels(self):
        return self.filled.qrels

    def _json(self) -> dict:
        f = self.filled
        out = {"calibration": self.calibration.to_json(),
               "filled": {"path": _str(self.paths.get("qrels")), "sources": _str(self.paths.get("sources")),
                          "n_human": f.n_human, "n_filled": f.n_filled, "n_unfilled": f.n_unfilled,
                          "weak_calibration": list(f.problems)},
               "scenarios": self.scenarios.to_json(), "settings": dict(self.options)}
        if self.validation is not None:
            out["validation"] = self.validation.to_json()
        return out

    def to_frame(self) -> pd.DataFrame:
        """The mixed qrels with each label's source (human or llm-calibrated) and LLM grade."""
        return self.filled.sources

    def format(self) -> str:
        k, f, rep, val = self.options["k"], self.filled, self.scenarios, self.validation
        written = f" → {self.paths['qrels']} (sources: {self.paths['sources']})" if self.paths else ""
        weak = ([f"WARNING: filled with a calibration that cannot calibrate (--allow-weak-calibration); the "
                 f"'LLM fills gaps' ranking is an artefact of the fill, not a result:"] +
                [f"  - {p}" for p in f.problems] + [""]) if f.problems else []
        lines = [*weak, "calibration (LLM grade → human scale):", self.calibration.to_frame().to_string(),
                 "\n" + _wrapped(f"{f.n_human} human labels + {f.n_filled} calibrated LLM labels "
                                 f"({f.n_unfilled} top-{k} items left unjudged by both){written}"),
                 f"\naverage Judged@{k} over systems:", rep.judged.round(4).to_string()]
        for m, tau in rep.tau.items():
            lines += [f"\nKendall τ-b between scenario rankings on {m}:", tau.round(3).to_string()]
        lines += ["\n" + _wrapped(f"warning: {w}") for w in rep.warnings]
        note = (rep.tie_sensitivity or {}).get("note")
        if note:
            lines.append("\n" + _wrapped(f"{note} (under the human labels)"))
        if val is not None:
            lines.append(f"\nvalidation: hid {val.n_hidden} human labels ({self.validate:.0%}), "
                         f"LLM covered {val.n_hidden_filled}")
            if val.agreement:
                a = val.agreement
                lines.append(f"  filled vs hidden human: κ {a['cohen_kappa']:.3f}, "
                             f"α ordinal {a['krippendorff_alpha_ordinal']:.3f}, "
                             f"pairwise agree {a['pairwise']['agree']:.3f}")
            lines += [f"  τ vs all human labels on {m}: without fill {val.tau_without_fill[m]:.3f}, "
                      f"with fill {val.tau_with_fill[m]:.3f}" for m in val.tau_with_fill]
        return "\n".join(lines)


@dataclass(frozen=True, eq=False)
class JudgeReport(Result):
    result: Any  # judging.JudgeResult
    paths: Mapping[str, Path] = field(default_factory=dict)  # what was written (qrels, judgments, summary)
    settings: Any = None  # JudgeCommandSettings

    def qrels(self):
        """Integer labels of the judged pairs (failed pairs absent), or None when none was judged."""
        return self.result.qrels()

    def write(self, qrels_path, **paths):
        return self.result.write(qrels_path, **paths)

    def _json(self) -> dict:
        return {"summary": self.result.summary.as_dict(), "provenance": dict(self.result.provenance),
                "paths": {k: str(v) for k, v in self.paths.items()}}

    def to_frame(self) -> pd.DataFrame:
        """One row per judged pair: label (None when it failed), status, reason, cache hit."""
        return pd.DataFrame([{"qid": j.qid, "docid": j.docid, "label": j.label, "status": j.status,
                              "reason": j.reason, "from_cache": j.from_cache} for j in self.result.judgments],
                            columns=["qid", "docid", "label", "status", "reason", "from_cache"])

    def format(self) -> str:
        return self.result.summary.format()


@dataclass(frozen=True, eq=False)
class TrainReport(Result):
    results: Sequence[Any]  # systems.TrainResult, one per system
    settings: Any = None  # TrainSettings

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def runs(self) -> dict:
        """The trained systems' runs, read back from disk: system name → Run."""
        from ..data.trec import read_run

        return {r.system: read_run(r.run_path, r.system) for r in self.results if r.ok}

    def _json(self) -> list:
        return [{**r.__dict__, "run_path": str(r.run_path) if r.run_path else None} for r in self.results]

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.to_json())

    def format(self) -> str:
        from ..systems import results_table

        return results_table(list(self.results))


@dataclass(frozen=True, eq=False)
class TiesReport(Result):
    result: Any  # ties.TieAudit
    sampled_candidates: Mapping[str, Any] | None = None  # the protocol's record, when it was audited
    settings: Any = None  # TiesSettings

    def _json(self) -> dict:
        data = self.result.as_dict()
        if self.sampled_candidates is not None:
            data["sampled_candidates"] = dict(self.sampled_candidates)
        return data

    def to_frame(self) -> pd.DataFrame:
        """One row per run: its prevalence and measure figures as flat columns."""
        return pd.json_normalize([{"run": name, **entry} for name, entry in self.to_json()["runs"].items()])

    def format(self) -> str:
        text = self.result.format()
        if self.sampled_candidates is not None:
            text = self.sampled_candidates["description"] + "\n\n" + text
        return text


@dataclass(frozen=True, eq=False)
class AblateReport(Result):
    experiment: Any             # ablate.Experiment
    rows: Sequence[Any]         # ablate.VariantRow
    dry_run: bool = False
    paths: Mapping[str, Path] = field(default_factory=dict)
    settings: Any = None  # AblateSettings

    def _json(self) -> dict:
        return {"rows": self.to_frame().to_dict(orient="records"), "dry_run": self.dry_run,
                "paths": {k: str(v) for k, v in self.paths.items()}}

    def to_frame(self) -> pd.DataFrame:
        from ..experiments.ablate import rows_frame

        return rows_frame(self.rows)

    def format(self) -> str:
        from ..experiments.ablate import coverage_notes, terminal_table, trivial_lines

        table = terminal_table(self.rows, self.dry_run)
        if self.dry_run:
            return "dry run: nothing was called\n" + table
        return table + "".join(f"\n{line}" for line in coverage_notes(self.rows)) + "".join(
            f"\n{line}" for line in trivial_lines(self.rows, self.experiment))


def _str(path) -> str | None:
    return None if path is None else str(path)
