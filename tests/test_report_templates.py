"""The reports' templates: shipped with the package, data escaped on its way into the Markdown, a name the
template asks for and the code does not give is an error (never an empty string in the report)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "src" / "recjudge" / "report" / "templates"


def test_every_template_is_package_data():
    """The wheel takes every file under src/recjudge that git does not ignore (hatchling's rule) and that
    the build configuration does not exclude: each template must be such a file."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["packages"] == ["src/recjudge"] and "exclude" not in wheel and "only-include" not in wheel
    files = sorted(p for p in TEMPLATES.iterdir() if p.is_file())
    assert files, "no templates found"
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: which files git ignores cannot be asked")
    for path in files:
        ignored = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=ROOT).returncode == 0
        assert not ignored, f"{path} is ignored by git, so hatchling leaves it out of the wheel"


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
