"""JudgeConfig as the one source of the judge's settings; the registries; the module layout."""

from __future__ import annotations

import argparse
import ast
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recjudge.errors import ConfigError
from recjudge.evaluation.agreement import krippendorff_alpha
from recjudge.judging import JudgeConfig
from recjudge.judging.backend import backend_names, register_backend
from recjudge.judging.results import alpha_interval, repeat_agreement

JUDGE_DIR = Path(__file__).resolve().parents[1] / "src" / "recjudge" / "judging"


@pytest.mark.parametrize("key, value, words", [
    ("profile_size", "50", "profile_size must be a whole number"),   # a string is no number
    ("repeats", True, "repeats must be a whole number"),             # bool is not an int
    ("repeats", 2.0, "repeats must be a whole number"),
    ("timeout", "60", "timeout must be a number"),
    ("timeout", float("nan"), "timeout must be finite"),
    ("batch", 1, "batch must be true or false"),
    ("model", 4, "model must be a string"),
    ("aggregate", "median", "aggregate must be one of mean, mode"),
    ("profile_size", 0, "profile_size must be at least 1"),
    ("repeats", 1001, r"repeats must be in \[1, 1000\]"),
    ("timeout", 0, r"timeout must be in \(0, 86400\]"),
    ("max_calls", -1, "max_calls must be 0 or more"),
    ("seed", -1, r"seed must be in \[0, 9.22337e\+18\]"),
    ("model", None, "model must not be None"),
    ("params", [1], "params must map"),
])
def test_from_dict_checks_types_and_ranges_naming_the_key(key, value, words):
    with pytest.raises(ConfigError, match=words):
        JudgeConfig.from_dict({key: value})


def test_from_dict_accepts_what_the_fields_declare():
    c = JudgeConfig.from_dict({"timeout": 5, "max_cost": 0, "max_calls": None, "seed": 2**63 - 1, "repeats": 1000})
    assert c.timeout == 5.0 and isinstance(c.timeout, float)  # an int is a fine number of seconds
    assert (c.max_cost, c.max_calls, c.seed, c.repeats) == (0.0, None, 2**63 - 1, 1000)
    with pytest.raises(ConfigError, match="unknown judge setting"):
        JudgeConfig.from_dict({"modle": "x"})
    with pytest.raises(ConfigError, match="table"):
        JudgeConfig.from_dict([("model", "x")])


def test_the_cli_takes_names_defaults_and_ranges_from_judgeconfig():
    from recjudge.cli.judge import BATCH_OPTIONS, BUDGET_OPTIONS, CALL_OPTIONS, JUDGE_OPTIONS, add_config_options

    parser = argparse.ArgumentParser()
    names = JUDGE_OPTIONS + CALL_OPTIONS + BATCH_OPTIONS + BUDGET_OPTIONS
    add_config_options(parser, names)
    args = parser.parse_args([])
    # every default of the command is the library's
    assert JudgeConfig(**{n: getattr(args, n) for n in names}) == JudgeConfig()
    settings = JudgeConfig.settings()
    assert settings["max_attempts"][0].flag == "--retries"
    assert parser.parse_args(["--retries", "3"]).max_attempts == 3
    for bad in (["--repeats", "1001"], ["--profile-size", "0"], ["--timeout", "0"], ["--seed", "-1"],
                ["--aggregate", "median"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)
    # a field kept out of the commands is not an option
    assert not any(a.dest == "drain_grace" for a in parser._actions)


def test_judge_choices_come_from_the_registry():
    from recjudge.cli.judge import add_config_options
    from recjudge.judging import judge_names

    parser = argparse.ArgumentParser()
    add_config_options(parser, ("judge",))
    (action,) = [a for a in parser._actions if a.dest == "judge"]
    assert tuple(action.choices) == judge_names() == ("openai", "overlap", "popularity")


def test_backends_register_themselves_and_duplicates_are_refused():
    assert backend_names() == ("chat", "batch")
    assert JudgeConfig().backend_name() == "chat" and JudgeConfig(batch=True).backend_name() == "batch"
    with pytest.raises(ConfigError, match="batch backend"):
        JudgeConfig(batch=True, backend="chat")


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
                         JudgeConfig(backend="echo-test", base_url="http://127.0.0.1:9/v1"))
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
    mods = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
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
