"""Item-level agreement: hand arithmetic, reference implementations, and published values."""

from __future__ import annotations

import json
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from recjudge.cli import main
from recjudge.data.trec import read_qrels
from recjudge.errors import ConfigError
from recjudge.evaluation.agreement import agreement, aligned_labels, cohen_kappa, krippendorff_alpha, parse_clip


@pytest.fixture
def llmjudge_data(shared_data: Path) -> Path:
    """../shared/data/llmjudge beside the repo; absent on a user's fresh clone, so skip there."""
    path = shared_data / "llmjudge"
    if not (path / "human.qrels").is_file():
        pytest.skip(f"real LLMJudge data not available at {path} (only in the project workspace)")
    return path


REF = (
    "u1 0 a 2\n"   # u1: a > b > c under the reference
    "u1 0 b 1\n"
    "u1 0 c 0\n"
    "u2 0 d 0\n"   # u2: e > d
    "u2 0 e 3\n"
)
CAND = (
    "u1 0 a 1\n"   # (a,b): tie; (a,c): agree; (b,c): agree
    "u1 0 b 1\n"
    "u1 0 c 0\n"
    "u2 0 d 2\n"   # (e,d): disagree
    "u2 0 e 1\n"
    "u9 0 z 3\n"   # not judged by the reference: ignored
)


def test_pairwise_by_hand():
    res = agreement(read_qrels(REF), read_qrels(CAND), bootstrap=0)
    pw = res.pairwise
    assert pw.n_pairs == 4
    assert (pw.agree, pw.tie, pw.disagree) == pytest.approx((2 / 4, 1 / 4, 1 / 4))
    by = res.pairwise_by_distance
    assert sorted(by) == [1, 2, 3]
    assert (by[1].agree, by[1].tie, by[1].n_pairs) == pytest.approx((1 / 2, 1 / 2, 2))  # (a,b) tie, (b,c) agree
    assert (by[2].agree, by[2].n_pairs) == (1.0, 1)                                        # (a,c)
    assert (by[3].disagree, by[3].n_pairs) == (1.0, 1)                                     # (e,d)
    # binary: reference a,b,e relevant; candidate a,b,d,e relevant
    # pairs with differing binary reference: (a,c) agree, (b,c) agree, (e,d) tie
    b = res.pairwise_binary
    assert (b.agree, b.tie, b.disagree, b.n_pairs) == pytest.approx((2 / 3, 1 / 3, 0.0, 3))
    assert res.n_pairs == 5 and res.n_missing == 0


def test_pairwise_matches_brute_force_on_random_labels():
    rng = np.random.default_rng(5)
    qids = np.repeat([f"u{i}" for i in range(30)], 12)
    ref = rng.integers(0, 5, len(qids))
    cand = rng.integers(0, 8, len(qids))
    lines_r = "".join(f"{q} 0 d{i} {r}\n" for i, (q, r) in enumerate(zip(qids, ref)))
    lines_c = "".join(f"{q} 0 d{i} {c}\n" for i, (q, c) in enumerate(zip(qids, cand)))
    res = agreement(read_qrels(lines_r), read_qrels(lines_c), bootstrap=0)
    agree = tie = dis = 0
    for u in np.unique(qids):
        idx = np.flatnonzero(qids == u)
        for x in idx:
            for y in idx:
                if ref[x] > ref[y]:
                    agree += cand[x] > cand[y]
                    tie += cand[x] == cand[y]
                    dis += cand[x] < cand[y]
    n = agree + tie + dis
    assert res.pairwise.n_pairs == n
    assert (res.pairwise.agree, res.pairwise.tie, res.pairwise.disagree) == pytest.approx(
        (agree / n, tie / n, dis / n), abs=1e-12)


def test_bootstrap_ci_brackets_the_estimate_and_is_seeded():
    rng = np.random.default_rng(2)
    qids = np.repeat([f"u{i}" for i in range(40)], 10)
    ref = rng.integers(0, 4, len(qids))
    cand = np.clip(ref + rng.integers(-1, 2, len(qids)), 0, 3)
    r = read_qrels("".join(f"{q} 0 d{i} {v}\n" for i, (q, v) in enumerate(zip(qids, ref))))
    c = read_qrels("".join(f"{q} 0 d{i} {v}\n" for i, (q, v) in enumerate(zip(qids, cand))))
    a = agreement(r, c, bootstrap=300, seed=1)
    b = agreement(r, c, bootstrap=300, seed=1)
    lo, hi = a.pairwise.agree_ci
    assert lo < a.pairwise.agree < hi and hi - lo < 0.5
    assert a.pairwise.agree_ci == b.pairwise.agree_ci


