"""What ``recjudge agreement`` returns: each candidate's item-level agreement with one reference, as JSON, a frame or text."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..report.terminal import table
from .agreement import AgreementResult
from .metaeval.text import wrapped as _wrapped

__all__ = ["AgreementReport", "AGREEMENT_LEGEND"]

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
class AgreementReport:
    """Item-level agreement of each candidate with one reference (``results``: name → AgreementResult).

    ``options`` holds the reference's path and the ``missing`` and ``clip`` settings as given; ``protocol``
    the :class:`recjudge.protocol.ProtocolUse` followed, stamped into the JSON."""

    reference: str
    results: Mapping[str, AgreementResult]
    sources: Mapping[str, str]
    options: Mapping[str, Any]
    baselines: Mapping[str, Any] = field(default_factory=dict)  # candidate → trivial judge → statistic → Spread
    protocol: Any = None

    def __getitem__(self, candidate: str) -> AgreementResult:
        return self.results[candidate]

    def to_json(self) -> dict:
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
        if self.protocol is not None and "protocol" not in out:  # a candidate named "protocol" keeps its entry
            out["protocol"] = self.protocol.as_dict()
        return out

    def to_frame(self) -> pd.DataFrame:
        return pd.concat([res.to_frame() for res in self.results.values()], ignore_index=True)

    def format(self) -> str:
        """What ``recjudge agreement`` prints: one row per candidate (and its trivial judges), notes, legend."""
        s = self.options
        rows = [res.summary_row() for res in self.results.values()]
        missing = s["missing"] or "zero up to 1% missing, else refused"
        if self.baselines:
            from .baselines import trivial_agreement_rows

            rows = [r for name, res in self.results.items()
                    for r in [res.summary_row(), *trivial_agreement_rows(name, self.baselines.get(name, {}))]]
            width = max(len(str(r["candidate"])) for r in rows)  # left-aligned, so the trivial rows show indented
            rows = [{**r, "candidate": str(r["candidate"]).ljust(width)} for r in rows]
        notes = "".join(f"\n{line}" for res in self.results.values() for line in res.notes())  # missing, CI coverage
        if self.baselines:
            draws = len(next(iter(next(iter(self.baselines.values()))["random"].values())).values)
            from .baselines import TRIVIAL_NOTE_AGREEMENT

            notes += "\n" + _wrapped(TRIVIAL_NOTE_AGREEMENT.format(draws=draws))
        notes += "".join(f"\n{_wrapped('warning: ' + w)}" for w in self.warnings)
        return (_wrapped(f"reference: {self.reference} ({s.get('reference_path')}; missing={missing}, "
                         f"clip={s['clip'] or 'none'})") + "\n" + table(pd.DataFrame(rows)) + notes
                + "\n\n" + "\n".join(_wrapped(line) for line in AGREEMENT_LEGEND))

    def __str__(self) -> str:
        return self.format()

    @property
    def warnings(self) -> list[str]:
        """A candidate that gives every compared pair one label (after any clip): κ is 0 by construction."""
        from .baselines import single_label_warning

        return [single_label_warning(name, int(res.confusion.columns[0]), "agreement")
                for name, res in self.results.items() if len(res.confusion.columns) == 1]
