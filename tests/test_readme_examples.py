"""The code examples of the README and of the docs run as written.

Command lines: the README's Quick start and its three commands to try, the ablate page's experiment
file. Python: every ```python block of README.md and docs/**/*.md, in a folder holding the example
runs and qrels; a block preceded by ``<!-- example: needs train -->`` trains systems and is run,
with checks of what it writes, by tests/test_api.py; one preceded by
``<!-- example: not run (REASON) -->`` is illustrative. The reproduce recipe is run by
tests/test_protocol_e2e.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import shutil

import pytest

from recjudge.cli import main

from conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
DOCS = REPO / "docs"


def _section(heading: str) -> str:
    start = README.index(heading)
    end = README.find("\n#", start + len(heading))
    return README[start:end if end > 0 else None]


def _commands(text: str) -> list[list[str]]:
    """Every `.venv/bin/recjudge ...` command of a text, as argv: up to the closing backtick of inline
    code (which may wrap a line) or of a fenced block, continuation lines joined."""
    found = re.findall(r"\.venv/bin/recjudge ([^`]*)", text)
    return [shlex.split(c.replace("\\\n", " ")) for c in found]


@pytest.fixture
def example_folder(tmp_path, monkeypatch):
    """A folder holding the repository's example runs and qrels, as the README's examples expect."""
    shutil.copytree(REPO / "runs" / "example", tmp_path / "runs" / "example")
    shutil.copytree(REPO / "qrels", tmp_path / "qrels")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_three_commands_to_try_run_as_written(example_folder, capsys):
    (block,) = re.findall(r"```bash\n(.*?)```", _section("## Three commands to try"), re.S)
    commands = [shlex.split(line.removeprefix(".venv/bin/recjudge ")) for line in block.splitlines()
                if line.startswith(".venv/bin/recjudge ")]
    assert [argv[0] for argv in commands] == ["compare", "agreement", "ties"], \
        "the README's commands to try changed: update this test"
    for argv in commands:
        assert main(argv) == 0, argv
    out = capsys.readouterr().out
    assert (example_folder / "out" / "example" / "report.md").is_file()
    assert "candidate: example-llm" in out          # compare
    assert "rel>non agree/tie" in out              # agreement
    assert "input order" in out                    # ties


def _ablate_toml() -> str:
    return re.search(r"```toml\n(.*?)```", (DOCS / "commands" / "ablate.md").read_text(encoding="utf-8"),
                     re.S).group(1)


@pytest.fixture
def ml100k_runs(tmp_path, monkeypatch):
    """A folder laid out as the docs' ablate example expects: runs/ml-100k with runs of ml-100k users."""
    pytest.importorskip("recbole", reason="ml-100k ships inside the recbole wheel: needs the 'train' extra")
    folder = tmp_path / "runs" / "ml-100k"
    folder.mkdir(parents=True)
    for s in range(3):
        (folder / f"s{s}.run").write_text("".join(
            f"{u} Q0 {(7 * u + 13 * r + 5 * s) % 1600 + 1} {r + 1} {100 - r} s{s}\n"
            for u in range(1, 60) for r in range(20)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return tmp_path


async def _openai_lists(settings):
    """The free probe of the OpenAI API, answered here (no network in tests): it serves the model."""
    from recjudge.judging.dialects import EndpointInfo

    return [("https://api.openai.com/v1", EndpointInfo("openai", "the OpenAI API's host", model_ids=(settings.model,),
                                                       models_status=200), None)]


def test_the_ablate_example_plans_as_written(ml100k_runs, capsys, monkeypatch):
    (ml100k_runs / "experiment.toml").write_text(_ablate_toml())
    # the dry run checks the key and asks the endpoint (free) before it plans
    assert main(["ablate", "experiment.toml", "--dry-run"]) == 2
    assert "the environment variable OPENAI_API_KEY is not set" in capsys.readouterr().err
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-sent")
    monkeypatch.setattr("recjudge.judging.client.probe_endpoints", _openai_lists)
    assert main(["ablate", "experiment.toml", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dry run: nothing was called" in out
    # one setting at a time; the variants equal to base (title+genres, profile size 50) are dropped
    shown = [line.split()[0] for line in out.splitlines()[-6:]]
    assert shown == ["base", "fields=title", "fields=title+year", "fields=all", "profile_size=10",
                     "profile_size=100"]


def test_a_field_set_the_collection_lacks_is_found_before_any_call(ml100k_runs, capsys, fake_openai):
    # the docs' example once named title+overview, which MovieLens-100K does not have
    text = _ablate_toml().replace('"title+year"', '"title+overview", "title+cast"')
    (ml100k_runs / "experiment.toml").write_text(text)
    for argv in (["ablate", "experiment.toml", "--dry-run"], ["ablate", "experiment.toml"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "problem(s) in the grid, found before any call" in err
        assert "variant 'fields=title+overview': collection 'ml-100k' has no overview field(s)" in err
        assert "variant 'fields=title+cast': collection 'ml-100k' has no cast field(s)" in err
        # without an API key: the dry run says so as the run that would call does, in the file's words
        assert "key 'judge.api_key_env': variants 'base', 'fields=title'" in err
        assert "the environment variable OPENAI_API_KEY is not set" in err and "--api-key-env" not in err
    assert not (ml100k_runs / "out").exists()
    # with an endpoint the key is not needed, and still nothing is called before the grid is right
    text = text.replace('model = "gpt-4o-mini"', f'model = "gpt-4o-mini"\nbase_url = "{fake_openai.url}"')
    (ml100k_runs / "experiment.toml").write_text(text)
    assert main(["ablate", "experiment.toml"]) == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY is not set" not in err and "does not serve model 'gpt-4o-mini'" in err
    assert fake_openai.chat_log() == []


@pytest.mark.slow
def test_the_demo_runs_as_written(tmp_path, monkeypatch, capsys):
    """`recjudge demo` with no option: the whole quick grid on MovieLens-100K, offline."""
    pytest.importorskip("recbole", reason="the demo trains RecBole systems: needs the 'train' extra")
    commands = [argv for argv in _commands(_section("## Quick start")) if argv[0] == "demo"]
    assert commands == [["demo"]], "the Quick start's demo command changed: update this test"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-a-key-alone-is-no-request-to-spend")
    assert main(commands[0]) == 0
    summary = json.loads((tmp_path / "out" / "demo" / "summary.json").read_text())["summary"]
    assert summary["judge"] == "overlap" and len(summary["systems"]) >= 8
    assert (tmp_path / "out" / "demo" / "report.html").is_file()


# ------------------------------------------------------------------------------------ Python blocks

_MARK = re.compile(r"<!-- example: (needs train|not run \(.+?\)) -->\n```python\n")


def _python_blocks() -> list[tuple[str, str, str | None]]:
    """(where, code, marker) for every ```python block of the README and the docs."""
    found = []
    for path in [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for n, block in enumerate(re.finditer(r"```python\n(.*?)```", text, re.S), 1):
            before = text[max(0, block.start() - 200):block.start() + len("```python\n")]
            mark = _MARK.search(before)
            found.append((f"{path.relative_to(REPO)} (python block {n})", block.group(1),
                          mark.group(1) if mark else None))
    return found


_RUN = [(where, code) for where, code, mark in _python_blocks() if mark is None]


@pytest.mark.parametrize("where, code", _RUN, ids=[where for where, _ in _RUN])
def test_a_python_example_runs_as_written(where, code, example_folder):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, where, "exec"), {"__name__": "__example__"})
    assert printed.getvalue().strip(), f"{where} printed nothing"


def test_the_examples_that_train_are_run_by_the_api_tests():
    marked = [where for where, _, mark in _python_blocks() if mark == "needs train"]
    assert marked == ["docs/python-api.md (python block 2)"], marked
    assert '"docs" / "python-api.md"' in (REPO / "tests" / "test_api.py").read_text(encoding="utf-8")
    assert len(_RUN) >= 2  # the README's example and the API page's first
