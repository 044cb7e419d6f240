"""Experiment files: every key's type and every judge, field, prompt, split and measure name is checked
at load, the error names the file and the key; the output folder is checked before any work."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from conftest import exit_code
from recjudge.cli import main
from recjudge.errors import InputError, OutputError
from recjudge.experiments.ablate import Experiment, load_experiment, run_experiment
from recjudge.judging import JudgeSettings

TOP = 'collection = "ml-100k"\nreference = "historical:rating"\nout = "{out}"\n'

# (case id, text after the required keys, regex the error must hold besides the file name)
BAD = [
    ("judge-not-table", 'judge = "overlap"\n', r"key 'judge' must be a table, not 'overlap'"),
    ("grid-not-table", "grid = 3\n", r"key 'grid' must be a table, not 3"),
    ("runs-int", "runs = 5\n", r"key 'runs' must be text or a list, not 5"),
    ("runs-list-of-int", "runs = [5]\n", r"key 'runs'"),
    ("runs-missing", 'runs = ["no-such-runs"]\n', r"key 'runs': run file or folder 'no-such-runs' not found"),
    ("reference-missing", None, r"key 'reference': qrels file 'missing.qrels' not found"),
    ("reference-mapping", None, r"key 'reference': unknown rating mapping 'stars'"),
    ("reference-threshold", None, r"key 'reference': unknown rating mapping 'threshold:high'"),
    ("reference-named-historical", None, r"key 'reference': qrels file 'historical-human.qrels' not found"),
    ("out-int", None, r"key 'out' must be text or a path, not 5"),
    ("name-int", "name = 5\n", r"key 'name' must be text, not 5"),
    ("measures-string", 'measures = "nDCG@10"\n', r"key 'measures' must be a list, not 'nDCG@10'"),
    ("measures-empty", "measures = []\n", r"key 'measures' must hold at least 1 item\(s\), not \[\]"),
    ("measures-unknown", 'measures = ["nDCG@10", "Bogus@3"]\n', r"key 'measures': unknown measure 'Bogus@3'"),
    ("measures-P@0", 'measures = ["P@0"]\n', r"key 'measures'.*P@0"),
    ("per_user-zero", "per_user = 0\n", r"key 'per_user' must be at least 1, not 0"),
    ("per_user-string", 'per_user = "20"\n', r"key 'per_user' must be a whole number, not '20'"),
    ("experiments-zero", "experiments = 0\n", r"key 'experiments' must be at least 1, not 0"),
    ("experiments-float", "experiments = 3.0\n", r"key 'experiments' must be a whole number, not 3.0"),
    ("experiments-bool", "experiments = true\n", r"key 'experiments' must be a whole number, not true"),
    ("seed-negative", "seed = -1\n", r"key 'seed' must be at least 0, not -1"),
    ("seed-huge", f"seed = {2**63}\n", rf"key 'seed' must be at most {2**63 - 1}, not {2**63}"),
    ("bootstrap-float", "bootstrap = 1.5\n", r"key 'bootstrap' must be a whole number, not 1.5"),
    ("bootstrap-bool", "bootstrap = true\n", r"key 'bootstrap' must be a whole number, not true"),
    ("mode-unknown", 'mode = "random"\n', r"key 'mode' must be 'one-at-a-time' or 'product', not 'random'"),
    ("tie_policy-int", "tie_policy = 3\n", r"key 'tie_policy' must be 'hash', 'trec_eval', 'docid' or 'input', not 3"),
    ("split-unknown", 'split = "weekly"\n', r"key 'split': must be one of global_time.*, not 'weekly'"),
    ("split_options-string", 'split_options = "x"\n', r"key 'split_options' must be a table, not 'x'"),
    ("top-unknown", "colour = 1\n", r"unknown key 'colour'; known: name, collection, .*, grid \("),
    ("judge-unknown-key", "[judge]\ncolour = 1\n", r"unknown key 'judge\.colour'; known: judge, model"),
    ("judge-unknown-judge", '[judge]\njudge = "bogus"\n', r"key 'judge\.judge': must be one of .*overlap.*not 'bogus'"),
    ("judge-unknown-field", '[judge]\nfields = "title+colour"\n', r"key 'judge\.fields': unknown field.*colour"),
    ("judge-unknown-prompt", '[judge]\nprompt = "nosuch"\n', r"key 'judge\.prompt': unknown prompt template 'nosuch'; choose one of baseline"),
    ("judge-unknown-sampling", '[judge]\nsampling = "oldest"\n',
     r"key 'judge\.sampling' must be 'random' or 'recent', not 'oldest'"),
    ("judge-profile_size-string", '[judge]\nprofile_size = "50"\n',
     r"key 'judge\.profile_size' must be a whole number, not '50'"),
    ("judge-profile_size-zero", "[judge]\nprofile_size = 0\n", r"key 'judge\.profile_size' must be at least 1, not 0"),
    ("judge-repeats-bool", "[judge]\nrepeats = true\n", r"key 'judge\.repeats' must be a whole number, not true"),
    ("judge-model-int", "[judge]\nmodel = 4\n", r"key 'judge\.model' must be text, not 4"),
    ("judge-timeout-string", '[judge]\ntimeout = "5"\n', r"key 'judge\.timeout' must be a number, not '5'"),
    ("judge-timeout-nan", "[judge]\ntimeout = nan\n", r"key 'judge\.timeout' must be a finite number, not nan"),
    ("judge-batch-string", '[judge]\nbatch = "yes"\n', r"key 'judge\.batch' must be true or false, not 'yes'"),
    ("judge-params-unknown", "[judge]\nparams = { colour = 1 }\n",
     r"key 'judge\.params': unknown generation parameter\(s\) colour"),
    ("judge-aggregate-unknown", '[judge]\naggregate = "median"\n',
     r"key 'judge\.aggregate' must be 'mean' or 'mode', not 'median'"),
    ("grid-unknown-axis", "[grid]\nbogus = [1]\n", r"unknown key\(s\) grid\.bogus"),
    ("grid-profile_size-string", '[grid]\nprofile_size = "50"\n',
     r"key 'grid\.profile_size' must be a non-empty list, not '50'"),
    ("grid-profile_size-zero", "[grid]\nprofile_size = [10, 0]\n",
     r"key 'grid\.profile_size' must be at least 1, not 0 \(item 1\)"),
    ("grid-profile_size-bool", "[grid]\nprofile_size = [10, true]\n",
     r"key 'grid\.profile_size' must be a whole number, not true \(item 1\)"),
    ("grid-repeats-empty", "[grid]\nrepeats = []\n", r"key 'grid\.repeats' must be a non-empty list, not \[\]"),
    ("grid-per_user-string", '[grid]\nper_user = "5"\n', r"key 'grid\.per_user' must be a non-empty list, not '5'"),
    ("grid-per_user-zero", "[grid]\nper_user = [5, 0]\n", r"key 'grid\.per_user' must be a positive whole number, not 0"),
    ("grid-unknown-judge", '[grid]\njudge = ["overlap", "nope"]\n', r"key 'grid\.judge': must be one of .*not 'nope'"),
    ("grid-unknown-field", '[grid]\nfields = ["title", "plot"]\n', r"key 'grid\.fields'.*unknown field.*plot"),
    ("grid-fields-string", '[grid]\nfields = "title"\n', r"key 'grid\.fields' must be a non-empty list, not 'title'"),
    ("grid-aggregate-unknown", '[grid]\naggregate = ["median"]\n',
     r"key 'grid\.aggregate' must be 'mean' or 'mode', not 'median'"),
]


def _text(case, extra, out):
    if case == "out-int":
        return 'collection = "ml-100k"\nreference = "historical:rating"\nout = 5\n'
    references = {"reference-missing": "missing.qrels", "reference-mapping": "historical:stars",
                  "reference-threshold": "historical:threshold:high",
                  "reference-named-historical": "historical-human.qrels"}
    if case in references:
        return f'collection = "ml-100k"\nreference = "{references[case]}"\nout = "{out}"\n'
    return TOP.format(out=out) + extra


@pytest.mark.parametrize("case,extra,pattern", BAD, ids=[c for c, _, _ in BAD])
def test_bad_experiment_file_exits_2_naming_file_and_key(tmp_path, monkeypatch, capsys, case, extra, pattern):
    monkeypatch.chdir(tmp_path)  # relative paths in the cases resolve here
    out = tmp_path / "out"
    path = tmp_path / "exp.toml"
    path.write_text(_text(case, extra, out))
    with pytest.raises(InputError, match=pattern) as err:
        load_experiment(path)
    assert err.value.source == str(path)
    assert main(["ablate", str(path), "--dry-run"]) == 2
    message = capsys.readouterr().err
    assert str(path) in message and "Traceback" not in message
    assert not out.exists()


def test_a_valid_file_loads_with_its_values_and_defaults(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    path = tmp_path / "fields.toml"
    path.write_text(f'collection = "ml-100k"\nreference = "historical:rating"\nruns = ["{runs}"]\n'
                    'measures = ["nDCG@10", "Bpref"]\nseed = 7\n'
                    '[judge]\njudge = "overlap"\nfields = "title+genres"\ntimeout = 5\n'
                    '[grid]\nprofile_size = [3, 20]\nfields = ["title+year"]\nper_user = [4]\n')
    exp = load_experiment(path)
    assert (exp.name, exp.runs, exp.measures, exp.seed) == ("fields", (str(runs),), ("nDCG@10", "Bpref"), 7)
    assert exp.out.as_posix() == "out/ablate-fields" and exp.per_user == 20 and exp.bootstrap == 1000
    assert dict(exp.judge) == {"judge": "overlap", "fields": "title+genres", "timeout": 5}
    assert dict(exp.grid) == {"profile_size": (3, 20), "fields": ("title+year",), "per_user": (4,)}
    with pytest.raises(TypeError):
        exp.judge["judge"] = "openai"  # a loaded experiment is what was validated


@pytest.mark.parametrize("reference", ["historical", "historical:binary", "historical:half_stars",
                                       "historical:threshold:4", "historical:threshold:3.5"])
def test_historical_references_load(tmp_path, reference):
    path = tmp_path / "exp.toml"
    path.write_text(f'collection = "ml-100k"\nreference = "{reference}"\n')
    assert load_experiment(path).reference == reference


def test_from_dict_names_its_source():
    with pytest.raises(InputError, match=r"^lab\.toml: key 'grid\.repeats'"):
        Experiment.from_dict({"collection": "c", "reference": "historical", "grid": {"repeats": [0]}}, "lab.toml")


def _experiment(tmp_path, out, reference="historical:rating", runs=None):
    path = tmp_path / "exp.toml"
    runs_line = f'runs = "{runs}"\n' if runs else ""
    path.write_text(f'collection = "ml-100k"\nreference = "{reference}"\nout = "{out}"\n{runs_line}'
                    '[judge]\njudge = "overlap"\n')
    return path


def test_out_that_is_a_file_is_refused_before_work(tmp_path, capsys):
    path = _experiment(tmp_path, tmp_path / "exp.toml")  # out names the experiment file itself
    before = path.read_bytes()
    assert main(["ablate", str(path)]) == 2
    assert path.read_bytes() == before
    assert "key 'out'" in capsys.readouterr().err


def test_out_that_is_the_runs_folder_is_refused_before_work(tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "s0.run").write_text("u1 Q0 a 1 1 s0\n")
    path = _experiment(tmp_path, runs, runs=runs)
    assert main(["ablate", str(path)]) == 2
    assert sorted(p.name for p in runs.iterdir()) == ["s0.run"]
    assert "input folder" in capsys.readouterr().err


def test_result_file_that_is_an_input_is_refused_before_work(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    reference = out / "ablation.csv"  # the reference qrels sits where a result would be written
    reference.write_text("u1 0 a 1\n")
    path = _experiment(tmp_path, out, reference=reference)
    with pytest.raises(OutputError, match="would be overwritten"):
        run_experiment(load_experiment(path))
    assert reference.read_text() == "u1 0 a 1\n"
    assert sorted(p.name for p in out.iterdir()) == ["ablation.csv"]


def test_options_apply_to_the_experiment_in_python_as_on_the_command_line(tmp_path):
    from recjudge.api import AblateSettings
    from recjudge.errors import ConfigError
    from recjudge.experiments.ablate import with_options

    path = tmp_path / "exp.toml"
    path.write_text('collection = "ml-100k"\nreference = "historical:rating"\n')
    exp = load_experiment(path)
    assert (exp.per_user, exp.experiments, dict(exp.origin)) == (20, 1, {"per_user": "default",
                                                                        "experiments": "default"})
    applied = with_options(exp, 50, 3)  # e.g. the penha2025 protocol
    assert (applied.per_user, applied.experiments) == (50, 3)
    # the origin is the option as the caller wrote it: Python's keyword here, the flag on the command line
    assert dict(applied.origin) == {"per_user": "per_user=", "experiments": "experiments="}
    cli = AblateSettings.build({"experiment": str(path), "per_user": 50}, spelled="cli")
    assert dict(with_options(exp, 50, 3, named=cli.name_of).origin) == {"per_user": "--per-user",
                                                                        "experiments": "--experiments"}
    with pytest.raises(ConfigError, match="^--per-user must be at least 1, not 0$"):
        with_options(exp, 0, named=cli.name_of)
    assert with_options(applied, 50, 3) == applied  # applying twice changes nothing
    path.write_text('collection = "ml-100k"\nreference = "historical:rating"\nper_user = 10\nexperiments = 2\n')
    given = with_options(load_experiment(path), 50, None)
    assert (given.per_user, given.experiments, given.origin["per_user"]) == (50, 2, "per_user=")  # over the file
    own = with_options(load_experiment(path), 50, 3, defaults=("per_user", "experiments"))
    assert (own.per_user, own.experiments, own.origin["per_user"]) == (10, 2, "file")  # defaults under it
    assert AblateSettings(experiment=str(path)).experiment == str(path)  # the verb loads the file
    with pytest.raises(ConfigError, match="experiments= must be at least 1, not 0"):
        AblateSettings(experiment=str(path), experiments=0)


@pytest.mark.parametrize("flag,value", [("--experiments", "0"), ("--experiments", "two"), ("--per-user", "-1")])
def test_bad_experiments_or_per_user_flag_exits_2(tmp_path, capsys, flag, value):
    path = tmp_path / "exp.toml"
    path.write_text('collection = "ml-100k"\nreference = "historical:rating"\n')
    assert exit_code(["ablate", str(path), flag, value]) == 2 and flag in capsys.readouterr().err
