"""The front door: a short README whose links resolve, and a documentation site that builds strict.

The site tests build it once with ``mkdocs build --strict`` (the `docs` extra; CI installs it) and
read the built pages: every command's page lists every option of its parser, and Getting started
shows its figure in a headless browser (tests/test_report_html.py drives Chromium).
"""

from __future__ import annotations

import argparse
import html
import re
import subprocess
import sys
from pathlib import Path

import pytest

from recjudge.cli import build_parser

from conftest import REPO
from test_report_html import browser_check, find_browser

README = REPO / "README.md"


def test_the_readme_is_at_most_12_kb():
    size = README.stat().st_size
    assert size <= 12_000, f"README.md is {size:,} bytes: move detail to docs/ (at most 12,000)"


def test_every_relative_link_of_the_readme_resolves():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link.split("#")[0] for link in links if not re.match(r"[a-z]+:", link)]
    assert len(local) >= 10, "the README links into docs/"
    missing = [link for link in local if not (REPO / link).is_file()]
    assert missing == []


def test_the_readme_test_command_is_the_one_ci_runs():
    quick = README.read_text(encoding="utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", quick, re.S)
    assert [b.strip() for b in blocks][1] == ".venv/bin/python -m pytest"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "\n.venv/bin/python -m pytest\n" in ci
    assert "mkdocs build --strict" in ci


# ------------------------------------------------------------------------------------ the built site

@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        pytest.importorskip(module, reason="the docs extra is not installed: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                           "-d", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return out


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[prefix + name] = sub
                found.update(_commands(sub, f"{prefix}{name} "))
    return found


def test_every_command_has_a_page_listing_every_option_of_its_parser(site):
    commands = _commands(build_parser())
    assert {"compare", "judge", "audit position"} <= set(commands)
    for name, parser in commands.items():
        page = site / "commands" / f"{name.split()[0]}.html"
        assert page.is_file(), f"no page for 'recjudge {name}'"
        text = _text(page)
        assert f"recjudge {name} [-h]" in text, f"{page.name}: no usage of 'recjudge {name}'"
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            for flag in action.option_strings or [action.dest]:
                assert flag in text, f"{page.name}: 'recjudge {name}' option {flag} is not listed"


def test_a_broken_link_fails_the_build(site, tmp_path):
    """Strict mode is on: a page linking to a page that does not exist stops the build."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\n[gone](no-such-page.md)\n")
    (tmp_path / "mkdocs.yml").write_text((REPO / "mkdocs.yml").read_text(encoding="utf-8").split("\nhooks:")[0]
                                         + "\nnav:\n  - index.md\n")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-d", str(tmp_path / "out")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "no-such-page.md" in proc.stderr


def test_getting_started_shows_the_demo_figure_in_a_browser(site, tmp_path):
    page = site / "getting-started.html"
    figure = re.search(r'<img[^>]*id="demo-figure"[^>]*>', page.read_text(encoding="utf-8"))
    assert figure, "Getting started has no demo figure"
    src = re.search(r'src="([^"]+)"', figure.group(0)).group(1)
    assert (page.parent / src).is_file() and (page.parent / src).stat().st_size < 50_000
    browser = find_browser()
    if browser is None:
        pytest.skip("no headless browser: install Chromium (Debian: apt-get install -y chromium)")
    res = browser_check(page, browser, tmp_path)
    # every image of the page decoded with a width (naturalWidth > 0), the demo figure among them
    assert res["images"] >= 3 and res["broken_images"] == []


def test_the_api_reference_sees_each_verbs_own_parameters():
    """Tools that unwrap a function (mkdocstrings, help()) reach the verb, not its one-settings work function."""
    import inspect

    import recjudge as rj

    for verb in (rj.compare, rj.agreement, rj.judge, rj.train):
        unwrapped = inspect.signature(inspect.unwrap(verb))
        assert list(unwrapped.parameters) == list(inspect.signature(verb).parameters) != ["s"]
    assert {"runs", "reference", "candidates", "tie_policy", "protocol"} <= set(
        inspect.signature(inspect.unwrap(rj.compare)).parameters)


def test_the_python_api_page_documents_each_verbs_parameters(site):
    page = (site / "python-api.html").read_text(encoding="utf-8")
    compare = page[page.index('id="recjudge.api.compare"'):page.index('id="recjudge.api.agreement"')]
    text = _text_of(compare)
    for parameter in ("runs", "reference", "candidates", "tie_policy", "bootstrap_seed", "ci_method"):
        assert parameter in text, f"the reference of compare lacks {parameter}"


def _text_of(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))
