"""Tables 4 and 9 and Figure 5: system rankings under the LLM's labels against the complete human qrels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ...data.trec import Qrels
from .cells import Cells
from .common import TRIVIAL_DRAWS, add_mean, ci_note, mean_of, published_cell_exists, restrict, short_name
from .judges import samples
from .settings import TABLE9_K, pick_measure

def ranking_cells(s, cells: Cells, figures, extras, runs, human, base_labels: Sequence[Qrels],
                  defined: Sequence[Qrels] | None, ranking, named: Mapping[str, str]) -> None:
    """Table 4 (K items per participant, the protocol's judge), Table 9 (both prompts at K = 100) and
    Figure 5 (ranks at K = 100 on nDCG@100): every label set scored in one pass over the runs, each
    over the participants it labels (all of them), against the complete human qrels."""
    from ...evaluation.metaeval import compare

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
    cmp = compare(runs, human, candidates, measures=ranking, queries="shared", bootstrap=0, seed=s.seed,
                  baselines=TRIVIAL_DRAWS)
    _trivial_taus(extras, cmp, s, ks, len(base_labels), defined is not None, ranking)

    def per_exp(prefix: str, k: int, measure: str, what: str) -> list[float]:
        return [getattr(cmp.agreement[f"{prefix} K={k} e{e + 1}"][measure], what) for e in range(len(base_labels))]

    if "table4" in only:
        for k in s.k_values:
            for m in ranking:
                add_mean(cells, "table4", f"K={k}", f"tau {short_name(m)}", per_exp("baseline", k, m, "kendall_tau"))
                add_mean(cells, "table4", f"K={k}", f"wtau {short_name(m)}", per_exp("baseline", k, m, "weighted_tau"))
        figures["table4"] = {short_name(m): {k: mean_of(per_exp("baseline", k, m, "kendall_tau")) for k in s.k_values}
                             for m in ranking}
    if "table9" in only and defined is not None:
        for row, prefix in (("baseline", "baseline"), ("defined scale", "defined scale")):
            for m in ranking:
                add_mean(cells, "table9", row, f"tau {short_name(m)}", per_exp(prefix, TABLE9_K, m, "kendall_tau"))
    if only & {"table4", "figure5"}:
        # Section 5.2's K = 100 numbers: the labels it takes and the nDCG@100 τ it quotes
        ndcg = pick_measure(ranking, "nDCG") or ranking[0]
        n_labels = [len(candidates[f"baseline K={TABLE9_K} e{e + 1}"].frame) for e in range(len(base_labels))]
        if TABLE9_K in ks:
            cells.add("figure5", f"K={TABLE9_K}", "LLM labels", mean_of(n_labels), ci_note(n_labels),
                      published_as=("section5.2", "K=100", "LLM labels"))
            cells.add("figure5", f"K={TABLE9_K}", "share of human labels", mean_of(n_labels) / len(human.frame),
                      f"of {len(human.frame):,} human labels",
                      published_as=("section5.2", "K=100", "share of human labels"))
            add_mean(cells, "figure5", f"K={TABLE9_K}", f"Kendall tau {ndcg}",
                     per_exp("baseline", TABLE9_K, ndcg, "kendall_tau"),
                     published_as=("section5.2", "K=100", "Kendall tau nDCG@100"))
    if "figure5" in only:
        _figure5(cells, figures, cmp, ranking, named, len(base_labels))


def _figure5(cells: Cells, figures, cmp, ranking, named: Mapping[str, str], n_exp: int) -> None:
    """Figure 5: each system's rank under the LLM's labels at K = 100 (its mean over the experiments) against
    its rank under the human qrels, on nDCG@100; the median displacement and the ranks of the named systems."""
    from ...evaluation.metaeval import kendall_tau, system_ranks

    ndcg = pick_measure(ranking, "nDCG") or ranking[0]
    names = [f"baseline K={TABLE9_K} e{e + 1}" for e in range(n_exp)]
    llm_scores = pd.concat([cmp.candidates[n].means(ndcg) for n in names], axis=1).mean(axis=1)
    human_ranks = cmp.reference_table(names[0]).ranks(ndcg)
    llm_ranks = system_ranks(llm_scores).reindex(human_ranks.index)
    displacement = (llm_ranks - human_ranks).abs()
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


def _trivial_taus(extras, cmp, s, ks, n_exp: int, defined: bool, ranking) -> None:
    """What trivial judges get on the same pairs as each Table 4 / Table 9 row (τ per measure, the mean
    over the experiments of each judge's τ; random: of its draws too), kept beside the cells."""
    only = set(s.only)

    def rows(prefix: str, k: int, row: str) -> list[dict]:
        out = []
        for judge in ("constant", "random", "popularity"):
            rec: dict[str, Any] = {"row": row, "trivial judge": judge}
            for m in ranking:
                rec[f"tau {short_name(m)}"] = mean_of([cmp.baselines[f"{prefix} K={k} e{e + 1}"][m][judge]["kendall_tau"].mean
                                                 for e in range(n_exp)])
            out.append(rec)
        return out

    trivial = extras.setdefault("trivial_judges", {})
    if "table4" in only:
        trivial["table4"] = [r for k in s.k_values for r in rows("baseline", k, f"K={k}")]
    if "table9" in only and defined:
        trivial["table9"] = [*rows("baseline", TABLE9_K, "baseline"), *rows("defined scale", TABLE9_K, "defined scale")]
    warnings = extras.setdefault("warnings", [])
    warnings += [w for w in cmp.warnings if w not in warnings]


def _best_of(family: str, ranks: pd.Series) -> str | None:
    hit = ranks[[str(n).startswith(family) for n in ranks.index]]
    return None if hit.empty else str(hit.idxmin())
