"""The cells of ``recjudge reproduce penha2025``: one function per target, each computing what the
paper's table or figure shows from the systems' runs, the human qrels and the judge's labels and
setting it beside the published values; plus the release's statistics, the settings that differ
from the paper (with the cells each can move) and the places where the paper contradicts itself."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..data.trec import Qrels
from ..errors import ConfigError
from .ablate import across_experiments
from .reproduce_plan import (
    K_VALUES,
    PROFILE_SIZES,
    STUDY,
    TABLE9_K,
    ReproduceResult,
    ReproduceSettings,
    Cells,
    target_measures,
    pick_measure,
    field_sets,
    protocol_settings,
    samples,
    training_positives,
)

__all__ = ["compute", "paper_contradictions", "restrict"]

LLM_CELLS = "every LLM-label cell (Tables 3, 4, 5, 8, 9; Figures 3-5; significance agreement)"
SYSTEM_CELLS = "every system-ranking cell (Tables 1, 4, 5, 9; Figures 2 and 5; significance agreement)"
# the systems Sections 4 and 5.2 name, and the shift each is named for: NCEPLRec drops under the
# Cranfield labels, SimpleX and DGCF gain, MultiVAE "shifts by up to 30 positions"
NAMED = {"NCEPLRec": "drop", "SimpleX": "gain", "DGCF": "gain", "MultiVAE": "either"}
SCENARIOS = ("Human-only", "LLM fills gaps", "Full LLM")


def restrict(qrels: Qrels, pairs: Sequence, name: str | None = None) -> Qrels:
    """``qrels`` cut down to the (qid, docid) ``pairs``."""
    wanted = pd.DataFrame(list(pairs), columns=["qid", "docid"]).astype(str)
    return Qrels.from_frame(qrels.frame.merge(wanted, on=["qid", "docid"]), name or qrels.name)


def _mean(values: Sequence[float]) -> float:
    """The mean of the finite values (NaN when none: a τ over constant scores is undefined)."""
    return across_experiments(values).mean


def _ci_note(values: Sequence[float], bounds: tuple[float, float] = (-1.0, 1.0), scale: float = 1.0) -> str:
    lo, hi = across_experiments(values, bounds=bounds).ci
    if math.isnan(lo):
        return f"{len(values)} experiment" + ("s" if len(values) != 1 else "")
    unit = "%" if scale == 100.0 else ""
    return f"mean of {len(values)} experiments, 95% CI [{lo * scale:.4f}{unit}, {hi * scale:.4f}{unit}]"


def _add_mean(cells: Cells, target: str, row: str, column: str, values: Sequence[float],
              published_as: tuple[str, str, str] | None = None, note: str = "") -> None:
    """A cell that is a mean over experiments, its CI stated on the published cell's scale (percent or share)."""
    cell = cells.published.cell(*(published_as or (target, row, column)))
    percent = cell is not None and cell.unit == "percent"
    # the interval is built on the shares' own range, then shown on the cell's scale (scaling first
    # put the values outside the τ-sized default bounds and lost the interval)
    text = _ci_note(values, bounds=(0.0, 1.0), scale=100.0) if percent else _ci_note(values)
    cells.add(target, row, column, _mean(values), text + (f"; {note}" if note else ""), published_as)


def _flag_contradicted(frame: pd.DataFrame, published, contradictions: Sequence[Mapping]) -> pd.DataFrame:
    """Cells whose published value is one side of a contradiction of the paper say so in their note."""
    marks: dict[str, str] = {}
    for c in contradictions:
        for key in c.get("cells", ()):
            cell = published.cell(*key)
            if cell is not None:
                marks[cell.cite] = f"the paper contradicts this value ({c['where']}: see below)"
    if not marks:
        return frame
    hit = frame.cite.isin(list(marks))
    frame.loc[hit, "note"] = [(f"{n}; " if n else "") + marks[c] for n, c in zip(frame.note[hit], frame.cite[hit])]
    return frame


def _short(measure: str) -> str:
    for name in ("Compat", "nDCG", "Bpref", "Judged"):
        if measure.startswith(name):
            return name
    return measure


