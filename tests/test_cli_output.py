"""What the command line prints on stderr: recjudge's own progress (none under --quiet), never other
libraries' INFO lines, and always warnings and errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "runs" / "example"
HUMAN = REPO / "qrels" / "example-human.qrels"
LLM = REPO / "qrels" / "example-llm.qrels"

# a command whose run first logs as a third-party library and as recjudge would, then does its work
_LOGGING_COMMAND = """
import logging, sys
import recjudge.cli.ties as ties
real = ties.run
def run(args):
    logging.getLogger("matplotlib.font_manager").info("generated new fontManager")
    logging.getLogger("recjudge.evaluation").info("own progress line")
    logging.getLogger("recjudge.evaluation").debug("own debug line")
    logging.getLogger("recbole").warning("a library warning")
    return real(args)
ties.run = run
from recjudge.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _recjudge(*argv: str, code: str = "import sys; from recjudge.cli import main; sys.exit(main(sys.argv[1:]))"):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=300)


def test_ties_prints_no_info_lines():
    """`ties` logged two INFO lines per run (126 for 63 runs): the audit is on stdout, stderr stays empty."""
    proc = _recjudge("ties", "--runs", str(RUNS), "--qrels", str(HUMAN), "--seeds", "5", "--permutations", "2",
                     "--mc-samples", "5")
    assert proc.returncode == 0, proc.stderr
    assert "Tie prevalence" in proc.stdout
    assert proc.stderr == ""
    # the per-run lines are still there for who asks for them
    verbose = _recjudge("-v", "ties", "--runs", str(RUNS), "--qrels", str(HUMAN), "--seeds", "5", "--permutations", "2",
                        "--mc-samples", "5")
    assert verbose.returncode == 0
    assert verbose.stderr.count("audited in") == len(list(RUNS.glob("*.run"))) == 8


@pytest.mark.parametrize("flags, shown, hidden", [
    ((), ["INFO recjudge.evaluation: own progress line", "WARNING recbole: a library warning"],
     ["fontManager", "own debug line"]),
    (("--quiet",), ["WARNING recbole: a library warning"], ["fontManager", "own progress line", "own debug line"]),
    (("-v",), ["own progress line", "own debug line", "fontManager", "a library warning"], []),
])
def test_other_libraries_log_only_warnings(flags, shown, hidden):
    proc = _recjudge(*flags, "ties", "--runs", str(RUNS / "sys1.run"), "--seeds", "2", code=_LOGGING_COMMAND)
    assert proc.returncode == 0, proc.stderr
    for line in shown:
        assert line in proc.stderr
    for line in hidden:
        assert line not in proc.stderr


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_compare_prints_nothing_on_stderr(where):
    """--quiet before or after the command name; a protocol's line on stderr is info too."""
    args = ["compare", "--runs", str(RUNS), "--reference", str(HUMAN), "--candidate", str(LLM), "--bootstrap", "20",
            "--protocol", "penha2025"]
    loud = _recjudge(*args)
    assert loud.returncode == 0 and "protocol penha2025" in loud.stderr
    quiet = _recjudge(*(["--quiet", *args] if where == "before" else [*args, "--quiet"]))
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    assert quiet.stdout == loud.stdout  # results are not progress: they stay


def test_quiet_keeps_warnings_and_errors(tmp_path):
    stranger = tmp_path / "stranger.run"
    stranger.write_text("nobody Q0 d1 1 2.0 x\nnobody Q0 d2 2 1.0 x\n")
    proc = _recjudge("--quiet", "ties", "--runs", str(stranger), "--qrels", str(HUMAN), "--seeds", "2")
    assert proc.returncode == 0
    assert "warning: run 'stranger' ranks none of the" in proc.stderr
    missing = tmp_path / "missing.qrels"
    proc = _recjudge("compare", "--runs", str(RUNS), "--reference", str(missing), "--candidate", str(LLM), "-q")
    assert proc.returncode != 0
    assert "error" in proc.stderr and str(missing) in proc.stderr


def test_verbose_and_quiet_exclude_each_other():
    proc = _recjudge("-v", "ties", "--runs", str(RUNS / "sys1.run"), "--quiet")
    assert proc.returncode == 2
    assert "-v/--verbose and -q/--quiet exclude each other" in proc.stderr
    proc = _recjudge("ties", "--runs", str(RUNS / "sys1.run"), "-v", "-q")
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


def test_quiet_silences_progress_in_process(tmp_path, capsys):
    """The commands that report progress (train here, with the offline baselines) say nothing under --quiet."""
    from recjudge.cli import main

    pytest.importorskip("recbole", reason="train loads MovieLens-100K from the recbole wheel")
    base = ["train", "--systems", "Pop", "--sample-users", "30", "--out", str(tmp_path / "runs")]
    assert main(base) == 0
    loud = capsys.readouterr()
    assert "[1/1] Pop" in loud.err
    assert main(["--quiet", *base, "--force"]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == "" and "Pop" in quiet.out
