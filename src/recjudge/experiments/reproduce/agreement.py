"""Tables 3 and 8 and Figures 3 and 4: item agreement of the LLM's labels with the participants'."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...data.trec import Qrels
from .cells import Cells
from .common import TRIVIAL_DRAWS, Labels, add_mean, ci_note, mean_of, restrict
from .judges import field_sets, samples

def _agreement(reference: Qrels, llm: Qrels, bootstrap: int, seed: int):
    """``recjudge agreement`` over the pairs the reference holds (a pair the LLM failed is left out)."""
    from ... import api

    report = api.agreement(reference, [llm], missing="drop", bootstrap=bootstrap, seed=seed, baselines=0)
    return next(iter(report.results.values()))


def _trivial_agreement(reference: Qrels, llm: Qrels, seed: int) -> dict[str, dict[str, float]]:
    """Trivial judge → the relevant-vs-not agree / tie and κ of ``_agreement_rows``, on the same pairs."""
    from ...evaluation.baselines import agreement_baselines

    got = agreement_baselines(reference, llm, "drop", draws=TRIVIAL_DRAWS, seed=seed)
    return {judge: {"agree": st["relevant_agree"].mean, "tie": st["relevant_tie"].mean,
                    "kappa": st["cohen_kappa"].mean} for judge, st in got.items()}


def agreement_rows(s, human, by_row: Mapping[str, Sequence[Qrels]]) -> dict[str, dict[str, list[float]]]:
    """Per row: agree / tie / disagree over pairs of one participant's items the human labels 0 and 1-7,
    on the LLM's raw labels (Section 5.1), and κ; one value per experiment, each on that experiment's
    K = ``per_user`` sample; under ``trivial``, the same of the trivial judges on those pairs."""
    n = max((len(v) for v in by_row.values()), default=0)
    cut = [restrict(human, samples(s, human, s.per_user, e)) for e in range(n)]
    out = {}
    for row, per_exp in by_row.items():
        vals: dict[str, Any] = {"agree": [], "tie": [], "disagree": [], "kappa": [], "trivial": {}}
        for e, llm in enumerate(per_exp):
            llm_cut = restrict(llm, zip(cut[e].frame.qid, cut[e].frame.docid))
            ag = _agreement(cut[e], llm_cut, 0, s.seed + e)
            for judge, st in _trivial_agreement(cut[e], llm_cut, s.seed + e).items():
                for k, v in st.items():
                    vals["trivial"].setdefault(judge, {}).setdefault(k, []).append(v)
            rv = ag.pairwise_relevant_vs_not
            vals["agree"].append(rv.agree)
            vals["tie"].append(rv.tie)
            vals["disagree"].append(rv.disagree)
            vals["kappa"].append(ag.cohen_kappa)
        out[row] = vals
    return out


def trivial_rows(extras, target: str, agree: Mapping[str, Mapping]) -> None:
    """Beside a target's agreement cells: each row's trivial judges, the mean over its experiments."""
    extras.setdefault("trivial_judges", {})[target] = [
        {"row": row, "trivial judge": judge, **{k: mean_of(v) for k, v in st.items()}}
        for row, r in agree.items() for judge, st in r["trivial"].items()]


def figure4_cells(s, cells: Cells, figures, human, base_labels: Sequence[Qrels]) -> None:
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
            add_mean(cells, "figure4", f"label distance {d}", col, values, note=f"{pairs[d]:,} pairs in all")
    figures["figure4"] = {f"distance {d}": {c: mean_of(v) for c, v in by_distance[d].items()} for d in sorted(by_distance)}


def _shares(cells: Cells, target: str, agree: Mapping[str, Mapping]) -> None:
    for row, r in agree.items():
        for col in ("agree", "tie", "disagree"):
            add_mean(cells, target, row, col, r[col])


def table3_cells(s, got: Labels, cells: Cells, figures, extras, human: Qrels, collection) -> None:
    """Table 3: agreement per metadata field set, K = ``per_user`` per participant, and its κ."""
    exps = range(s.experiments)
    rows = field_sets(s, collection)[0]
    labels = got.of({"table3"}, [("fields", row, e) for row in rows for e in exps])
    if labels is None:
        return
    by_row = {row: labels[i * len(exps):(i + 1) * len(exps)] for i, row in enumerate(rows)}
    agree = agreement_rows(s, human, by_row)
    trivial_rows(extras, "table3", agree)
    for row, r in agree.items():
        for col in ("agree", "tie", "disagree"):
            add_mean(cells, "table3", row, col, r[col])
        cells.add("table3 kappa", row, "Cohen's kappa", mean_of(r["kappa"]), ci_note(r["kappa"]))
    means = {row: mean_of(r["agree"]) for row, r in agree.items()}
    if means:
        lo, hi = min(means, key=means.get), max(means, key=means.get)
        cells.add("table3", "lowest row", "agree", means[lo], lo,
                  published_as=("section5.1", "item agreement", "pairwise agreement low"))
        cells.add("table3", "highest row", "agree", means[hi], hi,
                  published_as=("section5.1", "item agreement", "pairwise agreement high"))
    figures["table3"] = {row: {c: mean_of(r[c]) for c in ("agree", "tie", "disagree")} for row, r in agree.items()}


def table8_cells(s, got: Labels, cells: Cells, extras, human: Qrels) -> None:
    """Table 8: the baseline and the defined-scale prompt, item agreement as Table 3."""
    exps = range(s.experiments)
    labels = got.of({"table8"}, [("base", f"K={s.base_k()}", e) for e in exps]
                    + [("prompts", "defined scale", e) for e in exps])
    if labels is None:
        return
    agree = agreement_rows(s, human, {"baseline": labels[:len(exps)], "defined scale": labels[len(exps):]})
    trivial_rows(extras, "table8", agree)
    _shares(cells, "table8", agree)


def figure3_cells(s, got: Labels, cells: Cells, figures, extras, human: Qrels) -> None:
    """Figure 3: item agreement per profile size (history items shown)."""
    exps = range(s.experiments)
    rows = [f"profile {n}" for n in s.profile_sizes]
    labels = got.of({"figure3"}, [("profiles", row, e) for row in rows for e in exps])
    if labels is None:
        return
    agree = agreement_rows(s, human, {row: labels[i * len(exps):(i + 1) * len(exps)] for i, row in enumerate(rows)})
    trivial_rows(extras, "figure3", agree)
    _shares(cells, "figure3", agree)
    figures["figure3"] = {row: {c: mean_of(r[c]) for c in ("agree", "tie", "disagree")} for row, r in agree.items()}
