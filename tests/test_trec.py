"""TREC runs and qrels: reading, strict validation, writing, tie policy."""

from __future__ import annotations

import gzip
import io
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recjudge.data.trec import (
    Qrel,
    Qrels,
    Run,
    RunRow,
    frame_codes,
    hash_keys,
    read_qrels,
    read_run,
    read_runs,
    run_name,
    run_paths,
    seeded_hash_keys,
    string_hashes,
    write_qrels,
    write_run,
)
from recjudge.evaluation.ties.policy import ensure_tie_free, is_tie_free, resolve_ties, tied_user_share, top_k
from recjudge.errors import ConfigError, InputError

RUN = (
    "u1 Q0 i3 1 2.5 sysA\n"   # u1: i3 and i1 tie at 2.5
    "u1 Q0 i1 2 2.5 sysA\n"
    "u1 Q0 i2 3 1.0 sysA\n"
    "u2 Q0 i10 1 3 sysA\n"    # u2: i10, i9 tie at 3 ('10' < '9' as strings)
    "u2 Q0 i9 2 3 sysA\n"
)


def test_read_run_inline_path_gz_and_fileobj_agree(tmp_path):
    plain = tmp_path / "sysA.run"
    plain.write_text(RUN)
    gz = tmp_path / "sysB.run.gz"
    gz.write_bytes(gzip.compress(RUN.encode()))
    frames = [
        read_run(RUN).frame,
        read_run(plain).frame,
        read_run(str(gz)).frame,
        read_run(io.StringIO(RUN)).frame,
        read_run(io.BytesIO(RUN.encode())).frame,
    ]
    for f in frames[1:]:
        pd.testing.assert_frame_equal(frames[0], f)
    assert frames[0].qid.tolist() == ["u1", "u1", "u1", "u2", "u2"]
    assert frames[0].score.tolist() == [2.5, 2.5, 1.0, 3.0, 3.0]
    assert read_run(plain).name == "sysA"
    assert read_run(str(gz)).name == "sysB"


def test_rows_and_frame_round_trip():
    run = read_run(RUN, name="sysA")
    rows = list(run)
    assert rows[0] == RunRow("u1", "i3", 1, 2.5, "sysA")
    again = Run.from_rows(rows, name="sysA")
    pd.testing.assert_frame_equal(run.frame, again.frame)
    again = Run.from_frame(run.to_frame(), name="x")
    pd.testing.assert_frame_equal(run.frame, again.frame)
    q = Qrels.from_rows([Qrel("u1", "i1", 2), Qrel("u1", "i2", 0)])
    assert list(q) == [Qrel("u1", "i1", 2, "0"), Qrel("u1", "i2", 0, "0")]
    assert q.to_dict() == {"u1": {"i1": 2, "i2": 0}}


@pytest.mark.parametrize("name,expected", [
    ("bpr.run", "bpr"), ("bpr.run.gz", "bpr"), ("a.b.trec", "a.b"), ("x.txt", "x"), ("noext", "noext"),
])
def test_run_name(name, expected):
    assert run_name(name) == expected


def test_read_runs_folder_takes_known_suffixes(tmp_path):
    (tmp_path / "a.run").write_text(RUN)
    (tmp_path / "b.trec").write_text(RUN)
    (tmp_path / "c.txt.gz").write_bytes(gzip.compress(RUN.encode()))
    (tmp_path / "notes.md").write_text("not a run\n")
    runs = read_runs(tmp_path)
    assert sorted(runs) == ["a", "b", "c"]


def test_read_runs_duplicate_names_rejected(tmp_path):
    (tmp_path / "a.run").write_text(RUN)
    (tmp_path / "a.trec").write_text(RUN)
    with pytest.raises(InputError, match="also used by"):
        read_runs(tmp_path)


def test_a_runs_folder_or_file_given_twice_is_named_as_such(tmp_path):
    (tmp_path / "a.run").write_text(RUN)
    (tmp_path / "b.run").write_text(RUN)
    for given in ([tmp_path, tmp_path], [tmp_path, tmp_path / "." ], [tmp_path / "a.run", tmp_path / "a.run"]):
        with pytest.raises(InputError, match="given twice") as err:
            run_paths(given)
        assert "rename" not in str(err.value) and "once" in err.value.fix
    with pytest.raises(InputError, match="given twice") as err:  # a file, and its folder
        read_runs([tmp_path / "a.run", tmp_path])
    assert "rename" not in str(err.value)
    assert sorted(run_paths([tmp_path / "a.run", tmp_path / "b.run"])) == ["a", "b"]


