"""The demo's report: Markdown and its HTML rendering, figures, and the evaluation card."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from .._io import write_json
from .evaluation import (
    format_p_value,
    ci_cell,
    ci_notes,
    plain_text,
    load_pyplot,
    save_figure,
    ci_label,
    label_points,
    markdown_table,
    md_code,
    md_text,
    slug,
    write_report,
)

PENHA2025 = ("Penha, Petrov, Hauff, Palumbo, Vardasbi, D’Amico, Fabbri, Wang, Chandar, Lindström, Bouchard, "
             "Lalmas (2025). From IR to RecSys: Evaluating LLM-based Judges in Cranfield-style Recommendation "
             "Collections. arXiv 2511.23312.")

CARD_FIELDS = (
    "collection", "split", "candidate set", "systems", "pre-sort candidate order", "tie prevalence",
    "tie-breaking rule", "permutation check", "tie sensitivity", "judge", "judge model", "template hash",
    "fields", "profile size", "repeats", "judge cost", "labels compared", "measures", "users counted", "seeds",
)


def _fig_system_scores(out: Path, cmp, measure: str) -> str:
    plt = load_pyplot()
    cands = list(cmp.candidates)
    # one panel per row: each stays ~650 px wide, readable without scaling down on an 800 px page
    fig, axes = plt.subplots(len(cands), 1, figsize=(5.4, 4.4 * len(cands)), squeeze=False)
    ref = cmp.reference.means(measure)
    for ax, cand in zip(axes[:, 0], cands):
        c = cmp.candidates[cand].means(measure).reindex(ref.index)
        ra = cmp.agreement[cand][measure]
        ax.scatter(ref.to_numpy(), c.to_numpy(), s=30)
        ax.set_xlabel(plain_text(f"{measure}, historical labels"))
        ax.set_ylabel(plain_text(f"{measure}, {cand}"))
        ax.set_title(plain_text(f"{cand}: every system ties, τ-b undefined" if ra.undefined else
                            f"{cand}: τ-b {ra.kendall_tau:.3f} "
                            f"[{ra.kendall_tau_ci[0]:.2f}, {ra.kendall_tau_ci[1]:.2f}]"), fontsize=10)
        ax.grid(alpha=0.3)
        ax.margins(0.12)  # room for the labels of the outermost systems
    fig.suptitle(plain_text(f"System scores under each label source: {measure}"), fontsize=11)
    fig.tight_layout()
    for ax, cand in zip(axes[:, 0], cands):
        label_points(ax, ref.to_numpy(), cmp.candidates[cand].means(measure).reindex(ref.index).to_numpy(),
                     list(ref.index))
    name = f"fig-system-scores-{slug(measure)}.png"
    save_figure(fig, out / name)
    plt.close(fig)
    return name


def _fig_by_distance(out: Path, item_agreement) -> str:
    plt = load_pyplot()
    by = item_agreement.pairwise_by_distance
    d = sorted(by)
    agree = np.array([by[x].agree for x in d])
    tie = np.array([by[x].tie for x in d])
    dis = np.array([by[x].disagree for x in d])
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    x = np.arange(len(d))
    ax.bar(x, agree, label="agree", color="tab:green")
    ax.bar(x, tie, bottom=agree, label="tie", color="tab:gray")
    ax.bar(x, dis, bottom=agree + tie, label="disagree", color="tab:red")
    ax.set_xticks(x, [f"{k}\n(n={by[k].n_pairs})" for k in d])
    ax.set_xlabel("distance between the two historical labels")
    ax.set_ylabel("share of item pairs")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("Judge vs historical labels: pairwise agreement by label distance", fontsize=10)
    fig.tight_layout()
    save_figure(fig, out / "fig-agreement-by-distance.png")
    plt.close(fig)
    return "fig-agreement-by-distance.png"


def _fig_profile_size(out: Path, sweep: list[dict]) -> str | None:
    if not sweep:
        return None
    plt = load_pyplot()
    sizes = [r["profile_size"] for r in sweep]
    agree = np.array([r["agree"] for r in sweep])
    lo = np.array([r["agree_ci"][0] for r in sweep])
    hi = np.array([r["agree_ci"][1] for r in sweep])
    fig, ax = plt.subplots(figsize=(5.4, 3.6))
    ax.plot(sizes, agree, marker="o", label="agree")
    ax.fill_between(sizes, lo, hi, alpha=0.2, label="95% CI (users resampled)")
    ax.plot(sizes, [r["tie"] for r in sweep], marker="s", ls="--", label="tie")
    ax.set_xscale("log")
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel("profile size (rated history items shown to the judge)")
    ax.set_ylabel("share of item pairs")
    ax.legend(fontsize=8)
    ax.set_title("Agreement with historical labels against profile size", fontsize=10)
    fig.tight_layout()
    save_figure(fig, out / "fig-agreement-vs-profile-size.png")
    plt.close(fig)
    return "fig-agreement-vs-profile-size.png"


def _fig_judged(out: Path, frame: pd.DataFrame) -> str:
    plt = load_pyplot()
    fig, ax = plt.subplots(figsize=(max(5.5, 0.8 * len(frame) + 2), 3.8))
    width = 0.8 / len(frame.columns)
    x = np.arange(len(frame))
    for i, col in enumerate(frame.columns):
        ax.bar(x + i * width, frame[col].to_numpy(), width, label=plain_text(col))
    ax.set_xticks(x + width * (len(frame.columns) - 1) / 2, [plain_text(n) for n in frame.index], rotation=30,
                  ha="right", fontsize=8)
    ax.set_ylabel("Judged@100")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8)
    ax.set_title("Judged@100 per system under each label source", fontsize=10)
    fig.tight_layout()
    save_figure(fig, out / "fig-judged-at-100.png")
    plt.close(fig)
    return "fig-judged-at-100.png"


def _pct(x) -> str:
    return "–" if x is None else f"{x:.0%}"


def _tie_tables(audit, what: str) -> list[str]:
    """A tie audit as Markdown tables that wrap to the page (prevalence, then one table per measure)."""
    s = audit.settings
    k = s.cutoffs[0]
    rows = []
    for r in audit.runs:
        p = r.prevalence
        rows.append({what: r.name, "users": p.users, "tied": _pct(p.tied), f"tied@{k}": _pct(p.touching_top[0]),
                     f"cross@{k}": _pct(p.crossing_top[0]), f"inside@{k}": _pct(p.inside_top[0]),
                     f"relevant tied@{k}": _pct(p.relevant_touching_top[0]) if audit.qrels else "–",
                     "tied rows": _pct(p.tied_rows), "largest block": p.largest_block})
    md = ["Share of users whose ranking holds an exact score tie, before any tie policy "
          f"(tied@{k}: a tie block reaches the top {k}; cross@{k}: it holds ranks {k} and {k + 1}, so it decides "
          f"what enters the top {k}; inside@{k}: it lies wholly in the top {k}, so it decides positions; relevant: "
          "it holds an item labelled 1 or more):", "", markdown_table(pd.DataFrame(rows), index=False), ""]
    for name in s.measures:
        rows = []
        for r in audit.runs:
            m = next(x for x in r.measures if x.measure == name)
            rows.append({what: r.name, "input order": m.input_order, f"hash (seed {s.seed})": m.hash,
                         "expected": m.expected, f"mean over {s.seeds} hash seeds": m.hash_seeds_mean,
                         "sd": m.hash_seeds_sd,
                         "input − expected": f"{round(m.input_order - m.expected, 4) + 0.0:+.4f}",
                         "shuffled rows, max change": m.permutation})
        md += [f"{md_text(name)}, mean over {audit.counted_users} users of {md_code(audit.qrels)}:", "",
               markdown_table(pd.DataFrame(rows), index=False), ""]
    if s.measures:
        md += ["Input order: equal scores in the order of the list (a stable sort); hash: the disclosed "
               f"seeded hash policy; expected: a uniformly random order within tie blocks (exact); shuffled rows: "
               f"the largest change of the mean over {s.permutations} seeded shuffles of each user's rows, under "
               "input order (under the hash policy it is 0).", ""]
    md += [f"_{md_text(n)}_" for n in audit.notes]
    return md


def _tie_audit_section(audit) -> list[str]:
    systems = audit["systems"]
    tied = [r.name for r in systems.runs if r.prevalence.tied > 0]
    md = ["## Tie audit", "",
          "### The trained systems, before tie-breaking", "",
          "The exported runs are tie-free (the hash policy ordered equal scores at export), so this audit reads "
          f"each system's own scores as it ranked them, ties kept (written to {md_code(audit['raw_runs'])}), "
          "and scores them against the historical labels. "
          + (f"{len(tied)} of {len(systems.runs)} systems have ties: " + ", ".join(md_code(n) for n in tied) + "."
             if tied else "No system's ranking has an exact score tie: tie-breaking changes nothing here."), "",
          *_tie_tables(systems, "system"),
          "### Sampled candidates (1 held-out item among sampled negatives)", "",
          f"Two tie-heavy scorers that are not trained systems (item popularity and genre overlap with the "
          f"user's history) rank 1 held-out liked item + {audit['negatives']} sampled negatives per user, "
          "listed relevant first: under input order the relevant item wins every tie.", "",
          *_tie_tables(audit["audit"], "scorer")]
    return md


def evaluation_card(*, settings, collection, split_info, train_results, judged, judge_name, audit, cmp,
                    item_agreement) -> dict[str, str]:
    prov = dict(judged.provenance)
    shares = {r.system: r.tied_user_share for r in train_results if r.ok and r.tied_user_share is not None}
    tied_systems = ", ".join(f"{k} {v:.0%}" for k, v in sorted(shares.items(), key=lambda kv: -kv[1]))
    perm, sens = [], []
    for label, tie_audit in (("trained systems before tie-breaking", audit["systems"]),
                             ("sampled candidates", audit["audit"])):
        cells = [(run.name, m) for run in tie_audit.runs for m in run.measures]
        if not cells:
            continue
        moved = max(cells, key=lambda c: c[1].permutation)
        hashed = max(c[1].permutation_hash for c in cells)
        perm.append(f"{label}: shuffling a user's rows moves a measure by up to {moved[1].permutation:.3f} under "
                    f"input order ({moved[0]} {moved[1].measure}), {hashed:.3f} under the hash policy")
        far = max(cells, key=lambda c: abs(c[1].input_order - c[1].expected))
        seeds = max(c[1].hash_seeds_sd for c in cells)
        sens.append(f"{label}: input order − expected up to {far[1].input_order - far[1].expected:+.3f} "
                    f"({far[0]} {far[1].measure}); sd over hash seeds up to {seeds:.3f}")
    template = prov.get("template") or {}
    profiles = prov.get("profiles") or {}
    summary = judged.summary
    llm = prov.get("llm", summary.kind == "llm")
    cost = f"${summary.cost:.4f}" if summary.cost is not None else "unknown (no price for this model)"
    return {
        "collection": f"{collection.name} ({collection.info.get('source', 'recbole wheel')}): "
                      f"{collection.interactions.user.nunique()} users, {len(collection.items)} items, "
                      f"{len(collection.interactions):,} ratings" + (
                          f"; users sampled: {settings.max_users} (seed {settings.seed})" if settings.max_users else ""),
        "split": f"global time split at timestamp {split_info.get('cut_timestamp')} (quantile 0.8, exact "
                 f"seconds); {split_info.get('test_users')} test users with training history, "
                 f"{split_info.get('cold_test_users_dropped')} cold test users dropped",
        "candidate set": "full catalogue of training items minus each user's own training history; top-100 per "
                         "user. Tie audit: the same rankings before tie-breaking; and sampled candidates, 1 "
                         f"held-out liked item + {audit['negatives']} negatives from {audit['catalogue']} items, "
                         f"seeded, history excluded, {audit['users']} users",
        "systems": ", ".join(r.system for r in train_results if r.ok) + (
            "; failed: " + ", ".join(r.system for r in train_results if not r.ok)
            if any(not r.ok for r in train_results) else ""),
        "pre-sort candidate order": "full-catalogue runs: item-id order of the model's score vector; sampled "
                                    "candidates: relevant item first, then negatives in sampled order",
        "tie prevalence": f"users with exact score ties in their top-100 before the policy: {tied_systems}",
        "tie-breaking rule": f"{settings.tie_policy} (seed {settings.seed}): BLAKE2b+splitmix64 of seed, user, "
                             "item; item id as collision fallback; scores then rewritten as n…1",
        "permutation check": "; ".join(perm),
        "tie sensitivity": "; ".join(sens) + " (every system and measure: the report's tie audit)",
        "judge": f"{judge_name} — {'LLM' if llm else 'non-LLM baseline (not an LLM)'}",
        "judge model": str(prov.get("model", "none (offline)")),
        "template hash": (f"{template['name']} sha256:{template['sha256'][:16]}" if template.get("sha256")
                          else "none (no prompt)"),
        "fields": str(profiles.get("fields", settings.fields)),
        "profile size": str(profiles.get("profile_size", settings.profile_size)),
        "repeats": str(prov.get("repeats", 1)),
        "judge cost": f"{summary.calls} calls, {summary.cache_hits} cache hits, {summary.usage.prompt:,} "
                      f"prompt tokens, cost {cost}",
        "labels compared": f"historical (held-out ratings, rating − 1 → 0–4) vs {judge_name}"
                           + (" vs filled" if "filled" in cmp.candidates else
                              " (gap filling refused: the calibration cannot carry the judge's order)")
                           + f"; {item_agreement.n_pairs} shared pairs for item agreement",
        "measures": "; ".join(dict(cmp.settings.get("measure_definitions") or {}).values()
                              or cmp.settings["measures"]),
        "users counted": f"{cmp.settings['queries']}: each label set over the users it judges; a user a run "
                         "lacks scores 0",
        "seeds": f"{settings.seed} for every seeded step: user sample, pair sample, judge profiles, tie hash, "
                 f"tie-audit negatives, bootstrap ({cmp.settings['bootstrap']} resamples, "
                 f"{ci_label(cmp.settings)}); the time split needs none",
    }


def write_demo_report(out: Path, *, settings, collection, split_info, train_results, historical, judge_q,
                      judged, judge_name, filled, calibration, item_agreement, sweep, compare_result, scenario,
                      audit, paths: Mapping[str, Path], step_times: Mapping[str, float], fill_needs: str = "") -> Path:
    cmp = compare_result
    judged_per_system = scenario.judged_systems
    figs: dict[str, str | None] = {}
    for m in cmp.settings["measures"]:
        figs[f"scores {m}"] = _fig_system_scores(out, cmp, m)
    figs["distance"] = _fig_by_distance(out, item_agreement)
    figs["profile"] = _fig_profile_size(out, sweep)
    figs["judged"] = _fig_judged(out, judged_per_system)
    card = evaluation_card(settings=settings, collection=collection, split_info=split_info,
                           train_results=train_results, judged=judged, judge_name=judge_name, audit=audit,
                           cmp=cmp, item_agreement=item_agreement)
    llm = judged.summary.kind == "llm"
    title = f"recjudge demo: MovieLens-100K, historical labels vs {'an LLM' if llm else 'an offline'} judge"
    md: list[str] = [f"# {title}", ""]
    if not llm:
        md += ["> **Read this first.** The reference here is *historical* qrels — the ratings users "
               "happened to give after the split — not human Cranfield judgments, and the judge is the "
               f"non-LLM {md_code(judge_name)} baseline (no LLM endpoint was configured). The numbers show the "
               "pipeline working end to end; they say nothing yet about how far an LLM can be trusted.", ""]
    else:
        md += ["> **Read this first.** The reference here is *historical* qrels — held-out ratings — not "
               "human Cranfield judgments.", ""]
    md += [
        "For the real comparison, point recjudge at the ML-32M-ext release (access-restricted), whose "
        "`qrels/` hold pooled human interest judgments on the 0–7 scale. The `full` split trains on every "
        "rating and ranks the judged participants with their whole profile masked:",
        "",
        # continuation lines keep each command within a page's width, and still copy-paste as one
        "```bash",
        "recjudge train --collection /path/to/ml-32m-ext --split full \\",
        "    --grid quick --out runs/ml-32m-ext",
        "recjudge judge --runs runs/ml-32m-ext --collection /path/to/ml-32m-ext \\",
        "    --split none --out qrels/llm.qrels --depth 10 \\",
        "    --model MODEL --base-url URL",
        "recjudge compare --runs runs/ml-32m-ext \\",
        "    --reference /path/to/ml-32m-ext/qrels/*interest*.qrels \\",
        "    --candidate qrels/llm.qrels --report out/ml-32m-ext",
        "```",
        "",
        "## Pipeline",
        "",
        markdown_table(pd.DataFrame({"step": list(step_times), "seconds": [f"{v:.1f}" for v in step_times.values()]}),
                       index=False),
        "",
        "Systems trained (ties: share of users with exact score ties in the top-100 before the tie policy):",
        "",
        markdown_table(pd.DataFrame([{"system": r.system, "model": r.model, "status": r.status,
                                      "seconds": f"{r.seconds:.1f}", "users": r.users,
                                      "tied users": "" if r.tied_user_share is None else f"{r.tied_user_share:.0%}",
                                      "note": r.error or ""} for r in train_results]), index=False),
        "",
        "## Label sources",
        "",
        f"- historical: {len(historical):,} labels for {len(historical.qids)} users → "
        f"{md_code(paths['historical'])}",
        f"- {md_text(judge_name)}: {len(judge_q):,} labels (pool depth {settings.depth} ∪ {settings.per_user} "
        f"historical items per user) → {md_code(paths['judge'])}",
        (f"- filled: {filled.n_human:,} historical + {filled.n_filled:,} calibrated judge labels "
         f"({filled.n_unfilled:,} top-{settings.depth} items unlabelled) → {md_code(paths['filled'])} "
         f"(sources: {md_code(paths['sources'])})" if filled is not None else
         "- filled: **refused** — the calibration below cannot carry the judge's order onto the historical "
         "scale, so a filled ranking would show the fill, not the judge:"),
        *([f"  - {md_text(p)}" for p in calibration.problems()] if filled is None else []),
        *([f"  - What would make it work: {md_text(fill_needs)}."] if filled is None and fill_needs else []),
        "",
        f"Calibration of {md_text(judge_name)} grades to the historical scale (mean historical label per grade, "
        "rounded half up):",
        "",
        markdown_table(calibration.to_frame().reset_index(), index=False),
        "",
        "## System rankings (as in Figure 5 of Penha et al. 2025)",
        "",
    ]
    for cand, by in cmp.agreement.items():
        rows = [{"measure": m, "τ-b": ra.kendall_tau, "p": format_p_value(ra), ci_label(cmp.settings): ci_cell(ra),
                 "weighted τ_h": ra.weighted_tau, "τ_AP": ra.tau_ap,
                 "median abs Δrank": ra.median_abs_rank_displacement} for m, ra in by.items()]
        md += [f"Historical vs {md_code(cand)}:", "", markdown_table(pd.DataFrame(rows), index=False), ""]
        md += [f"- {md_text(m)}: {md_text(ra.undefined)}." for m, ra in by.items() if ra.undefined]
        md += [""] if any(ra.undefined for ra in by.values()) else []
        md += [*(md_text(n) for n in ci_notes(by)), ""] if ci_notes(by) else []
    for m in cmp.settings["measures"]:
        md += [f"![System scores, {md_text(m)}]({figs[f'scores {m}']})", ""]
    md += ["### Scenarios", "",
           markdown_table(pd.DataFrame({"average Judged@100": scenario.judged}).rename_axis("scenario")), ""]
    for m, tau in scenario.tau.items():
        md += [f"Kendall τ-b between scenario rankings, {md_text(m)}:", "", markdown_table(tau.rename_axis("")),
               ""]
    md += [f"_{md_text(w)}_" for w in scenario.warnings] + [""]
    md += ["### Judged@100 per system", "", f"![Judged@100]({figs['judged']})", "",
           markdown_table(judged_per_system.rename_axis("system")), ""]
    pw = item_agreement.pairwise
    md += ["## Item-level agreement with the historical labels (as in Figure 4 of Penha et al. 2025)", "",
           f"Over {item_agreement.n_pairs:,} (user, item) pairs both label: Cohen's κ "
           f"{item_agreement.cohen_kappa:.3f} (linear {item_agreement.cohen_kappa_linear:.3f}), Krippendorff's α "
           f"ordinal {item_agreement.krippendorff_alpha_ordinal:.3f} (interval "
           f"{item_agreement.krippendorff_alpha_interval:.3f}); over {pw.n_pairs:,} item pairs with different "
           f"historical labels the judge agrees {pw.agree:.3f} "
           + (pw.ci_missing or f"[{pw.agree_ci[0]:.3f}, {pw.agree_ci[1]:.3f}]{'*' if pw.ci_note else ''}")
           + f", ties {pw.tie:.3f}, disagrees {pw.disagree:.3f}."
           + (f" (*) The interval: {pw.ci_summary or pw.ci_note}." if pw.ci_note else ""), "",
           f"![Agreement by distance]({figs['distance']})", ""]
    if figs["profile"]:
        md += ["## Agreement against profile size (as in Figure 3 of Penha et al. 2025)", "",
               f"![Profile size]({figs['profile']})", "",
               markdown_table(pd.DataFrame([{k: v for k, v in r.items() if k != "agree_ci"} for r in sweep]),
                              index=False), ""]
    md += _tie_audit_section(audit)
    md += ["## Evaluation card", "", "| field | value |", "|---|---|"]
    md += [f"| {md_text(k)} | {md_text(v)} |" for k, v in card.items()]
    md += ["", "## References", "", f"- {md_text(PENHA2025)}", ""]
    path = write_report(out, "\n".join(md), title)
    write_json(out / "card.json", card)
    return path
