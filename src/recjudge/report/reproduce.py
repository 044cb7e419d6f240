"""The report of ``recjudge reproduce``: every table and figure, each cell beside the published value
and the difference, the settings that differ from the paper, as Markdown, HTML, PNG figures and one JSON."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tabulate import DataRow, TableFormat, tabulate

from .evaluation import load_pyplot, md_text, save_figure, write_report

__all__ = ["TARGET_TITLES", "format_duration", "write_reproduce_report"]

TARGET_TITLES = {
    "dataset": "The release against Section 3's statistics, and the systems' coverage",
    "table1": "Table 1: Judged@100, historical 80/20 split vs Cranfield pooling, per system group",
    "figure2": "Figure 2 and Section 4: historical vs Cranfield system ranking on nDCG@100",
    "table3": "Table 3: item agreement per metadata field set (human 0 vs 1-7 pairs, the LLM's raw labels, K = 50)",
    "figure3": "Figure 3: item agreement per profile size (history items shown)",
    "figure4": "Figure 4: item agreement by the distance between the two human labels",
    "table4": "Table 4: K judged items per participant, τ and weighted τ against the complete human qrels",
    "figure5": "Figure 5 and Section 5.2: system ranks under the LLM's labels (K = 100) vs the human labels",
    "table5": "Table 5: Human-only, LLM fills gaps, Full LLM (τ on Compat, Judged@100) and its calibration",
    "table8": "Table 8: baseline vs defined-scale prompt, item agreement (K = 50)",
    "table9": "Table 9: baseline vs defined-scale prompt, τ at K = 100",
    "table3 kappa": "Beyond the paper: Cohen's κ per Table 3 row",
    "significance": "Beyond the paper: significance agreement and the top of the ranking (Full LLM vs human)",
    "audit": "Judge audit: popularity bias",
}


# how each statistic of the report is computed, where the paper names only the statistic
STATISTICS_NOTES = (
    "τ is Kendall's τ-b (scipy.stats.kendalltau, ties counted as in τ-b; its p-value two-sided).",
    "Weighted τ is scipy.stats.weightedtau with its default hyperbolic weigher (an exchange at ranks r and s "
    "weighs 1/(r+1) + 1/(s+1)) and rank=True: the ranks come from each score vector in decreasing order and "
    "the two weighted τ values are averaged.",
    "Intervals of a mean over experiments are Student t-intervals across the experiments on the Fisher-z scale "
    "of the statistic's range (one experiment gives none); agreement shares are built as shares and shown on "
    "the paper's percent scale where it prints percents.",
    "Table 5's LLM fills gaps column maps each LLM grade to the mean human label of the pool items both label, "
    "rounded half up to a whole label (qrels hold integers): see 'Settings that differ from the paper'.",
)


def format_duration(seconds: float) -> str:
    """A wall time as people say it: 45 s, 12 min, 3.5 h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _num(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float) and abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4f}" if isinstance(x, float) else str(x)


# the report's tables as Markdown pipe tables, cells as written: no padding, no alignment colons
_PIPE = TableFormat(lineabove=None, linebelowheader=lambda widths, _: "|" + "---|" * len(widths),
                    linebetweenrows=None, linebelow=None, headerrow=DataRow("|", "|", "|"),
                    datarow=DataRow("|", "|", "|"), padding=1, with_header_hide=None)