def compute(s: ReproduceSettings, collection, human: Qrels, runs: Mapping, run_files: Sequence,
            labels: Mapping[tuple[str, str, int], Qrels | None], published, base, not_applied: Mapping[str, Any],
            plan_rows, stopped: str | None, say: Callable[[str], None],
            historical: tuple[Mapping, Qrels] | None = None) -> ReproduceResult:
    """Every chosen target's cells, figures and extras; a target whose labels are missing is listed
    as not computed (judging stopped) rather than computed from part of them."""
    measures, measure_note = target_measures()
    ranking = [m for m in measures if not m.startswith("Judged")]
    cells = Cells(published)
    figures: dict[str, Any] = {}
    extras: dict[str, Any] = {"not_computed": {}}
    only = set(s.only)
    exps = range(s.experiments)

    def labelled(targets: set[str], keys: Sequence[tuple]) -> list | None:
        """The labels of ``keys``, or None (and each target said not computed) when any is missing."""
        absent = [k for k in keys if labels.get(k) is None]
        if absent:
            for t in sorted(targets):
                extras["not_computed"][t] = (f"judging stopped ({stopped or 'no labels'}) before {len(absent)} of "
                                             f"its {len(keys)} judge jobs finished; run the same command again to "
                                             "resume from the cache")
            return None
        return [labels[k] for k in keys]

    _dataset(s, cells, extras, collection, human, runs, base)
    named: dict[str, str] = {}
    if only & {"table1", "figure2"}:
        if historical is None:
            for t in only & {"table1", "figure2"}:
                extras["not_computed"][t] = "no historical runs and qrels (give --historical-runs and --historical-qrels)"
        else:
            named = _historical(s, cells, figures, extras, runs, run_files, human, historical, ranking)
    base_key = f"K={s.base_k()}"
    if only & {"table4", "table9", "figure5"}:
        base_labels = labelled(only & {"table4", "table9", "figure5"}, [("base", base_key, e) for e in exps])
        defined = None
        if "table9" in only and base_labels is not None:
            defined = labelled({"table9"}, [("prompts", "defined scale", e) for e in exps])
        if base_labels is not None:
            _rankings(s, cells, figures, extras, runs, human, base_labels, defined, ranking, named)
    if "table3" in only:
        rows = field_sets(s, collection)[0]
        got = labelled({"table3"}, [("fields", row, e) for row in rows for e in exps])
        if got is not None:
            by_row = {row: [labels[("fields", row, e)] for e in exps] for row in rows}
            agree = _agreement_rows(s, human, by_row)
            for row, r in agree.items():
                for col in ("agree", "tie", "disagree"):
                    _add_mean(cells, "table3", row, col, r[col])
                cells.add("table3 kappa", row, "Cohen's kappa", _mean(r["kappa"]), _ci_note(r["kappa"]))
            means = {row: _mean(r["agree"]) for row, r in agree.items()}
            if means:
                lo, hi = min(means, key=means.get), max(means, key=means.get)
                cells.add("table3", "lowest row", "agree", means[lo], lo,
                          published_as=("section5.1", "item agreement", "pairwise agreement low"))
                cells.add("table3", "highest row", "agree", means[hi], hi,
                          published_as=("section5.1", "item agreement", "pairwise agreement high"))
            figures["table3"] = {row: {c: _mean(r[c]) for c in ("agree", "tie", "disagree")} for row, r in agree.items()}
    if "table8" in only:
        got = labelled({"table8"}, [("base", base_key, e) for e in exps] + [("prompts", "defined scale", e)
                                                                              for e in exps])
        if got is not None:
            by_row = {"baseline": got[:len(exps)], "defined scale": got[len(exps):]}
            for row, r in _agreement_rows(s, human, by_row).items():
                for col in ("agree", "tie", "disagree"):
                    _add_mean(cells, "table8", row, col, r[col])
    if "figure3" in only:
        keys = [("profiles", f"profile {n}", e) for n in s.profile_sizes for e in exps]
        if labelled({"figure3"}, keys) is not None:
            by_row = {f"profile {n}": [labels[("profiles", f"profile {n}", e)] for e in exps] for n in s.profile_sizes}
            agree = _agreement_rows(s, human, by_row)
            for row, r in agree.items():
                for col in ("agree", "tie", "disagree"):
                    _add_mean(cells, "figure3", row, col, r[col])
            figures["figure3"] = {row: {c: _mean(r[c]) for c in ("agree", "tie", "disagree")} for row, r in agree.items()}
    if "figure4" in only:
        got = labelled({"figure4"}, [("base", base_key, e) for e in exps])
        if got is not None:
            _figure4(s, cells, figures, human, got)
    if "table5" in only:
        got = labelled({"table5"}, [("pool", f"depth {s.depth}", 0)])
        if got is not None:
            _pool(s, cells, figures, extras, runs, human, got[0], ranking, collection)
    differences = _differences(s, base, not_applied, measure_note, runs, run_files, collection, extras)
    extras["contradictions"] = paper_contradictions(published)
    extras["published_context"] = [c.as_dict() for c in published.table("table6")]
    frame = _flag_contradicted(cells.frame(), published, extras["contradictions"])
    return ReproduceResult(frame, figures, extras, tuple(differences), tuple(plan_rows),
                           not extras["not_computed"], stopped, {}, s.as_dict())


# ------------------------------------------------------------------------------ the release

def _profile_tokens(collection, base, human: Qrels, users: Sequence[str]) -> float | None:
    """Estimated input tokens of one prompt showing each of ``users``' whole profile with every field
    (no call: the judge's dry run over one judged item each); their mean."""
    from ..judging import Pair, judge_pairs

    first = human.frame.drop_duplicates("qid").set_index("qid").docid
    pairs = [Pair(u, str(first[u])) for u in users if u in first.index]
    if not pairs:
        return None
    counts = collection.interactions.user.value_counts()
    config = base.replace(fields="all", profile_size=int(max(1, counts.reindex(users).max())), dry_run=True,
                          context_tokens=2**62)
    summary = judge_pairs(pairs, collection, config, name="profile-tokens").summary
    return summary.estimated_input_tokens / max(1, summary.planned_calls)


def _dataset(s: ReproduceSettings, cells: Cells, extras, collection, human: Qrels, runs: Mapping, base) -> None:
    """The release against Section 3's and 5.1's statistics, and whether every system ranks every
    participant (a participant a run leaves out scores 0 for that run in every measure)."""
    judged = human.frame.groupby("qid").size()
    participants = set(judged.index)
    extras["participants"] = len(participants)
    inter = collection.interactions
    profile = inter[inter.user.isin(participants)].user.value_counts()
    cells.add("dataset", "ML-32M-ext", "participants", len(participants), "users the human qrels judge",
              published_as=("section3", "ML-32M-ext", "participants"))
    cells.add("dataset", "ML-32M-ext", "judgments", len(human.frame), "rows of the human qrels",
              published_as=("section3", "ML-32M-ext", "judgments"))
    cells.add("dataset", "ML-32M-ext", "fewest judged movies of a participant", float(judged.min()),
              published_as=("section3", "ML-32M-ext", "judged movies per participant"))
    cells.add("dataset", "profiles", "mean movies per participant", float(profile.mean()) if len(profile) else None,
              published_as=("section5.1", "profiles", "mean movies per participant"))
    cells.add("dataset", "profiles", "max movies per participant", float(profile.max()) if len(profile) else None,
              published_as=("section5.1", "profiles", "max movies per participant"))
    if len(profile):
        mean_tokens = _profile_tokens(collection, base, human, list(profile.index))
        most = _profile_tokens(collection, base, human, [profile.idxmax()])
        note = "recjudge's prompt with every field, ≈3 characters per token (the margin of OpenAI models), no call"
        cells.add("dataset", "profiles", "mean tokens, full profile, all fields", mean_tokens, note,
                  published_as=("section5.1", "profiles", "mean tokens, full profile, all fields"))
        cells.add("dataset", "profiles", "tokens of the largest profile, all fields", most,
                  f"participant {profile.idxmax()}; {note}",
                  published_as=("section5.1", "profiles", "max tokens, full profile, all fields"))
    ml = inter[~inter.user.isin(participants)]
    note = "" if len(ml) else "no ML-32M ratings in the folder (the release before its make.sh)"
    for column, value in (("ratings", len(ml)), ("users", ml.user.nunique()), ("movies", ml.item.nunique())):
        cells.add("dataset", "ML-32M", column, float(value) if len(ml) else None, note,
                  published_as=("section3", "ML-32M", column))
    if runs:
        missing = {name: sorted(participants - set(run.qids)) for name, run in runs.items()}
        missing = {k: v for k, v in missing.items() if v}
        extras["unranked_participants"] = missing
        cells.add("dataset", "systems", "participants some system does not rank",
                  float(len(set().union(*missing.values()))) if missing else 0.0,
                  "; ".join(f"{k}: {len(v)}" for k, v in sorted(missing.items())) or
                  f"every one of {len(runs)} systems ranks every participant")


