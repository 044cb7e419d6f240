"""``compare``: rank systems under the reference and each candidate label set, and compare the rankings."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ...data.trec import Qrels
from ...errors import ConfigError
from ..intervals import DEFAULT_TAU_METHOD
from .comparison import CompareResult, RankAgreement, UserOverlap
from .kendall import BootstrapWeights, check_ci_method
from .rank_agreement import rank_agreement
from .ranks import SystemTable
from .scoring import (
    measure_definitions,
    missing_user_settings,
    named_measures,
    score_label_sets,
    summarize_ties,
    system_table,
)

if TYPE_CHECKING:
    from ...data.trec import Run
    from ..measures import Scored

    RunSource = Run | str | os.PathLike  # a run, or a run file read when its turn comes

__all__ = ["compare", "user_overlap", "QUERY_SETS"]

QUERY_SETS = ("own", "shared")


def _setting(spelled: Callable[[str], str], name: str, value: str) -> str:
    """``name`` set to ``value`` as the caller would write it: ``--queries own``, ``queries='own'``."""
    flag = spelled(name)
    if flag.endswith("="):
        return f"{flag}{value!r}"
    if flag.startswith("key "):
        return f'{name} = "{value}"'
    return f"{flag} {value}"


def user_overlap(reference: Qrels, candidates: Mapping[str, Qrels], queries: str | None = None,
                 spelled: Callable[[str], str] | None = None) -> dict[str, UserOverlap]:
    """Per candidate: the users it and the reference judge, and what τ compares under ``queries``.

    Refused (ConfigError) where a candidate shares no user with the reference, unless ``queries`` is
    ``"own"`` given explicitly (None: the default, read as "own"): τ then compares a ranking over one
    set of users with a ranking over another, which says how two user samples agree, not how two
    judges do. ``"shared"`` with no user in common leaves nothing to compare and is refused always.
    """
    spelled = spelled or _flag
    own, shared = _setting(spelled, "queries", "own"), _setting(spelled, "queries", "shared")
    ref_users = set(reference.qids)
    out: dict[str, UserOverlap] = {}
    for key, qrels in candidates.items():
        cand_users = set(qrels.qids)
        r, c, b = len(ref_users), len(cand_users), len(ref_users & cand_users)
        counts = f"reference judges {r:,} users, {key} judges {c:,}, both {b:,}"
        if ref_users == cand_users:
            note = ""
        elif b == 0 and queries == "shared":
            raise ConfigError(f"reference {reference.name!r} ({r:,} users) and candidate {key!r} ({c:,} users) "
                              f"judge no user in common, so {shared} leaves no user to compare; {own} compares "
                              "each label set's system ranking on its own users instead")
        elif b == 0 and queries is None:
            raise ConfigError(
                f"reference {reference.name!r} and candidate {key!r} share no user ({counts}): τ could only compare "
                "the systems ranked over one set of users with the systems ranked over another, which says whether "
                f"two samples of users rank the systems alike, not whether {key} judges as the reference does. "
                f"{own} compares each label set's system ranking on its own users (how SynDL's published figure is "
                "computed): give it to accept that τ, or give label sets that judge the same users (if these should, "
                "check that both use the same user ids)")
        elif b == 0:
            note = (f"{counts}: with {own}, τ compares the reference's system ranking over its {r:,} users with "
                    f"{key}'s over {c:,} other users — two samples of users, not two judges of the same users")
        elif queries == "shared":
            note = f"{counts}: with {shared}, both rankings are over the {b:,} users both judge"
        else:
            note = (f"{counts}: each ranking is over its own users ({own}), so τ compares rankings over partly "
                    f"different users; {shared} compares them over the {b:,} both judge")
        out[key] = UserOverlap(r, c, b, note)
    return out


def compare(runs: Mapping[str, RunSource], reference: Qrels, candidates: Sequence[Qrels] | Mapping[str, Qrels],
            measures: Sequence[str] | str | None = None, queries: str | None = None, tie_policy: str = "trec_eval",
            seed: int = 0, bootstrap: int = 1000, export_ties: Mapping[str, dict] | None = None,
            bootstrap_seed: int | None = None, ci_method: str = DEFAULT_TAU_METHOD,
            sources: Mapping[str, str] | None = None, spelled: Callable[[str], str] | None = None,
            tie_note: float = 1.0, baselines: int = 0) -> CompareResult:
    """Rank systems under the reference and each candidate label set and compare the rankings.

    ``seed`` drives the hash tie policy and, unless ``bootstrap_seed`` is given, the bootstrap;
    a separate ``bootstrap_seed`` varies the CIs without changing any score or rank.
    ``sources`` (label set name → path it was read from) is recorded in the settings. ``runs`` maps
    a name to a Run or to a run file, read one at a time as in :func:`evaluate`.

    ``queries`` None counts users as ``"own"`` but refuses a candidate that shares no user with the
    reference: τ would then compare two rankings over different users, which only an explicit
    ``"own"`` accepts (:func:`user_overlap`). ``spelled`` (a setting's name → how the caller wrote it,
    e.g. ``--queries``) words that refusal; default: the command line's. ``tie_note`` as in
    :func:`evaluate`: τ is recomputed from the means under each other tie treatment. ``baselines`` > 0
    also scores each candidate's trivial judges (:mod:`recjudge.evaluation.baselines`: constant,
    popularity and that many random draws, seeded by ``seed``) in the same pass and gives their τ
    and weighted τ against the same reference table as the candidate's.
    """
    spelled = spelled or _flag
    cand_map = _candidate_map(candidates)
    _check_compare(runs, cand_map, queries, bootstrap, ci_method, spelled)
    boot_seed = seed if bootstrap_seed is None else bootstrap_seed
    names = named_measures(measures)
    users = user_overlap(reference, cand_map, queries, spelled)  # refused here, before any run is read
    explicit, queries = queries is not None, queries or "own"
    label_sets, shared = _label_sets(reference, cand_map, queries)
    trivial = _trivial_label_sets(cand_map, baselines, seed)
    from ..measures import SamePairs

    for (key, judge, r), qrels in trivial.items():  # the candidate's judgments under other labels
        label_sets[("trivial", key, judge, r)] = SamePairs(qrels, ("candidate", key))
    scored, observer = score_label_sets(runs, label_sets, names, tie_policy, seed, tie_note)
    ref_table = system_table(reference.name, scored, ("reference",), names)
    ref_tables, cand_tables = _tables(reference, cand_map, scored, names, shared, ref_table)
    agreement: dict[str, dict[str, RankAgreement]] = {}
    for key in cand_map:
        # every measure of a label set is over the same users: one set of resamples serves them all
        weights = BootstrapWeights.over(ref_tables[key], cand_tables[key], boot_seed, bootstrap)
        agreement[key] = {
            m: rank_agreement(m, ref_tables[key].matrices[m], cand_tables[key].matrices[m], bootstrap, boot_seed,
                              ci_method=ci_method, label=f"candidate {key!r}", weights=weights,
                              reference=f"reference {reference.name!r}")
            for m in names
        }
    ties = _compare_ties(observer, reference.name, ref_table, ref_tables, cand_tables, names, tie_note, queries)
    settings = _settings(names, queries, explicit, tie_policy, seed, bootstrap, boot_seed, ci_method, reference,
                         cand_map, export_ties, sources, baselines)
    by_trivial = _trivial_taus(trivial, scored, ref_tables, names)
    return CompareResult(ref_table, cand_tables, agreement, settings, scored.tied_user_share, ref_tables, users,
                         tie_sensitivity=ties, baselines=by_trivial,
                         warnings=_single_label_warnings(reference, cand_map))


def _settings(names: Mapping[str, str], queries: str, explicit: bool, tie_policy: str, seed: int, bootstrap: int,
              boot_seed: int, ci_method: str, reference: Qrels, cand_map: Mapping[str, Qrels],
              export_ties: Mapping[str, dict] | None, sources: Mapping[str, str] | None, baselines: int) -> dict:
    """The settings a compare result records (and its JSON shows)."""
    settings = {
        "measures": list(names),
        "measure_definitions": measure_definitions(names),
        "queries": queries,
        "queries_given": explicit,
        "tie_policy": tie_policy,
        "seed": seed,
        "bootstrap": bootstrap,
        "bootstrap_seed": boot_seed,
        "ci_method": ci_method,
        "ci_level": 0.95,
        "reference": reference.name,
        "candidates": list(cand_map),
        **missing_user_settings(names),
        "rank_order": "mean score descending (rounded to 12 decimals); equal means share the average rank",
        "export_ties": dict(export_ties or {}),
    }
    if sources is not None:
        settings["paths"] = {name: str(path) for name, path in sources.items()}
    if baselines:
        settings["baselines"] = {"random_draws": baselines, "seed": seed}
    return settings


def _flag(name: str) -> str:
    """How the command line spells setting ``name``."""
    return "--" + name.replace("_", "-")


def _candidate_map(candidates: Sequence[Qrels] | Mapping[str, Qrels]) -> dict[str, Qrels]:
    """Candidates by name; a name given twice gets a prime (``llm'``)."""
    if isinstance(candidates, Mapping):
        return dict(candidates)
    cand_map: dict[str, Qrels] = {}
    for q in candidates:
        key = q.name
        while key in cand_map:
            key += "'"
        cand_map[key] = q
    return cand_map


def _check_compare(runs: Mapping, cand_map: Mapping, queries: str | None, bootstrap: int, ci_method: str,
                   spelled: Callable[[str], str]) -> None:
    """Refuse what compare cannot do, before any file is read."""
    if queries is not None and queries not in QUERY_SETS:
        raise ConfigError(f"{spelled('queries')} must be one of {', '.join(QUERY_SETS)}, not {queries!r}")
    if not cand_map:
        raise ConfigError("no candidate qrels given; pass --candidate QRELS at least once")
    if len(runs) < 2:
        raise ConfigError(f"comparing system rankings needs at least 2 runs, got {len(runs)}")
    if bootstrap < 0:
        raise ConfigError(f"--bootstrap must be 0 (no CI) or a positive number of resamples, not {bootstrap}")
    check_ci_method(ci_method)


def _label_sets(reference: Qrels, cand_map: Mapping[str, Qrels], queries: str
                ) -> tuple[dict[tuple, Qrels | tuple], dict[str, list[str]]]:
    """Every table's label set, so that one pass over the runs scores them all: ("reference",) over
    the reference's users; per candidate, ("candidate", key) and, under "shared", ("shared", key)
    for the reference over the users both judge (listed in the second value)."""
    label_sets: dict[tuple, Qrels | tuple] = {("reference",): reference}
    shared: dict[str, list[str]] = {}
    ref_users = set(reference.qids)
    for key, qrels in cand_map.items():
        if queries == "shared":
            shared[key] = sorted(ref_users & set(qrels.qids))
            label_sets[("shared", key)] = (reference, shared[key])
            label_sets[("candidate", key)] = (qrels, shared[key])
        else:
            label_sets[("candidate", key)] = qrels
    return label_sets, shared


def _tables(reference: Qrels, cand_map: Mapping[str, Qrels], scored: Scored, names: Mapping[str, str],
            shared: Mapping[str, list[str]], ref_table: SystemTable
            ) -> tuple[dict[str, SystemTable], dict[str, SystemTable]]:
    """Per candidate: the reference table it is compared with, and its own."""
    cand_tables: dict[str, SystemTable] = {}
    ref_tables: dict[str, SystemTable] = {}
    for key in cand_map:
        if key in shared:
            unranked = (f"no run ranks any of the {len(shared[key])} users that reference {reference.name!r} and "
                        f"candidate {key!r} both judge: every measure would be 0; check that runs and qrels use "
                        "the same user ids, or use --queries own")
            ref_t = system_table(reference.name, scored, ("shared", key), names, unranked)
            cand_t = system_table(key, scored, ("candidate", key), names, unranked)
        else:
            ref_t = ref_table
            cand_t = system_table(key, scored, ("candidate", key), names)
        cand_tables[key] = cand_t
        ref_tables[key] = ref_t
    return ref_tables, cand_tables


def _compare_ties(observer, reference: str, ref_table: SystemTable, ref_tables: Mapping[str, SystemTable],
                  cand_tables: Mapping[str, SystemTable], names: Mapping[str, str], tie_note: float,
                  queries: str) -> dict:
    """The tie note over every table compare made, each candidate paired with its reference table."""
    tables = {("reference",): ref_table}
    pairs = {}
    for key in cand_tables:
        tables[("candidate", key)] = cand_tables[key]
        if queries == "shared":
            tables[("shared", key)] = ref_tables[key]
        pairs[key] = (("shared", key) if queries == "shared" else ("reference",), ("candidate", key))
    label_names = {lb: reference if lb[0] == "reference" else f"{lb[0]} {lb[1]}" for lb in tables}
    return summarize_ties(observer, tables, names, ("reference",), tie_note, pairs, label_names)


def _trivial_label_sets(candidates: Mapping[str, Qrels], draws: int, seed: int) -> dict[tuple, Qrels]:
    """(candidate, judge, draw) → the trivial judge's labels on the candidate's pairs (none for 0 draws)."""
    if draws <= 0:
        return {}
    from ..baselines import trivial_judges

    return {(key, judge, r): q for key, qrels in candidates.items()
            for judge, sets in trivial_judges(qrels, draws, seed).items() for r, q in enumerate(sets)}


def _trivial_taus(trivial: Mapping[tuple, Qrels], scored: Scored, ref_tables: Mapping[str, SystemTable],
                  names: Mapping[str, str]) -> dict:
    """candidate → measure → judge → {kendall_tau, weighted_tau} as Spreads over the draws, each τ from
    the same function and reference table as the candidate's own."""
    from ..baselines import spread

    values: dict = {}
    for (key, judge, r) in trivial:
        label = ("trivial", key, judge, r)
        mats = scored.matrices[label]  # its users are the candidate's: ranked, or the candidate was refused
        for m, k in names.items():
            with warnings.catch_warnings():
                # a trivial judge may give no user a mean (CompatHM without a relevant label): τ is NaN, said
                # as "–"; numpy's empty-slice warning would read as a fault of the judge's own numbers
                warnings.simplefilter("ignore", RuntimeWarning)
                ra = rank_agreement(m, ref_tables[key].matrices[m], mats[k], 0, 0)
            cell = values.setdefault(key, {}).setdefault(m, {}).setdefault(judge, {"kendall_tau": [], "weighted_tau": []})
            cell["kendall_tau"].append(ra.kendall_tau)
            cell["weighted_tau"].append(ra.weighted_tau)
    return {key: {m: {judge: {k: spread(v) for k, v in st.items()} for judge, st in by_judge.items()}
                  for m, by_judge in by_measure.items()} for key, by_measure in values.items()}


def _single_label_warnings(reference: Qrels, candidates: Mapping[str, Qrels]) -> tuple[str, ...]:
    from ..baselines import single_label, single_label_warning

    out = []
    for name, qrels in {reference.name: reference, **candidates}.items():
        label = single_label(qrels)
        if label is not None:
            out.append(single_label_warning(name, label))
    return tuple(out)
