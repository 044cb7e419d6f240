"""report.html: Markdown rendered by markdown-it-py, data escaped, checked in a real headless browser.

The browser check loads a copy of the page with a small script that inspects the laid-out page at a
1280 px wide window (raw Markdown in the visible text, images that did not load, anything wider than
the viewport outside a scroll container) and leaves its findings as JSON in the DOM, which
``chromium --dump-dom`` prints. Without a Chromium the browser tests skip with the reason.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recjudge.data.trec import read_qrels, read_run
from recjudge.evaluation.metaeval import compare, evaluate
from recjudge.report.evaluation import (
    md_code,
    md_fence,
    markdown_table,
    md_text,
    render_html,
    write_compare_report,
    write_evaluation_report,
)

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "runs" / "example"
HUMAN = REPO / "qrels" / "example-human.qrels"
LLM = REPO / "qrels" / "example-llm.qrels"
VIEWPORT = 1280

# Runs in the page after every image has loaded or failed ("load" waits for both).
_CHECK_JS = r"""
(function () {
  function run() {
    var vw = document.documentElement.clientWidth;
    var res = {inner_width: window.innerWidth, client_width: vw,
               scroll_width: document.documentElement.scrollWidth,
               images: 0, broken_images: [], raw_markup: [], overflow: [], scrolled: []};
    // visible text outside code blocks: a code block may show Markdown on purpose
    var pres = Array.prototype.slice.call(document.querySelectorAll('pre'));
    pres.forEach(function (p) { p.dataset.display = p.style.display; p.style.display = 'none'; });
    var text = document.body.innerText;
    pres.forEach(function (p) { p.style.display = p.dataset.display; });
    var patterns = [[/\*\*/, '**'], [/`/, 'backtick'], [/\|\s*:?-{3}/, '|---'], [/^\s*#{1,6}(\s|$)/, 'leading #'],
                    [/!\[[^\]]*\]\(/, 'image markup'], [/\[[^\]]*\]\([^)]*\)/, 'link markup'],
                    [/(^|\s)[*_][^\s*_][^*_]*[*_](?=$|[\s.,;:])/, 'emphasis']];
    text.split('\n').forEach(function (line) {
      patterns.forEach(function (p) { if (p[0].test(line)) res.raw_markup.push(p[1] + ': ' + line.slice(0, 160)); });
    });
    // a box whose content is wider than the box: the reader must scroll sideways to see it (clipped)
    Array.prototype.forEach.call(document.body.querySelectorAll('table, pre'), function (el) {
      if (el.scrollWidth > el.clientWidth + 1) {
        var h = el, head = '';
        while (h && !head) { h = h.previousElementSibling; if (h && /^H[1-6]$/.test(h.tagName)) head = h.textContent; }
        if (!head) {  // the section heading before the box's parent, when the box is nested
          for (var a = el; a && !head; a = a.parentElement) {
            for (var b = a.previousElementSibling; b && !head; b = b.previousElementSibling)
              if (/^H[1-6]$/.test(b.tagName)) head = b.textContent;
          }
        }
        res.scrolled.push(el.tagName.toLowerCase() + ' under "' + head + '" (' + el.scrollWidth + ' > '
                          + el.clientWidth + ' px): ' + (el.textContent || '').trim().slice(0, 60));
      }
    });
    Array.prototype.forEach.call(document.images, function (img) {
      res.images += 1;
      if (!img.complete || img.naturalWidth === 0) res.broken_images.push(img.getAttribute('src'));
    });
    // an element (or text spilling out of its box) reaching past the viewport is fine only inside a
    // scroll container that fits
    Array.prototype.forEach.call(document.body.querySelectorAll('*'), function (el) {
      var r = el.getBoundingClientRect();
      var right = getComputedStyle(el).overflowX === 'visible' ? Math.max(r.right, r.left + el.scrollWidth) : r.right;
      if (right <= vw + 0.5 && r.left >= -0.5) return;
      for (var a = el.parentElement; a && a !== document.body; a = a.parentElement) {
        var ox = getComputedStyle(a).overflowX;
        if ((ox === 'auto' || ox === 'scroll' || ox === 'hidden') && a.getBoundingClientRect().right <= vw + 0.5) return;
      }
      res.overflow.push(el.tagName.toLowerCase() + ' (right edge ' + Math.round(right) + '): '
                        + (el.textContent || el.getAttribute('src') || '').trim().slice(0, 80));
    });
    var out = document.createElement('pre');
    out.id = 'recjudge-check';
    out.style.display = 'none';
    out.textContent = JSON.stringify(res);
    document.body.appendChild(out);
  }
  if (document.readyState === 'complete') run(); else window.addEventListener('load', run);
})();
"""


def find_browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browser_check(page: Path, browser: str, tmp: Path, width: int = VIEWPORT) -> dict:
    """Lay out ``page`` (with its images, from its folder) in headless Chromium ``width`` px wide; the
    check's findings."""
    probe = page.with_name(f".check-{page.name}")
    text = page.read_text(encoding="utf-8")
    script = f"<script>{_CHECK_JS}</script>"
    probe.write_text(text.replace("</body>", script + "</body>") if "</body>" in text else text + script,
                     encoding="utf-8")
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--hide-scrollbars", f"--window-size={width},900", "--virtual-time-budget=5000",
           f"--user-data-dir={tmp / 'chromium-profile'}", "--dump-dom", probe.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="recjudge-check"[^>]*>(.*?)</pre>', proc.stdout, re.S)
    assert found, f"the check did not run (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def screenshot(page: Path, browser: str, tmp: Path, png: Path, width: int = VIEWPORT, height: int = 900) -> Path:
    """A PNG of ``page`` as Chromium shows it in a ``width`` × ``height`` window (for a person to look at)."""
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
           f"--window-size={width},{height}", "--virtual-time-budget=5000",
           f"--user-data-dir={tmp / 'chromium-profile'}", f"--screenshot={png}", page.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert png.is_file(), f"no screenshot (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return png


@pytest.fixture(scope="module")
def browser() -> str:
    path = find_browser()
    if path is None:
        pytest.skip("no headless browser: install Chromium (Debian: apt-get install -y chromium)")
    return path


def _example_compare(**kwargs):
    runs = {p.stem: read_run(p, p.stem) for p in sorted(RUNS.glob("*.run"))}
    return compare(runs, read_qrels(HUMAN), {"example-llm": read_qrels(LLM)}, bootstrap=200, seed=0, **kwargs)


@pytest.fixture(scope="module")
def compare_report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("compare")
    write_compare_report(_example_compare(), out)
    return out


# ------------------------------------------------------------------------------------- in a browser

def test_compare_report_in_a_browser(compare_report, browser, tmp_path):
    res = browser_check(compare_report / "report.html", browser, tmp_path)
    assert res["inner_width"] == VIEWPORT
    assert res["raw_markup"] == []
    # 4 measures × (scatter + displacement) for the one candidate, but Judged@100, on which the example
    # LLM labels tie every system: no displacement figure for it
    assert res["images"] == 7 and res["broken_images"] == []
    assert res["scroll_width"] <= res["client_width"] <= VIEWPORT
    assert res["overflow"] == []


def test_a_long_table_and_code_block_stay_inside_the_page(tmp_path, browser):
    """What the demo report holds: a long command block, a wide table, a long unbroken path."""
    wide = "| " + " | ".join(f"column {i}" for i in range(40)) + " |"
    md = "\n".join([
        "# t", "", "> **Read this first.** the reference is *historical*.", "",
        *md_fence("recjudge judge --runs runs/ml-32m-ext " + "--option value " * 40),
        "", wide, "|" + "---|" * 40, "| " + " | ".join("0.1234" for _ in range(40)) + " |", "",
        "Path: " + md_code("/a/" + "x" * 400 + ".qrels"), "",
    ])
    (tmp_path / "report.html").write_text(render_html(md, "t"), encoding="utf-8")
    res = browser_check(tmp_path / "report.html", browser, tmp_path)
    assert (res["raw_markup"], res["overflow"]) == ([], [])
    assert res["scroll_width"] <= res["client_width"]


def test_the_browser_check_fails_on_raw_markup_overflow_and_missing_images(tmp_path, browser):
    """The page the old hand-rolled converter made: markup left as text, a command block wider than
    the page, a table with no scroll box, and an image that is not there."""
    page = ("<!doctype html><meta charset='utf-8'><body style='margin:0'>"
            "<p>**Read this first.** the reference is *historical*, see `qrels/`</p>"
            "<p># Settings</p><p>|---|---|</p>"
            f"<pre>{'recjudge judge --option value ' * 20}</pre>"
            f"<table><tr>{'<td>0.123456789</td>' * 150}</tr></table>"
            "<img src='missing.png' alt='a figure'></body>")
    (tmp_path / "bad.html").write_text(page, encoding="utf-8")
    res = browser_check(tmp_path / "bad.html", browser, tmp_path)
    kinds = {r.split(":")[0] for r in res["raw_markup"]}
    assert kinds >= {"**", "backtick", "|---", "leading #", "emphasis"}
    assert res["broken_images"] == ["missing.png"]
    assert any(o.startswith("pre") for o in res["overflow"])
    assert any(o.startswith("table") for o in res["overflow"])
    assert res["scroll_width"] > VIEWPORT


# ------------------------------------------------------------------------------------ without one

def test_compare_and_evaluate_write_html_beside_markdown(compare_report, tmp_path):
    page = (compare_report / "report.html").read_text(encoding="utf-8")
    md = (compare_report / "report.md").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "<table>" in page and "<h2>" in page
    # every figure the Markdown names exists and is referenced by the HTML
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    # 4 scatters, and displacements for the 3 measures on which the example LLM labels rank the systems
    assert len(figures) == 7 and all((compare_report / f).is_file() for f in figures)
    assert sorted(re.findall(r'<img src="([^"]+)"', page)) == sorted(figures)
    runs = {p.stem: read_run(p, p.stem) for p in sorted(RUNS.glob("*.run"))}
    out = tmp_path / "evaluate"
    write_evaluation_report(evaluate(runs, read_qrels(HUMAN), "nDCG@10"), out)
    assert "<table>" in (out / "report.html").read_text(encoding="utf-8")
    assert "| system |" in (out / "report.md").read_text(encoding="utf-8")


def test_the_compare_page_is_titled_like_its_report(compare_report):
    # the HTML title once came from the last scatter plot drawn ("Bpref: τ-b = ...")
    page = (compare_report / "report.html").read_text(encoding="utf-8")
    assert re.findall(r"<title>(.*?)</title>", page) == ["recjudge compare"]
    assert (compare_report / "report.md").read_text(encoding="utf-8").startswith("# recjudge compare\n")


def test_reports_name_the_ci_method(compare_report, tmp_path):
    result = _example_compare()
    settings = dict(result.settings)
    settings["ci_method"] = "BCa"
    write_compare_report(dataclasses.replace(result, settings=settings), tmp_path / "bca")
    assert "95% CI (BCa)" in (tmp_path / "bca" / "report.md").read_text(encoding="utf-8")
    settings.pop("ci_method")  # a result from before the method was recorded: the percentile bootstrap
    write_compare_report(dataclasses.replace(result, settings=settings), tmp_path / "old")
    text = (tmp_path / "old" / "report.md").read_text(encoding="utf-8")
    assert "95% CI (percentile)" in text and "BCa" not in text


NASTY = ["**bold**", "*em*", "_em_", "__x__", "`code`", "[a](http://x)", "![i](x.png)", "[a]: http://x",
         "<script>alert(1)</script>", "<http://x>", "&amp; &#65;", "# heading", "- item", "+ item", "1. item",
         "12) item", "---", "a | b", "back\\slash", "~~strike~~", "> quote", "τ_AP", "sys_1_a", "1.5", "-0.5"]


@pytest.mark.parametrize("text", NASTY)
def test_md_text_renders_as_itself(text):
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark", {"html": False}).enable("table").render(md_text(text))
    assert rendered.startswith("<p>") and rendered.endswith("</p>\n")
    assert html.unescape(rendered[3:-5]) == text


@pytest.mark.parametrize("text", ["a`b", "`x", "x``y`", "plain"])
def test_md_code_holds_backticks(text):
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark").renderInline(md_code(text))
    assert rendered == f"<code>{html.escape(text, quote=False)}</code>"


def test_data_in_a_compare_report_is_escaped(tmp_path):
    """System and label-set names come from file names: they are shown, never interpreted."""
    sources = sorted(RUNS.glob("*.run"))
    names = ["<img src=x onerror=alert(1)>", "**sys2**", "sys_3_", "[a](javascript:alert(1))"]
    runs = {name: read_run(p, name) for name, p in zip(names, sources)}
    # two names with one slug: their figures must not overwrite each other
    cands = {"llm.v1": read_qrels(LLM), "llm-v1": read_qrels(HUMAN)}
    write_compare_report(compare(runs, read_qrels(HUMAN), cands, measures="nDCG@10", bootstrap=0), tmp_path)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    body = page.split("<body>", 1)[1]
    assert "<img src=x" not in body and "&lt;img src=x onerror=alert(1)&gt;" in body
    assert "**sys2**" in body and "<strong>sys2" not in body
    assert "sys_3_" in body and "<em>" not in body
    assert 'href="javascript' not in body and "<a " not in body
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["displacement-llm-v1-2-ndcg-10.png", "displacement-llm-v1-ndcg-10.png",
                    "scatter-llm-v1-2-ndcg-10.png", "scatter-llm-v1-ndcg-10.png"]


def test_markdown_it_is_imported_only_when_writing():
    code = ("import sys, recjudge, recjudge.report.evaluation, recjudge.report.demo; "
            "print(sorted(m for m in ('markdown_it', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_scatter_labels_do_not_overlap(tmp_path):
    """Four systems a hair apart (as NeuMF, DiffRec, EASE and BPR fell in the demo) among spread ones: each
    label keeps clear of every other label and of every point."""
    from recjudge.report.evaluation import label_points, load_pyplot

    plt = load_pyplot()
    names = ["NeuMF", "DiffRec", "EASE", "BPR", "Pop", "Random", "MultiVAE", "ItemKNN"]
    xs = [0.301, 0.303, 0.300, 0.304, 0.25, 0.02, 0.28, 0.27]
    ys = [0.402, 0.400, 0.399, 0.403, 0.35, 0.10, 0.38, 0.36]
    fig, ax = plt.subplots(figsize=(5.4, 4.4))
    ax.scatter(xs, ys, s=30)
    fig.tight_layout()
    texts = label_points(ax, xs, ys, names)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in texts]
    assert sorted(t.get_text() for t in texts) == sorted(names)
    points = ax.transData.transform(list(zip(xs, ys)))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), (texts[i].get_text(), a, b)
        for (px, py) in points:
            assert not (a.x0 < px < a.x1 and a.y0 < py < a.y1), (texts[i].get_text(), px, py)
    fig.savefig(tmp_path / "labels.png")
    plt.close(fig)


def test_markdown_tables_are_unpadded_pipe_tables_with_cells_escaped():
    frame = pd.DataFrame({"τ": [0.5, np.nan], "n": [1, 2], "run": ["a|b", "x_"]},
                         index=pd.Index(["nDCG@10", "1. AP"], name="measure"))
    assert markdown_table(frame) == ("| measure | τ | n | run |\n"
                                     "|---|---|---|---|\n"
                                     "| nDCG@10 | 0.5000 | 1 | a\\|b |\n"
                                     "| 1\\. AP | – | 2 | x\\_ |")
    assert markdown_table(frame.iloc[:0], index=False) == "| τ | n | run |\n|---|---|---|"
