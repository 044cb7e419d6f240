"""``recjudge judge``: judge the pairs of runs (or a pool of them) into qrels."""

from __future__ import annotations

import argparse
import sys

from ..api.judge_settings import JudgeCommandSettings
from .options import add_settings, progress, settings_from

INCOMPLETE_EXIT = 4  # outputs written, but some selected pairs have no label (failures or budget)


def register(sub) -> None:
    p = sub.add_parser(
        "judge", help="judge runs' (user, item) pairs with an LLM or an offline baseline into qrels",
        description="Ask an LLM (any OpenAI-compatible endpoint) or an offline baseline judge how interested "
                    "each user would be in each selected item, and write TREC qrels, a judgments JSONL with "
                    "provenance and a summary. Answers are cached in SQLite: re-running the same command "
                    "resumes and asks nothing already answered. Pairs whose judgment failed are left out of "
                    f"the qrels (never labelled 0); the exit status is {INCOMPLETE_EXIT} when any pair is "
                    "missing.")
    add_settings(p, JudgeCommandSettings, run_judge)


def run_judge(args: argparse.Namespace) -> int:
    from ..api import judge_with

    s = settings_from(args, JudgeCommandSettings)
    report = judge_with(s, progress=progress(args))
    result = report.result
    prof = result.provenance.get("profiles", {})
    if prof.get("history_order") == "chronological" and prof.get("users_without_chronology"):
        print(f"note: {prof['users_without_chronology']:,} user(s) have no chronology (their ratings share one "
              "timestamp or have none): their history is shown in the seeded random order "
              "(--history-order random)", file=sys.stderr)
    print(result.summary.format())
    if result.summary.stopped_early:
        print(f"stopped early: {result.summary.stopped_early}. The labels received are written and cached; fix the "
              "cause and re-run the same command to resume", file=sys.stderr)
    if s.dry_run:
        return 0
    paths = dict(report.paths)
    removed = paths.pop("removed_qrels", None)
    if "qrels" not in paths:
        print("no pair was judged: no qrels written"
              + (f"; removed the earlier {removed}, whose labels are not this run's" if removed else ""),
              file=sys.stderr)
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0 if result.summary.judged == result.summary.pairs else INCOMPLETE_EXIT