def test_cohen_kappa_by_hand_and_against_sklearn():
    # observed agreement 3/4; chance (2·3 + 2·1)/16 = 1/2; κ = (3/4 − 1/2) / (1 − 1/2) = 1/2
    assert cohen_kappa([0, 1, 1, 0], [0, 1, 0, 0]) == pytest.approx(0.5)
    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, 500)
    b = np.clip(a + rng.integers(-2, 3, 500), 0, 5)
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert cohen_kappa(a, b, "linear") == pytest.approx(cohen_kappa_score(a, b, weights="linear"), abs=1e-12)


@pytest.mark.parametrize("level", ["ordinal", "interval"])
def test_krippendorff_alpha_against_reference_package(level):
    rng = np.random.default_rng(level == "ordinal")
    a = rng.integers(0, 4, 300)
    b = np.clip(a + rng.integers(-1, 3, 300), 0, 5)
    expected = krippendorff.alpha(reliability_data=np.vstack([a, b]).astype(float), level_of_measurement=level)
    assert krippendorff_alpha(a, b, level) == pytest.approx(expected, abs=1e-12)


def test_krippendorff_interval_by_hand():
    # units (0,0), (1,1), (0,1): coincidences o00=2, o11=2, o01=o10=1; n0=n1=3, n=6
    # D_o ∝ Σ o δ² = 2·1 = 2; D_e ∝ Σ n_c n_k δ² = 2·3·3 = 18; α = 1 − (n−1)·2/18 = 1 − 10/18
    assert krippendorff_alpha([0, 1, 0], [0, 1, 1], "interval") == pytest.approx(1 - 10 / 18)


def test_missing_and_clip():
    ref = read_qrels("u1 0 a 3\nu1 0 b 0\nu1 0 c 1\n")
    cand = read_qrels("u1 0 a 9\nu1 0 b 0\n")
    pairs, n_missing = aligned_labels(ref, cand, "zero", (0, 3))
    assert n_missing == 1
    assert pairs.cand.tolist() == [3, 0, 0]
    pairs, _ = aligned_labels(ref, cand, "drop")
    assert pairs.docid.tolist() == ["a", "b"] and pairs.cand.tolist() == [9, 0]
    assert parse_clip("0..3") == (0, 3)
    for bad in ("0-3", "3..0", "a..b"):
        with pytest.raises(ConfigError):
            parse_clip(bad)


# The LLMJudge challenge labels with the agreement the organisers published (Rahmani et al. 2025,
# Table 3): κ unweighted and α ordinal over all 4,423 pairs, missing labels as 0, clipped to 0–3.
PUBLISHED = {
    "willia-umbrela1": (0.2863, 0.4918),
    "h2oloo-fewself": (0.2774, 0.4958),
    "Olz-gpt4o": (0.2625, 0.5020),
    "prophet-setting4": (0.1471, 0.1623),
    "TREMA-nuggets": (0.0604, 0.1691),
}