@pytest.mark.parametrize("text,line,match", [
    ("u1 Q0 i1 1 1.0 t\nu1 Q0 i2 2 1.0\n", 2, "expected 6 columns"),
    ("u1 Q0 i1 1 abc t\n", 1, "not a number"),
    ("u1 Q0 i1 1 1 t\nu1 Q0 i2 2 nan t\n", 2, "not a finite number"),
    ("u1 Q0 i1 1 inf t\n", 1, "not a finite number"),
    ("u1 Q0 i1 1 -Infinity t\n", 1, "not a finite number"),
    ("u1 Q0 i1 1 1 t\n\nu1 Q0 i1 2 0.5 t\n", 3, "appears twice"),
    ("u1 Q0 i1 x 1 t\n", 1, "rank"),
])
def test_run_validation_names_file_line_and_fix(tmp_path, text, line, match):
    path = tmp_path / "bad.run"
    path.write_text(text)
    with pytest.raises(InputError, match=match) as err:
        read_run(path)
    assert err.value.line == line
    assert str(path) in str(err.value)
    assert "fix:" in str(err.value)


# Spacing the fast readers must treat as TREC's "any whitespace" does: each text is one table.
SPACINGS = [
    "u1 Q0 i1 1 2.5 t\nu1 Q0 i2 2 1 t\nu2 Q0 i1 1 3 t\n",        # single spaces
    "u1  Q0 i1 1 2.5 t\nu1 Q0 i2 2 1 t\nu2 Q0 i1 1 3 t\n",       # a doubled space
    " u1 Q0 i1 1 2.5 t\nu1 Q0 i2 2 1 t\nu2 Q0 i1 1 3 t \n",      # leading and trailing spaces
    "u1\tQ0\ti1\t1\t2.5\tt\nu1 Q0 i2 2 1 t\r\nu2 Q0 i1 1 3 t",  # tabs, CRLF, no final newline
    "u1 Q0 i1 1 2.5 t\n\nu1 Q0 i2 2 1 t\n\nu2 Q0 i1 1 3 t\n",    # blank lines
]


@pytest.mark.parametrize("text", SPACINGS)
def test_fast_run_reader_splits_on_any_whitespace(text):
    run = read_run(text)
    assert list(run.frame.qid) == ["u1", "u1", "u2"] and list(run.frame.docid) == ["i1", "i2", "i1"]
    assert list(run.frame["rank"]) == [1, 2, 1] and list(run.frame.score) == [2.5, 1.0, 3.0]
    assert list(run.frame.tag) == ["t"] * 3
    codes = frame_codes(run.frame)  # the reader's codes stand for the frame's ids
    assert list(codes.qids[codes.qcode]) == ["u1", "u1", "u2"] and list(codes.docids[codes.dcode]) == ["i1", "i2", "i1"]


@pytest.mark.parametrize("text,line", [
    ("u1 Q0 i1 1 2.5 t\nu1 Q0 i2 2 1\nu2 Q0 i1 1 3 t\n", 2),   # a short line among single-spaced ones
    ("u1 Q0 i1 1 2.5 t\nu1 Q0 i2 2 1 \nu2 Q0 i1 1 3 t\n", 2),  # ... whose trailing space is not a tag
    ("u1 Q0 i1 1 2.5\nu1 Q0 i2 2 1 t x\n", 1),                 # one field short, the next one too many
])
def test_fast_run_reader_refuses_wrong_field_counts(text, line):
    with pytest.raises(InputError, match="expected 6 columns") as err:
        read_run(text)
    assert err.value.line == line