# ------------------------------------------------------------------------------ Table 1, Figure 2

def _groups(s: ReproduceSettings, run_files: Sequence, names: Sequence[str]) -> dict[str, str]:
    from ..data.groups import groups_from_sidecars, read_groups

    if s.groups is not None:
        return read_groups(s.groups)
    found = groups_from_sidecars(run_files) if run_files else {}
    return found if found and all(n in found for n in names) else {n: "all systems" for n in names}


def historical_relevance(qrels: Qrels) -> Qrels:
    """The held-out interactions of a train-test split as relevance: each one relevant, label 1 (a
    label ≤ 0, a judged non-relevant item of a thresholded mapping, stays 0). A train-test split
    counts a held-out interaction as a hit whatever its star rating (RecBole, the paper's framework,
    scores it so), and the star ratings are not on the 0-7 interest scale whose gains nDCG@100 uses:
    label 1 has gain 2^1 − 1 = 1, so exponential and linear gain agree."""
    frame = qrels.frame.assign(label=(qrels.frame.label > 0).astype(np.int64))
    return Qrels.from_frame(frame, f"{qrels.name}-held-out")


def _historical(s, cells: Cells, figures, extras, runs, run_files, human, historical, ranking) -> dict[str, str]:
    """Table 1 and Figure 2; returns the system each named family stands for (its largest shift)."""
    from ..evaluation.settings_comparison import compare_settings
    from ..data.groups import group_means
    from ..evaluation.metaeval import evaluate

    hist_runs, hist_qrels = historical
    held_out = historical_relevance(hist_qrels)
    groups = _groups(s, run_files, sorted(runs))
    users = {"historical": len(set(held_out.frame.qid)), "Cranfield": len(set(human.frame.qid))}
    extras["historical_users"] = users["historical"]
    if "table1" in s.only:
        for label, rr, qq in (("historical", hist_runs, held_out), ("Cranfield", runs, human)):
            table = evaluate(rr, qq, ["Judged@100"]).table
            scores = table.scores_frame()
            g = {n: groups.get(n, "all systems") for n in scores.index}
            means = group_means(scores, g, "groups")
            for group, row in means.iterrows():
                value = float(row[table.measures[0]])
                cells.add("table1", str(group), f"Judged@100 {label}", value,
                          f"{int(row['systems'])} systems, mean over {users[label]:,} users")
                cells.add("table1", f"{group} (text)", f"Judged@100 {label}", value, "Section 4 rounds Table 1",
                          published_as=("section4", f"Judged@100 {group}", label))
    ndcg = pick_measure(ranking, "nDCG") or ranking[0]
    cmp = compare_settings(hist_runs, held_out, runs, human, [ndcg])
    r = cmp.measures.loc[ndcg]
    note = f"{ndcg}: historical runs under their held-out interactions vs Cranfield runs under the human qrels"
    cells.add("figure2", "historical vs Cranfield", "Kendall tau", r["kendall_tau"], note,
              published_as=("section4", "historical vs Cranfield", "Kendall tau nDCG@100"))
    cells.add("figure2", "historical vs Cranfield", "p-value", r["kendall_tau_p"], "scipy.stats.kendalltau, two-sided",
              published_as=("section4", "historical vs Cranfield", "p-value"))
    cells.add("figure2", "train-test vs Cranfield", "median |rank displacement|", r["median_abs_rank_shift"],
              f"{ndcg}, over {int(cmp.settings['systems'])} systems",
              published_as=("section5.2", "train-test vs Cranfield", "median |rank displacement|"))
    systems = cmp.systems[ndcg]
    gain = systems["rank_a"] - systems["rank_b"]  # > 0: ranked better under the Cranfield labels
    named: dict[str, str] = {}
    for family, direction in NAMED.items():
        hit = [n for n in systems.index if str(n).startswith(family)]
        if not hit:
            for col in ("rank historical", "rank Cranfield", "rank shift"):
                if published_cell_exists(cells, ("section4", family, col)):
                    cells.add("figure2", family, col, None, f"no {family} system in our grid",
                              published_as=("section4", family, col))
            continue
        shift = {"drop": -gain[hit], "gain": gain[hit], "either": gain[hit].abs()}[direction]
        chosen = str(shift.idxmax())
        named[family] = chosen
        note = f"{chosen}" + (f", the largest {'drop' if direction == 'drop' else 'shift'} of {len(hit)} "
                              f"{family} systems" if len(hit) > 1 else "")
        for col, value in (("rank historical", systems.loc[chosen, "rank_a"]),
                           ("rank Cranfield", systems.loc[chosen, "rank_b"]), ("rank shift", shift[chosen])):
            if published_cell_exists(cells, ("section4", family, col)):
                cells.add("figure2", family, col, float(value), note, published_as=("section4", family, col))
    figures["figure2"] = {"measure": ndcg, "tau": float(r["kendall_tau"]), "p": float(r["kendall_tau_p"]),
                          "ranks": systems[["rank_a", "rank_b"]].rename(columns={"rank_a": "historical",
                                                                                 "rank_b": "Cranfield"})}
    extras["figure2"] = cmp.to_json()
    return named


