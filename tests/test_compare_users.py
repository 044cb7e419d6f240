"""`recjudge compare` says first when reference and candidate judge different users, and refuses a
candidate that shares no user with the reference unless `--queries own` is given: τ then compares a
ranking over one set of users with a ranking over another (DL-2021: NIST judges 53 queries, the
GPT-4 labels 424 others), which is not agreement of two judges."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import recjudge
from recjudge.cli import main
from recjudge.errors import ConfigError

def _write(folder: Path, ref_users, cand_users, n_runs: int = 4, items: int = 12, seed: int = 0,
           cand_name: str = "gpt4") -> dict[str, Path]:
    """Runs ranking every user of both label sets, reference qrels over ``ref_users`` and candidate
    qrels over ``cand_users`` (graded 0–3, every item of the pool judged)."""
    rng = np.random.default_rng(seed)
    users = sorted(set(ref_users) | set(cand_users))
    runs = folder / "runs"
    runs.mkdir(parents=True)
    for s in range(n_runs):
        lines = []
        for u in users:
            for r, i in enumerate(rng.permutation(items)[:10]):
                lines.append(f"{u} Q0 d{i} {r + 1} {10 - r} sys{s}")
        (runs / f"sys{s}.run").write_text("\n".join(lines) + "\n")
    ref, cand = folder / "nist.qrels", folder / f"{cand_name}.qrels"
    ref.write_text("".join(f"{u} 0 d{i} {rng.integers(0, 4)}\n" for u in ref_users for i in range(items)))
    cand.write_text("".join(f"{u} 0 d{i} {rng.integers(0, 4)}\n" for u in cand_users for i in range(items)))
    return {"runs": runs, "reference": ref, "candidate": cand}


def _argv(paths, *extra) -> list[str]:
    return ["compare", "--runs", str(paths["runs"]), "--reference", str(paths["reference"]),
            "--candidate", str(paths["candidate"]), "--measures", "nDCG@10", "--bootstrap", "20", *extra]


DISJOINT = ([f"q{i}" for i in range(5)], [f"q{i}" for i in range(5, 11)])  # 5 and 6 users, none shared


def test_label_sets_sharing_no_user_are_refused_without_queries_own(tmp_path, capsys):
    paths = _write(tmp_path, *DISJOINT)
    out = tmp_path / "c.json"
    assert main(_argv(paths, "--json", str(out))) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert "reference 'nist' and candidate 'gpt4' share no user (reference judges 5 users, gpt4 judges 6, both 0)" in err
    assert "--queries own compares each label set's system ranking on its own users" in err
    assert "two samples of users" in err and "Traceback" not in err
    assert "tau_b" not in captured.out and not out.exists()  # no τ printed, nothing written


def test_queries_own_given_explicitly_proceeds_and_says_first_what_tau_compares(tmp_path, capsys):
    paths = _write(tmp_path, *DISJOINT)
    out, report = tmp_path / "c.json", tmp_path / "report"
    assert main(_argv(paths, "--queries", "own", "--json", str(out), "--report", str(report))) == 0
    lines = capsys.readouterr().out.splitlines()
    said = ("reference judges 5 users, gpt4 judges 6, both 0: with --queries own, τ compares the reference's "
            "system ranking over its 5 users with gpt4's over 6 other users — two samples of users, not two "
            "judges of the same users")
    assert lines[0] == said  # before the header and before any τ
    assert lines.index(said) < min(i for i, line in enumerate(lines) if "tau_b" in line)
    data = json.loads(out.read_text())
    assert data["users"] == {"gpt4": {"reference": 5, "candidate": 6, "both": 0, "note": said}}
    assert data["settings"]["queries"] == "own" and data["settings"]["queries_given"] is True
    md = (report / "report.md").read_text()
    quoted = f"> {said}."
    assert quoted in md.splitlines() and md.index(quoted) < md.index("Kendall τ-b")
    html = (report / "report.html").read_text()
    assert "<blockquote>" in html and "reference judges 5 users, gpt4 judges 6, both 0" in html


def test_queries_shared_with_no_user_in_common_is_refused_naming_own(tmp_path, capsys):
    paths = _write(tmp_path, *DISJOINT)
    assert main(_argv(paths, "--queries", "shared")) == 2
    err = capsys.readouterr().err
    assert ("reference 'nist' (5 users) and candidate 'gpt4' (6 users) judge no user in common, so --queries "
            "shared leaves no user to compare; --queries own compares each label set's system ranking on its "
            "own users instead") in err


def test_partial_overlap_is_said_with_its_counts(tmp_path, capsys):
    # reference q0–q4, candidate q3–q8: 5 and 6 users, q3 and q4 both
    paths = _write(tmp_path, [f"q{i}" for i in range(5)], [f"q{i}" for i in range(3, 9)])
    out = tmp_path / "c.json"
    assert main(_argv(paths, "--json", str(out))) == 0  # the default: own, and said
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("reference judges 5 users, gpt4 judges 6, both 2: each ranking is over its own users "
                        "(--queries own), so τ compares rankings over partly different users; --queries shared "
                        "compares them over the 2 both judge")
    users = json.loads(out.read_text())["users"]["gpt4"]
    assert (users["reference"], users["candidate"], users["both"]) == (5, 6, 2)
    assert main(_argv(paths, "--queries", "shared")) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "reference judges 5 users, gpt4 judges 6, both 2: with --queries shared, both rankings are over the 2 "
        "users both judge")


def test_the_same_users_print_no_users_line(tmp_path, capsys):
    users = [f"q{i}" for i in range(6)]
    paths = _write(tmp_path, users, users)
    out = tmp_path / "c.json"
    assert main(_argv(paths, "--json", str(out))) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("4 systems; reference nist")
    assert json.loads(out.read_text())["users"] == {"gpt4": {"reference": 6, "candidate": 6, "both": 6, "note": None}}


def test_the_python_verb_refuses_and_explains_in_its_own_words(tmp_path):
    paths = _write(tmp_path, *DISJOINT)
    args = (paths["runs"], paths["reference"], paths["candidate"])
    with pytest.raises(ConfigError, match=r"share no user .*queries='own' compares each label set's system ranking"):
        recjudge.compare(*args, measures="nDCG@10", bootstrap=0)
    res = recjudge.compare(*args, measures="nDCG@10", bootstrap=0, queries="own")
    first = res.format().splitlines()[0]
    assert first.startswith("reference judges 5 users, gpt4 judges 6, both 0: with queries='own', τ compares")
    assert res.to_json()["users"]["gpt4"]["both"] == 0
    # the library function refuses the same inputs, in the command line's words
    from recjudge.data.trec import read_qrels, read_runs
    from recjudge.evaluation.metaeval import compare

    runs = read_runs(sorted(paths["runs"].iterdir()))
    ref, cand = read_qrels(paths["reference"]), read_qrels(paths["candidate"])
    with pytest.raises(ConfigError, match="share no user.*--queries own"):
        compare(runs, ref, {"gpt4": cand}, measures="nDCG@10", bootstrap=0)
    assert compare(runs, ref, {"gpt4": cand}, measures="nDCG@10", bootstrap=0, queries="own").users["gpt4"].both == 0


def _dl2021_like(tmp_path: Path) -> dict[str, Path]:
    """The SynDL case in small: NIST judges 53 queries, the GPT-4 labels 424 other queries of the same
    runs (numeric TREC query ids), 5 runs."""
    rng = np.random.default_rng(21)
    qids = [str(q) for q in rng.choice(np.arange(1_000, 1_200_000), 477, replace=False)]
    return _write(tmp_path, qids[:53], qids[53:], n_runs=5, seed=21, cand_name="gpt4-syndl")


def test_dl2021_like_disjoint_label_sets_through_the_command_line(tmp_path, capsys):
    paths = _dl2021_like(tmp_path)
    assert main(_argv(paths)) == 2
    err = capsys.readouterr().err
    assert "share no user (reference judges 53 users, gpt4-syndl judges 424, both 0)" in err
    assert main(_argv(paths, "--queries", "own")) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("reference judges 53 users, gpt4-syndl judges 424, both 0: with --queries own, "
                                 "τ compares the reference's system ranking over its 53 users with gpt4-syndl's "
                                 "over 424 other users")


def test_dl2021_like_refusal_in_a_fresh_process(tmp_path):
    # as a new user meets it: the installed entry point in its own interpreter
    paths = _dl2021_like(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(recjudge.__file__).resolve().parents[1])}  # this recjudge
    code = "import sys; from recjudge.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", code, *_argv(paths)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "share no user (reference judges 53 users, gpt4-syndl judges 424, both 0)" in proc.stderr
    assert "--queries own compares each label set's system ranking on its own users" in proc.stderr
