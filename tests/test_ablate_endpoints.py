"""An ablation's endpoints checked before anything is paid, in the dry run as in the real one: the key
in its environment variable, the server answering the free probe and serving the model, every problem
at once and named by the file's keys; one probe (and one note) per endpoint for the whole grid; a
terminal table that fits 100 columns while ablation.csv keeps every column."""

from __future__ import annotations

import logging
import math
import socket

import pandas as pd
import pytest
from fake_openai import FakeOpenAI
from test_ablate import _movielens, _write

from recjudge.cli import main
from recjudge.errors import InputError
from recjudge.experiments.ablate import (Estimate, ExperimentOutcome, VariantRow, load_experiment, run_experiment,
                                         terminal_table, write_results)

GENERIC = "no known server answered the probes"  # what the probe says of a server of no known kind


def _experiment(tmp_path, judge: str, grid: str = "", top: str = ""):
    coll = _movielens(tmp_path, users=6, items=30)
    return _write(tmp_path, f'''{top}
collection = "{coll}"
reference = "historical:rating"
out = "{tmp_path / 'out'}"
per_user = 2
bootstrap = 0
split = "user_ratio"

[judge]
judge = "openai"
profile_size = 5
{judge}

[grid]
{grid}
''')


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there once the socket is closed


def _refusal(path) -> str:
    """Why a dry run of the experiment file ``path`` is refused."""
    with pytest.raises(InputError) as err:
        run_experiment(load_experiment(path), dry_run=True)
    return str(err.value)


# ------------------------------------------------------------------------------ the dry run's checks

def test_a_working_endpoint_passes_the_dry_run_for_free(tmp_path, fake_openai, capsys):
    path = _experiment(tmp_path, f'model = "fake-model"\nbase_url = "{fake_openai.url}"', "profile_size = [3, 4]")
    assert main(["ablate", str(path), "--dry-run"]) == 0
    assert fake_openai.chat_log() == []  # nothing generated, nothing paid
    asked = [(r.method, r.path) for r in fake_openai.log]
    assert ("GET", "/v1/models") in asked and all(m == "GET" or "tokenize" in p for m, p in asked)
    err = capsys.readouterr().err
    # what the probe found is said once for the three variants
    assert err.count(f"endpoint {fake_openai.url}: generic") == 1


@pytest.mark.parametrize("dry", [True, False])
def test_a_missing_key_fails_the_dry_run_as_the_real_run_naming_the_file_s_key(tmp_path, monkeypatch, capsys, dry):
    # the OpenAI API (no base_url) and no key: both runs stop before any work, in the file's words
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = _experiment(tmp_path, 'model = "gpt-4o-mini"', 'fields = ["title", "title+year"]', 'name = "abl"')
    assert main(["ablate", str(path)] + (["--dry-run"] if dry else [])) == 2
    err = capsys.readouterr().err
    assert "exp.toml" in err and "1 problem(s)" in err
    assert ("key 'judge.api_key_env': variants 'base', 'fields=title', 'fields=title+year' "
            "(judge.api_key_env = 'OPENAI_API_KEY', the default): the environment variable OPENAI_API_KEY is not "
            "set — export it, or name the variable that holds the key in judge.api_key_env") in err
    assert "--api-key-env" not in err and "--base-url" not in err
    assert not (tmp_path / "out").exists()


