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


def _tie_tables(audit, what: str) -> dict:
    """A tie audit's tables (prevalence, then one per measure) and what the template says beside them."""
    s = audit.settings
    k = s.cutoffs[0]
    rows = []
    for r in audit.runs:
        p = r.prevalence
        rows.append({what: r.name, "users": p.users, "tied": _pct(p.tied), f"tied@{k}": _pct(p.touching_top[0]),
                     f"cross@{k}": _pct(p.crossing_top[0]), f"inside@{k}": _pct(p.inside_top[0]),
                     f"relevant tied@{k}": _pct(p.relevant_touching_top[0]) if audit.qrels else "–",
                     "tied rows": _pct(p.tied_rows), "largest block": p.largest_block})
    measures = []
    for name in s.measures:
        by_run = []
        for r in audit.runs:
            m = next(x for x in r.measures if x.measure == name)
            by_run.append({what: r.name, "input order": m.input_order, f"hash (seed {s.seed})": m.hash,
                           "expected": m.expected, f"mean over {s.seeds} hash seeds": m.hash_seeds_mean,
                           "sd": m.hash_seeds_sd,
                           "input − expected": f"{round(m.input_order - m.expected, 4) + 0.0:+.4f}",
                           "shuffled rows, max change": m.permutation})
        measures.append((name, pd.DataFrame(by_run)))
    return {"k": k, "prevalence": pd.DataFrame(rows), "measures": measures, "users": audit.counted_users,
            "qrels": audit.qrels, "permutations": s.permutations, "notes": list(audit.notes)}


def _tie_checks(audit) -> tuple[list[str], list[str]]:
    """The card's permutation check and tie sensitivity: the largest change each tie audit found."""
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
    return perm, sens


def evaluation_card(*, settings, collection, split_info, train_results, judged, judge_name, audit, cmp,
                    item_agreement) -> dict[str, str]:
    prov = dict(judged.provenance)
    shares = {r.system: r.tied_user_share for r in train_results if r.ok and r.tied_user_share is not None}
    tied_systems = ", ".join(f"{k} {v:.0%}" for k, v in sorted(shares.items(), key=lambda kv: -kv[1]))
    perm, sens = _tie_checks(audit)
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
    """report.md (from the template ``templates/demo.md.j2``), report.html, the figures and card.json."""
    from .templates import render

    cmp = compare_result
    figs: dict[str, str | None] = {f"scores {m}": _fig_system_scores(out, cmp, m) for m in cmp.settings["measures"]}
    figs.update(distance=_fig_by_distance(out, item_agreement), profile=_fig_profile_size(out, sweep),
                judged=_fig_judged(out, scenario.judged_systems))
    card = evaluation_card(settings=settings, collection=collection, split_info=split_info,
                           train_results=train_results, judged=judged, judge_name=judge_name, audit=audit,
                           cmp=cmp, item_agreement=item_agreement)
    llm = judged.summary.kind == "llm"
    title = f"recjudge demo: MovieLens-100K, historical labels vs {'an LLM' if llm else 'an offline'} judge"
    markdown = render(
        "demo.md.j2", title=title, llm=llm, judge_name=judge_name, settings=settings, paths=paths,
        historical=historical, judge_q=judge_q, filled=filled, calibration=calibration, fill_needs=fill_needs,
        pipeline=pd.DataFrame({"step": list(step_times), "seconds": [f"{v:.1f}" for v in step_times.values()]}),
        systems=_systems_frame(train_results), rankings=_rankings(cmp),
        score_figures=[(m, figs[f"scores {m}"]) for m in cmp.settings["measures"]], scenario=scenario,
        scenario_judged=pd.DataFrame({"average Judged@100": scenario.judged}).rename_axis("scenario"),
        scenario_taus=[(m, tau.rename_axis("")) for m, tau in scenario.tau.items()],
        judged_per_system=scenario.judged_systems.rename_axis("system"), figs=figs, item_agreement=item_agreement,
        sweep=pd.DataFrame([{k: v for k, v in r.items() if k != "agree_ci"} for r in sweep]),
        raw_runs=audit["raw_runs"], systems_audit=audit["systems"], negatives=audit["negatives"],
        tied=[r.name for r in audit["systems"].runs if r.prevalence.tied > 0],
        ties_systems=_tie_tables(audit["systems"], "system"), ties_candidates=_tie_tables(audit["audit"], "scorer"),
        card=card, penha2025=PENHA2025)
    path = write_report(out, markdown, title)
    write_json(out / "card.json", card)
    return path


def _systems_frame(train_results) -> pd.DataFrame:
    return pd.DataFrame([{"system": r.system, "model": r.model, "status": r.status, "seconds": f"{r.seconds:.1f}",
                          "users": r.users,
                          "tied users": "" if r.tied_user_share is None else f"{r.tied_user_share:.0%}",
                          "note": r.error or ""} for r in train_results])


def _rankings(cmp) -> list[dict]:
    """Per candidate: its τ table against the historical labels, the measures whose τ is undefined and why,
    and the notes of flagged intervals."""
    out = []
    for cand, by in cmp.agreement.items():
        rows = [{"measure": m, "τ-b": ra.kendall_tau, "p": format_p_value(ra), ci_label(cmp.settings): ci_cell(ra),
                 "weighted τ_h": ra.weighted_tau, "τ_AP": ra.tau_ap,
                 "median abs Δrank": ra.median_abs_rank_displacement} for m, ra in by.items()]
        out.append({"candidate": cand, "frame": pd.DataFrame(rows),
                    "undefined": [(m, ra.undefined) for m, ra in by.items() if ra.undefined],
                    "ci_notes": ci_notes(by)})
    return out
