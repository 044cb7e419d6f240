"""``recjudge compare``, ``recjudge agreement`` and ``recjudge evaluate``: options from their settings, work in the API."""

from __future__ import annotations

import contextlib
import sys

from ..api.settings import AgreementSettings, CompareSettings, EvaluateSettings
from .options import add_settings, settings_from


def register(sub) -> None:
    p = sub.add_parser("compare", help="compare system rankings under a reference and candidate qrels",
                       description="Rank systems under the reference labels and under each candidate "
                                   "label set; report Kendall's τ-b (with a confidence interval), weighted τ, τ_AP "
                                   "and rank displacement per measure.")
    add_settings(p, CompareSettings, run_compare)

    p = sub.add_parser("agreement", help="item-level agreement of candidate labels with reference labels",
                       description="Pairwise agree/tie/disagree (with CIs; also the paper's relevant-vs-not pairs "
                                   "on raw candidate labels), Cohen's κ and Krippendorff's α over the pairs the "
                                   "reference judges.")
    add_settings(p, AgreementSettings, run_agreement)

    p = sub.add_parser("evaluate", help="score and rank systems under one label set")
    add_settings(p, EvaluateSettings, run_evaluate)


def _print(result, settings) -> None:
    print(result.format())
    if settings.json:
        print(f"\nJSON: {settings.json}")
    if getattr(result, "report_path", None) is not None:
        print(f"Report: {result.report_path}")


def run_compare(args) -> int:
    from ..api import compare_with

    s = settings_from(args, CompareSettings)
    _print(compare_with(s), s)
    return 0


def run_agreement(args) -> int:
    from ..api import agreement_with

    s = settings_from(args, AgreementSettings)
    _print(agreement_with(s), s)
    return 0


def run_evaluate(args) -> int:
    from ..api import evaluate_with

    s = settings_from(args, EvaluateSettings)
    result = evaluate_with(s)
    if s.per_query is not None and str(s.per_query) == "-":  # stdout holds the rows alone: pipe it
        result.to_frame(per_query=True).to_csv(sys.stdout, sep="\t", index=False, lineterminator="\n")
        with contextlib.redirect_stdout(sys.stderr):
            _print(result, s)
        return 0
    _print(result, s)
    if s.per_query is not None:
        print(f"Per-user scores: {s.per_query}")
    return 0
