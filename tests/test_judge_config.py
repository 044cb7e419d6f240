"""JudgeSettings as the one source of the judge's settings; the registries; the module layout."""

from __future__ import annotations

import argparse
import ast
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recjudge.errors import ConfigError, InputError
from recjudge.evaluation.agreement import krippendorff_alpha
from recjudge.judging import JudgeSettings
from recjudge.judging.backend import backend_names, register_backend
from recjudge.judging.results import alpha_interval, repeat_agreement

JUDGE_DIR = Path(__file__).resolve().parents[1] / "src" / "recjudge" / "judging"


@pytest.mark.parametrize("key, value, words", [
    ("profile_size", "50", "profile_size= must be a whole number, not '50'"),   # a string is no number
    ("repeats", True, "repeats= must be a whole number, not True"),             # bool is not an int
    ("repeats", 2.0, "repeats= must be a whole number, not 2.0"),
    ("timeout", "60", "timeout= must be a number, not '60'"),
    ("timeout", float("nan"), "timeout= must be a finite number, not nan"),
    ("batch", 1, "batch= must be true or false, not 1"),
    ("model", 4, "model= must be text, not 4"),
    ("aggregate", "median", "aggregate= must be 'mean' or 'mode', not 'median'"),
    ("profile_size", 0, "profile_size= must be at least 1, not 0"),
    ("repeats", 1001, "repeats= must be at most 1000, not 1001"),
    ("timeout", 0, "timeout= must be more than 0, not 0"),
    ("timeout", 86401, "timeout= must be at most 86400, not 86401"),
    ("max_calls", -1, "max_calls= must be at least 0, not -1"),
    ("seed", -1, "seed= must be at least 0, not -1"),
    ("seed", 2**63, f"seed= must be at most {2**63 - 1}, not {2**63}"),
    ("model", None, "model= must be text, not None"),
    ("params", [1], r"params=: must map parameter names to values, not \[1\]"),
    ("fields", "title+colour", r"fields=: unknown field\(s\) \['colour'\]"),
    ("prompt", "nosuch", "prompt=: unknown prompt template 'nosuch'"),
    ("judge", "bogus", "judge=: must be one of openai, overlap, popularity, not 'bogus'"),
])
def test_from_dict_checks_types_and_ranges_naming_the_key(key, value, words):
    with pytest.raises(ConfigError, match=words):
        JudgeSettings.from_dict({key: value})


def test_from_dict_accepts_what_the_fields_declare():
    c = JudgeSettings.from_dict({"timeout": 5, "max_cost": 0, "max_calls": None, "seed": 2**63 - 1, "repeats": 1000})
    assert c.timeout == 5.0 and isinstance(c.timeout, float)  # an int is a fine number of seconds
    assert (c.max_cost, c.max_calls, c.seed, c.repeats) == (0.0, None, 2**63 - 1, 1000)
    with pytest.raises(ConfigError, match="unexpected parameter modle="):
        JudgeSettings.from_dict({"modle": "x"})
    with pytest.raises(ConfigError, match="table"):
        JudgeSettings.from_dict([("model", "x")])
    # a file's keys are named as keys, with the file
    with pytest.raises(InputError, match=r"exp\.toml: key 'repeats' must be at most 1000, not 1001"):
        JudgeSettings.from_dict({"repeats": 1001}, source="exp.toml")


def _judge_parser():
    from recjudge.api.settings import JudgeCommandSettings

    parser = argparse.ArgumentParser()
    JudgeCommandSettings.add_arguments(parser)
    return parser, JudgeCommandSettings


def test_the_cli_takes_names_defaults_and_ranges_from_the_settings():
    parser, model = _judge_parser()
    args = parser.parse_args(["--collection", "c", "--runs", "r", "--out", "o"])
    # every default of the command is the library's
    assert model.from_args(args).judge_settings() == JudgeSettings()
    assert model.from_args(parser.parse_args(["--collection", "c", "--runs", "r", "--out", "o", "--retries", "3"])).max_attempts == 3
    for bad, words in ((["--repeats", "1001"], "--repeats must be at most 1000"),
                       (["--profile-size", "0"], "--profile-size must be at least 1"),
                       (["--timeout", "0"], "--timeout must be more than 0"),
                       (["--seed", "-1"], "--seed must be at least 0")):
        with pytest.raises(ConfigError, match=words):
            model.from_args(parser.parse_args(["--collection", "c", "--runs", "r", "--out", "o", *bad]))
    with pytest.raises(SystemExit):  # a choice argparse knows
        parser.parse_args(["--collection", "c", "--runs", "r", "--out", "o", "--aggregate", "median"])
    # a field kept out of the commands is not an option
    assert not any(a.dest == "drain_grace" for a in parser._actions)


