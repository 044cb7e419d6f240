"""``recjudge annotate``: people label pairs in a local web page; options from its settings."""

from __future__ import annotations

import argparse

from ..api.annotate import AnnotateSettings
from .options import add_settings, progress, settings_from


def register(sub) -> None:
    p = sub.add_parser(
        "annotate", help="label (user, item) pairs by hand in a local web page, keyboard first, into qrels",
        description="Serve a page on this machine where assessors label the pairs the judge would be asked "
                    "about, shown as the judge's prompt shows them (the user's sampled history with ratings, the "
                    "candidate's fields, the prompt's scale). Every label is appended to the assessor's log and "
                    "synced to disk at once, so a closed tab or a killed server loses nothing and a restart "
                    "resumes; on exit (Ctrl-C) each assessor's qrels are written under DIR/qrels. --export writes "
                    "them without serving, --report summarises the labels.")
    add_settings(p, AnnotateSettings, run)


def run(args: argparse.Namespace) -> int:
    from ..api.annotate import annotate_with

    s = settings_from(args, AnnotateSettings)
    report = annotate_with(s, ready=lambda url: print(f"annotate: open {url}  (Ctrl-C stops and exports)",
                                                      flush=True), progress=progress(args))
    print(report.format())
    for name, path in report.paths.items():
        print(f"qrels of {name}: {path}")
    return 0
