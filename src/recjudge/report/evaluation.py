"""Reports: Markdown with PNG plots a reader would rather look at than read, and the same report as HTML.

matplotlib and markdown-it-py are imported only when a report is written (Agg backend, no display
needed). Every report goes through :func:`write_report`, which writes ``report.md`` and its HTML
rendering ``report.html`` side by side.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from tabulate import DataRow, TableFormat, tabulate

from .._io import atomic_write
from ..evaluation.intervals import TAU_METHODS
from ..evaluation.metaeval import CompareResult, EvaluationResult, ci_cell, ci_notes

__all__ = ["write_compare_report", "write_evaluation_report", "write_report", "render_html", "markdown_table",
           "md_text", "md_code", "md_fence", "slug", "unique_slugs", "ci_method", "ci_cell", "ci_notes",
           "ci_label", "label_points"]


def slug(text: str, keep: str = "") -> str:
    """Lower-case ``text`` with every run of other characters (bar those in ``keep``) as one ``-``."""
    return re.sub(f"[^A-Za-z0-9{re.escape(keep)}]+", "-", text).strip("-").lower() or "x"


def unique_slugs(names: Iterable[str]) -> dict[str, str]:
    """A file-name slug per name; names whose slugs collide (``llm.v1``, ``llm-v1``) get ``-2``, ``-3``."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = candidate = slug(name)
        n = 1
        while candidate in taken:
            n += 1
            candidate = f"{base}-{n}"
        taken.add(candidate)
        out[name] = candidate
    return out


# What can open Markdown markup inside a line (emphasis, code, links, raw HTML, entities, table
# cells, headings); CommonMark lets a backslash escape any ASCII punctuation. Harmless characters
# stay bare so the .md file reads well: "_" inside a word, "[" without "](", "#" after the start.
_MD_SPECIAL = re.compile(r"[\\`*<>|~]"            # always
                         r"|(?<![^\W_])_|_(?![^\W_])"  # "_" not between letters or digits: it could open or close emphasis
                         r"|\](?=[(\[:])"          # "](" "][" "]:" would make a link or a definition
                         r"|&(?=#|[A-Za-z0-9]+;)"   # an entity
                         r"|^#|^[+-](?=\s|$)|^[=-]+$")  # a heading, list item, rule or setext underline
_MD_ORDERED = re.compile(r"^(\d{1,9})([.)])(?=\s|$)")  # "1. " or "1) " would start an ordered list


def md_text(value: object) -> str:
    """``value`` as literal Markdown text on one line: data never turns into markup."""
    text = _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), re.sub(r"[\r\n]+", " ", str(value)))
    return _MD_ORDERED.sub(r"\1\\\2", text)


def md_code(value: object) -> str:
    """``value`` as an inline code span, fenced by more backticks than it contains."""
    text = re.sub(r"[\r\n]+", " ", str(value))
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_fence(text: str, info: str = "") -> list[str]:
    """A fenced code block holding ``text`` verbatim, whatever backtick runs it contains."""
    fence = "`" * max(3, max((len(r) for r in re.findall(r"`{3,}", text)), default=0) + 1)
    return [fence + info, text, fence]


def ci_method(settings: Mapping[str, object]) -> str:
    """The bootstrap interval's name as recorded by the analysis (older results: percentile)."""
    return str(settings.get("ci_method") or "percentile")


def ci_label(settings: Mapping[str, object]) -> str:
    """Column header of a τ interval: its level and method, e.g. ``95% CI (BCa)``."""
    level = settings.get("ci_level", 0.95)
    return f"{float(level):.0%} CI ({ci_method(settings)})"


def _fmt(x) -> str:
    if isinstance(x, (float, np.floating)):
        return "–" if x != x else f"{x:.4f}"
    if isinstance(x, (int, np.integer)):
        return str(x)
    return md_text(x)


# GitHub's pipe table with unpadded cells and a plain "---" rule: the .md file stays small and
# diffs of a changed value touch one line
_PIPE = TableFormat(lineabove=None, linebelowheader=lambda widths, _aligns: "|" + "---|" * len(widths),
                    linebetweenrows=None, linebelow=None, headerrow=DataRow("|", "|", "|"),
                    datarow=DataRow("|", "|", "|"), padding=1, with_header_hide=None)


def markdown_table(frame: pd.DataFrame, index: bool = True) -> str:
    cols = ([frame.index.name or ""] if index else []) + [str(c) for c in frame.columns]
    # itertuples keeps each column's dtype, so integer columns print as integers
    rows = [[_fmt(v) for v in row] for row in frame.itertuples(index=index, name=None)]
    return tabulate(rows, [md_text(c) for c in cols], tablefmt=_PIPE, stralign=None, numalign=None,
                    disable_numparse=True, preserve_whitespace=True)