def published_cell_exists(cells: Cells, key: tuple[str, str, str]) -> bool:
    return cells.published.cell(*key) is not None


# ------------------------------------------------------------------------------ Tables 4, 9, Figure 5

def _rankings(s, cells: Cells, figures, extras, runs, human, base_labels: Sequence[Qrels],
              defined: Sequence[Qrels] | None, ranking, named: Mapping[str, str]) -> None:
    """Table 4 (K items per participant, the protocol's judge), Table 9 (both prompts at K = 100) and
    Figure 5 (ranks at K = 100 on nDCG@100): every label set scored in one pass over the runs, each
    over the participants it labels (all of them), against the complete human qrels."""
    from ..evaluation.metaeval import compare, system_ranks

    if len(runs) < 2:
        for t in set(s.only) & {"table4", "table9", "figure5"}:
            extras["not_computed"][t] = f"ranking systems needs at least 2 runs, got {len(runs)}"
        return
    only = set(s.only)
    ks = sorted(set(s.k_values if "table4" in only else ()) | ({TABLE9_K} if only & {"table9", "figure5"} else set()))
    candidates: dict[str, Qrels] = {}
    for e, llm in enumerate(base_labels):
        for k in ks:
            candidates[f"baseline K={k} e{e + 1}"] = restrict(llm, samples(s, human, k, e))
    for e, llm in enumerate(defined or ()):
        candidates[f"defined scale K={TABLE9_K} e{e + 1}"] = restrict(llm, samples(s, human, TABLE9_K, e))
    cmp = compare(runs, human, candidates, measures=ranking, queries="shared", bootstrap=0, seed=s.seed)

    def per_exp(prefix: str, k: int, measure: str, what: str) -> list[float]:
        return [getattr(cmp.agreement[f"{prefix} K={k} e{e + 1}"][measure], what) for e in range(len(base_labels))]

    if "table4" in only:
        for k in s.k_values:
            for m in ranking:
                _add_mean(cells, "table4", f"K={k}", f"tau {_short(m)}", per_exp("baseline", k, m, "kendall_tau"))
                _add_mean(cells, "table4", f"K={k}", f"wtau {_short(m)}", per_exp("baseline", k, m, "weighted_tau"))
        figures["table4"] = {_short(m): {k: _mean(per_exp("baseline", k, m, "kendall_tau")) for k in s.k_values}
                             for m in ranking}
    if "table9" in only and defined is not None:
        for row, prefix in (("baseline", "baseline"), ("defined scale", "defined scale")):
            for m in ranking:
                _add_mean(cells, "table9", row, f"tau {_short(m)}", per_exp(prefix, TABLE9_K, m, "kendall_tau"))
    if only & {"table4", "figure5"}:
        # Section 5.2's K = 100 numbers: the labels it takes and the nDCG@100 τ it quotes
        ndcg = pick_measure(ranking, "nDCG") or ranking[0]
        n_labels = [len(candidates[f"baseline K={TABLE9_K} e{e + 1}"].frame) for e in range(len(base_labels))]
        if TABLE9_K in ks:
            cells.add("figure5", f"K={TABLE9_K}", "LLM labels", _mean(n_labels), _ci_note(n_labels),
                      published_as=("section5.2", "K=100", "LLM labels"))
            cells.add("figure5", f"K={TABLE9_K}", "share of human labels", _mean(n_labels) / len(human.frame),
                      f"of {len(human.frame):,} human labels",
                      published_as=("section5.2", "K=100", "share of human labels"))
            _add_mean(cells, "figure5", f"K={TABLE9_K}", f"Kendall tau {ndcg}",
                      per_exp("baseline", TABLE9_K, ndcg, "kendall_tau"),
                      published_as=("section5.2", "K=100", "Kendall tau nDCG@100"))
    if "figure5" in only:
        ndcg = pick_measure(ranking, "nDCG") or ranking[0]
        names = [f"baseline K={TABLE9_K} e{e + 1}" for e in range(len(base_labels))]
        llm_scores = pd.concat([cmp.candidates[n].means(ndcg) for n in names], axis=1).mean(axis=1)
        human_ranks = cmp.reference_table(names[0]).ranks(ndcg)
        llm_ranks = system_ranks(llm_scores).reindex(human_ranks.index)
        displacement = (llm_ranks - human_ranks).abs()
        from ..evaluation.metaeval import kendall_tau

        tau = kendall_tau(cmp.reference_table(names[0]).means(ndcg).reindex(llm_scores.index), llm_scores)
        how = (f"{ndcg}, each system's mean over {len(names)} experiment(s) at K = {TABLE9_K}; τ of these means "
               f"{tau:.4f}")
        cells.add("figure5", "LLM vs Cranfield", "median |rank displacement|", float(displacement.median()), how,
                  published_as=("section5.2", "LLM vs Cranfield", "median |rank displacement|"))
        for family in ("SimpleX", "DGCF", "NCEPLRec"):
            system = named.get(family) or _best_of(family, human_ranks)
            why = (f"{system}: the system Figure 2 names" if family in named else
                   f"{system}: the family's best system under the human labels" if system else
                   f"no {family} system in our grid")
            cells.add("figure5", family, "rank LLM", float(llm_ranks[system]) if system else None, why,
                      published_as=("section5.2", family, "rank LLM"))
            if published_cell_exists(cells, ("section4", family, "rank Cranfield")):
                cells.add("figure5", family, "rank Cranfield", float(human_ranks[system]) if system else None, why,
                          published_as=("section4", family, "rank Cranfield"))
        figures["figure5"] = {"measure": ndcg, "tau": tau,
                              "ranks": pd.DataFrame({"human": human_ranks, "LLM": llm_ranks})}


