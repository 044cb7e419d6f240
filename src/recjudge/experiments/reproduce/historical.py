"""Table 1 and Figure 2: historical runs under their held-out interactions against Cranfield runs under the human qrels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...data.trec import Qrels
from .cells import Cells
from .common import published_cell_exists
from .settings import ReproduceSettings, pick_measure

# the systems Sections 4 and 5.2 name, and the shift each is named for: NCEPLRec drops under the
# Cranfield labels, SimpleX and DGCF gain, MultiVAE "shifts by up to 30 positions"
NAMED = {"NCEPLRec": "drop", "SimpleX": "gain", "DGCF": "gain", "MultiVAE": "either"}


def system_groups(s: ReproduceSettings, run_files: Sequence, names: Sequence[str]) -> dict[str, str]:
    from ...data.groups import groups_from_sidecars, read_groups

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


def historical_cells(s, cells: Cells, figures, extras, runs, run_files, human, historical,
                     ranking) -> dict[str, str]:
    """Table 1 and Figure 2; returns the system each named family stands for (its largest shift)."""
    from ...evaluation.settings_comparison import compare_settings
    from ...data.groups import group_means
    from ...evaluation.metaeval import evaluate

    hist_runs, hist_qrels = historical
    held_out = historical_relevance(hist_qrels)
    groups = system_groups(s, run_files, sorted(runs))
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