def test_a_key_named_in_the_grid_is_named_by_its_grid_key(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-sent")
    monkeypatch.delenv("OTHER_KEY", raising=False)
    # the base variant has its key: only the grid's variable is missing (the OpenAI API is not asked:
    # the base's probe would need the network, so it is answered as a server that lists the model)
    monkeypatch.setattr("recjudge.judging.client.probe_endpoints", _lists_the_model)
    text = _refusal(_experiment(tmp_path, 'model = "gpt-4o-mini"', 'api_key_env = ["OTHER_KEY"]'))
    assert ("key 'grid.api_key_env': variant 'api_key_env=OTHER_KEY' (grid.api_key_env = 'OTHER_KEY'): the "
            "environment variable OTHER_KEY is not set") in text


async def _lists_the_model(settings):
    from recjudge.judging.dialects import EndpointInfo

    return [("https://api.openai.com/v1", EndpointInfo("openai", "the OpenAI API's host", model_ids=(settings.model,),
                                                       models_status=200), None)]


def test_a_server_that_refuses_the_key_fails_the_dry_run(tmp_path, monkeypatch):
    monkeypatch.delenv("MY_KEY", raising=False)
    with FakeOpenAI(require_key="sk-right") as server:
        path = _experiment(tmp_path, f'model = "fake-model"\nbase_url = "{server.url}"\napi_key_env = "MY_KEY"')
        text = _refusal(path)
        assert (f"key 'judge.api_key_env': variant 'base': endpoint {server.url} refused the key (GET /v1/models "
                "answered HTTP 401; judge.api_key_env = 'MY_KEY'): the environment variable MY_KEY is not set") in text
        monkeypatch.setenv("MY_KEY", "sk-wrong")
        assert "the key in MY_KEY is not one it takes" in _refusal(path)
        monkeypatch.setenv("MY_KEY", "sk-right")
        assert len(run_experiment(load_experiment(path), dry_run=True)) == 1
        assert server.chat_log() == []


def test_a_server_that_is_down_fails_the_dry_run(tmp_path):
    url = _closed_port_url()
    text = _refusal(_experiment(tmp_path, f'model = "m"\nbase_url = "{url}"'))
    assert f"key 'judge.base_url': variant 'base': endpoint {url} does not answer GET /v1/models (" in text
    assert f"start the server, or correct judge.base_url = '{url}'" in text


def test_a_model_the_server_does_not_list_fails_the_dry_run(tmp_path, fake_openai):
    fake_openai.models = ("qwen2.5-7b", "llama-3.1-8b")
    text = _refusal(_experiment(tmp_path, f'model = "gpt-4o-mini"\nbase_url = "{fake_openai.url}"'))
    assert (f"key 'judge.model': variant 'base': endpoint {fake_openai.url} does not serve model 'gpt-4o-mini' "
            "(judge.model = 'gpt-4o-mini'); it lists 'qwen2.5-7b', 'llama-3.1-8b': set judge.model to one of them"
            ) in text
    assert fake_openai.chat_log() == []


def test_one_problem_of_several_variants_is_listed_once_naming_them_all(tmp_path, fake_openai, monkeypatch):
    # a local server needs no key: the two variables name the same (absent) key, so one probe, one problem
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MY_KEY", raising=False)
    text = _refusal(_experiment(tmp_path, f'model = "nope"\nbase_url = "{fake_openai.url}"', 'api_key_env = ["MY_KEY"]'))
    assert "1 problem(s)" in text and "key 'judge.model': variants 'base', 'api_key_env=MY_KEY': endpoint" in text
    assert sum(r.path == "/v1/models" for r in fake_openai.log) == 1


def test_llama_cpp_serves_its_model_under_any_name(tmp_path):
    # llama-server answers with the model it loaded whatever the request names: no refusal
    with FakeOpenAI(kind="llama.cpp") as server:
        path = _experiment(tmp_path, f'model = "whatever"\nbase_url = "{server.url}"')
        assert len(run_experiment(load_experiment(path), dry_run=True)) == 1


def test_every_problem_of_every_endpoint_is_listed_at_once(tmp_path, fake_openai, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    down = _closed_port_url()
    path = _experiment(tmp_path, f'model = "nope"\nbase_url = "{fake_openai.url}"',
                       f'base_url = ["{down}"]\nmodel = ["fake-model"]\nmax_cost = [1.0]')
    text = _refusal(path)
    assert "3 problem(s)" in text
    assert "key 'judge.model': variants 'base', 'max_cost=1.0': endpoint" in text
    assert "does not serve model 'nope'" in text
    assert f"key 'grid.base_url': variant 'base_url={down}': endpoint {down} does not answer" in text
    assert "key 'grid.max_cost': variant 'max_cost=1.0' (grid.max_cost = 1.0): no price for model 'nope'" in text


# ------------------------------------------------------------------------------ one note per endpoint

@pytest.mark.parametrize("with_progress", [True, False])
def test_eighteen_experiments_on_one_endpoint_say_what_it_is_once(tmp_path, fake_openai, caplog, with_progress):
    # 6 variants × 3 experiments judge through one generic server: its kind was said 18 times
    # (on the progress when there is one, else as a logged warning)
    path = _experiment(tmp_path, f'model = "fake-model"\nbase_url = "{fake_openai.url}"',
                       'profile_size = [2, 3, 4, 6, 7]', "experiments = 3")
    said: list[str] = []
    with caplog.at_level(logging.INFO):
        rows = run_experiment(load_experiment(path), progress=said.append if with_progress else None)
    assert len(rows) == 6 and sum(r.experiments for r in rows) == 18
    assert all(r.judged == r.pairs > 0 for r in rows)
    notes = [m for m in said + [r.getMessage() for r in caplog.records] if GENERIC in m]
    assert len(notes) == 1, notes
    # and the server was probed once: one GET /v1/models for the whole grid
    assert sum(r.path == "/v1/models" for r in fake_openai.log) == 1


def test_outside_an_ablation_each_run_probes_afresh(fake_openai, caplog):
    # a judge run on its own keeps probing on first contact (a server may be restarted between runs)
    from judge_data import movies, pairs_for

    from recjudge.judging import JudgeSettings, judge_pairs

    config = JudgeSettings(base_url=fake_openai.url, model="fake-model", backoff_initial=0.01, timeout=10.0)
    with caplog.at_level(logging.INFO):
        for _ in range(2):
            judge_pairs(pairs_for([10], ["u0"]), movies(), config)
    assert sum(GENERIC in r.getMessage() for r in caplog.records) == 2
    assert sum(r.path == "/v1/models" for r in fake_openai.log) == 2


# ------------------------------------------------------------------------------ the terminal table

MEASURES = ("Compat(p=0.95)", "nDCG@100", "Bpref")


def _estimate(x: float, n: int) -> Estimate:
    values = tuple(x + 0.01 * i for i in range(n))
    mean = sum(values) / n
    return Estimate(mean, (mean - 0.031, mean + 0.029) if n > 1 else (math.nan, math.nan), values)


def _rows(n: int, names: list[str]) -> list[VariantRow]:
    """Realistic rows: 18 variants of a fields × profile-size × prompt study, 50 users × K = 50."""
    rows = []
    for v, name in enumerate(names):
        outs = tuple(ExperimentOutcome(e + 1, e, e, 2500, 2500, 2500, 0, 1_234_567, 0.512, (0.48, 0.54), 0.101,
                                       (0.08, 0.12), 0.387, (0.35, 0.42), 0.331, 0.402,
                                       {m: 0.8 for m in MEASURES}, {m: 0.75 for m in MEASURES}) for e in range(n))
        tau = {m: _estimate(-0.05 + 0.05 * v, n) for m in MEASURES}
        rows.append(VariantRow(name, name.split("=")[0], 50, n, 2500 * n, 2500 * n, 0, 2500 * n, 0, 1_234_567 * n,
                               _estimate(0.512, n), _estimate(0.101, n), _estimate(0.387, n), _estimate(0.331, n),
                               _estimate(-0.402, n), tau, {m: _estimate(0.75, n) for m in MEASURES}, outs))
    return rows


NAMES = (["base"] + [f"fields={f}" for f in ("title", "title+year", "title+genres+directors", "all")]
         + [f"profile_size={k}" for k in (5, 10, 20, 100, 200)] + [f"per_user={k}" for k in (10, 100, 200)]
         + [f"prompt={p}" for p in ("defined-scale", "criteria", "relevance")] + ["repeats=3", "temperature=0.7"])


@pytest.mark.parametrize("n", [1, 3])
def test_eighteen_variants_fit_a_hundred_columns_and_the_csv_keeps_every_column(tmp_path, n):
    assert len(NAMES) == 18
    rows = _rows(n, NAMES)
    text = terminal_table(rows)
    assert max(map(len, text.splitlines())) <= 100, text
    for name in NAMES:  # every variant is named in each block
        assert sum(line.split()[0] == name for line in text.splitlines() if line.strip()) >= 2
    assert "τ Bpref" in text and "τ_w nDCG@100" in text and "κ" in text
    exp = load_experiment(_write(tmp_path, f'collection = "ml-100k"\nreference = "historical:rating"\n'
                                           f'out = "{tmp_path / "out"}"\nexperiments = {n}\n'))
    (tmp_path / "out").mkdir()
    write_results(exp, rows)
    csv = pd.read_csv(tmp_path / "out" / "ablation.csv")
    expected = {"variant", "axis", "per_user", "experiments", "pairs", "judged", "failed", "calls", "cache_hits",
                "est_input_tokens", "boot_ci_note", "boot_ci_missing"}
    for metric in ["agree", "tie", "disagree", "kappa", "alpha_ordinal"] + [f"{t} {m}" for t in ("tau", "wtau")
                                                                          for m in MEASURES]:
        expected |= {metric, f"{metric}_ci_lo", f"{metric}_ci_hi"}
    expected |= {f"{s}_boot_{b}" for s in ("agree", "tie", "disagree") for b in ("lo", "hi")}
    assert set(csv.columns) == expected and len(csv) == 18
    assert csv["est_input_tokens"].tolist() == [1_234_567 * n] * 18


def test_long_variant_names_are_numbered_and_listed_above_the_table():
    names = ["base", "fields=title+genres+directors, profile_size=100, prompt=defined-scale", "fields=title"]
    text = terminal_table(_rows(1, names))
    assert max(map(len, text.splitlines())) <= 100
    lines = text.splitlines()
    assert lines[:4] == ["variants:", "  #1 base", f"  #2 {names[1]}", "  #3 fields=title"]
    assert any(line.startswith("#2 ") for line in lines[4:])


def test_the_dry_run_table_fits_too():
    text = terminal_table(_rows(1, NAMES), dry_run=True)
    assert max(map(len, text.splitlines())) <= 100
    assert text.splitlines()[0].split() == ["K", "pairs", "calls", "est.", "tokens"]


# ------------------------------------------------------------------------------ the file's words

def test_the_judge_s_own_refusals_name_the_file_s_keys(tmp_path, monkeypatch):
    from recjudge.errors import ConfigError
    from recjudge.experiments.ablate import variant_config, variants
    from recjudge.judging.backend import api_key

    monkeypatch.delenv("OTHER_KEY", raising=False)
    exp = load_experiment(_experiment(tmp_path, 'model = "gpt-4o-mini"', 'api_key_env = ["OTHER_KEY"]'))
    base, other = variants(exp)
    # the key of the grid's variant is the grid's; its other settings are the [judge] table's
    with pytest.raises(ConfigError) as err:
        api_key(variant_config(exp, other))
    assert str(err.value) == ("no API key: set the environment variable OTHER_KEY (or name another with key "
                              "'grid.api_key_env'), or point key 'judge.base_url' at a server that needs none")
    # a value the judge refuses later in the run is named as the file wrote it, too
    with pytest.raises(ConfigError, match=r"^key 'judge.profile_size' must be at least 1, not 0$"):
        variant_config(exp, base).replace(profile_size=0)


def test_the_names_a_caller_wrote_win_in_every_refusal():
    from recjudge.errors import ConfigError
    from recjudge.judging import JudgeSettings

    names = {"model": "key 'judge.model'", "batch": "key 'grid.batch'", "base_url": "key 'judge.base_url'"}
    s = JudgeSettings.build({"model": "m"}, spelled="file", names=names)
    assert (s.name_of("model"), s.name_of("seed"), s.name_of("batch")) == ("key 'judge.model'", "key 'seed'",
                                                                           "key 'grid.batch'")
    with pytest.raises(ConfigError, match=r"^key 'judge.model' must be text, not 3$"):
        JudgeSettings.build({"model": 3}, spelled="file", names=names)
    # a conflict of two settings names both as written
    with pytest.raises(ConfigError, match=r"give one key 'judge.base_url' with key 'grid.batch'"):
        JudgeSettings.build({"base_url": ("http://a/v1", "http://b/v1"), "batch": True}, spelled="file", names=names)
    # without names, the spelling alone decides, as before
    assert JudgeSettings.build({}, spelled="cli").name_of("api_key_env") == "--api-key-env"


def test_options_given_in_python_are_named_as_python_writes_them(tmp_path):
    from recjudge.errors import ConfigError
    from recjudge.experiments.ablate import with_options

    exp = load_experiment(_write(tmp_path, 'collection = "ml-100k"\nreference = "historical:rating"\n'))
    # the value came from the call, not from the file: not "key 'per_user'"
    with pytest.raises(ConfigError, match=r"^per_user= must be at least 1, not 0$"):
        with_options(exp, 0)


# ------------------------------------------------------------------------------ one question for the grid

def test_the_grid_is_confirmed_once_on_its_total_not_variant_by_variant(tmp_path, fake_openai, capsys):
    """6 users × 2 items: 12 calls a variant, 24 for the grid. Under a 20-call threshold each variant alone
    would start; the grid's total is above it, so without a terminal the ablation refuses before any call,
    naming the file's key; with judge.yes it runs, and nothing asks again per variant."""
    from recjudge.errors import NotConfirmed

    path = _experiment(tmp_path, f'model = "fake-model"\nbase_url = "{fake_openai.url}"\nconfirm_above_calls = 20',
                       "profile_size = [3]")
    with pytest.raises(NotConfirmed) as err:
        run_experiment(load_experiment(path))
    text = str(err.value)
    assert "24 calls" in text and "key 'judge.yes'" in text, text
    assert fake_openai.chat_log() == []
    path.write_text(path.read_text().replace("confirm_above_calls = 20", "confirm_above_calls = 20\nyes = true"))
    rows = run_experiment(load_experiment(path))
    assert [r.judged for r in rows] == [12, 12] and len(fake_openai.chat_log()) == 24