def _best_of(family: str, ranks: pd.Series) -> str | None:
    hit = ranks[[str(n).startswith(family) for n in ranks.index]]
    return None if hit.empty else str(hit.idxmin())


# ------------------------------------------------------------------------------ Tables 3, 8, Figures 3, 4

def _agreement(reference: Qrels, llm: Qrels, bootstrap: int, seed: int):
    """``recjudge agreement`` over the pairs the reference holds (a pair the LLM failed is left out)."""
    from .. import api

    report = api.agreement(reference, [llm], missing="drop", bootstrap=bootstrap, seed=seed)
    return next(iter(report.results.values()))


def _agreement_rows(s, human, by_row: Mapping[str, Sequence[Qrels]]) -> dict[str, dict[str, list[float]]]:
    """Per row: agree / tie / disagree over pairs of one participant's items the human labels 0 and 1-7,
    on the LLM's raw labels (Section 5.1), and κ; one value per experiment, each on that experiment's
    K = ``per_user`` sample."""
    n = max((len(v) for v in by_row.values()), default=0)
    cut = [restrict(human, samples(s, human, s.per_user, e)) for e in range(n)]
    out = {}
    for row, per_exp in by_row.items():
        vals: dict[str, list[float]] = {"agree": [], "tie": [], "disagree": [], "kappa": []}
        for e, llm in enumerate(per_exp):
            ag = _agreement(cut[e], restrict(llm, zip(cut[e].frame.qid, cut[e].frame.docid)), 0, s.seed + e)
            rv = ag.pairwise_relevant_vs_not
            vals["agree"].append(rv.agree)
            vals["tie"].append(rv.tie)
            vals["disagree"].append(rv.disagree)
            vals["kappa"].append(ag.cohen_kappa)
        out[row] = vals
    return out


def _figure4(s, cells: Cells, figures, human, base_labels: Sequence[Qrels]) -> None:
    """Agreement over every pair of distinct human labels, by their distance (Figure 4), K = 50."""
    by_distance: dict[int, dict[str, list[float]]] = {}
    pairs: dict[int, int] = {}
    for e, llm in enumerate(base_labels):
        cut = restrict(human, samples(s, human, s.per_user, e))
        ag = _agreement(cut, restrict(llm, zip(cut.frame.qid, cut.frame.docid)), 0, s.seed + e)
        for d, p in ag.pairwise_by_distance.items():
            slot = by_distance.setdefault(int(d), {"agree": [], "tie": [], "disagree": []})
            for col in slot:
                slot[col].append(getattr(p, col))
            pairs[int(d)] = pairs.get(int(d), 0) + p.n_pairs
    for d in sorted(by_distance):
        for col, values in by_distance[d].items():
            _add_mean(cells, "figure4", f"label distance {d}", col, values, note=f"{pairs[d]:,} pairs in all")
    figures["figure4"] = {f"distance {d}": {c: _mean(v) for c, v in by_distance[d].items()} for d in sorted(by_distance)}


# ------------------------------------------------------------------------------ Table 5