def test_frame_codes_are_computed_for_frames_built_in_memory():
    run = Run.from_frame(pd.DataFrame({"qid": ["b", "a", "b"], "docid": ["x", "y", "y"], "score": [1.0, 2.0, 0.5]}))
    codes = frame_codes(run.frame)
    assert list(run.codes.qids[run.codes.qcode]) == ["b", "a", "b"]  # the run's own codes, taken at construction
    assert list(codes.qids[codes.qcode]) == ["b", "a", "b"] and list(codes.docids[codes.dcode]) == ["x", "y", "y"]
    assert codes.qcode.dtype == np.int32


def test_run_paths_names_files_without_reading_them(tmp_path):
    (tmp_path / "a.run").write_text("u Q0 d 1 1 a\n")
    (tmp_path / "b.run.gz").write_bytes(gzip.compress(b"not read here"))
    assert run_paths(tmp_path) == {"a": tmp_path / "a.run", "b": tmp_path / "b.run.gz"}


@pytest.mark.parametrize("text,line,match", [
    ("u1 0 i1 1\nu1 0 i2 1.5\n", 2, "not an integer"),
    ("u1 0 i1 high\n", 1, "not an integer"),
    ("u1 0 i1\n", 1, "expected 4 columns"),
    ("u1 0 i1 1\nu1 0 i1 2\n", 2, "judged twice"),
])
def test_qrels_validation(tmp_path, text, line, match):
    path = tmp_path / "bad.qrels"
    path.write_text(text)
    with pytest.raises(InputError, match=match) as err:
        read_qrels(path)
    assert err.value.line == line
    assert str(path) in str(err.value)


def test_empty_missing_and_bad_gzip(tmp_path):
    empty = tmp_path / "empty.run"
    empty.write_text("\n  \n")
    with pytest.raises(InputError, match="empty run"):
        read_run(empty)
    with pytest.raises(InputError, match="not found"):
        read_run(tmp_path / "nope.run")
    bad = tmp_path / "bad.run.gz"
    bad.write_bytes(b"\x1f\x8b" + b"garbage" * 5)
    with pytest.raises(InputError, match="unreadable gzip"):
        read_run(bad)
    fake = tmp_path / "plain.qrels.gz"
    fake.write_text("u1 0 i1 1\n")
    with pytest.raises(InputError, match="not gzip"):
        read_qrels(fake)


def test_negative_labels_are_integers():
    q = read_qrels("u1 0 i1 -1\nu1 0 i2 +2\n")
    assert q.frame.label.tolist() == [-1, 2]


@pytest.mark.parametrize("labels, dtype", [
    ([0, 7, -1], np.int8), ([-128, 127], np.int8), ([128, 0], np.int16), ([-129], np.int16),
    ([40_000, 1], np.int32), ([-999_999_999, 999_999_999], np.int32),
])
def test_qrels_tables_hold_labels_narrow_and_hand_out_int64(labels, dtype):
    text = "".join(f"u1 0 i{i} {lab}\n" for i, lab in enumerate(labels))
    for q in (read_qrels(text), Qrels("f", read_qrels(text).to_frame())):
        assert q.table.label.dtype == dtype  # 0-7 labels: a byte each
        assert q.labels.dtype == np.int64 and q.labels.tolist() == labels
        assert q.frame.label.dtype == np.int64 and q.frame.label.tolist() == labels
        # a caller's arithmetic on .labels cannot wrap at the narrow width
        assert (q.labels * 1000).tolist() == [lab * 1000 for lab in labels]

