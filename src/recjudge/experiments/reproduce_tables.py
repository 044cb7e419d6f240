"""The cells of ``recjudge reproduce penha2025``: one function per target, each computing its numbers
from the systems' runs, the human qrels and the judge's labels and setting them beside the
published values; plus the settings that differ from the paper and the cells they can move."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from ..data.trec import Qrels
from .ablate import across_experiments
from .reproduce import (
    K_VALUES,
    PROMPT_ROWS,
    STUDY,
    ReproduceResult,
    ReproduceSettings,
    _Cells,
    _measures,
    _pick,
    field_sets,
    protocol_settings,
    table3_row,
)

__all__ = ["compute", "restrict"]

LLM_CELLS = "every LLM-label cell (Tables 3, 4, 5, 8, 9; Figures 3-5; significance agreement)"
SYSTEM_CELLS = "every system-ranking cell (Tables 1, 4, 5, 9; Figures 2 and 5; significance agreement)"
# Figure 2's named systems (section 5.2), matched to our run names by their model family prefix
NAMED_SHIFTS = ("NCEPLRec", "SimpleX")
TABLE5_PAIRS = (("Human-only", "LLM fills gaps"), ("Human-only", "Full LLM"), ("LLM fills gaps", "Full LLM"))


def restrict(qrels: Qrels, pairs: Sequence, name: str | None = None) -> Qrels:
    """``qrels`` cut down to the (qid, docid) ``pairs``."""
    wanted = pd.DataFrame(list(pairs), columns=["qid", "docid"]).astype(str)
    return Qrels.from_frame(qrels.frame.merge(wanted, on=["qid", "docid"]), name or qrels.name)


def _mean(values: Sequence[float]) -> float:
    """The mean of the finite values (NaN when none: a τ over constant scores is undefined)."""
    return across_experiments(values).mean


def _ci_note(values: Sequence[float]) -> str:
    lo, hi = across_experiments(values).ci
    if math.isnan(lo):
        return f"{len(values)} experiment" + ("s" if len(values) != 1 else "")
    return f"mean of {len(values)} experiments, 95% CI [{lo:.4f}, {hi:.4f}]"


def _add_mean(cells: _Cells, target: str, row: str, column: str, values: Sequence[float]) -> None:
    """A cell that is a mean over experiments, its CI stated on the published cell's scale (percent or share)."""
    cell = cells.published.cell(target, row, column)
    scale = 100.0 if cell is not None and cell.unit == "percent" else 1.0
    cells.add(target, row, column, _mean(values), _ci_note([v * scale for v in values]))


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
    measures, measure_note = _measures()
    cells = _Cells(published)
    figures: dict[str, Any] = {}
    extras: dict[str, Any] = {"not_computed": {}}
    kmax = max(s.k_values)

    def missing(target: str, keys: Sequence[tuple]) -> bool:
        absent = [k for k in keys if labels.get(k) is None]
        if absent:
            extras["not_computed"][target] = (f"judging stopped ({stopped or 'no labels'}) before "
                                              f"{len(absent)} of its {len(keys)} judge jobs finished; run the same "
                                              "command again to resume from the cache")
        return bool(absent)

    only = set(s.only)
    if only & {"table1", "figure2"}:
        if historical is None:
            for t in only & {"table1", "figure2"}:
                extras["not_computed"][t] = "no historical runs and qrels (give --historical-runs and --historical-qrels)"
        else:
            _historical(s, cells, figures, extras, runs, run_files, human, historical, measures)
    exps = range(s.experiments)
    if only & {"table4", "table9", "figure4"}:
        keys = [("ksweep", f"K={kmax}", e) for e in exps]
        if not any(missing(t, keys) for t in sorted(only & {"table4", "table9", "figure4"})):
            _ksweep(s, cells, figures, runs, human, [labels[k] for k in keys], measures)
    if only & {"table3", "figure3"}:
        sets = field_sets(s, collection)[0]
        keys = [("fields", fs, e) for fs in sets for e in exps]
        if not any(missing(t, keys) for t in sorted(only & {"table3", "figure3"})):
            rows = _agreement_rows(s, human, {fs: [labels[("fields", fs, e)] for e in exps] for fs in sets})
            for fs, r in rows.items():
                for col in ("agree", "tie", "disagree"):
                    _add_mean(cells, "table3", table3_row(fs), col, r[col])
                _add_mean(cells, "table3", table3_row(fs), "kappa", r["kappa"])
            figures["figure3"] = {table3_row(fs): {c: _mean(r[c]) for c in ("agree", "tie", "disagree")}
                                  for fs, r in rows.items()}
    if "table8" in only:
        keys = [("prompts", row, e) for row in PROMPT_ROWS for e in exps]
        if not missing("table8", keys):
            rows = _agreement_rows(s, human, {row: [labels[("prompts", row, e)] for e in exps] for row in PROMPT_ROWS})
            for row, r in rows.items():
                for col in ("agree", "tie", "disagree"):
                    _add_mean(cells, "table8", row, col, r[col])
    if only & {"table5", "figure5"}:
        key = next((k for k in labels if k[0] == "pool"), ("pool", "", 0))
        if not any(missing(t, [key]) for t in sorted(only & {"table5", "figure5"})):
            _pool(s, cells, figures, extras, runs, human, labels[key], measures, collection)
    differences = _differences(s, base, not_applied, measure_note, runs, run_files)
    skipped = field_sets(s, collection)[1] if only & {"table3", "figure3"} else {}
    if skipped:
        differences.append({"setting": "Table 3 rows", "paper": ", ".join(skipped),
                            "used": "left out: the collection has no " + "; ".join(
                                f"{', '.join(v)} field ({k})" for k, v in skipped.items()),
                            "moves": "Table 3, Figure 3 (those rows are missing)"})
    return ReproduceResult(cells.frame(), figures, extras, tuple(differences), tuple(plan_rows),
                           not extras["not_computed"], stopped, {}, s.as_dict())