def test_judge_choices_come_from_the_registry():
    from recjudge.judging import judge_names

    parser, _ = _judge_parser()
    (action,) = [a for a in parser._actions if a.dest == "judge"]
    assert judge_names() == ("openai", "overlap", "popularity")
    assert action.choices is None or tuple(action.choices) == judge_names()
    with pytest.raises(ConfigError, match="--judge: must be one of openai, overlap, popularity, not 'bogus'"):
        _judge_parser()[1].from_args(parser.parse_args(["--collection", "c", "--runs", "r", "--out", "o", "--judge", "bogus"]))


def test_backends_register_themselves_and_duplicates_are_refused():
    assert backend_names() == ("chat", "batch")
    assert JudgeSettings().backend_name() == "chat" and JudgeSettings(batch=True).backend_name() == "batch"
    with pytest.raises(ConfigError, match="batch backend"):
        JudgeSettings(batch=True, backend="chat")


def test_a_new_backend_is_one_registration(tmp_path):
    """A backend registered under a new name gets every request of the run and stores the answers."""
    from recjudge.judging import judge_pairs
    from recjudge.judging.cache import CallRecord

    seen = []

    class Echo:
        attempts = 0

        def __init__(self, job):
            pass

        async def run(self, job):
            async for missing in job.pending():
                for req in missing:
                    seen.append(req.items)
                    self.attempts += 1
                    job.store(CallRecord(req.key, req.qid, req.items, req.repeat, "ok", None, None,
                                         labels={i: 3 for i in req.items}), req)

        async def close(self):
            pass

        def endpoint_stats(self):
            return {}

    register_backend("echo-test", Echo)
    from test_judge_units import tiny_collection

    result = judge_pairs([("u1", "i3"), ("u1", "i4")], tiny_collection(),
                         JudgeSettings(backend="echo-test", base_url="http://127.0.0.1:9/v1"))
    assert sorted(seen) == [("i3",), ("i4",)]
    assert result.labels == {("u1", "i3"): 3, ("u1", "i4"): 3} and result.summary.attempts == 2
    with pytest.raises(ConfigError, match="already registered"):
        register_backend("chat", lambda job: None)


def test_alpha_interval_equals_the_two_coder_alpha_of_evaluation_agreement():
    a = np.array([0, 1, 2, 3, 3, 1, 0, 2])
    b = np.array([0, 2, 2, 3, 1, 1, 1, 2])
    assert alpha_interval(np.vstack([a, b]).T) == pytest.approx(krippendorff_alpha(a, b, "interval"), abs=1e-12)


def test_alpha_interval_by_hand_with_a_missing_value():
    # units (1, 1, 2) and (3, 3): n = 5 values, mean 2, sum of squared deviations 1+1+0+1+1 = 4;
    # D_e = 2 (n Σv² − (Σv)²) / (n (n − 1)) = 2 (5·24 − 100) / 20 = 2;
    # D_o = [2 (3·6 − 16)/2 + 0] / 5 = 0.4; α = 1 − 0.4 / 2 = 0.8
    assert alpha_interval([[1, 1, 2], [3, 3]]) == pytest.approx(0.8, abs=1e-12)
    agreement = repeat_agreement([(1, 1, 2), (3, None, 3), (5, None, None)])
    assert agreement.alpha_interval == pytest.approx(0.8, abs=1e-12) and agreement.pairs == 2
    assert alpha_interval([[2, 2], [2, 2]]) == 1.0  # no variation at all: complete agreement
    assert math.isnan(alpha_interval([[1]]))


def _imports(path: Path) -> set[str]:
    """Sibling modules ``path`` imports at run time (anywhere but an ``if TYPE_CHECKING:`` block)."""
    tree = ast.parse(path.read_text("utf-8"))
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
                   for n in ast.walk(node)}
    mods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module and id(node) not in typing_only:
            mods.add(node.module.split(".")[0])
    return mods


def test_the_judge_package_has_no_import_cycle():
    graph = {p.stem: _imports(p) & {q.stem for q in JUDGE_DIR.glob("*.py")} for p in JUDGE_DIR.glob("*.py")}
    graph.pop("__init__")

    def reaches(start, goal, seen=()):
        return any(n == goal or (n not in seen and reaches(n, goal, (*seen, n))) for n in graph.get(start, ()))

    cycles = [m for m in graph if reaches(m, m)]
    assert cycles == []
    # the plugins import the registries, never the run loop
    assert "orchestrate" not in graph["baselines"] and "orchestrate" not in graph["chat"] | graph["batch"]


def test_importing_the_judge_loads_no_heavy_module():
    code = ("import sys, recjudge.judging as j; j.judge_names(); "
            "print(sorted(m for m in ('openai', 'torch', 'recbole', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
