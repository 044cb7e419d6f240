"""From runs and label sets to system tables: the measures asked for, one scoring pass, the tie note."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ...data.trec import TIE_POLICIES
from ...errors import ConfigError
from .ranks import MEAN_DECIMALS, SystemTable, system_means

if TYPE_CHECKING:
    from ...data.trec import Run
    from ..measures import Scored

    RunSource = Run | str | os.PathLike  # a run, or a run file read when its turn comes

__all__ = ["named_measures", "missing_user_settings", "COVERAGE_MEASURES", "ranking_measure", "measure_definitions",
           "score_label_sets", "summarize_ties", "system_table"]


_INPUT_WARNING = ("tie policy 'input': equal scores are ordered by file order; a list written relevant-first "
                  "then wins every tie. Prefer 'trec_eval' (the default) or 'hash'.")


def _check_runs(runs: Mapping, tie_policy: str) -> None:
    if tie_policy not in TIE_POLICIES:
        raise ConfigError(f"unknown tie policy {tie_policy!r}; choose one of: {', '.join(TIE_POLICIES)}")
    if not runs:
        raise ConfigError("no runs given; pass run files or a folder of runs")


def named_measures(measures: Sequence[str] | str | None) -> dict[str, str]:
    """User spelling → ir-measures key. Output keeps the user's spelling (``Compat(p=0.95)``, which
    ir-measures would print as ``Compat`` since 0.95 is its default); a trec_eval name is named in
    ir-measures spelling (``ndcg_cut_10`` → ``nDCG@10``)."""
    from ..measures import DEFAULT_MEASURES, measure_key, measure_names, parse_measures, split_top_level

    if measures is None:
        measures = DEFAULT_MEASURES
    items = split_top_level(measures) if isinstance(measures, str) else [str(m).strip() for m in measures]
    parsed = parse_measures(items)
    return {name.replace(" ", ""): measure_key(m) for name, m in zip(measure_names(items), parsed)}


def missing_user_settings(names) -> dict:
    """The settings saying how a user without a score counts: 0, except for measures whose mean
    leaves such users out (CompatHM, as its script), listed when there are any."""
    left_out = {n: "users the run does not rank, or without a relevant label, are left out of the mean"
                for n in names if n.replace(" ", "").startswith("CompatHM")}
    return {"missing_user_score": 0.0, **({"missing_user_exceptions": left_out} if left_out else {})}


# measures of how much of a ranking is judged, not of how good it is
COVERAGE_MEASURES = ("Judged",)


def ranking_measure(names: Sequence[str]) -> tuple[str, str]:
    """The measure systems are ranked by: the first that is not a coverage measure (Judged@k says how
    much of a ranking is labelled, not how good it is), and a note saying so."""
    from ..measures import measure_key

    names = list(names)
    effective = [n for n in names if measure_key(n).split("@")[0].split("(")[0] not in COVERAGE_MEASURES]
    if effective:
        skipped = names[:names.index(effective[0])]
        note = "the first effectiveness measure" + (
            f"; {', '.join(skipped)} {'measures' if len(skipped) == 1 else 'measure'} coverage, not effectiveness"
            if skipped else "")
        return effective[0], note
    return names[0], (f"{names[0]} measures coverage (how much of each ranking is judged), not effectiveness: "
                      "no effectiveness measure was given")


def measure_definitions(names) -> dict[str, str]:
    """Each measure's definition in words (gain function, variant), as reports and JSON state it."""
    from ..measures import describe_measure

    return {name: describe_measure(name) for name in names}


def score_label_sets(runs: Mapping[str, RunSource], label_sets: Mapping, measures: Mapping[str, str], tie_policy: str,
           seed: int, tie_note: float = 1.0):
    """Every run scored under every label set in one pass over the runs, one run in memory at a time
    (:func:`recjudge.evaluation.measures.score_runs`); the tied-user shares are taken at k = 100.
    Returns the scores and, unless ``tie_note`` is 1 (off), the tie note's observations."""
    from ..measures import score_runs
    from ..ties.note import TieObserver

    _check_runs(runs, tie_policy)
    _check_tie_note(tie_note)
    # the trivial judges' labels are the candidate's reshuffled: the note is about the label sets themselves
    noted = {k: v for k, v in label_sets.items() if not (isinstance(k, tuple) and k[:1] == ("trivial",))}
    observer = TieObserver(noted, list(measures), tie_policy, seed) if tie_note < 1 else None
    scored = score_runs(runs, label_sets, list(measures), tie_policy, seed, k=100, observe=observer)
    if tie_policy == "input":  # score_runs keeps each run's own warning quiet: said once here
        warnings.warn(_INPUT_WARNING, stacklevel=3)
    return scored, observer


def _check_tie_note(value: float) -> None:
    if not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
        raise ConfigError(f"tie_note must be a share in [0, 1] (1 turns the tie note off), not {value!r}")


def summarize_ties(observer, tables: Mapping, names: Mapping[str, str], main, tie_note: float,
                     pairs: Mapping | None = None, label_names: Mapping | None = None) -> dict:
    """The tie note (:mod:`recjudge.evaluation.ties.note`) from the tables' means under the policy."""
    from ..ties.note import summarize

    means = {label: {k: system_means(t.matrices[name]).to_dict() for name, k in names.items()}
             for label, t in tables.items()}
    return summarize(observer, means, names, main, tie_note, pairs, MEAN_DECIMALS, label_names)


def system_table(label_set: str, scored: Scored, key, measures: Mapping[str, str], unranked: str | None = None
           ) -> SystemTable:
    """The matrices of label set ``key`` in ``scored`` under the user's measure names. ``unranked``
    is the error when no run ranks any of the label set's users (every measure would be 0)."""
    if not any(scored.users_ranked[key].values()):
        raise ConfigError(unranked or f"no run ranks any user that {label_set!r} judges: every measure would be 0; "
                          "check that runs and qrels use the same user ids")
    mats = scored.matrices[key]
    return SystemTable(label_set, {name: mats[k] for name, k in measures.items()})