# ------------------------------------------------------------------------------ Table 1, Figure 2

def _groups(s: ReproduceSettings, run_files: Sequence, names: Sequence[str]) -> dict[str, str]:
    from ..data.groups import groups_from_sidecars, read_groups

    if s.groups is not None:
        return read_groups(s.groups)
    found = groups_from_sidecars(run_files) if run_files else {}
    return found if found and all(n in found for n in names) else {n: "all systems" for n in names}


def _historical(s, cells: _Cells, figures, extras, runs, run_files, human, historical, measures) -> None:
    from ..api.settings import compare_settings
    from ..data.groups import group_means
    from ..evaluation.metaeval import evaluate

    hist_runs, hist_qrels = historical
    judged = _pick(measures, "Judged") or "Judged@100"
    groups = _groups(s, run_files, sorted(runs))
    if "table1" in s.only:
        for label, rr, qq in (("historical", hist_runs, hist_qrels), ("Cranfield", runs, human)):
            table = evaluate(rr, qq, [judged]).table
            scores = table.scores_frame()
            g = {n: groups.get(n, "all systems") for n in scores.index}
            means = group_means(scores, g, "groups")
            for group, row in means.iterrows():
                cells.add("table1", str(group), f"Judged@100 {label}", float(row[table.measures[0]]),
                          f"{int(row['systems'])} systems")
    # one measure: the historical qrels' labels (half stars, 1-10) are off the 0-7 scale nDCGexp's gains assume
    ranking = [_pick(measures, "Compat") or next(m for m in measures if not m.startswith("Judged"))]
    cmp = compare_settings(hist_runs, hist_qrels, runs, human, ranking)
    m = _pick(list(cmp.measures.index), "Compat") or cmp.measures.index[0]
    r = cmp.measures.loc[m]
    note = f"on {m}; the paper's Figure 2 measure is not in our data"
    cells.add("figure2", "historical vs Cranfield", "Kendall tau", r["kendall_tau"], note)
    cells.add("figure2", "historical vs Cranfield", "p-value", r["kendall_tau_p"], note)
    cells.add("section5.2", "train-test vs Cranfield", "median |Δrank|", r["median_abs_rank_shift"], note)
    systems = cmp.systems[m]
    for family in NAMED_SHIFTS:
        hit = [n for n in systems.index if str(n).startswith(family)]
        for col, key in (("rank historical", "rank_a"), ("rank Cranfield", "rank_b")):
            cells.add("figure2", family, col, float(systems.loc[hit[0], key]) if hit else None,
                      hit[0] if hit else f"no {family} system in our grid")
    dgcf = [n for n in systems.index if str(n).startswith("DGCF")]
    gain = float((systems.loc[dgcf, "rank_a"] - systems.loc[dgcf, "rank_b"]).max()) if dgcf else None
    cells.add("figure2", "DGCF", "rank gain", gain, "rank historical − rank Cranfield, largest over DGCF systems"
              if dgcf else "no DGCF system in our grid")
    figures["figure2"] = {"measure": m, "tau": float(r["kendall_tau"]), "p": float(r["kendall_tau_p"]),
                          "ranks": systems[["rank_a", "rank_b"]].rename(columns={"rank_a": "historical",
                                                                                 "rank_b": "Cranfield"})}
    extras["figure2"] = cmp.to_json()


