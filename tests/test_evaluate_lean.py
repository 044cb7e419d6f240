"""What `evaluate` loads and computes: no scipy.stats for its ranks and its tie note (τ-b and average
ranks computed as scipy computes them, checked against scipy)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from recjudge.evaluation.metaeval import kendall_tau, system_ranks

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("seed", range(12))
def test_kendall_tau_is_scipys_tau_b_to_the_last_bit(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    # rounded values: many ties in one vector, in both, or none
    x = np.round(rng.normal(size=n), int(rng.integers(0, 3)))
    y = np.round(x + rng.normal(size=n), int(rng.integers(0, 4)))
    want = stats.kendalltau(x, y, variant="b").statistic
    got = kendall_tau(list(x), list(y))
    assert (np.isnan(want) and np.isnan(got)) or got == want


def test_kendall_tau_of_constant_or_short_vectors_is_nan_as_scipys():
    assert np.isnan(kendall_tau([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
    assert np.isnan(stats.kendalltau([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]).statistic)
    assert np.isnan(kendall_tau([1.0], [2.0]))
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0


def test_system_ranks_are_scipys_average_ranks_of_the_negated_means():
    rng = np.random.default_rng(3)
    means = pd.Series(np.round(rng.random(200), 2), index=[f"s{i}" for i in range(200)])
    got = system_ranks(means)
    assert list(got.index) == list(means.index)
    np.testing.assert_array_equal(got.to_numpy(), stats.rankdata(-means.to_numpy(), method="average"))


def test_evaluate_with_the_tie_note_loads_no_scipy_stats(tmp_path):
    # runs whose scores tie, so the tie note is computed (its τ against the other orders)
    runs = tmp_path / "runs"
    runs.mkdir()
    rng = np.random.default_rng(0)
    for s in range(4):
        lines = [f"q{q} Q0 d{d} {r + 1} {round(float(rng.random()), 1)} s{s}\n"
                 for q in range(30) for r, d in enumerate(rng.permutation(40)[:20])]
        (runs / f"s{s}.run").write_text("".join(lines))
    (tmp_path / "q.qrels").write_text("".join(f"q{q} 0 d{d} {int(rng.integers(0, 3))}\n"
                                               for q in range(30) for d in range(0, 40, 2)))
    code = ("import sys\nfrom recjudge.cli import main\n"
            f"sys.argv = ['recjudge', 'evaluate', '--runs', {str(runs)!r}, '--qrels', {str(tmp_path / 'q.qrels')!r},"
            " '--measures', 'nDCG@10,AP(rel=2)@1000,RR(rel=2),R(rel=2)@1000', '--tie-policy', 'trec_eval']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print('LOADED', 'scipy.stats' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert "ties:" in out  # the note was computed
    assert out.strip().splitlines()[-1] == "LOADED False"
