"""``run_reproduce`` itself, where a slip would show: which targets read the runs, what a dry run
prices without them, the budget's boundary, the inputs the output folder may not be, and the
templates checked before any call (the planning and the cells are tests/test_mutation_reproduce.py)."""

from __future__ import annotations

import pytest
from test_reproduce import REDUCED, _settings, build_study, oracle

from recjudge.errors import ConfigError, InputError, OutputError
from recjudge.experiments.reproduce import ReproduceSettings, run_reproduce

SYSTEMS = {"Good": 1.5, "Weak": 0.3, "Pop": None}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return build_study(tmp_path_factory.mktemp("run"), participants=4, candidates=20, judged=6, run_length=8,
                       systems=SYSTEMS)


def _quiet(settings):
    return run_reproduce(settings, progress=lambda m: None)


def test_a_dry_run_prices_table5_from_the_runs_and_says_so_without_them(small, tmp_path):
    kw = {**REDUCED, "only": ("table5",), "dry_run": True, "model": "gpt-4o-mini"}
    # with runs: one pool job, the union of the 3 systems' top-8 of 4 participants (≤ 3 × 8 × 4 pairs)
    with_runs = _quiet(ReproduceSettings(collection=small["folder"], out=tmp_path / "a", runs=small["runs"], **kw))
    pool = [r for r in with_runs.plan if "pool" in r.tables]
    assert len(pool) == 1 and 8 * 4 <= pool[0].pairs <= 3 * 8 * 4
    # without runs: nothing to price, and the plan says why (no error, no job)
    without = _quiet(ReproduceSettings(collection=small["folder"], out=tmp_path / "b", **kw))
    assert without.plan == () and "Table 5 is not priced" in without.plan_text


def test_a_budget_of_zero_stops_before_the_first_call(small, tmp_path, fake_openai):
    oracle(fake_openai, small)
    result = _quiet(_settings(small, tmp_path / "out", **{**REDUCED, "only": ("table8",), "model": "gpt-4o-mini",
                                                          "base_url": fake_openai.url, "max_cost": 0.0}))
    assert result.stopped == "--max-cost $0 reached" and not result.complete
    assert fake_openai.chat_log() == []


def test_the_output_folder_may_not_be_the_runs_folder(small, fake_openai):
    oracle(fake_openai, small)
    with pytest.raises(OutputError, match="--out is the input folder"):
        _quiet(_settings(small, small["runs"], **{**REDUCED, "only": ("table4",), "base_url": fake_openai.url}))
    assert fake_openai.chat_log() == []


@pytest.mark.parametrize("setting", ["prompt", "defined_scale_prompt"])
def test_both_prompts_are_checked_with_the_settings(small, tmp_path, setting):
    missing = tmp_path / "by-hand.txt"
    with pytest.raises(ConfigError, match=f"{setting}=: no prompt template named '.*by-hand.txt' and no such file"):
        _settings(small, tmp_path / "out", **{setting: str(missing)})
    broken = tmp_path / "broken.txt"
    broken.write_text("=== nonsense\n")
    with pytest.raises(InputError, match="broken.txt"):  # a file that exists keeps its own error, with its line
        _settings(small, tmp_path / "out", **{setting: str(broken)})


def test_an_unpriced_budget_is_refused_before_training(small, tmp_path, fake_openai):
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="--max-cost needs a price for model 'my-model'"):
        _quiet(ReproduceSettings(collection=small["folder"], out=out, model="my-model", base_url=fake_openai.url,
                                 max_cost=1.0, systems="Pop", only=("table4",), **{k: v for k, v in REDUCED.items()
                                                                                  if k != "concurrency"}))
    assert not (out / "runs").exists() and fake_openai.chat_log() == []  # nothing trained, nothing asked


def test_the_whole_plan_is_confirmed_once_before_the_first_call(small, tmp_path, fake_openai, monkeypatch):
    import io
    import sys

    from recjudge.errors import NotConfirmed
    from recjudge.judging import budget

    oracle(fake_openai, small)
    kw = {**REDUCED, "only": ("table8",), "model": "gpt-4o-mini", "base_url": fake_openai.url,
          "confirm_above_usd": 0.0}
    monkeypatch.setattr(budget, "_at_terminal", lambda: False)
    with pytest.raises(NotConfirmed, match=r"above confirm_above_usd= 0, .*Give yes= to start them, or max_cost="):
        _quiet(_settings(small, tmp_path / "a", **kw))
    assert fake_openai.chat_log() == []
    # at a terminal one answer starts every job: a second question would read nothing and stop the run
    monkeypatch.setattr(budget, "_at_terminal", lambda: True)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    result = _quiet(_settings(small, tmp_path / "b", **kw))
    assert result.stopped is None and len(fake_openai.chat_log()) > 0
