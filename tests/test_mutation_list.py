"""The mutation run's list check (``python scripts/mutation.py --check``, run by the mutation job, not by
this suite: a refactor that moves a listed line must not fail the tests) refuses a list out of step
with the code, naming the mutant and what is wrong."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULE = "pkg/mod.py"


def _mutation():
    spec = importlib.util.spec_from_file_location("mutation", ROOT / "scripts" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation"] = module  # its dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / MODULE).write_text("import a\nimport b\n\ndef same_value(x):\n    return x <= 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mod.py").write_text("")
    return tmp_path


def _entry(body: str, tests: str = '["tests/test_mod.py"]', why: str = '"w"') -> str:
    return f'[[mutant]]\nid = "stale-one"\nmodule = "{MODULE}"\n{body}\nwhy = {why}\ntests = {tests}\n'


@pytest.mark.parametrize("entry, words", [
    (_entry('find = "this text is nowhere"\nreplace = "x"'), "occurs 0 times"),
    (_entry('find = "import"\nreplace = "x"'), f"occurs 2 times in {MODULE}, not once"),
    (_entry('find = "def same_value("\nreplace = "def same_value("'), "does not change the code"),
    (_entry('find = "x <= 1"\nreplace = "x < 1"', why='"two\\nlines"'), "in one line"),
    (_entry('find = "x <= 1"\nreplace = "x < 1"', tests='["tests/test_gone.py -k x"]'), "no test file"),
])
def test_a_list_out_of_step_names_the_mutant(tmp_path, entry, words):
    mutation = _mutation()
    root = _tree(tmp_path)
    (root / "mutants.toml").write_text(entry)
    with pytest.raises(mutation.MutantListError, match="mutant stale-one") as exc:
        mutation.load_mutants(root / "mutants.toml", root)
    assert words in str(exc.value)


def test_a_list_in_step_loads(tmp_path):
    root = _tree(tmp_path)
    (root / "mutants.toml").write_text(_entry('find = "x <= 1"\nreplace = "x < 1"'))
    [m] = _mutation().load_mutants(root / "mutants.toml", root)
    assert m.apply((root / MODULE).read_text()).endswith("return x < 1\n")