def test_published_llmjudge_agreement_through_cli(llmjudge_data: Path, tmp_path, capsys):
    out = tmp_path / "agreement.json"
    candidates = [str(llmjudge_data / "labels" / f"{name}.qrels") for name in PUBLISHED]
    code = main(["agreement", "--reference", str(llmjudge_data / "human.qrels"), "--candidate", *candidates,
                 "--missing", "zero", "--clip", "0..3", "--bootstrap", "50", "--json", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    for name, (kappa, alpha) in PUBLISHED.items():
        row = result[name]  # keyed by the qrels name; the path is kept in a field
        assert row["path"] == str(llmjudge_data / "labels" / f"{name}.qrels")
        assert row["n_pairs"] == 4423
        assert round(row["cohen_kappa"], 4) == kappa
        assert round(row["krippendorff_alpha_ordinal"], 4) == alpha
        assert 0 < row["pairwise"]["agree"] < 1
    assert "willia-umbrela1" in capsys.readouterr().out


def test_agreement_cli_bad_input_exits_nonzero(tmp_path, capsys):
    bad = tmp_path / "bad.qrels"
    bad.write_text("q1 0 d1 1\nq1 0 d2 0.5\n")
    ok = tmp_path / "ok.qrels"
    ok.write_text("q1 0 d1 1\n")
    code = main(["agreement", "--reference", str(ok), "--candidate", str(bad)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{bad}:2" in err and "not an integer" in err


def test_clip_applies_to_candidate_labels_before_missing_zero():
    ref = read_qrels("u1 0 a 3\nu1 0 b 0\n")
    cand = read_qrels("u1 0 a 0\n")
    pairs, n_missing = aligned_labels(ref, cand, "zero", (1, 3))
    # the candidate's own 0 is clipped to 1; the pair it lacks stays 0 by convention
    assert pairs.cand.tolist() == [1, 0] and n_missing == 1


def test_byte_order_mark_does_not_stick_to_the_first_id(tmp_path):
    path = tmp_path / "bom.qrels"
    path.write_bytes("\ufeffq1 0 d1 1\n".encode("utf-8"))
    assert read_qrels(path).frame.qid.tolist() == ["q1"]


def test_pairwise_ci_is_korn_graubard_at_the_effective_pairs_of_the_user_bootstrap():
    # Recompute the overall CI from the same resamples: per-user (agree, tie, disagree) counts by
    # brute force, the multinomial draws the first resampling step makes with the same seed, their
    # shares' standard deviation SE, n_eff = p(1 − p)/SE² shrunk by (z / t_{users − 1})², and the
    # Clopper–Pearson bounds at p·n_df of n_df, checked by their tail equations (betainc).
    rng = np.random.default_rng(8)
    n_users = 25
    qids = np.repeat([f"u{i:02d}" for i in range(n_users)], 8)
    ref = rng.integers(0, 4, len(qids))
    cand = np.clip(ref + rng.integers(-2, 3, len(qids)), 0, 3)
    r = read_qrels("".join(f"{q} 0 d{i} {v}\n" for i, (q, v) in enumerate(zip(qids, ref))))
    c = read_qrels("".join(f"{q} 0 d{i} {v}\n" for i, (q, v) in enumerate(zip(qids, cand))))
    res = agreement(r, c, bootstrap=150, seed=6)
    counts = np.zeros((n_users, 3))
    for k, u in enumerate(sorted(set(qids))):  # users in sorted order, as the resampling sees them
        idx = np.flatnonzero(qids == u)
        for x in idx:
            for y in idx:
                if ref[x] > ref[y]:
                    counts[k] += [cand[x] > cand[y], cand[x] == cand[y], cand[x] < cand[y]]
    w = np.random.default_rng(6).multinomial(n_users, np.full(n_users, 1 / n_users), size=150)
    sums = w @ counts
    keep = sums.sum(1) > 0
    shares = sums[keep] / sums[keep].sum(1, keepdims=True)
    pw = res.pairwise
    from scipy.special import betainc

    shrink = (stats.norm.ppf(0.975) / stats.t.ppf(0.975, n_users - 1)) ** 2
    for j, ci in enumerate((pw.agree_ci, pw.tie_ci, pw.disagree_ci)):
        p = counts[:, j].sum() / counts.sum()
        n_df = min(counts.sum(), p * (1 - p) / shares[:, j].std(ddof=1) ** 2) * shrink
        x = p * n_df
        assert betainc(x, n_df - x + 1, ci[0]) == pytest.approx(0.025, abs=1e-9)
        assert betainc(x + 1, n_df - x, ci[1]) == pytest.approx(0.975, abs=1e-9)
        assert ci[0] <= p <= ci[1]


def test_candidate_sharing_no_pair_is_an_error_under_both_missing_rules():
    ref = read_qrels("u1 0 a 2\nu1 0 b 0\nu2 0 c 1\n", name="human")
    other = read_qrels("u1 0 x 1\nu3 0 c 2\n", name="offset-ids")
    for missing in ("zero", "drop"):
        # under "zero" this used to report κ 0 and α −0.62 for labels that are all the fill value
        with pytest.raises(ConfigError, match=r"'offset-ids' labels none of the 3 pairs"):
            agreement(ref, other, missing=missing, bootstrap=0)
    # one shared pair is enough to compute something
    some = read_qrels("u1 0 a 1\n", name="partial")
    assert agreement(ref, some, missing="zero", bootstrap=0).n_missing == 2


@pytest.mark.parametrize("text, message", [
    ("0..99999999999999999999", "outside the label range"),
    ("-1000000000..3", "outside the label range"),
    ("3..0", "LO must not exceed HI"),
    ("0..3..5", "LO..HI"),
    ("..3", "LO..HI"),
])
def test_clip_bounds_are_checked(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_clip(text)


def test_relevant_vs_not_compares_raw_candidate_labels():
    # the hand case: human 0,0,3,6 with LLM 5,4,6,6 for one user
    ref = "u 0 a 0\nu 0 b 0\nu 0 c 3\nu 0 d 6\n"
    cand = "u 0 a 5\nu 0 b 4\nu 0 c 6\nu 0 d 6\n"
    res = agreement(read_qrels(ref), read_qrels(cand), bootstrap=0)
    # pairs (c,a) 6>5, (c,b) 6>4, (d,a) 6>5, (d,b) 6>4: all agree
    rv = res.pairwise_relevant_vs_not
    assert (rv.agree, rv.tie, rv.disagree, rv.n_pairs) == (1.0, 0.0, 0.0, 4)
    # binarised on both sides every candidate label is relevant: all four pairs tie
    b = res.pairwise_binary
    assert (b.agree, b.tie, b.n_pairs) == (0.0, 1.0, 4)
    # unrestricted pairs also include (d,c) 6 = 6 (tie) and (a,b) 0 = 0 is no pair: 4 agree + 1 tie
    assert (res.pairwise.agree, res.pairwise.tie, res.pairwise.n_pairs) == pytest.approx((4 / 5, 1 / 5, 5))
    assert res.to_json()["pairwise_relevant_vs_not"]["agree"] == 1.0


def test_relevant_vs_not_matches_brute_force_and_ignores_negative_labels():
    rng = np.random.default_rng(8)
    qids = np.repeat([f"u{i}" for i in range(20)], 10)
    ref = rng.integers(-1, 8, len(qids))
    cand = rng.integers(0, 8, len(qids))
    lines_r = "".join(f"{q} 0 d{i} {r}\n" for i, (q, r) in enumerate(zip(qids, ref)))
    lines_c = "".join(f"{q} 0 d{i} {c}\n" for i, (q, c) in enumerate(zip(qids, cand)))
    res = agreement(read_qrels(lines_r), read_qrels(lines_c), bootstrap=0)
    counts = np.zeros(3)
    for u in np.unique(qids):
        idx = np.flatnonzero(qids == u)
        for x in idx:          # x relevant (≥ 1), y not (exactly 0); -1 takes no part
            for y in idx:
                if ref[x] >= 1 and ref[y] == 0:
                    counts += [cand[x] > cand[y], cand[x] == cand[y], cand[x] < cand[y]]
    rv = res.pairwise_relevant_vs_not
    assert rv.n_pairs == counts.sum()
    assert (rv.agree, rv.tie, rv.disagree) == pytest.approx(tuple(counts / counts.sum()))


def test_relevant_vs_not_leaves_the_other_cis_unchanged():
    # its bootstrap draws come last from the shared generator: the earlier CIs are those of before
    from recjudge.evaluation.agreement import _pairwise, _pair_counts, _user_tables

    rng = np.random.default_rng(3)
    qids = np.repeat([f"u{i}" for i in range(15)], 8)
    ref, cand = rng.integers(0, 5, len(qids)), rng.integers(0, 8, len(qids))
    lines_r = "".join(f"{q} 0 d{i} {r}\n" for i, (q, r) in enumerate(zip(qids, ref)))
    lines_c = "".join(f"{q} 0 d{i} {c}\n" for i, (q, c) in enumerate(zip(qids, cand)))
    res = agreement(read_qrels(lines_r), read_qrels(lines_c), bootstrap=50, seed=4)
    t, vals = _user_tables(qids, ref, cand)
    expected = _pairwise(sum(_pair_counts(t, vals).values()), 50, np.random.default_rng(4))
    assert res.pairwise.agree_ci == expected.agree_ci


@pytest.mark.parametrize("values", [[3, -1, 3, 0, 7], [5], [2**40, 0, 2**40], [-3, -3], list(range(100, 0, -7))])
def test_counting_unique_and_counts_are_numpys(values):
    import numpy as np

    from recjudge.evaluation.agreement import _counts, _unique

    v = np.array(values, dtype=np.int64)
    want_u, want_inv = np.unique(v, return_inverse=True)
    got_u, got_inv = _unique(v, return_inverse=True)
    assert got_u.tolist() == want_u.tolist() and got_inv.ravel().tolist() == want_inv.ravel().tolist()
    assert _unique(v).tolist() == want_u.tolist()
    other = (np.arange(len(v)) % 2).astype(np.int64)
    want = np.zeros((len(want_u), 2))
    np.add.at(want, (want_inv.ravel(), other), 1.0)
    assert np.array_equal(_counts((len(want_u), 2), got_inv, other), want)


# ------------------------------------------------------------------ pairs a candidate lacks are never silently 0

def _ref_with(n_pairs: int) -> str:
    # one user, labels cycling 0..3 so every pair kind occurs
    return "".join(f"u1 0 d{i} {i % 4}\n" for i in range(n_pairs))


def test_a_candidate_lacking_many_pairs_is_refused_until_the_rule_is_chosen():
    ref = read_qrels(_ref_with(10))
    cand = read_qrels("".join(f"u1 0 d{i} {i % 4}\n" for i in range(6)))  # lacks 4 of 10 (40%)
    with pytest.raises(ConfigError) as err:
        agreement(ref, cand, bootstrap=0)
    msg = str(err.value)
    assert "lacks 4 of the 10 pairs" in msg and "40%" in msg
    assert "--missing zero" in msg and "--missing drop" in msg and "over the 6 pairs both judge" in msg
    # both rules stay available when asked for, and say what they did
    zero = agreement(ref, cand, missing="zero", bootstrap=0)
    drop = agreement(ref, cand, missing="drop", bootstrap=0)
    assert (zero.n_pairs, zero.n_missing, zero.missing) == (10, 4, "zero")
    assert (drop.n_pairs, drop.n_missing, drop.missing) == (6, 4, "drop")
    assert "lacks 4 of 10 reference pairs (40.0%), counted as label 0" in zero.format()
    assert "left out" in drop.format()


def test_a_small_missing_share_counts_as_zero_and_is_reported():
    ref = read_qrels(_ref_with(200))
    # lacks d0 and d1 (1% of 200, the limit), and labels two pairs the reference does not judge
    cand = read_qrels("".join(f"u1 0 d{i} {i % 4}\n" for i in range(2, 200)) + "u1 0 x 3\nu2 0 y 1\n")
    res = agreement(ref, cand, bootstrap=0)
    assert (res.n_pairs, res.n_missing, res.n_candidate_only, res.missing) == (200, 2, 2, "zero")
    assert res.settings["missing_given"] is False
    out = res.to_json()
    assert (out["n_missing"], out["n_candidate_only"], out["n_reference"], out["missing"]) == (2, 2, 200, "zero")
    assert "lacks 2 of 200 reference pairs (1.0%), counted as label 0" in out["missing_note"]
    # one more missing pair (3 of 200 = 1.5%) crosses the limit
    with pytest.raises(ConfigError, match="lacks 3 of the 200"):
        agreement(ref, read_qrels("".join(f"u1 0 d{i} {i % 4}\n" for i in range(3, 200))), bootstrap=0)


def test_agreement_cli_refuses_a_sparse_candidate_without_missing_and_prints_the_counts(tmp_path, capsys):
    ref, cand = tmp_path / "human.qrels", tmp_path / "llm.qrels"
    ref.write_text(_ref_with(10))
    cand.write_text("".join(f"u1 0 d{i} {i % 4}\n" for i in range(5)) + "u7 0 z 2\n")
    assert main(["agreement", "--reference", str(ref), "--candidate", str(cand), "--bootstrap", "0"]) == 2
    err = capsys.readouterr().err
    assert "lacks 5 of the 10 pairs" in err and "--missing drop" in err
    out_json = tmp_path / "a.json"
    assert main(["agreement", "--reference", str(ref), "--candidate", str(cand), "--bootstrap", "0",
                 "--missing", "drop", "--json", str(out_json)]) == 0
    printed = capsys.readouterr().out
    assert "llm: the candidate lacks 5 of 10 reference pairs (50.0%), left out" in printed
    row = json.loads(out_json.read_text())["llm"]
    assert (row["n_pairs"], row["n_missing"], row["n_candidate_only"]) == (5, 5, 1)