# ------------------------------------------------------------------------------ Tables 4, 9, Fig 4

def _ksweep(s, cells: _Cells, figures, runs, human, llm_by_exp: Sequence[Qrels], measures) -> None:
    from .. import api
    from ..judge import select_pairs

    ranking = [m for m in measures if not m.startswith("Judged")]
    taus: dict[tuple[int, str], list[float]] = {}
    wtaus: dict[tuple[int, str], list[float]] = {}
    subs = {}  # (experiment, K) → the LLM's labels on that sample
    for e, llm in enumerate(llm_by_exp):
        for k in s.k_values:
            pairs = select_pairs(reference=human, per_user=k, seed=s.seed + e)
            sub = restrict(llm, pairs, f"LLM K={k} e{e + 1}")
            if len(runs) >= 2 and len(sub.frame):
                subs[(e, k)] = sub
    if subs:
        # one compare scores every sample in one pass over the runs (each on the users it shares)
        cmp = api.compare(runs=runs, reference=human, candidate=list(subs.values()), measures=",".join(ranking),
                          queries="shared", bootstrap=0).result
        for (_, k), by_measure in zip(subs, cmp.agreement.values()):
            for m, ra in by_measure.items():
                taus.setdefault((k, _short(m)), []).append(ra.kendall_tau)
                wtaus.setdefault((k, _short(m)), []).append(ra.weighted_tau)
    for (k, m), values in taus.items():
        if "table4" in s.only:
            _add_mean(cells, "table4", f"K={k}", f"tau {m}", values)
            _add_mean(cells, "table4", f"K={k}", f"wtau {m}", wtaus[(k, m)])
        if "table9" in s.only:
            for e, v in enumerate(values):
                cells.add("table9", f"K={k}, experiment {e + 1}", f"tau {m}", v)
            _add_mean(cells, "table9", f"K={k}", f"tau {m}", values)
    figures["table4"] = {m: {k: _mean(taus[(k, m)]) for (k, mm) in taus if mm == m}
                         for m in sorted({m for _, m in taus})}
    if "figure4" in s.only and llm_by_exp:
        pairs = select_pairs(reference=human, per_user=max(s.k_values), seed=s.seed)
        ag = _agreement(restrict(human, pairs), llm_by_exp[0], min(s.bootstrap, 200), s.seed)
        figures["figure4"] = {d: p.to_json() for d, p in ag.pairwise_by_distance.items()}
        for d, p in ag.pairwise_by_distance.items():
            cells.add("figure4", f"label distance {d}", "agree", p.agree, f"{p.n_pairs} pairs, experiment 1")


# ------------------------------------------------------------------------------ Tables 3 and 8

def _agreement(reference: Qrels, llm: Qrels, bootstrap: int, seed: int):
    """``recjudge agreement`` over the pairs the reference holds (a pair the LLM failed is left out)."""
    from .. import api

    report = api.agreement(reference=reference, candidate=[llm], missing="drop", bootstrap=bootstrap, seed=seed)
    return next(iter(report.results.values()))


