"""``recjudge ties``: tie prevalence, every measure under every tie treatment, permutation test."""

from __future__ import annotations

import argparse

from ..api.settings import TiesSettings
from .options import add_settings, settings_from

DESCRIPTION = """\
Audit tie handling in the runs of --runs. Prints, per run, how many users have exactly equal
scores (overall, reaching / crossing / inside the top k; on a relevant item as a share of the
users the qrels judge, column judged) and, with --qrels, each measure under input-order
tie-breaking (a stable sort: the run file's line order), the disclosed hash policy, the mean
and sd over many hash seeds, and the exact expectation under a uniformly random order within
tie blocks (Monte Carlo with a CI for measures without a closed form, e.g. Compat, Bpref). The
permutation test shuffles each user's rows and reports the largest change of each measure: 0
for a row-order-invariant evaluator. Means are over the qrels' users; a user the run lacks
scores 0.

--sampled-candidates N audits the sampled-candidate protocol instead (the tie paper's setting):
--qrels holds each user's one held-out positive, and each user's list is that positive plus N
negatives sampled (seeded by --seed and the user) from a catalogue, written relevant-first. Each
run of --runs scores the candidates (items it does not rank tie below its lowest score); without
runs every candidate scores 0. The catalogue is --catalogue (one item id per line), the items of
--collection, or every item the runs and the qrels name. Under input order the relevant item
wins every tie."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ties", help="audit tie handling: prevalence, metrics per tie treatment, permutation test",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_settings(p, TiesSettings, run)


def run(args: argparse.Namespace) -> int:
    from ..api import ties_with

    print(ties_with(settings_from(args, TiesSettings)).format())
    return 0