def _table(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown table (tabulate): headers and text escaped, numbers to 4 decimals, NaN as –."""
    rows = [[_cell(v) for v in row] for row in frame.itertuples(index=False, name=None)]
    return tabulate(rows, headers=[md_text(c) for c in frame.columns], tablefmt=_PIPE, stralign=None, numalign=None,
                    disable_numparse=True)


def _cell(x: Any) -> str:
    if isinstance(x, (float, np.floating)):
        return "–" if x != x else f"{x:.4f}"
    if isinstance(x, (int, np.integer)):
        return str(x)
    return md_text(x)


def _cells_table(frame: pd.DataFrame) -> str:
    def on_scale(v, unit):  # percent cells read as the paper prints them; None and NaN as "–"
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        if unit == "percent":
            return f"{v:.2f}%"
        if unit in ("count", "tokens", "rank", "CAD") and float(v).is_integer():
            return f"{v:,.0f}"
        return _num(v)

    def inside(v, published):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        bound = "±" if "±" in published else "bound"
        return f"yes (within the {bound})" if v else f"no (outside the {bound})"

    shown = pd.DataFrame({
        "row": frame.row, "column": frame.column, "ours": [on_scale(v, u) for v, u in zip(frame.ours, frame.unit)],
        "published": frame.published,
        "difference": [on_scale(v, u) for v, u in zip(frame.difference, frame.unit)],
        "inside": [inside(v, p) for v, p in zip(frame.inside, frame.published)], "note": frame.note})
    return _table(shown)


def _plot_figures(result, fig_dir: Path) -> dict[str, Path]:
    """One PNG per figure whose data was computed (matplotlib loaded here only)."""
    figs = result.figures
    if not figs:
        return {}
    plt = load_pyplot()
    fig_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}

    def ranks(key: str, xlab: str, ylab: str, title: str) -> None:
        data = figs[key]["ranks"]
        fig, ax = plt.subplots(figsize=(5.2, 4.8))
        ax.scatter(data.iloc[:, 0], data.iloc[:, 1], s=26, alpha=0.8)
        n = len(data)
        ax.plot([1, n], [1, n], color="gray", lw=0.8, ls="--")
        if n <= 30:
            for name, (a, b) in data.iterrows():
                ax.annotate(str(name), (a, b), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel(xlab)
        ax.set_ylabel(ylab)
        ax.set_title(title, fontsize=10)
        ax.invert_xaxis()
        ax.invert_yaxis()
        ax.grid(alpha=0.3)
        paths[key] = fig_dir / f"{key}.png"
        save_figure(fig, paths[key])
        plt.close(fig)

    if "figure2" in figs:
        f = figs["figure2"]
        ranks("figure2", "rank, historical runs under historical qrels", "rank, Cranfield runs under human qrels",
              f"{f['measure']}: τ = {f['tau']:.3f} (p = {f['p']:.3g})")
    if "figure5" in figs:
        f = figs["figure5"]
        ranks("figure5", "rank under the human labels", "rank under the LLM's labels (K = 100)",
              f"{f['measure']}: τ = {f['tau']:.3f}")
    for key, title in (("table3", "agreement per field set"), ("figure3", "agreement per profile size"),
                       ("figure4", "agreement by human label distance")):
        if key in figs and figs[key]:
            paths[key] = _shares_figure(plt, figs[key], title, fig_dir / f"{key}.png")
    if figs.get("table4"):
        paths["table4"] = _tau_by_k_figure(plt, figs["table4"], fig_dir / "table4.png")
    return paths


def _shares_figure(plt, shares, title: str, path: Path) -> Path:
    """Agree / tie / disagree per row as stacked horizontal bars."""
    data = pd.DataFrame(shares).T[["agree", "tie", "disagree"]].astype(float)
    fig, ax = plt.subplots(figsize=(6.4, max(2.6, 0.32 * len(data) + 1.2)))
    left = pd.Series(0.0, index=data.index)
    for col, color in (("agree", "tab:green"), ("tie", "tab:gray"), ("disagree", "tab:red")):
        ax.barh([str(i) for i in data.index], data[col], left=left, color=color, label=col)
        left += data[col]
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of item pairs")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    save_figure(fig, path)
    plt.close(fig)
    return path


def _tau_by_k_figure(plt, taus, path: Path) -> Path:
    """Table 4's τ per measure against K."""
    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    for m, by_k in taus.items():
        ks = sorted(by_k)
        ax.plot(ks, [by_k[k] for k in ks], marker="o", label=m)
    ax.set_xscale("log")
    ax.set_xlabel("K judged items per participant")
    ax.set_ylabel("Kendall τ vs complete human qrels")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    save_figure(fig, path)
    plt.close(fig)
    return path


def _markdown(result, figure_paths: dict[str, Path], out: Path) -> str:
    lines = _opening(result) + _plan_section(result)
    cells = result.cells
    order = [t for t in TARGET_TITLES if t in set(cells.target) or t in result.extras.get("not_computed", {})
             or t in figure_paths]
    for target in order:
        lines += _target_section(result, target, figure_paths, out)
    lines += ["", "## Notes on the statistics", ""]
    lines += [f"- {md_text(n)}" for n in STATISTICS_NOTES]
    context = result.extras.get("published_context") or []
    if context:
        lines += ["", "## Published context: Table 6 (the podcast case study, not reproduced)", "",
                  _table(pd.DataFrame([{"row": c["row"], "column": c["column"], "published": c["value"]}
                                       for c in context]))]
    return "\n".join(lines) + "\n"


def _opening(result) -> list[str]:
    """The title, whether every target was computed, what a cell shows, the warnings, the settings that
    differ from the paper and where the paper contradicts itself."""
    s = result.settings
    lines = ["# Reproduction of Penha et al. 2025 (penha2025)", ""]
    if result.complete:
        lines.append("Every chosen table and figure was computed.")
    else:
        lines.append(f"**Incomplete**: {md_text(result.stopped or 'some targets were not computed')}. "
                     "What was judged is in the cache; run the same command again to resume.")
    lines += ["", (f"Collection `{s.get('collection')}`; targets: {', '.join(s.get('only', []))}; "
              f"{s.get('experiments')} experiment(s), K = {s.get('per_user')} items per participant for the "
              "alignment tables. Each cell: our value, the published value (as the paper prints it, in its "
              "table or text), our value minus the published one (percent cells compare our share × 100) and, "
              "where the paper prints a ± or a p-value bound, whether ours falls inside it. "
              "\"not published in our data\" marks a cell the paper prints no number for."), ""]
    lines += [f"**Warning:** {md_text(w)}." for w in result.extras.get("warnings") or []]
    lines += [""] if result.extras.get("warnings") else []
    lines += ["## Settings that differ from the paper", ""]
    if result.differences:
        lines.append(_table(pd.DataFrame(list(result.differences))))
    else:
        lines.append("None.")
    failures = result.extras.get("judge_failures")
    if failures:
        # e.g. a profile longer than the model's context: never cut, never sent, its pairs left out
        lines += ["", "Pairs the judge could not label (left out of every cell that uses them): "
                  + "; ".join(f"{md_text(k)}: {v:,}" for k, v in sorted(failures.items())) + "."]
    contradictions = result.extras.get("contradictions") or []
    if contradictions:
        lines += ["", "## Where the paper contradicts itself", "",
                  "Each cell is compared with the number the paper prints for it; here two of the paper's numbers "
                  "cannot both describe one computation, and the report does not pick one silently.", ""]
        lines += [f"- **{md_text(c['where'])}**: {md_text(c['detail'])}" for c in contradictions]
    return lines


def _plan_section(result) -> list[str]:
    """The plan's calls, tokens, cost and wall time per job group."""
    s = result.settings
    lines = ["", "## Plan (calls, tokens and cost of this run)", ""]
    if result.plan:
        lines.append(_table(pd.DataFrame([{
            "jobs": r.tables, "pairs": r.pairs, "shared with an earlier table": r.shared_pairs, "calls": r.calls,
            "cached": r.cache_hits, "input tokens": r.input_tokens, "output tokens": r.output_tokens,
            "USD": "unknown" if r.cost is None else f"{r.cost:,.4f}", "wall time": format_duration(r.wall_seconds)}
            for r in result.plan])))
        lines.append(f"\nWall time at concurrency {s.get('concurrency')} and an assumed {s.get('call_seconds')} s "
                     "per call; input tokens counted as the judge's context check counts them: the endpoint's "
                     "tokenizer where it has one, else about 3 characters per token for OpenAI models and 2.5 "
                     "for others.")
    return lines


def _target_section(result, target: str, figure_paths: dict[str, Path], out: Path) -> list[str]:
    """One target's section: its cells (or why it was not computed), the trivial judges beside them,
    its figure and its notes."""
    cells = result.cells
    lines: list[str] = []
    lines += ["", f"## {md_text(TARGET_TITLES[target])}", ""]
    why = result.extras.get("not_computed", {}).get(target)
    if why:
        lines.append(f"Not computed: {md_text(why)}.")
        return lines
    part = cells[cells.target == target]
    if len(part):
        lines.append(_cells_table(part))
    trivial = (result.extras.get("trivial_judges") or {}).get(target)
    if trivial:
        lines += ["", "What trivial judges get on the same pairs (mean over the experiments): constant = the "
                  "judge's most frequent label above 0 on every pair; random = its labels shuffled across its "
                  f"pairs (mean of {result.extras.get('trivial_draws')} draws); popularity = its labels assigned "
                  "by how many participants' pairs hold the item (same histogram).", "",
                  _table(pd.DataFrame(trivial))]
    if target in figure_paths:
        rel = os.path.relpath(figure_paths[target], out)
        lines += ["", f"![{md_text(TARGET_TITLES[target])}]({Path(rel).as_posix()})"]
    if target == "table5":
        for key in ("calibration_refused", "calibration_warning"):
            if result.extras.get(key):
                lines += ["", f"**{md_text(result.extras[key])}**"]
    unranked = result.extras.get("unranked_participants")
    if target == "dataset" and unranked:
        lines += ["", "**Systems that do not rank every participant** (each such participant scores 0 for "
                  "that system): " + "; ".join(f"{md_text(k)}: {', '.join(v[:10])}" + (" …" if len(v) > 10 else "")
                                               for k, v in sorted(unranked.items()))]
    if target == "audit" and "popularity" in result.extras:
        lines += ["", "```", result.extras["popularity"]["text"], "```"]
    return lines


def _json(result) -> dict:
    cells = result.cells.astype(object).where(result.cells.notna(), None)
    figs = {}
    for k, v in result.figures.items():
        if isinstance(v, dict) and "ranks" in v:
            figs[k] = {**{a: b for a, b in v.items() if a != "ranks"},
                       "ranks": {str(n): {c: float(x) for c, x in row.items()} for n, row in v["ranks"].iterrows()}}
        else:
            figs[k] = {str(a): b for a, b in v.items()} if isinstance(v, dict) else v
    return {"study": "penha2025", "complete": result.complete, "stopped": result.stopped,
            "settings": dict(result.settings), "differences": list(result.differences),
            "notes": list(STATISTICS_NOTES),
            "plan": [r.as_dict() for r in result.plan], "cells": cells.to_dict(orient="records"),
            "figures": figs, "extras": dict(result.extras)}


def write_reproduce_report(result, out_dir: str | os.PathLike) -> dict[str, Path]:
    """Write report.md, report.html, figures/*.png and reproduce.json into ``out_dir``."""
    from .._io import write_json
    from ..outputs import output_set

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with output_set():  # the report, its figures and the JSON replace the old ones together
        figure_paths = _plot_figures(result, out / "figures")
        md = write_report(out, _markdown(result, figure_paths, out), "recjudge reproduce penha2025")
        write_json(out / "reproduce.json", _json(result))
    return {"md": md, "html": out / "report.html", "json": out / "reproduce.json",
            **{f"figure:{k}": v for k, v in figure_paths.items()}}
