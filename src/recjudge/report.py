"""Reports: Markdown with PNG plots a reader would rather look at than read.

matplotlib is imported only when a report is written (Agg backend, no display needed).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ._io import atomic_write
from .metaeval import CompareResult, EvaluationResult

__all__ = ["write_compare_report", "write_evaluation_report", "markdown_table", "slug"]


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "x"


def _fmt(x) -> str:
    if isinstance(x, (float, np.floating)):
        return "–" if x != x else f"{x:.4f}"
    return str(x).replace("|", "/")


def markdown_table(frame: pd.DataFrame, index: bool = True) -> str:
    cols = ([frame.index.name or ""] if index else []) + [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    # itertuples keeps each column's dtype, so integer columns print as integers
    for row in frame.itertuples(index=index, name=None):
        lines.append("| " + " | ".join(_fmt(v) for v in row) + " |")
    return "\n".join(lines)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120, bbox_inches="tight")


def plot_scatter(ref: pd.Series, cand: pd.Series, measure: str, title: str, path: Path,
                 ref_label: str, cand_label: str) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    ax.scatter(ref.to_numpy(), cand.reindex(ref.index).to_numpy(), s=28, alpha=0.8)
    if len(ref) <= 25:
        for name in ref.index:
            ax.annotate(str(name), (ref[name], cand[name]), fontsize=7, alpha=0.75,
                        xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(f"{measure} under {ref_label}")
    ax.set_ylabel(f"{measure} under {cand_label}")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_displacement(displacement: pd.Series, title: str, path: Path) -> None:
    plt = _pyplot()
    d = displacement.sort_values(kind="stable")
    fig, ax = plt.subplots(figsize=(6.4, max(2.5, 0.22 * len(d) + 1)))
    colors = ["tab:red" if v > 0 else "tab:blue" if v < 0 else "tab:gray" for v in d.to_numpy()]
    ax.barh([str(i) for i in d.index], d.to_numpy(), color=colors)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel("rank under candidate − rank under reference (positive: drops)")
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _tie_note(settings: Mapping[str, object], tie_share: Mapping[str, float]) -> list[str]:
    exported = dict(settings.get("export_ties") or {})
    lines = [f"- Tie policy: `{settings.get('tie_policy')}` (seed {settings.get('seed')}); ties in "
             "each ranking are ordered by this rule and scores rewritten as strictly decreasing "
             "rank-derived values before any measure runs."]
    in_file = {n: v for n, v in tie_share.items() if v == v and n not in exported}
    if in_file:
        lines.append(f"- Share of users with exact score ties in their top-100 in the run files: median "
                     f"{pd.Series(list(in_file.values())).median():.3f}, max {max(in_file.values()):.3f} over "
                     f"{len(in_file)} runs.")
    if exported:
        parts = [f"{n} {e.get('tied_user_share', float('nan')):.0%} ({e.get('tie_policy')}, seed "
                 f"{e.get('tie_seed')})" for n, e in sorted(exported.items())
                 if isinstance(e.get("tied_user_share"), (int, float))]
        lines.append(f"- {len(exported)} runs were already tie-free on disk: their ties were resolved at "
                     "export, so the policy above changes nothing for them. Users with ties in the top-k "
                     "before export: " + ", ".join(parts) + ".")
    return lines


def write_compare_report(result: CompareResult, out_dir: str | os.PathLike, title: str = "recjudge compare") -> Path:
    """Write ``report.md`` with per-measure scatter plots and rank displacement plots."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    s = result.settings
    md: list[str] = [f"# {title}", ""]
    md += [
        f"Reference labels: `{s['reference']}`. Candidates: " + ", ".join(f"`{c}`" for c in s["candidates"]) + ".",
        "",
        "## Settings",
        f"- Measures: {', '.join(s['measures'])}",
        f"- Users counted: `{s['queries']}` ("
        + ("each label set over the users it judges" if s["queries"] == "own"
           else "only users judged by both label sets") + "); a user a run does not rank scores 0.",
        f"- Bootstrap: {s['bootstrap']} resamples of users, percentile 95% CI, seed {s['seed']}.",
        *_tie_note(s, result.tie_share),
        "",
    ]
    for cand, by_measure in result.agreement.items():
        md += [f"## Reference vs `{cand}`", ""]
        rows = []
        for m, ra in by_measure.items():
            rows.append({
                "measure": m,
                "Kendall τ-b": ra.kendall_tau,
                "95% CI": f"[{ra.kendall_tau_ci[0]:.3f}, {ra.kendall_tau_ci[1]:.3f}]",
                "weighted τ_h": ra.weighted_tau,
                "τ_AP": ra.tau_ap,
                "median abs Δrank": ra.median_abs_rank_displacement,
                "max abs Δrank": ra.max_abs_rank_displacement,
            })
        md += [markdown_table(pd.DataFrame(rows).set_index("measure")), ""]
        table = result.candidates[cand]
        ref_table = result.reference_table(cand)
        for m, ra in by_measure.items():
            ref_means = ref_table.means(m)
            cand_means = table.means(m)
            base = f"{slug(cand)}-{slug(m)}"
            plot_scatter(ref_means, cand_means, m,
                         f"{m}: τ-b = {ra.kendall_tau:.3f}, τ_AP = {ra.tau_ap:.3f}",
                         out / f"scatter-{base}.png", result.settings["reference"], cand)
            disp = table.ranks(m) - ref_table.ranks(m)
            plot_displacement(disp, f"{m}: rank displacement, {cand} vs reference", out / f"displacement-{base}.png")
            md += [f"### {m}", "", f"![{m} scatter](scatter-{base}.png) ![{m} displacement](displacement-{base}.png)", ""]
            if ra.most_displaced:
                md.append("Most displaced: " + ", ".join(f"`{n}` ({d:+g})" for n, d in ra.most_displaced) + ".")
                md.append("")
    md += ["## System scores under the reference", ""]
    ref_scores = result.reference.scores_frame()
    ref_scores.index.name = "system"
    md += [markdown_table(ref_scores), ""]
    for cand, table in result.candidates.items():
        md += [f"## System scores under `{cand}`", ""]
        sc = table.scores_frame()
        sc.index.name = "system"
        md += [markdown_table(sc), ""]
    path = out / "report.md"
    with atomic_write(path) as fh:
        fh.write("\n".join(md))
    return path


def write_evaluation_report(result: EvaluationResult, out_dir: str | os.PathLike,
                            title: str = "recjudge evaluate") -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sc = result.table.scores_frame()
    sc.index.name = "system"
    md = [f"# {title}", "", f"Labels: `{result.settings['qrels']}`.", "", *_tie_note(result.settings, result.tie_share),
          "", markdown_table(sc.sort_values(sc.columns[0], ascending=False)), ""]
    path = out / "report.md"
    with atomic_write(path) as fh:
        fh.write("\n".join(md))
    return path
