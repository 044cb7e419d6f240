"""``recjudge audit``: the LLM judge's own biases — popularity, position in multi-item calls,
self-consistency, prompt injection; the work is :mod:`recjudge.api.audit`'s."""

from __future__ import annotations

import argparse
import sys

from ..api.judge_settings import (
    AuditConsistencySettings,
    AuditInjectionSettings,
    AuditPopularitySettings,
    AuditPositionSettings,
    AuditInjectionScanSettings,
)
from .options import add_settings, progress, settings_from

_ABOUT = ("LLM errors that correlate with system characteristics (overrating popular items, favouring "
          "the first candidate of a call, obeying instructions in item metadata) can distort system "
          "rankings in ways a global tau does not reveal. Each audit reports one such bias.")


def register(sub) -> None:
    p = sub.add_parser("audit", help="audit the LLM judge's biases: popularity, position, consistency, "
                                     "prompt injection", description=_ABOUT)
    kinds = p.add_subparsers(dest="audit", metavar="AUDIT")
    kinds.required = True
    for name, model, helptext, func in (
            ("popularity", AuditPopularitySettings, "residual of calibrated LLM labels against human labels by "
                                                    "item-popularity decile (needs human qrels)", run_popularity),
            ("consistency", AuditConsistencySettings, "kappa / alpha between repeated experiments", run_consistency),
            ("injection-scan", AuditInjectionScanSettings, "items whose metadata reads like an instruction to the judge",
             run_scan),
            ("position", AuditPositionSettings, "the same multi-item calls in a seeded shuffled order, and one item "
                                                "per call: label flip rate and agreement", run_position),
            ("injection", AuditInjectionSettings, "label inflation on a copy of the collection whose items carry an "
                                                  "instruction", run_injection)):
        add_settings(kinds.add_parser(name, help=helptext), model, func)


def _show(args: argparse.Namespace, report) -> int:
    if report.format():
        print(report.format())
    if report.settings.json:
        print(f"json: {report.settings.json}")
    return 0


def run_popularity(args: argparse.Namespace) -> int:
    from ..api.audit import audit_popularity_with

    return _show(args, audit_popularity_with(settings_from(args, AuditPopularitySettings)))


def run_consistency(args: argparse.Namespace) -> int:
    from ..api.audit import audit_consistency_with

    return _show(args, audit_consistency_with(settings_from(args, AuditConsistencySettings)))


def run_scan(args: argparse.Namespace) -> int:
    from ..api.audit import audit_injection_scan_with

    report = audit_injection_scan_with(settings_from(args, AuditInjectionScanSettings))
    if report.format():
        print(report.format())
    print(f"{len(report.result):,} item field(s) read like instructions to the judge", file=sys.stderr)
    if report.settings.json:
        print(f"json: {report.settings.json}")
    return 0


def run_position(args: argparse.Namespace) -> int:
    from ..api.audit import audit_position_with

    return _show(args, audit_position_with(settings_from(args, AuditPositionSettings), progress=progress(args)))


def run_injection(args: argparse.Namespace) -> int:
    from ..api.audit import audit_injection_with

    return _show(args, audit_injection_with(settings_from(args, AuditInjectionSettings), progress=progress(args)))
