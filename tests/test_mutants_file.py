"""The mutation run's list (scripts/mutants.toml) is kept in step with the code: every snippet occurs
exactly once in its module, every mutant changes the code, and a list out of step is refused naming
the mutant. The run itself is ``python scripts/mutation.py`` (minutes, not part of the suite)."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _mutation():
    spec = importlib.util.spec_from_file_location("mutation", ROOT / "scripts" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation"] = module  # its dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


def test_every_mutant_matches_the_code_once_and_changes_it():
    mutation = _mutation()
    mutants = mutation.load_mutants()  # raises MutantListError naming the mutant otherwise
    for m in mutants:
        text = (ROOT / m.module).read_text("utf-8")
        assert text.count(m.find) == 1, m.id
        assert m.apply(text) != text, m.id
        assert m.why.strip() and "\n" not in m.why, m.id
        for selection in m.tests:
            assert (ROOT / selection.split("::")[0].split()[0]).is_file(), (m.id, selection)
    per_module = Counter(m.module for m in mutants)
    for module in ("experiments/reproduce/run.py", "evaluation/significance.py",
                   "judging/budget.py", "judging/bias.py", "protocol.py"):
        assert per_module[f"src/recjudge/{module}"] >= 8, module
    # the reproduction's cells, one module per table family: at least 8 among them
    families = ("release", "historical", "rankings", "agreement", "pool", "common", "tables")
    assert sum(per_module[f"src/recjudge/experiments/reproduce/{f}.py"] for f in families) >= 8


@pytest.mark.parametrize("entry, words", [
    ('find = "this text is nowhere"\nreplace = "x"', "occurs 0 times"),
    ('find = "import"\nreplace = "x"', "times in src/recjudge/protocol.py, not once"),
    ('find = "def same_value("\nreplace = "def same_value("', "does not change the code"),
])
def test_a_list_out_of_step_names_the_mutant(tmp_path, entry, words):
    mutation = _mutation()
    path = tmp_path / "mutants.toml"
    path.write_text(f'[[mutant]]\nid = "stale-one"\nmodule = "src/recjudge/protocol.py"\n{entry}\n'
                    'why = "w"\ntests = ["tests/test_protocol.py"]\n')
    with pytest.raises(mutation.MutantListError, match="mutant stale-one") as exc:
        mutation.load_mutants(path)
    assert words in str(exc.value)
