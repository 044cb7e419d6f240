"""The reports' templates: shipped with the package, data escaped on its way into the Markdown, a name the
template asks for and the code does not give is an error (never an empty string in the report)."""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "src" / "recjudge" / "report" / "templates"


def _package_data() -> list[str]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["recjudge"]


def test_every_template_is_package_data():
    files = sorted(p.relative_to(TEMPLATES.parents[1]).as_posix() for p in TEMPLATES.iterdir() if p.is_file())
    assert files, "no templates found"
    for name in files:
        assert any(fnmatch.fnmatch(name, pattern) for pattern in _package_data()), name


def test_the_demo_template_loads_from_the_package():
    from recjudge.report.templates import render

    with pytest.raises(Exception, match="'title' is undefined"):
        render("demo.md.j2")  # strict: a missing name fails, it does not print as ''


def test_data_goes_into_the_markdown_through_the_escaping_filters():
    from recjudge.report.templates import _environment

    template = _environment().from_string("{{ name | md_text }} in {{ path | md_code }}\n{% if flag %}\nyes\n"
                                          "{% endif %}\n{{ n | fmt(',') }}\n")
    # emphasis and a link's "](" escaped, a backtick inside a longer code fence, a block tag's line gone
    assert template.render(name="*bold* [x](y)", path="a`b", flag=True, n=12345) == \
        "\\*bold\\* [x\\](y) in ``a`b``\nyes\n12,345\n"