def _pool(s, cells: Cells, figures, extras, runs, human, llm: Qrels, ranking, collection) -> None:
    """Table 5 from the LLM's labels of the systems' depth-100 pool: Human-only, LLM fills gaps (the
    calibration estimated on the pool items humans also judged) and Full LLM (those labels alone)."""
    from ..evaluation.calibration import calibrate, fill_gaps, scenarios, write_filled
    from ..evaluation.metaeval import compare
    from ..evaluation.significance import pairwise_tests, significance_agreement
    from ..judging.bias import item_popularity, popularity_bias

    min_overlap = int(protocol_settings("fill").get("min_overlap", 30))
    compat = pick_measure(ranking, "Compat") or ranking[0]
    ndcg = pick_measure(ranking, "nDCG")
    full = llm.renamed("Full LLM")
    both = human.frame[["qid", "docid", "label"]].merge(llm.frame[["qid", "docid", "label"]], on=["qid", "docid"],
                                                        suffixes=("_human", "_llm"))
    label_sets: dict[str, Qrels] = {"Human-only": human}
    refused, weak = None, ""
    try:
        cal = calibrate(human, llm, min_overlap)
        extras["calibration"] = cal.to_json()
        filled = fill_gaps(human, llm, runs, cal, k=s.depth, seed=s.seed, name="LLM fills gaps",
                           allow_weak=s.allow_weak_calibration)
        if filled.problems:
            weak = "computed although the calibration is weak (--allow-weak-calibration): " + "; ".join(filled.problems)
        # the mixed qrels are kept beside the report (with their .sources.tsv)
        write_filled(filled, s.out / "table5-filled.qrels")
        label_sets["LLM fills gaps"] = filled.qrels
        extras["calibration"] = cal.to_json()
        flagged = [g for g in cal.grades if g.flagged]
        if flagged and not weak:
            weak = ("weak calibration: " + "; ".join(f"LLM grade {g.llm_grade}: {g.note}" for g in flagged))
        if weak:
            extras["calibration_warning"] = weak
    except ConfigError as exc:  # a calibration the evaluation refuses (degenerate, too few pairs)
        refused = f"calibration refused: {exc}"
        extras["calibration_refused"] = refused
    label_sets["Full LLM"] = full
    rep = scenarios(runs, label_sets, k=s.depth, seed=s.seed, measures=[m for m in (compat, ndcg) if m])
    for a in SCENARIOS:
        for b in SCENARIOS:
            if a == b:
                continue
            value = None if a not in label_sets or b not in label_sets else float(rep.tau[compat].loc[a, b])
            cells.add("table5", f"vs. {a}", b, value, refused if value is None else f"Kendall's τ on {compat}"
                      + (f"; {weak}" if weak and "LLM fills gaps" in (a, b) else ""))
    for name in SCENARIOS:
        value = float(rep.judged[name]) if name in rep.judged else None
        cells.add("table5", "Avg. Judged@100", name, value, refused if value is None else
                  f"mean over {len(runs)} systems")
    judged = rep.judged_systems["Human-only"]
    cells.add("table5", "Human-only per system", "lowest Judged@100", float(judged.min()), str(judged.idxmin()),
              published_as=("section5.2", "Table 5", "per-system Judged@100 min"))
    cells.add("table5", "Human-only per system", "highest Judged@100", float(judged.max()), str(judged.idxmax()),
              published_as=("section5.2", "Table 5", "per-system Judged@100 max"))
    if ndcg is not None:
        value = float(rep.tau[ndcg].loc["Human-only", "LLM fills gaps"]) if "LLM fills gaps" in label_sets else None
        cells.add("table5", "vs. Human-only", f"LLM fills gaps, τ on {ndcg}", value, refused or "",
                  published_as=("section5.2", "Table 5", "tau nDCG@100 Human-only vs LLM fills gaps"))
    note = "the depth-100 pool items both the participants and the LLM label (the calibration set)"
    cells.add("table5", "calibration", "pairs", float(len(both)), note,
              published_as=("section5.2", "calibration", "pairs"))
    cells.add("table5", "calibration", "mean LLM label", float(both.label_llm.mean()) if len(both) else None,
              published_as=("section5.2", "calibration", "mean LLM label"))
    cells.add("table5", "calibration", "mean human label", float(both.label_human.mean()) if len(both) else None,
              published_as=("section5.2", "calibration", "mean human label"))
    extras["table5"] = rep.to_json()

    # beyond the paper: do both label sets call the same differences significant?
    cmp = compare(runs, human, {"Full LLM": full}, measures=ranking, queries="shared", bootstrap=0, seed=s.seed)
    ref_t, llm_t = cmp.reference_table("Full LLM"), cmp.candidates["Full LLM"]
    sig = {}
    for m in ranking:
        h = pairwise_tests(ref_t.matrices[m], "human", m, s.alpha, s.permutations, s.seed)
        c = pairwise_tests(llm_t.matrices[m], "Full LLM", m, s.alpha, s.permutations, s.seed)
        agree = significance_agreement(h, c, ref_t.means(m), llm_t.means(m))
        sig[m] = {"agreement": agree.to_json(), "human": h.to_json(), "llm": c.to_json()}
        same = agree.both_same_direction / agree.n_pairs if agree.n_pairs else math.nan
        cells.add("significance", m, "both significant, same direction", same,
                  f"share of {agree.n_pairs} system pairs (paired sign-flip test over users, Holm, alpha {s.alpha})")
        for col in ("agreement", "false_positive_rate", "false_negative_rate", "tau_ap", "top5_overlap"):
            cells.add("significance", m, col, getattr(agree, col),
                      f"{agree.n_pairs} system pairs; human significant {agree.reference_significant}, "
                      f"LLM {agree.candidate_significant}, both same direction {agree.both_same_direction}")
    extras["significance"] = sig
    pop = item_popularity(collection.interactions)
    bias = popularity_bias(llm, human, pop, bins=min(10, max(1, both.docid.nunique()))) if len(both) else None
    if bias is not None:
        extras["popularity"] = {"spearman": bias.spearman, "pairs": bias.pairs,
                                "bins": bias.deciles.to_dict(orient="records"), "text": bias.format()}
        cells.add("audit", "popularity", "Spearman rho(popularity, residual)", bias.spearman,
                  "residual = calibrated LLM label − human label; 0 means no popularity bias")


# ------------------------------------------------------------------------------ the paper itself

