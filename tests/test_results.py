"""Each evaluation command's result is its library's own class, with to_json / to_frame / format, and
its JSON carries the protocol followed (no API wrapper around it)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import recjudge as rj
from recjudge.evaluation import metaeval
from recjudge.evaluation.agreement_report import AgreementReport
from recjudge.evaluation.calibration import FillReport
from recjudge.evaluation.metaeval import CompareResult, EvaluationResult
from recjudge.evaluation.settings_comparison import SettingsComparison
from recjudge.evaluation.ties import TieAudit

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "example"
HUMAN = ROOT / "qrels" / "example-human.qrels"
LLM = ROOT / "qrels" / "example-llm.qrels"


def _protocol(tmp_path, body: str) -> str:
    path = tmp_path / "proto.toml"
    path.write_text('name = "mine"\ntitle = "a test protocol"\n' + body)
    return str(path)


def _checked(result, cls):
    """The verb's result is the library class itself, and its three views agree with each other."""
    assert type(result) is cls
    assert isinstance(result.to_frame(), pd.DataFrame)
    assert str(result) == result.format()
    return json.loads(json.dumps(result.to_json()))  # JSON-serialisable as it is


def test_evaluate_and_compare_return_the_metaeval_results(tmp_path):
    ev = rj.evaluate(RUNS, HUMAN, measures="P@1,nDCG@10")
    data = _checked(ev, EvaluationResult)
    # the source line names the qrels file given, not only the qrels' name
    assert ev.format().startswith(f"{len(data['systems'])} systems under {HUMAN}")
    cmp = rj.compare(RUNS, HUMAN, LLM, measures="nDCG@10", bootstrap=0)
    data = _checked(cmp, CompareResult)
    assert list(cmp.to_frame()["measure"]) == ["nDCG@10"] and cmp.agreement["example-llm"]["nDCG@10"] is not None
    assert data["candidates"]["example-llm"]["nDCG@10"]["kendall_tau"] == pytest.approx(
        cmp.to_frame()["tau_b"].iloc[0], abs=0)


def test_agreement_fill_ties_and_compare_settings_return_their_library_classes(tmp_path):
    _checked(rj.agreement(HUMAN, LLM, bootstrap=0), AgreementReport)
    _checked(rj.fill(HUMAN, LLM, RUNS, k=10, allow_weak_calibration=True), FillReport)
    _checked(rj.ties(RUNS, HUMAN, measures="nDCG@10", cutoffs=(10,), seeds=2, permutations=1), TieAudit)
    _checked(rj.compare_settings(RUNS, HUMAN, RUNS, LLM, measures="nDCG@10"), SettingsComparison)


def test_compare_settings_result_names_the_protocol_it_followed(tmp_path):
    """As every other command's result does: the JSON the verb returns and the file it writes alike."""
    proto = _protocol(tmp_path, '[compare-settings]\nmeasures = "nDCG@10"\n')
    out = tmp_path / "s.json"
    result = rj.compare_settings(RUNS, HUMAN, RUNS, LLM, protocol=proto, json=str(out))
    want = {"name": "mine", "title": "a test protocol", "source": "", "command": "compare-settings",
            "follows_protocol": True, "differs": {}}
    assert result.to_json()["protocol"] == want
    assert json.loads(out.read_text())["protocol"] == want
    assert "protocol" not in rj.compare_settings(RUNS, HUMAN, RUNS, LLM, measures="nDCG@10").to_json()


def test_the_protocol_is_stamped_by_the_library_results(tmp_path):
    proto = _protocol(tmp_path, '[evaluate]\nmeasures = "P@1"\n[agreement]\nbootstrap = 0\n')
    assert rj.evaluate(RUNS, HUMAN, protocol=proto).to_json()["protocol"]["command"] == "evaluate"
    assert rj.agreement(HUMAN, LLM, protocol=proto).to_json()["protocol"]["command"] == "agreement"
    assert "protocol" not in rj.evaluate(RUNS, HUMAN, measures="P@1").to_json()


@pytest.mark.parametrize("name", ["bootstrap_kendall_tau", "bias_corrected_interval", "CI_METHODS",
                                  "DEFAULT_CI_METHOD", "DEFAULT_MEASURES"])
def test_the_shims_of_metaeval_are_gone(name):
    assert not hasattr(metaeval, name)


def test_ci_flag_has_one_home():
    from recjudge.evaluation import agreement, intervals
    from recjudge.report import evaluation as report

    assert "CI_FLAG" not in vars(report) and agreement.CI_FLAG is intervals.CI_FLAG == "*"
