"""The Python API: lazy verbs, one result interface, configs that refuse what the CLI refuses, the README walk."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import recjudge as rj
from recjudge.cli import main
from recjudge.data.trec import read_qrels, read_runs
from recjudge.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "runs" / "example"
HUMAN = REPO / "qrels" / "example-human.qrels"
LLM = REPO / "qrels" / "example-llm.qrels"
VERBS = ("load_collection", "split", "train", "judge", "evaluate", "compare", "agreement", "fill", "ablate",
         "ties", "compare_settings")
HEAVY = ("torch", "recbole", "matplotlib", "openai", "scipy.stats")


def test_import_and_help_stay_light_in_a_fresh_interpreter():
    code = ("import sys, recjudge\n"
            "verbs = [getattr(recjudge, v) for v in %r]\n"
            "from recjudge.cli import build_parser\n"
            "build_parser().format_help()\n"
            "print([m for m in %r if m in sys.modules])\n") % (VERBS, HEAVY)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_all_lists_every_verb_and_each_resolves():
    assert set(VERBS) <= set(rj.__all__)
    assert len(rj.__all__) == len(set(rj.__all__))
    for verb in VERBS:
        assert callable(getattr(rj, verb)), verb
    with pytest.raises(AttributeError):
        rj.no_such_verb  # noqa: B018


def test_settings_are_frozen_and_refuse_unknown_keys_and_bad_values_naming_the_parameter():
    import pydantic

    cfg = rj.CompareSettings(runs=[str(RUNS)], reference=str(HUMAN), candidates=[str(LLM)])
    assert cfg.bootstrap == 1000 and cfg.runs == [str(RUNS)]  # inputs are kept as given
    with pytest.raises(pydantic.ValidationError):
        cfg.seed = 3  # frozen
    # a verb is a plain function: Python (and a type checker, before the call) refuses an unknown keyword;
    # the model refuses it listing what it knows
    with pytest.raises(TypeError, match=r"compare\(\) got an unexpected keyword argument 'bootstraps'"):
        rj.compare(RUNS, HUMAN, LLM, bootstraps=10)
    with pytest.raises(ConfigError, match=r"unexpected parameter bootstraps=; known: runs, reference"):
        rj.CompareSettings(runs=[str(RUNS)], reference=str(HUMAN), candidates=[str(LLM)], bootstraps=10)
    with pytest.raises(ConfigError, match=r"^bootstrap= must be at least 0, not -1$"):
        rj.CompareSettings(runs=[], reference="h", candidates=["c"], bootstrap=-1)
    with pytest.raises(ConfigError, match=r"^seed= must be a whole number, not True$"):
        rj.EvaluateSettings(runs=[], qrels="q", seed=True)  # a bool is not a seed
    with pytest.raises(ConfigError, match=r"^seed= must be a whole number, not '3'$"):
        rj.EvaluateSettings(runs=[], qrels="q", seed="3")  # nor is text
    with pytest.raises(ConfigError, match=r"^tie_policy= must be 'hash', 'trec_eval', 'docid' or 'input', not "):
        rj.EvaluateSettings(runs=[], qrels="q", tie_policy="random-ish")
    with pytest.raises(ConfigError, match=r"^validate= must be less than 1.0, not 1.0$"):
        rj.FillSettings(human="h", llm="l", runs=[], out="o", validate=1.0)
    with pytest.raises(ConfigError, match=r"^measures=: unknown measure 'Bogus@3'"):
        rj.evaluate(RUNS, HUMAN, measures="Bogus@3")


def test_the_same_refusal_names_the_flag_on_the_command_line_and_the_key_in_a_file(capsys):
    with pytest.raises(SystemExit) as exit_:  # argparse's own check of choices
        main(["evaluate", "--runs", str(RUNS), "--qrels", str(HUMAN), "--tie-policy", "random-ish"])
    assert exit_.value.code == 2 and "--tie-policy: invalid choice: 'random-ish'" in capsys.readouterr().err
    assert main(["compare", "--runs", str(RUNS), "--reference", str(HUMAN), "--candidate", str(LLM),
                 "--bootstrap", "-1"]) == 2
    assert "--bootstrap must be at least 0, not -1" in capsys.readouterr().err
    from recjudge.errors import InputError

    with pytest.raises(InputError, match=r"x.toml: key 'bootstrap' must be at least 0, not -1"):
        rj.CompareSettings.from_file({"runs": "r", "reference": "h", "candidates": "c", "bootstrap": -1}, "x.toml")


def test_train_split_options_follow_the_split_functions_signature():
    assert rj.TrainSettings(cut=6).split_options() == {"timestamp": 6}
    assert rj.TrainSettings(split="user_ratio", ratio=0.5).split_options() == {"ratio": 0.5}
    with pytest.raises(ConfigError, match="cut= does not apply to split 'user_ratio'"):
        rj.TrainSettings(split="user_ratio", cut=6).split_options()


def test_verbs_take_their_main_inputs_by_position_in_every_form(tmp_path):
    """As ranx and ir-measures users type them: paths, folders, Run and Qrels objects, lists, dicts and
    DataFrames in TREC (or ir-measures) columns give the same numbers."""
    import inspect

    runs = read_runs([RUNS])
    human, llm = read_qrels(HUMAN), read_qrels(LLM)
    by_path = rj.compare(RUNS, HUMAN, LLM, bootstrap=0).to_frame()
    forms = {
        "objects": rj.compare(runs, human, llm, bootstrap=0),
        "list of runs": rj.compare(list(runs.values()), human, [llm], bootstrap=0),
        "list of files": rj.compare(sorted(RUNS.glob("*.run")), str(HUMAN), [str(LLM)], bootstrap=0),
        "frames": rj.compare({n: r.frame for n, r in runs.items()}, human.frame,
                             {"example-llm": llm.frame.rename(columns={"qid": "query_id", "docid": "doc_id",
                                                                       "label": "relevance"})}, bootstrap=0),
    }
    for name, result in forms.items():
        frame = result.to_frame()
        assert frame[["measure", "tau_b"]].equals(by_path[["measure", "tau_b"]]), name
    assert list(rj.evaluate(runs, human).to_frame().index) == list(rj.evaluate(RUNS, HUMAN).to_frame().index)
    assert rj.agreement(human, llm, bootstrap=0).results["example-llm"].cohen_kappa == \
        rj.agreement(str(HUMAN), [str(LLM)], bootstrap=0).results["example-llm"].cohen_kappa
    # the signature is the settings model's: main inputs first, then every setting with its default
    params = inspect.signature(rj.compare).parameters
    assert list(params)[:3] == ["runs", "reference", "candidates"]
    assert params["bootstrap"].default == 1000 and params["bootstrap"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "protocol" in params and "bootstrap" in rj.compare.__doc__
    assert list(inspect.signature(rj.evaluate).parameters)[:2] == ["runs", "qrels"]
    assert list(inspect.signature(rj.agreement).parameters)[:2] == ["reference", "candidates"]
    with pytest.raises(ConfigError, match=r"runs\[1\] must be a run file or folder, a Run or a DataFrame, not int"):
        rj.evaluate([runs["sys1"], 3], human)
    with pytest.raises(TypeError, match="takes 2 positional"):
        rj.evaluate(RUNS, HUMAN, "nDCG@10")


def test_verbs_equal_the_commands_json(tmp_path):
    # the CLI is a thin layer: each verb's to_json() is what the command writes with --json
    assert main(["compare", "--runs", str(RUNS), "--reference", str(HUMAN), "--candidate", str(LLM),
                 "--bootstrap", "50", "--json", str(tmp_path / "c.json")]) == 0
    res = rj.compare(str(RUNS), str(HUMAN), str(LLM), bootstrap=50, json=str(tmp_path / "c2.json"))
    assert (tmp_path / "c.json").read_text() == (tmp_path / "c2.json").read_text()
    assert json.loads((tmp_path / "c.json").read_text())["measures"]["nDCG@100"]["kendall_tau"] == \
        res.agreement["example-llm"]["nDCG@100"].kendall_tau
    assert main(["agreement", "--reference", str(HUMAN), "--candidate", str(LLM), "--bootstrap", "50",
                 "--json", str(tmp_path / "a.json")]) == 0
    ag = rj.agreement(str(HUMAN), [str(LLM)], bootstrap=50, json=str(tmp_path / "a2.json"))
    assert (tmp_path / "a.json").read_text() == (tmp_path / "a2.json").read_text()
    assert json.loads((tmp_path / "a.json").read_text())["example-llm"]["cohen_kappa"] == \
        ag["example-llm"].cohen_kappa


def test_one_result_interface_on_in_memory_inputs(tmp_path):
    runs, human, llm = read_runs([RUNS]), read_qrels(HUMAN), read_qrels(LLM)
    from recjudge.evaluation.metaeval import compare as reference_compare

    direct = reference_compare(runs, human, {llm.name: llm}, bootstrap=0)
    results = {
        "evaluate": rj.evaluate(runs=runs, qrels=human),
        "compare": rj.compare(runs=runs, reference=human, candidates=llm, bootstrap=0),
        "agreement": rj.agreement(reference=human, candidates=llm, bootstrap=0),
        "fill": rj.fill(human=human, llm=llm, runs=runs, out=str(tmp_path / "f.qrels")),
        "ties": rj.ties(runs, human, measures="nDCG@10", seeds=3, permutations=2),
    }
    for name, r in results.items():
        assert isinstance(r.to_json(), (dict, list)), name
        assert len(r.to_frame()) > 0, name
        assert r.format().strip(), name
    # the same numbers as the library function the verb wraps
    frame = results["compare"].to_frame().set_index("measure")
    for m, ra in direct.agreement[llm.name].items():
        assert frame.loc[m, "tau_b"] == pytest.approx(ra.kendall_tau, nan_ok=True)
    assert results["evaluate"].to_frame()["rank"].min() == 1
    assert results["fill"].to_json()["settings"] == {"k": 100, "tie_policy": "trec_eval", "seed": 0,
                                                     "allow_weak_calibration": False}  # as the command's
    assert (tmp_path / "f.qrels").is_file() and (tmp_path / "f.qrels.sources.tsv").is_file()


def test_agreement_verb_on_the_papers_hand_case():
    human = read_qrels("u 0 a 0\nu 0 b 0\nu 0 c 3\nu 0 d 6\n", name="human")
    llm = read_qrels("u 0 a 5\nu 0 b 4\nu 0 c 6\nu 0 d 6\n", name="llm")
    res = rj.agreement(human, llm, bootstrap=0)
    frame = res.to_frame().set_index("pairs")
    assert frame.loc["relevant_vs_not", "agree"] == 1.0   # 4 of 4 pairs: 6 > 5, 6 > 4, 6 > 5, 6 > 4
    assert frame.loc["binary", "tie"] == 1.0              # binarised, every LLM label is relevant
    assert "1.000/0.000" in res.format()


def _readme_blocks() -> list[str]:
    """The Python blocks of the docs' Python API page: a first example, then the whole pipeline."""
    text = (REPO / "docs" / "python-api.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_readme_positional_examples_run_on_a_core_install(monkeypatch, capsys):
    """The first example uses only what ships in the repository: no RecBole, no training."""
    monkeypatch.chdir(REPO)
    namespace: dict = {}
    exec(compile(_readme_blocks()[0], "docs/python-api.md (first example)", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "tau_b" in printed and "ranked by nDCG@10" in printed and "example-llm" in printed
    assert namespace["result"].to_frame().shape[0] == 4


def test_readme_python_walkthrough_runs(tmp_path, monkeypatch, capsys):
    pytest.importorskip("recbole", reason="the docs' walk trains EASE: needs the 'train' extra")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(_readme_blocks()[1], "docs/python-api.md (the whole pipeline)", "exec"), namespace)
    assert set(namespace["runs"]) == {"Pop", "EASE"}
    assert (tmp_path / "qrels" / "ml-100k-overlap.qrels").is_file()
    assert (tmp_path / "qrels" / "ml-100k-filled.qrels").is_file()
    assert namespace["filled"].to_json()["filled"]["n_filled"] > 0
    assert namespace["filled"].to_json()["filled"]["weak_calibration"]  # the baseline cannot calibrate
    assert "rel>non agree/tie" in capsys.readouterr().out
    assert os.listdir(tmp_path / "runs" / "ml-100k")


@pytest.mark.parametrize("argv, settings", [
    (["compare", "--runs", "r", "--reference", "h", "--candidate", "c"],
     rj.CompareSettings(runs=("r",), reference="h", candidates=("c",))),
    (["agreement", "--reference", "h", "--candidate", "c"], rj.AgreementSettings(reference="h", candidates=("c",))),
    (["evaluate", "--runs", "r", "--qrels", "q"], rj.EvaluateSettings(runs=("r",), qrels="q")),
    (["fill", "--human", "h", "--llm", "l", "--runs", "r", "--out", "o"],
     rj.FillSettings(human="h", llm="l", runs=("r",), out="o")),
    (["ablate", "x.toml"], rj.AblateSettings(experiment="x.toml")),
    (["train"], rj.TrainSettings()),
    (["ties", "--runs", "r"], rj.TiesSettings(runs=("r",))),
    (["compare-settings", "--runs-a", "a", "--qrels-a", "qa", "--runs-b", "b", "--qrels-b", "qb"],
     rj.SettingsComparisonSettings(runs_a=("a",), qrels_a="qa", runs_b=("b",), qrels_b="qb")),
])
def test_the_cli_defaults_are_the_settings(argv, settings):
    from recjudge.cli import build_parser

    args = build_parser().parse_args(argv)
    assert type(settings).from_args(args) == settings


def test_the_demo_and_reproduce_commands_are_built_from_their_settings():
    from recjudge.cli import build_parser
    from recjudge.experiments.demo import DemoSettings
    from recjudge.experiments.reproduce import ReproduceSettings

    # no option given: the settings are the model's defaults
    assert DemoSettings.from_args(build_parser().parse_args(["demo"])) == DemoSettings()
    # every option given on the command line arrives as its field
    args = build_parser().parse_args(["demo", "--depth", "5", "--systems", "Pop", "EASE", "--reduced"])
    assert DemoSettings.from_args(args) == DemoSettings(depth=5, systems=("Pop", "EASE"), reduced=True)
    argv = ["reproduce", "penha2025", "--collection", "c", "--out", "o", "--only", "table3,figure4",
            "--k-values", "10,50", "--max-cost", "2.5"]
    got = ReproduceSettings.from_args(build_parser().parse_args(argv))
    assert got == ReproduceSettings(collection="c", out="o", only=("table3", "figure4"), k_values=(10, 50),
                                    max_cost=2.5)
    hidden = {"collection", "profile_sizes", "tie_policy", "negatives"}  # set in Python, not on the command line
    flags = {a.dest for a in _subparser("demo")._actions}
    assert set(DemoSettings.model_fields) - hidden <= flags and not hidden & flags


def _subparser(name):
    import argparse

    from recjudge.cli import build_parser

    subs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return subs.choices[name]


def test_ties_and_compare_settings_verbs_equal_their_commands_json(tmp_path):
    assert main(["ties", "--runs", str(RUNS), "--qrels", str(HUMAN), "--measures", "nDCG@10", "--seeds", "3",
                 "--permutations", "2", "--k", "10", "--json", str(tmp_path / "t.json")]) == 0
    cfg = rj.TiesSettings(runs=[str(RUNS)], qrels=str(HUMAN), measures="nDCG@10", seeds=3, permutations=2,
                          cutoffs="10", json=str(tmp_path / "t2.json"))
    report = rj.api.ties_with(cfg)
    assert (tmp_path / "t.json").read_text() == (tmp_path / "t2.json").read_text()
    assert cfg.cutoffs == (10,) and list(report.to_frame().run) == sorted(p.stem for p in RUNS.glob("*.run"))
    # ties(runs, qrels, ...) with the settings as keywords is the same
    assert rj.ties(str(RUNS), str(HUMAN), measures="nDCG@10", seeds=3, permutations=2,
                         cutoffs=(10,)).to_json() == json.loads((tmp_path / "t.json").read_text())
    args = ["--runs-a", str(RUNS), "--qrels-a", str(HUMAN), "--runs-b", str(RUNS), "--qrels-b", str(LLM)]
    assert main(["compare-settings", *args, "--json", str(tmp_path / "s.json")]) == 0
    rj.compare_settings([str(RUNS)], str(HUMAN), [str(RUNS)], str(LLM), json=str(tmp_path / "s2.json"))
    assert (tmp_path / "s.json").read_text() == (tmp_path / "s2.json").read_text()


@pytest.mark.parametrize("options, words", [
    ({"runs": ["r"], "measures": "P@5"}, "measures= needs qrels="),
    ({"runs": ["r"], "qrels": "q", "sampled_candidates": 5, "catalogue": "c", "collection": "ml-100k"},
     "give catalogue= or collection=, not both"),
    ({"runs": ["r"], "catalogue": "c"}, "catalogue= and collection= go with sampled_candidates="),
    ({}, "no runs given (runs=)"),
    ({"runs": ["r"], "cutoffs": "0,10"}, "cutoffs= must be at least 1, not 0 (item 0)"),
])
def test_ties_settings_refuse_what_the_command_refuses(options, words):
    with pytest.raises(ConfigError, match=re.escape(words)):
        rj.TiesSettings(**options)