def paper_contradictions(published) -> list[dict[str, str]]:
    """Where the paper's own numbers disagree, from the published cells (not matched silently)."""
    v = published.value
    out = []

    def pct(row: str, table: str = "table3") -> str:
        scale = 1.0 if table == "table8" else 100.0
        return " / ".join(f"{v(table, row, c) * scale:.2f}%" for c in ("agree", "tie", "disagree"))

    if v("table8", "baseline", "agree") is not None and v("table3", "Title + All metadata", "agree") is not None:
        out.append({"where": "Table 8 vs Table 3",
                    "detail": (f"Table 8's baseline ({pct('baseline', 'table8')} agree / tie / disagree; 51 users, 50 "
                               f"items each) matches no row of Table 3 in that stated setting: 'Title + All metadata', "
                               f"the protocol's fields, is {pct('Title + All metadata')} and 'Title', Table 3's "
                               f"baseline, {pct('Title')}. recjudge computes both from the same labels, so its two "
                               "rows agree with each other and differ from one of the paper's.")})
    systems, configs = v("section5.2", "system rankings", "systems"), v("section3", "systems", "configurations")
    if systems is not None and configs is not None:
        out.append({"where": "Section 5.2",
                    "detail": (f"the τ of Table 4 is said to be over the ranking of {systems:.0f} recommender systems, "
                               f"while the same section and Appendix B give it across {configs:.0f} system "
                               f"configurations; recjudge ranks every system it is given")})
    bound = v("appendixB", "Table 9", "tau difference nDCG@100 and Compat")
    if bound is not None and v("table9", "baseline", "tau Compat") is not None:
        diffs = {m: abs(v("table9", "baseline", f"tau {m}") - v("table9", "defined scale", f"tau {m}"))
                 for m in ("Compat", "nDCG", "Bpref")}
        out.append({"where": "Appendix B (and Section 7) vs Table 9",
                    "detail": (f"the text says the two prompts' τ differ by less than {bound:g} for nDCG@100 and "
                               f"Compat; Table 9's values differ by {diffs['Compat']:.4f} on Compat (more than "
                               f"{bound:g}), {diffs['nDCG']:.4f} on nDCG@100 and {diffs['Bpref']:.4f} on Bpref")})
    lo, hi = v("section3", "LLM judge", "rating scale low"), v("section3", "LLM judge", "rating scale high")
    if lo is not None and hi is not None:
        out.append({"where": "Section 3",
                    "detail": (f"the judge is said to see each movie's explicit rating on a {lo:g}-{hi:g} scale; "
                               "MovieLens-32M's ratings are half stars from 0.5 to 5.0, and recjudge's prompt states "
                               "the collection's own scale")})
    out.append({"where": "Table 3",
                "detail": "the columns are headed 'Agreement (%)', 'Tie (%)', 'Disagreement (%)' but the values are "
                          "printed as shares (0.5398, not 53.98); recjudge compares them as shares"})
    pooled, non_pooled = v("table1", "pooled", "Judged@100 Cranfield"), v("table1", "non-pooled", "Judged@100 Cranfield")
    human_only = v("table5", "Avg. Judged@100", "Human-only")
    if pooled is not None and non_pooled is not None and human_only is not None:
        # Table 1's rows are 7 pooled and 45 non-pooled configurations; their weighted mean is the all-system mean
        implied = (7 * pooled + 45 * non_pooled) / 52
        if round(implied, 3) != round(human_only, 3):
            out.append({"where": "Table 1 vs Table 5",
                        "detail": (f"Table 1's Cranfield column (7 pooled configurations at {pooled:.4f}, 45 "
                                   f"non-pooled at {non_pooled:.4f}) implies an all-system mean Judged@100 of "
                                   f"{implied:.4f}; Table 5's Human-only column prints {human_only:.3f} for the "
                                   "same 52 configurations and the same human qrels"),
                        "cells": [["table1", "pooled", "Judged@100 Cranfield"],
                                  ["table1", "non-pooled", "Judged@100 Cranfield"],
                                  ["table5", "Avg. Judged@100", "Human-only"]]})
    cis = [c for c in published.table("table3") if c.ci is not None]
    if cis:
        lo, hi = min(c.ci for c in cis), max(c.ci for c in cis)
        out.append({"where": "Table 3's confidence intervals",
                    "detail": (f"Table 3 prints 95% intervals of ±{lo:.4f} to ±{hi:.4f} on shares of about 0.5, "
                               "described as across runs with different samples; three experiments of 51 "
                               "participants × 50 items cannot pin a share to ±0.003 (a t-interval over three "
                               "values is ±4.3 standard deviations), so the paper's interval is probably not "
                               "across resamples. recjudge's interval is across its experiments, and 'inside' "
                               "compares with the printed ± as it is"),
                    "cells": [[c.table, c.row, c.column] for c in cis]})
    return out


# ------------------------------------------------------------------------------ differences

def _table3_fields(s: ReproduceSettings, collection) -> set[str]:
    """The fields Table 3's rows show (none when Table 3 is not computed)."""
    from ..judging.profile import parse_fields

    if "table3" not in s.only:
        return set()
    return {f for spec in field_sets(s, collection)[0].values() for f in parse_fields(spec)}


