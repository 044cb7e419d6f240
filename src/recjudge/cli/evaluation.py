"""``recjudge compare``, ``recjudge agreement`` and ``recjudge evaluate``: flags from their configs, work in the API."""

from __future__ import annotations

from ..api.config import AgreementConfig, CompareConfig, EvaluateConfig


def register(sub) -> None:
    p = sub.add_parser("compare", help="compare system rankings under a reference and candidate qrels",
                       description="Rank systems under the reference labels and under each candidate "
                                   "label set; report Kendall's τ-b (bootstrap CI), weighted τ, τ_AP and "
                                   "rank displacement per measure.")
    CompareConfig.add_arguments(p)
    p.set_defaults(func=run_compare)

    p = sub.add_parser("agreement", help="item-level agreement of candidate labels with reference labels",
                       description="Pairwise agree/tie/disagree (with bootstrap CIs; also the paper's "
                                   "relevant-vs-not pairs on raw candidate labels), Cohen's κ and "
                                   "Krippendorff's α over the pairs the reference judges.")
    AgreementConfig.add_arguments(p)
    p.set_defaults(func=run_agreement)

    p = sub.add_parser("evaluate", help="score and rank systems under one label set")
    EvaluateConfig.add_arguments(p)
    p.set_defaults(func=run_evaluate)


def _print(result, config) -> None:
    print(result.format())
    if config.json:
        print(f"\nJSON: {config.json}")
    if getattr(result, "report", None) is not None:
        print(f"Report: {result.report}")


def run_compare(args) -> int:
    from ..api import compare

    config = CompareConfig.from_args(args)
    _print(compare(config), config)
    return 0


def run_agreement(args) -> int:
    from ..api import agreement

    config = AgreementConfig.from_args(args)
    _print(agreement(config), config)
    return 0


def run_evaluate(args) -> int:
    from ..api import evaluate

    config = EvaluateConfig.from_args(args)
    _print(evaluate(config), config)
    return 0