def _agreement_rows(s, human, by_row: Mapping[str, Sequence[Qrels]]) -> dict[str, dict[str, list[float]]]:
    """Per row: agree / tie / disagree (human 0 vs 1-7 on the LLM's raw labels) and κ, one value per experiment."""
    from ..judge import select_pairs

    # every row of an experiment is judged on that experiment's one sample: cut the human qrels once
    n = max((len(v) for v in by_row.values()), default=0)
    samples = [restrict(human, select_pairs(reference=human, per_user=s.per_user, seed=s.seed + e)) for e in range(n)]
    out = {}
    for row, per_exp in by_row.items():
        vals: dict[str, list[float]] = {"agree": [], "tie": [], "disagree": [], "kappa": []}
        for e, llm in enumerate(per_exp):
            ag = _agreement(samples[e], llm, 0, s.seed + e)
            rv = ag.pairwise_relevant_vs_not
            vals["agree"].append(rv.agree)
            vals["tie"].append(rv.tie)
            vals["disagree"].append(rv.disagree)
            vals["kappa"].append(ag.cohen_kappa)
        out[row] = vals
    return out


# ------------------------------------------------------------------------------ Table 5, Figure 5

def _pool(s, cells: _Cells, figures, extras, runs, human, llm: Qrels, measures, collection) -> None:
    from .. import api
    from ..evaluation.significance import pairwise_tests, significance_agreement
    from ..judge.audit import item_popularity, popularity_bias

    min_overlap = int(protocol_settings("fill").get("min_overlap", 30))
    ranking = [m for m in measures if not m.startswith("Judged")]
    # the mixed qrels are kept beside the report (with their .sources.tsv): Table 5's "LLM fills gaps"
    fill = api.fill(human=human, llm=llm, runs=runs, k=s.depth, min_overlap=min_overlap,
                    out=os.fspath(s.out / "table5-filled.qrels"), allow_weak_calibration=True,
                    measures=",".join(m for m in ranking if not m.startswith("Bpref")), seed=s.seed)
    cal, rep = fill.calibration, fill.scenarios
    for name, value in rep.judged.items():
        cells.add("table5", str(name), "Judged@100", float(value), f"mean over {len(runs)} systems")
    compat = _pick(list(rep.tau), "Compat")
    ndcg = _pick(list(rep.tau), "nDCG")
    for i, (a, b) in enumerate(TABLE5_PAIRS, 1):
        for m, col in ((compat, "Kendall tau"), (ndcg, "tau nDCG")):
            if m is None:
                continue
            tau = float(rep.tau[m].loc[a, b])
            if col == "Kendall tau":
                cells.add("table5", f"{a} vs {b}", f"tau {_short(m)}", tau, "the published τ of this position is "
                          "matched by the order of the quote (an assumption)",
                          published_as=("table5", f"tau Compat {i}", "Kendall tau"))
            else:
                cells.add("table5", f"{a} vs {b}", f"tau {_short(m)}", tau, "",
                          published_as=("table5", "LLM fills gaps", "tau nDCG") if b == "LLM fills gaps" else None)
    both = human.frame[["qid", "docid", "label"]].merge(llm.frame[["qid", "docid", "label"]], on=["qid", "docid"],
                                                        suffixes=("_human", "_llm"))
    cells.add("table5", "calibration", "pairs", float(len(both)), "pairs both the participants and the LLM label")
    cells.add("table5", "calibration", "mean LLM label", float(both.label_llm.mean()) if len(both) else None)
    cells.add("table5", "calibration", "mean human label", float(both.label_human.mean()) if len(both) else None)
    extras["calibration"] = cal.to_json()

    full = llm.renamed("Full LLM")
    cmp = api.compare(runs=runs, reference=human, candidate=[full], measures=",".join(ranking), queries="shared",
                      bootstrap=0).result
    name = next(iter(cmp.agreement))
    ra = cmp.agreement[name]
    key = _pick(list(ra), "Compat") or next(iter(ra))
    cells.add("section5.2", "LLM vs Cranfield", "median |Δrank|", ra[key].median_abs_rank_displacement,
              f"Full LLM vs human labels on {key}")
    ref_t, llm_t = cmp.reference_table(name), cmp.candidates[name]
    figures["figure5"] = {"measure": key, "tau": ra[key].kendall_tau,
                          "ranks": pd.DataFrame({"human": ref_t.ranks(key), "LLM": llm_t.ranks(key)})}
    cells.add("figure5", "Full LLM vs human", "Kendall tau", ra[key].kendall_tau, f"on {key}")
    # beyond the paper: do both label sets call the same differences significant?
    sig = {}
    for m in ranking:
        mk = _pick(list(ra), _short(m))
        h = pairwise_tests(ref_t.matrices[mk], "human", mk, s.alpha, s.permutations, s.seed)
        c = pairwise_tests(llm_t.matrices[mk], "Full LLM", mk, s.alpha, s.permutations, s.seed)
        agree = significance_agreement(h, c, ref_t.means(mk), llm_t.means(mk))
        sig[mk] = {"agreement": agree.to_json(), "human": h.to_json(), "llm": c.to_json()}
        same = agree.both_same_direction / agree.n_pairs if agree.n_pairs else math.nan
        cells.add("significance", mk, "both significant, same direction", same,
                  f"share of {agree.n_pairs} system pairs (paired sign-flip test over users, Holm, alpha {s.alpha})")
        for col in ("agreement", "false_positive_rate", "false_negative_rate", "tau_ap", "top5_overlap"):
            cells.add("significance", mk, col, getattr(agree, col),
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


# ------------------------------------------------------------------------------ differences

def _differences(s: ReproduceSettings, base, not_applied: Mapping[str, Any], measure_note: str, runs,
                 run_files) -> list[dict[str, str]]:
    """Every setting that is not the paper's, and which cells it can move."""
    from ..protocol import load_protocol

    protocol = load_protocol(STUDY)
    out: list[dict[str, str]] = []

    def add(setting: str, paper: Any, used: Any, moves: str) -> None:
        out.append({"setting": setting, "paper": str(paper), "used": str(used), "moves": moves})

    judge = protocol.settings("judge")
    used = {k: getattr(base, k) for k in judge if hasattr(base, k)}
    if "reasoning_effort" in judge:
        used["reasoning_effort"] = base.params.get("reasoning_effort")
    for key, d in protocol.differences("judge", used).items():
        add(f"judge {key}", d["protocol"], d["used"], LLM_CELLS)
    for key, value in not_applied.items():
        add(f"judge {key}", value, "not available in this recjudge's judge", LLM_CELLS)
    from ..judge.prompts import load_template

    tpl = load_template(base.prompt)
    if base.prompt in ("baseline", "defined-scale"):
        add("prompt wording", "the paper's Figure 1 text", f"recjudge's wording of the paper's design "
            f"({tpl.name}); pass the exact text as a template file", LLM_CELLS)
    ablate = protocol.settings("ablate")
    for key, paper in (("experiments", ablate.get("experiments", 3)), ("per_user", ablate.get("per_user", 50))):
        if getattr(s, key) != paper:
            add(key, paper, getattr(s, key), "Tables 3, 4, 8, 9 and Figures 3, 4 (their means and CIs)")
    if tuple(s.k_values) != K_VALUES:
        add("K values", ", ".join(map(str, K_VALUES)), ", ".join(map(str, s.k_values)), "Tables 4 and 9")
    if s.depth != 100:
        add("pool depth", 100, s.depth, "Table 5, Figure 5, significance agreement")
    if s.field_sets:
        add("Table 3 field sets", "the paper's 11 rows", ", ".join(s.field_sets), "Table 3, Figure 3")
    train = protocol.settings("train")
    if s.runs is not None:
        add("systems", "the paper's 52 configurations (appendix; not in our data)", f"runs given: {s.runs} "
            f"({len(runs)} systems)", SYSTEM_CELLS)
    else:
        grid = s.grid or train.get("grid")
        add("systems", "the paper's 52 configurations (appendix; not in our data)",
            f"grid {grid}" + (f", systems {s.systems}" if s.systems else "") +
            (f", {s.epochs} epochs" if s.epochs else ""), SYSTEM_CELLS)
        for key in ("sample_users", "min_interactions"):
            if getattr(s, key) is not None and getattr(s, key) != train.get(key):
                add(f"train {key}", train.get(key), getattr(s, key), SYSTEM_CELLS)
    if s.historical_runs is None:
        add("historical split", "the paper's train-test split (not in our data)", s.historical_split,
            "Table 1 (historical column), Figure 2")
    if measure_note:
        add("measures", protocol.settings("compare").get("measures"), measure_note, SYSTEM_CELLS)
    return out