def _differences(s: ReproduceSettings, base, not_applied: Mapping[str, Any], measure_note: str, runs,
                 run_files, collection, extras) -> list[dict[str, str]]:
    """Every setting that is not the paper's, and which cells it can move."""
    from ..judging.prompts import load_template
    from ..protocol import load_protocol

    protocol = load_protocol(STUDY)
    out: list[dict[str, str]] = []
    only = set(s.only)

    def add(setting: str, paper: Any, used: Any, moves: str) -> None:
        out.append({"setting": setting, "paper": str(paper), "used": str(used), "moves": moves})

    judge = protocol.settings("judge")
    used = {k: getattr(base, k) for k in judge if hasattr(base, k)}
    if "reasoning_effort" in judge:
        used["reasoning_effort"] = base.params.get("reasoning_effort")
    for key, d in protocol.differences("judge", used).items():
        if key != "prompt":
            add(f"judge {key}", d["protocol"], d["used"], LLM_CELLS)
    for key, value in not_applied.items():
        add(f"judge {key}", value, "not available in this recjudge's judge", LLM_CELLS)
    tpl = load_template(base.prompt)
    if base.prompt in ("baseline", "defined-scale"):
        add("prompt wording", "the paper's Figure 1 text (not in our copy)", f"recjudge's wording of its design "
            f"({tpl.name}); pass the text as a template file with --prompt", LLM_CELLS)
    if only & {"table8", "table9"} and s.defined_scale_prompt == "defined-scale":
        add("defined-scale prompt wording", "Appendix B's prompt with explicit scale definitions (not in our copy)",
            "recjudge's defined-scale template; pass the text with --defined-scale-prompt",
            "Table 8 and Table 9, row defined scale")
    add("rating scale in the prompt", "explicit ratings 'on a 1-5 scale' (Section 3)",
        f"the collection's scale ({collection.rating_scale.describe()})", LLM_CELLS)
    from ..judging.profile import DERIVED_FIELDS, parse_fields

    derived = (set(parse_fields(base.fields)) | _table3_fields(s, collection)) & set(DERIVED_FIELDS)
    if derived:
        sources = collection.info.get("interactions_from") or [collection.name]
        add("average rating and number of ratings", "not stated where they come from (Table 3's rows 'Title + "
            "Average rating' and 'Title + Number ratings')", f"computed from the collection's ratings "
            f"({', '.join(map(str, sources))}: {len(collection.interactions):,} ratings, ML-32M's users with the "
            "participants), leaving out the judged participant's own rating of the movie",
            "Table 3 (those rows and 'Title + All metadata'), every cell of the protocol's judge")
    ablate = protocol.settings("ablate")
    for key, paper in (("experiments", ablate.get("experiments", 3)), ("per_user", ablate.get("per_user", 50))):
        if getattr(s, key) != paper:
            add(key, paper, getattr(s, key), "Tables 3, 4, 8, 9 and Figures 3-5 (their means and CIs)")
    if tuple(s.k_values) != K_VALUES:
        add("K values", ", ".join(map(str, K_VALUES)), ", ".join(map(str, s.k_values)), "Table 4")
    if s.depth != 100:
        add("pool depth", 100, s.depth, "Table 5, significance agreement")
    if only & {"table3"}:
        rows, skipped = field_sets(s, collection)
        if s.field_sets:
            add("Table 3 rows", "the paper's 11 field sets", ", ".join(rows), "Table 3")
        if skipped:
            add("Table 3 rows", ", ".join(skipped), "left out: the collection has no " + "; ".join(
                f"{', '.join(v)} field ({k})" for k, v in skipped.items()), "Table 3 (those rows are missing)")
    if "figure3" in only:
        add("Figure 3 profile sizes", "the figure's sizes (the image is not in our copy)",
            ", ".join(map(str, s.profile_sizes)) + (" (recjudge's default)" if tuple(s.profile_sizes) == PROFILE_SIZES
                                                   else ""), "Figure 3")
    if "figure5" in only:
        add("Figure 5 ranking", "not stated (the text ties it to τ 0.92 at K = 100)",
            "each system's nDCG@100 at K = 100 averaged over the experiments, then ranked", "Figure 5 and its ranks")
    if "table5" in only:
        add("Table 5 judging", "not stated whether the pool was judged in each of the three experiments",
            "the depth-100 pool judged once (the first experiment's seed)", "Table 5, significance agreement")
        if extras.get("calibration_refused"):
            add("Table 5 calibration", "the mean human label per LLM grade over the items both label",
                extras["calibration_refused"] + " (--allow-weak-calibration computes the column anyway, with "
                "the warning)", "Table 5, column and row LLM fills gaps (not computed)")
        cal = extras.get("calibration")
        if cal:
            mapping = {str(g["llm_grade"]): g["label"] for g in cal.get("grades", ()) if g.get("label") is not None}
            add("Table 5 calibration labels", "the mean human label per LLM grade (not stated how a mean becomes "
                "a label)", f"the mean rounded half up to a whole label (qrels hold integers): "
                f"{len(mapping)} LLM grades onto {len(set(mapping.values()))} labels "
                f"({', '.join(f'{k}→{v}' for k, v in mapping.items())})", "Table 5, column and row LLM fills gaps")
    train = protocol.settings("train")
    if s.runs is not None:
        add("systems", "the paper's 52 configurations (Appendix A; not in our copy)", f"runs given: {s.runs} "
            f"({len(runs)} systems)", SYSTEM_CELLS)
    else:
        grid = s.grid or train.get("grid")
        add("systems", "the paper's 52 configurations (Appendix A; not in our copy)",
            f"grid {grid}" + (f", systems {s.systems}" if s.systems else "") +
            (f", {s.epochs} epochs" if s.epochs else ""), SYSTEM_CELLS)
        for key in ("sample_users", "min_interactions"):
            if getattr(s, key) is not None and getattr(s, key) != train.get(key):
                add(f"train {key}", train.get(key), getattr(s, key), SYSTEM_CELLS)
        positives = training_positives(s)
        add("training positives", "not stated (Section 3: the sampled users' interactions)",
            f"the ratings >= {positives:g}, the rule of the release's implicit-ratings.csv (--min-rating 0 trains "
            "on every rating)" if positives > 0 else "every explicit rating, 0.5 stars included (--min-rating 0)",
            SYSTEM_CELLS + (" and the historical setting's held-out interactions" if s.historical_runs is None
                            else ""))
    if only & {"table1"} and runs:
        groups = _groups(s, run_files, sorted(runs))
        if set(groups.values()) == {"all systems"}:
            add("system groups", "7 pooled and 45 non-pooled configurations (Table 1)",
                "none given (--groups, or group = \"pooled\" in the grid file): one row of all systems", "Table 1")
        else:
            for group in ("pooled", "non-pooled"):
                if group not in set(groups.values()):
                    add("system groups", "7 pooled and 45 non-pooled configurations (Table 1)",
                        f"no {group} system among the {len(groups)} given ({', '.join(sorted(set(groups.values())))}"
                        f"): Table 1's {group} row is absent, not zero" + (
                            "; the grid's systems follow Section 3's rule for the non-pooled ones, and the 7 pooled "
                            "configurations are not in our copy (give them in a grid file with group = \"pooled\")"
                            if group == "pooled" else ""), f"Table 1 (the {group} row)")
    if only & {"table1", "figure2"} and extras.get("historical_users") is not None:
        add("historical setting's users", "not stated (ML-32M users of the 80%-20% split)",
            f"{extras['historical_users']:,} users: those of the historical qrels (each user's held-out 20%), "
            f"not the {extras.get('participants', 51)} participants the Cranfield setting ranks",
            "Table 1 (historical column), Figure 2")
    if only & {"table1", "figure2"}:
        if s.historical_runs is None:
            add("historical split", "an 80%-20% train-test split (per user, by time; not otherwise stated)",
                f"{s.historical_split} at 0.8 (the participants' ratings share one timestamp, so their held-out "
                "20% is taken in item-id order)", "Table 1 (historical column), Figure 2, Section 5.2's median 8")
        add("historical relevance", "not stated (the held-out interactions of the split)",
            "every held-out interaction relevant, label 1 (nDCG gain 1)", "Figure 2, Section 4's rank shifts")
    if measure_note:
        add("measures", protocol.settings("compare").get("measures"), measure_note, SYSTEM_CELLS)
    unranked = extras.get("unranked_participants")
    if unranked:
        add("participants ranked", "every system ranks all 51 participants",
            "; ".join(f"{k} leaves out {len(v)}" for k, v in sorted(unranked.items())) +
            " (a participant left out scores 0 for that system)", SYSTEM_CELLS)
    return out
