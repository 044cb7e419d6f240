"""Table 5 from the LLM's labels of the systems' pool, with significance agreement and the judge's popularity bias."""

from __future__ import annotations

import math

from ...data.trec import Qrels
from ...errors import ConfigError
from .cells import Cells
from .settings import pick_measure, protocol_settings

SCENARIOS = ("Human-only", "LLM fills gaps", "Full LLM")


def pool_cells(s, cells: Cells, figures, extras, runs, human, llm: Qrels, ranking, collection) -> None:
    """Table 5 from the LLM's labels of the systems' depth-100 pool: Human-only, LLM fills gaps (the
    calibration estimated on the pool items humans also judged) and Full LLM (those labels alone)."""
    from ...evaluation.calibration import scenarios

    compat = pick_measure(ranking, "Compat") or ranking[0]
    ndcg = pick_measure(ranking, "nDCG")
    full = llm.renamed("Full LLM")
    both = human.frame[["qid", "docid", "label"]].merge(llm.frame[["qid", "docid", "label"]], on=["qid", "docid"],
                                                        suffixes=("_human", "_llm"))
    label_sets, refused, weak = _label_sets(s, extras, runs, human, llm)
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
    _calibration_cells(cells, both)
    extras["table5"] = rep.to_json()
    _significance(s, cells, extras, runs, human, full, ranking)
    _popularity(cells, extras, collection, human, llm, both)


def _label_sets(s, extras, runs, human: Qrels, llm: Qrels) -> tuple[dict[str, Qrels], str | None, str]:
    """Human-only and, when the calibration holds (or is allowed weak), LLM fills gaps; why it was
    refused (or None), and the warning of a weak calibration ('' when none)."""
    from ...evaluation.calibration import calibrate, fill_gaps, write_filled

    min_overlap = int(protocol_settings("fill").get("min_overlap", 30))
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
    return label_sets, refused, weak


def _calibration_cells(cells: Cells, both) -> None:
    note = "the depth-100 pool items both the participants and the LLM label (the calibration set)"
    cells.add("table5", "calibration", "pairs", float(len(both)), note,
              published_as=("section5.2", "calibration", "pairs"))
    cells.add("table5", "calibration", "mean LLM label", float(both.label_llm.mean()) if len(both) else None,
              published_as=("section5.2", "calibration", "mean LLM label"))
    cells.add("table5", "calibration", "mean human label", float(both.label_human.mean()) if len(both) else None,
              published_as=("section5.2", "calibration", "mean human label"))


def _significance(s, cells: Cells, extras, runs, human: Qrels, full: Qrels, ranking) -> None:
    """Beyond the paper: do both label sets call the same differences significant?"""
    from ...evaluation.metaeval import compare
    from ...evaluation.significance import pairwise_tests, significance_agreement

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


def _popularity(cells: Cells, extras, collection, human: Qrels, llm: Qrels, both) -> None:
    """The judge's popularity bias on the pool items both label."""
    from ...judging.bias import item_popularity, popularity_bias

    pop = item_popularity(collection.interactions)
    bias = popularity_bias(llm, human, pop, bins=min(10, max(1, both.docid.nunique()))) if len(both) else None
    if bias is not None:
        extras["popularity"] = {"spearman": bias.spearman, "pairs": bias.pairs,
                                "bins": bias.deciles.to_dict(orient="records"), "text": bias.format()}
        cells.add("audit", "popularity", "Spearman rho(popularity, residual)", bias.spearman,
                  "residual = calibrated LLM label − human label; 0 means no popularity bias")