# Readable at any width: the text column is capped, and whatever cannot shrink (wide tables,
# preformatted blocks) scrolls inside its own box instead of widening the page.
_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;font-size:16px;
line-height:1.5;color:#1f2328;max-width:72rem;margin:0 auto;padding:1.5rem;overflow-wrap:break-word}
h1,h2,h3{line-height:1.25;margin:1.6em 0 .6em}
h1{font-size:1.8em}h2{font-size:1.4em;border-bottom:1px solid #d8dee4;padding-bottom:.2em}h3{font-size:1.15em}
table{display:block;max-width:100%;overflow-x:auto;border-collapse:collapse;margin:1em 0;font-size:.92em}
th,td{border:1px solid #d0d7de;padding:.3em .65em;text-align:left;vertical-align:top}
th{background:#f6f8fa}
pre{max-width:100%;overflow-x:auto;background:#f6f8fa;border:1px solid #d8dee4;border-radius:6px;padding:.8em 1em;
font-size:.85em;line-height:1.4}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace}
:not(pre)>code{background:#eff1f3;border-radius:4px;padding:.1em .3em;font-size:.88em;overflow-wrap:anywhere}
img{max-width:100%;height:auto;vertical-align:top}
blockquote{margin:1em 0;padding:.6em 1em;border-left:4px solid #d4a72c;background:#fff8c5}
blockquote p{margin:.3em 0}
""".strip()


def render_html(markdown: str, title: str) -> str:
    """A standalone HTML page from report Markdown (CommonMark + tables, raw HTML escaped)."""
    from markdown_it import MarkdownIt

    # html=False: any "<...>" in the Markdown (data included) is shown as text, never parsed
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)
    return ("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{html.escape(title)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n<body>\n"
            f"{body}</body>\n</html>\n")


def write_report(out_dir: str | os.PathLike, markdown: str, title: str, protocol=None) -> Path:
    """Write ``report.md`` and ``report.html`` into ``out_dir``; returns the Markdown path.

    Under a protocol (``protocol``: the settings' ProtocolUse), a line after the title names it and
    every setting that differs from it.
    """
    use = protocol
    if use is not None:
        head, _, rest = markdown.partition("\n")
        markdown = f"{head}\n\n{md_text(use.describe())}.\n{rest}"
    from ..outputs import current

    out = Path(out_dir)
    page = render_html(markdown, title)  # rendered before anything is written
    staged = current()
    if staged is not None:
        staged.own(out)  # the folder holds this report: figures only its earlier one had go with it
    path = out / "report.md"
    with atomic_write(path) as fh:
        fh.write(markdown)
    with atomic_write(out / "report.html") as fh:
        fh.write(page)
    return path


def load_pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path) -> None:
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120, bbox_inches="tight")


# where a label may go around its point: rings of growing radius (points), 16 directions each, nearest
# first; a label away from its point gets a leader line. Labels are placed after the layout is fixed,
# so display coordinates are final.
def _label_spots():
    spots = []
    for radius in (5, 11, 18, 27, 38, 50):
        for k in range(16):
            a = np.pi / 4 + k * np.pi / 8  # up-right first, the usual place of a label
            c, s = np.cos(a), np.sin(a)
            spots.append((radius * c, radius * s, "left" if c > 0.3 else "right" if c < -0.3 else "center",
                          "bottom" if s > 0.3 else "top" if s < -0.3 else "center", radius > 6))
    return tuple(spots)


_LABEL_SPOTS = _label_spots()


def _overlap(a, b) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def label_points(ax, xs, ys, names, fontsize: float = 8, marker_points: float = 3.0) -> list:
    """Name each point with a label that overlaps no other label, no point and stays in the axes where
    any spot around it allows (greedy, most crowded points first); the least-overlapping spot otherwise.
    Call after the figure's layout is final (``tight_layout``): placement is measured on the canvas."""
    from matplotlib.transforms import Bbox

    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    ok = np.isfinite(xs) & np.isfinite(ys)
    pts = ax.transData.transform(np.column_stack([np.where(ok, xs, 0), np.where(ok, ys, 0)]))
    r = marker_points * fig.dpi / 72
    markers = [Bbox([[x - r, y - r], [x + r, y + r]]) for (x, y), good in zip(pts, ok) if good]
    frame = ax.get_window_extent(renderer)
    # most crowded first: they have the fewest free spots
    dist = np.linalg.norm(pts[:, None, :] - pts[None, :, :], axis=2) + np.where(np.eye(len(pts)), np.inf, 0)
    order = np.argsort(dist.min(axis=1) if len(pts) > 1 else np.zeros(len(pts)), kind="stable")
    placed, texts = [], []
    for i in order:
        if not ok[i]:
            continue
        best = None
        for dx, dy, ha, va, leader in _LABEL_SPOTS:
            t = ax.annotate(plain_text(names[i]), (xs[i], ys[i]), xytext=(dx, dy), textcoords="offset points",
                            ha=ha, va=va, fontsize=fontsize,
                            arrowprops=dict(arrowstyle="-", lw=0.5, color="0.5", shrinkA=0, shrinkB=2)
                            if leader else None)
            bb = t.get_window_extent(renderer).expanded(1.04, 1.15)
            cost = sum(_overlap(bb, o) for o in placed) + sum(_overlap(bb, m) for m in markers)
            cost += (bb.width * bb.height - _overlap(bb, frame)) * 0.5  # outside the axes: crowds the axis labels
            if best is None or cost < best[0]:
                if best is not None:
                    best[1].remove()
                best = (cost, t, bb)
            else:
                t.remove()
            if cost == 0:
                break
        placed.append(best[2])
        texts.append(best[1])
    return texts


def plot_scatter(ref: pd.Series, cand: pd.Series, measure: str, title: str, path: Path,
                 ref_label: str, cand_label: str) -> None:
    plt = load_pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    ax.scatter(ref.to_numpy(), cand.reindex(ref.index).to_numpy(), s=28, alpha=0.8)
    ax.set_xlabel(f"{measure} under {ref_label}")
    ax.set_ylabel(f"{measure} under {cand_label}")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    if len(ref) <= 25:
        label_points(ax, ref.to_numpy(), cand.reindex(ref.index).to_numpy(), list(ref.index), fontsize=7)
    save_figure(fig, path)
    plt.close(fig)


def plot_displacement(displacement: pd.Series, title: str, path: Path) -> None:
    plt = load_pyplot()
    d = displacement.sort_values(kind="stable")
    fig, ax = plt.subplots(figsize=(6.4, max(2.5, 0.22 * len(d) + 1)))
    colors = ["tab:red" if v > 0 else "tab:blue" if v < 0 else "tab:gray" for v in d.to_numpy()]
    ax.barh([plain_text(i) for i in d.index], d.to_numpy(), color=colors)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel("rank under candidate − rank under reference (positive: drops)")
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def _tie_note(settings: Mapping[str, object], tie_share: Mapping[str, float],
              sensitivity: Mapping | None = None) -> list[str]:
    exported = dict(settings.get("export_ties") or {})
    lines = [f"- Tie policy: {md_code(settings.get('tie_policy'))} (seed {md_text(settings.get('seed'))}); ties "
             "in each ranking are ordered by this rule and scores rewritten as strictly decreasing "
             "rank-derived values before any measure runs."]
    in_file = {n: v for n, v in tie_share.items() if v == v and n not in exported}
    if in_file:
        lines.append(f"- Share of users with exact score ties in their top-100 in the run files: median "
                     f"{pd.Series(list(in_file.values())).median():.3f}, max {max(in_file.values()):.3f} over "
                     f"{len(in_file)} runs.")
    if exported:
        parts = [md_text(f"{n} {e.get('tied_user_share', float('nan')):.0%} ({e.get('tie_policy')}, seed "
                         f"{e.get('tie_seed')})") for n, e in sorted(exported.items())
                 if isinstance(e.get("tied_user_share"), (int, float))]
        lines.append(f"- {len(exported)} runs were already tie-free on disk: their ties were resolved at "
                     "export, so the policy above changes nothing for them. Users with ties in the top-k "
                     "before export: " + ", ".join(parts) + ".")
    note = (sensitivity or {}).get("note")
    if note:  # ties could change the result: how far (recjudge.evaluation.ties.note)
        lines.append(f"- {md_text(note)}")
    return lines


def _measure_lines(settings: Mapping[str, object]) -> list[str]:
    """One indented line per measure with its definition (gain function, variant)."""
    defs = dict(settings.get("measure_definitions") or {})
    return [f"  - {md_text(defs.get(m, m))}" for m in settings["measures"]]


def format_p_value(ra) -> str:
    """Kendall τ-b's two-sided p-value, when the analysis computed one."""
    p = getattr(ra, "kendall_tau_p", None)
    if p is None or p != p:
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def plain_text(text: object) -> str:
    """Text for a matplotlib label: a name with two ``$`` must not turn into mathtext."""
    return str(text).replace("$", r"\$")


def _trivial_table(result: CompareResult, cand: str) -> list[str]:
    """What trivial judges get on the candidate's own pairs, per measure: Kendall τ-b and weighted τ."""
    from ..evaluation.baselines import TRIVIAL_NOTE, format_spread

    by_measure = getattr(result, "baselines", {}).get(cand)
    if not by_measure:
        return []
    draws = result.settings.get("baselines", {}).get("random_draws")
    rows = [{"measure": m, **{f"{judge} τ-b": format_spread(st["kendall_tau"], 3) for judge, st in by_judge.items()},
             **{f"{judge} τ_h": format_spread(st["weighted_tau"], 3) for judge, st in by_judge.items()}}
            for m, by_judge in by_measure.items()]
    return [f"Against the same reference, {md_text(TRIVIAL_NOTE.format(draws=draws))}; – : the judge ties every "
            "system, so τ is undefined:", "",
            markdown_table(pd.DataFrame(rows).set_index("measure")), ""]


def write_compare_report(result: CompareResult, out_dir: str | os.PathLike, title: str = "recjudge compare",
                         protocol=None) -> Path:
    """Write ``report.md`` and ``report.html`` with per-measure scatter and rank displacement plots."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # candidates are keyed by name (a file stem, disambiguated); figure files take a slug of that
    # name, made unique because different names can share a slug
    fig_names = unique_slugs(result.agreement)
    md = _compare_head(result, title)
    for cand in result.agreement:
        md += _candidate_section(result, cand, out, fig_names[cand])
    md += _score_tables(result)
    return write_report(out, "\n".join(md), title, protocol)


def _compare_head(result: CompareResult, title: str) -> list[str]:
    """The report's title, label sets, user notes, settings and warnings."""
    s = result.settings
    md: list[str] = [f"# {md_text(title)}", ""]
    md += [
        f"Reference labels: {md_code(s['reference'])}. Candidates: "
        + ", ".join(md_code(c) for c in s["candidates"]) + ".",
        "",
        # before any τ: a τ over different users is read differently
        *[line for note in result.user_notes() for line in (f"> {md_text(note)}.", "")],
        *_compare_settings(result),
        "",
    ]
    md += [f"**Warning:** {md_text(w)}." for w in getattr(result, "warnings", ())]
    md += [""] if getattr(result, "warnings", ()) else []
    return md


def _compare_settings(result: CompareResult) -> list[str]:
    """The Settings section: measures, users counted, bootstrap, run paths and ties."""
    s = result.settings
    return [
        "## Settings",
        "- Measures:",
        *_measure_lines(s),
        f"- Users counted: {md_code(s['queries'])} ("
        + ("each label set over the users it judges" if s["queries"] == "own"
           else "only users judged by both label sets") + "); a user a run does not rank scores 0"
        + "".join(f" ({md_text(m)}: {md_text(why)})" for m, why in
                  dict(s.get("missing_user_exceptions") or {}).items()) + ".",
        (f"- Bootstrap: {md_text(s['bootstrap'])} resamples of users, {md_text(ci_label(s))} for Kendall τ-b"
         + (f" ({md_text(TAU_METHODS[ci_method(s)].description)})" if ci_method(s) in TAU_METHODS else "")
         + f", seed {md_text(s.get('bootstrap_seed', s['seed']))}." if s["bootstrap"]
         else "- Bootstrap: none (0 resamples), so no confidence interval for Kendall τ-b."),
        *[f"- {md_code(name)} read from {md_code(path)}" for name, path in dict(s.get("paths") or {}).items()],
        *_tie_note(s, result.tie_share, getattr(result, "tie_sensitivity", None)),
    ]


def _agreement_table(settings: Mapping[str, object], by_measure: Mapping) -> str:
    """One row per measure: the rank correlations and displacements of a candidate against the reference."""
    rows = []
    for m, ra in by_measure.items():
        rows.append({
            "measure": m,
            "Kendall τ-b": ra.kendall_tau,
            ci_label(settings): ci_cell(ra),
            "p (τ-b)": format_p_value(ra),
            "weighted τ_h": ra.weighted_tau,
            "τ_AP": ra.tau_ap,
            "median abs Δrank": ra.median_abs_rank_displacement,
            "max abs Δrank": ra.max_abs_rank_displacement,
        })
    return markdown_table(pd.DataFrame(rows).set_index("measure"))


def _candidate_section(result: CompareResult, cand: str, out: Path, fig_name: str) -> list[str]:
    """The section of one candidate: its agreement table and notes, then each measure's figures."""
    by_measure = result.agreement[cand]
    md = [f"## Reference vs {md_code(cand)}", ""]
    md += [_agreement_table(result.settings, by_measure), ""]
    md += [f"- {md_text(m)}: {md_text(ra.undefined)}." for m, ra in by_measure.items() if ra.undefined]
    md += [""] if any(ra.undefined for ra in by_measure.values()) else []
    notes = ci_notes(by_measure)
    if notes:
        md += [md_text(n) for n in notes] + [""]
    md += _trivial_table(result, cand)
    for m, ra in by_measure.items():
        md += _measure_figures(result, cand, m, ra, out, f"{fig_name}-{slug(m)}")
    return md


def _figure_title(m: str, ra) -> str:
    """The scatter plot's title for measure ``m``."""
    return (f"{m}: every system ties under one label set" if ra.undefined
            else f"{m}: τ-b = {ra.kendall_tau:.3f}, τ_AP = {ra.tau_ap:.3f}")


def _measure_figures(result: CompareResult, cand: str, m: str, ra, out: Path, base: str) -> list[str]:
    """Draw measure ``m``'s scatter (and rank displacement) figures of ``cand``; the lines showing them."""
    table = result.candidates[cand]
    ref_table = result.reference_table(cand)
    plot_scatter(ref_table.means(m), table.means(m), plain_text(m), plain_text(_figure_title(m, ra)),
                 out / f"scatter-{base}.png", plain_text(str(result.settings["reference"])), plain_text(cand))
    alt = md_text(m)
    if ra.undefined:  # shifts between ties are artefacts of the average rank: no displacement figure
        return [f"### {md_text(m)}", "", f"![{alt} scatter](scatter-{base}.png)", "",
                f"No rank displacement: {md_text(ra.undefined)}.", ""]
    disp = table.ranks(m) - ref_table.ranks(m)
    plot_displacement(disp, plain_text(f"{m}: rank displacement, {cand} vs reference"),
                      out / f"displacement-{base}.png")
    md = [f"### {md_text(m)}", "",
          f"![{alt} scatter](scatter-{base}.png) ![{alt} displacement](displacement-{base}.png)", ""]
    if ra.most_displaced:
        md.append("Most displaced: " + ", ".join(f"{md_code(n)} ({d:+g})" for n, d in ra.most_displaced) + ".")
        md.append("")
    return md


def _score_tables(result: CompareResult) -> list[str]:
    """The systems' scores under the reference, then under each candidate."""
    md = ["## System scores under the reference", ""]
    ref_scores = result.reference.scores_frame()
    ref_scores.index.name = "system"
    md += [markdown_table(ref_scores), ""]
    for cand, table in result.candidates.items():
        md += [f"## System scores under {md_code(cand)}", ""]
        sc = table.scores_frame()
        sc.index.name = "system"
        md += [markdown_table(sc), ""]
    return md


def write_evaluation_report(result: EvaluationResult, out_dir: str | os.PathLike,
                            title: str = "recjudge evaluate", protocol=None) -> Path:
    """Write ``report.md`` and ``report.html``: the systems ranked under one label set."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sc = result.table.scores_frame()
    sc.index.name = "system"
    by = result.settings["ranked_by"]
    sc = sc.sort_values(by, ascending=False, kind="stable")
    ranks = result.table.ranks(by).reindex(sc.index)
    tied = ranks != ranks.round()
    # whole ranks as integers; systems with equal means share the mean of their ranks (7.5)
    sc.insert(0, "rank", [f"{r:g}" for r in ranks] if tied.any() else ranks.astype("int64"))
    tie_line = ([f"- Rank {md_text(', '.join(dict.fromkeys(f'{r:g}' for r in ranks[tied])))}: systems with equal "
                 f"{md_text(by)} share the mean of their ranks."] if tied.any() else [])
    md = [f"# {md_text(title)}", "", f"Labels: {md_code(result.settings['qrels'])}.", "",
          "- Measures:", *_measure_lines(result.settings),
          f"- Systems ranked by {md_text(by)} ({md_text(result.settings['ranked_by_note'])}).", *tie_line,
          *_tie_note(result.settings, result.tie_share, getattr(result, "tie_sensitivity", None)),
          "", markdown_table(sc), ""]
    return write_report(out, "\n".join(md), title, protocol)
