"""The results of the verbs whose library returns no single record: ``to_json()``, ``to_frame()``, ``format()``.

Thin adapters over the judge's JudgeResult, training's TrainResult list and ablate's rows; each keeps
what it wraps (``.result``, ``.results``, ``.rows``), so nothing is lost. The text of ``format()`` is
what the matching command prints. The evaluation commands return their library's own result, with
the same three methods: ``EvaluationResult`` and ``CompareResult`` (:mod:`recjudge.evaluation.metaeval`),
``AgreementReport`` (:mod:`recjudge.evaluation.agreement_report`), ``FillReport``
(:mod:`recjudge.evaluation.calibration`), ``TieAudit`` (:mod:`recjudge.evaluation.ties`) and
``SettingsComparison`` (:mod:`recjudge.evaluation.settings_comparison`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["Result", "JudgeReport", "TrainReport", "AblateReport"]


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