def test_write_run_and_qrels_round_trip_atomically(tmp_path):
    run = read_run(RUN, name="sysA")
    out = write_run(run, tmp_path / "sub" / "sysA.run")
    assert out.read_text().splitlines()[0] == "u1 Q0 i3 1 2.5 sysA"
    assert out.read_text().splitlines()[3] == "u2 Q0 i10 1 3 sysA"
    pd.testing.assert_frame_equal(read_run(out).frame, run.frame)
    gz = write_run(run, tmp_path / "sysA.run.gz")
    pd.testing.assert_frame_equal(read_run(gz).frame, run.frame)
    q = read_qrels("u1 0 i1 3\nu2 Q0 i9 0\n")
    pd.testing.assert_frame_equal(read_qrels(write_qrels(q, tmp_path / "q.qrels")).frame, q.frame)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.qrels", "sub", "sysA.run.gz"]


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    run = read_run(RUN, name="sysA")
    import recjudge.data.trec.writing as writing

    def broken(scores):  # the writer fails mid-way, after the temp file was opened
        raise RuntimeError("disk full")

    monkeypatch.setattr(writing, "_format_scores", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        write_run(run, tmp_path / "x.run")
    assert list(tmp_path.iterdir()) == []


def test_tie_policies_order_equal_scores():
    run = read_run(RUN, name="sysA")
    by = {p: resolve_ties(run, p, seed=0) for p in ("trec_eval", "docid")}
    # trec_eval: docid descending as strings: 'i3' > 'i1'; 'i9' > 'i10'
    assert by["trec_eval"].frame.docid.tolist() == ["i3", "i1", "i2", "i9", "i10"]
    assert by["docid"].frame.docid.tolist() == ["i1", "i3", "i2", "i10", "i9"]
    with pytest.warns(UserWarning, match="file order"):
        inp = resolve_ties(run, "input")
    assert inp.frame.docid.tolist() == ["i3", "i1", "i2", "i10", "i9"]
    # rewritten scores: n..1 per user, strictly decreasing, exact in float32
    assert by["docid"].frame.score.tolist() == [3.0, 2.0, 1.0, 2.0, 1.0]
    assert by["docid"].frame["rank"].tolist() == [1, 2, 3, 1, 2]
    assert by["docid"].tie_policy == "docid"


def test_hash_policy_is_seeded_stable_and_independent_of_input_order():
    rng = np.random.default_rng(1)
    n = 400
    frame = pd.DataFrame({"qid": [f"u{i % 4}" for i in range(n)], "docid": [f"d{i}" for i in range(n)],
                          "score": rng.integers(0, 3, n).astype(float)})
    run = Run.from_frame(frame, "r")
    shuffled = Run.from_frame(frame.sample(frac=1.0, random_state=3), "r")
    a = resolve_ties(run, "hash", seed=7).frame
    b = resolve_ties(shuffled, "hash", seed=7).frame
    pd.testing.assert_frame_equal(a[["qid", "docid", "score"]], b[["qid", "docid", "score"]])
    c = resolve_ties(run, "hash", seed=8).frame
    assert a.docid.tolist() != c.docid.tolist()  # another seed, another tie order
    # scores are still respected: within a user, original scores never increase down the ranking
    orig = frame.set_index(["qid", "docid"]).score
    for _, g in a.groupby("qid"):
        s = orig.loc[list(zip(g.qid, g.docid))].to_numpy()
        assert np.all(np.diff(s) <= 0)
    # the disclosed key: the same (seed, qid, docid) gives the same key in any context
    k1 = hash_keys(np.array(["u1", "u2"]), np.array(["d5", "d5"]), seed=7)
    k2 = hash_keys(np.array(["u1"]), np.array(["d5"]), seed=7)
    assert k1[0] == k2[0] and k1[0] != k1[1]


def test_resolve_ties_depth_truncates_after_ordering():
    run = read_run(RUN, name="sysA")
    top1 = resolve_ties(run, "trec_eval", depth=1).frame
    assert top1.docid.tolist() == ["i3", "i9"]
    assert top1.score.tolist() == [1.0, 1.0]


def test_tied_user_share():
    run = read_run(
        "u1 Q0 a 1 3 t\nu1 Q0 b 2 2 t\nu1 Q0 c 3 2 t\n"   # tie at positions 2-3
        "u2 Q0 a 1 3 t\nu2 Q0 b 2 2 t\nu2 Q0 c 3 1 t\n"   # no tie
        "u3 Q0 a 1 5 t\nu3 Q0 b 2 5 t\n", name="r")       # tie at positions 1-2
    assert tied_user_share(run) == pytest.approx(2 / 3)
    # top-1: only u3's block (positions 1-2) crosses the boundary; u1's block starts at 2
    assert tied_user_share(run, k=1) == pytest.approx(1 / 3)
    assert tied_user_share(resolve_ties(run)) == 0.0


def test_tied_user_share_cutoff_boundary():
    run = read_run("u1 Q0 a 1 3 t\nu1 Q0 b 2 2 t\nu1 Q0 c 3 2 t\nu1 Q0 d 4 2 t\n", name="r")
    # block {b,c,d} occupies positions 2-4: inside top-3, crossing top-2's boundary, outside top-1's
    assert tied_user_share(run, k=3) == 1.0
    assert tied_user_share(run, k=2) == 1.0
    assert tied_user_share(run, k=1) == 0.0


def test_written_files_get_the_umask_mode_and_json_has_no_nan(tmp_path):
    import json
    import os
    import stat

    from recjudge._io import write_json

    old = os.umask(0o022)
    try:
        path = write_qrels(read_qrels("u1 0 a 1\n"), tmp_path / "q.qrels")
        write_json(tmp_path / "x.json", {"a": float("nan"), "b": [1.0, float("inf")], "c": np.float64(2.5)})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    text = (tmp_path / "x.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": [1.0, None], "c": 2.5}


# ------------------------------------------------------------------------------ ensure_tie_free

def test_ensure_tie_free_keeps_a_tie_free_run_untouched():
    run = read_run("u Q0 b 1 0.5 t\nu Q0 a 2 0.25 t\nv Q0 c 1 -1 t\n")  # distinct scores per user
    out = ensure_tie_free(run, "docid", 3)
    assert out.table is run.table  # no copy, no rewritten scores
    framed = Run("f", run.frame)
    assert ensure_tie_free(framed, "docid", 3).frame is framed.frame
    assert out.frame.score.tolist() == [0.5, 0.25, -1.0]
    assert (out.tie_policy, out.seed) == ("docid", 3)
    assert ensure_tie_free(out, "hash") is out


def test_ensure_tie_free_checks_the_claim_in_float32():
    # 1 + 1e-12 and 1.0 differ in float64 but tie in float32, where trec_eval compares them
    f = pd.DataFrame({"qid": ["q", "q"], "docid": ["a", "b"], "rank": [1, 2],
                      "score": [1.0 + 1e-12, 1.0], "tag": ["t", "t"]})
    claimed = Run("r", f, tie_policy="hash", seed=0)
    assert not is_tie_free(claimed)
    out = ensure_tie_free(claimed, "docid")
    assert out.frame.docid.tolist() == ["a", "b"] and out.frame.score.tolist() == [2.0, 1.0]
    assert is_tie_free(out)


def test_ensure_tie_free_resolves_ties_like_resolve_ties():
    run = read_run("u Q0 b 1 1 t\nu Q0 a 2 1 t\nu Q0 c 3 2 t\n")
    out = ensure_tie_free(run, "docid")
    assert out.frame.docid.tolist() == ["c", "a", "b"]  # c scores highest, then a < b by docid
    pd.testing.assert_frame_equal(out.frame, resolve_ties(run, "docid").frame)
    with pytest.raises(ConfigError, match="unknown tie policy"):
        ensure_tie_free(run, "alphabetical")


def test_top_k_ranks_by_score_not_by_the_rank_column():
    run = read_run("u Q0 a 1 1 t\nu Q0 b 2 3 t\nu Q0 c 3 2 t\nv Q0 d 9 5 t\n")  # rank column ignored
    assert top_k(run, 2)[["qid", "docid"]].values.tolist() == [["u", "b"], ["u", "c"], ["v", "d"]]


def test_hash_keys_equal_seeded_hash_keys_from_string_hashes():
    q = np.array(["u1", "u2", "u1"], dtype=object)
    d = np.array(["i1", "i1", "i2"], dtype=object)
    users = np.array(["u1", "u2"], dtype=object)
    got = seeded_hash_keys(string_hashes(users), string_hashes(d), np.array([0, 1, 0]), seed=9)
    np.testing.assert_array_equal(got, hash_keys(q, d, seed=9))


def test_read_concurrently_keeps_the_order_and_raises_the_first_failure_in_order():
    import time

    from recjudge._io import read_concurrently

    def read(x):
        time.sleep(0.05 if x in (0, 1) else 0)  # the later sources finish first
        if x in (1, 3):
            raise ValueError(f"source {x}")
        return x * 10

    assert read_concurrently(read, [0, 2, 4]) == [0, 20, 40]
    with pytest.raises(ValueError, match="source 1"):  # 3 fails first in time; 1 comes first in order
        read_concurrently(read, [0, 1, 3])
