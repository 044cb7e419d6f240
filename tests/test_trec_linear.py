"""The tie policies' cost follows the rows read, not the docid dictionary the runs share.

An evaluation reads every run with one :class:`~recjudge.data.trec.IdDictionary`, which ends up
holding every docid of every run (TREC DL: ~50 runs × 50,000 rows). Sorting or hashing the whole
dictionary once per run made 63 runs quadratic; these tests count the work instead of timing it:
the strings sorted, the strings hashed and the memory a run's tie order takes.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from recjudge.data.trec import IdDictionary, Qrels, read_run, string_rank
from recjudge.data.trec import hashing, records
from recjudge.evaluation.ties import policy
from recjudge.evaluation.ties.policy import score_order, tie_order
from recjudge.evaluation.ties.ranked import Ranked

BIG = 50_000  # ids already in the dictionary, from "other runs"


def _dictionary(n: int = BIG) -> IdDictionary:
    d = IdDictionary()
    d.encode(np.array([f"other_{i:06d}" for i in range(n)], dtype=object))
    return d


def _tied_run(d: IdDictionary | None, tag: str = "r"):
    """Two queries, 20 rows each; in each query, rows 5-9 tie (5 tied rows per query, 10 in all)."""
    lines = []
    for q in ("q1", "q2"):
        for i in range(20):
            score = 100 - 5 if 5 <= i < 10 else 100 - i
            lines.append(f"{q} Q0 {tag}_doc{(i * 7) % 20:02d} {i + 1} {score} {tag}\n")
    return read_run("".join(lines), name=tag, dictionary=d)


def _counting(monkeypatch, module, name: str) -> list[int]:
    sizes: list[int] = []
    real = getattr(module, name)

    def counted(values, *args, **kwargs):
        values = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
        sizes.append(len(values))
        return real(values, *args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return sizes


@pytest.mark.parametrize("n_values", [12, 400])  # both ways of string_rank: few rows, and rows ≥ values / 8
def test_string_rank_orders_rows_as_python_sorts_their_strings(n_values):
    rng = np.random.default_rng(n_values)
    values = np.array([f"d{x}" for x in range(n_values)] + ["é", "Z", "€", "d", "a b"], dtype=object)
    codes = rng.integers(0, len(values), 40)
    key = string_rank(values, codes)
    strings = values[codes].tolist()
    for i in range(len(codes)):
        for j in range(len(codes)):
            # code points = UTF-8 byte order = trec_eval's strcmp
            assert (key[i] < key[j]) == (strings[i] < strings[j]), (strings[i], strings[j])
            assert (key[i] == key[j]) == (strings[i] == strings[j])


@pytest.mark.parametrize("policy_name", ["trec_eval", "docid", "hash"])
def test_a_runs_tie_order_sorts_and_hashes_its_tied_rows_only(monkeypatch, policy_name):
    d = _dictionary()
    d.hashes()  # the dictionary's ids hashed once already: a run must not hash them again
    run = _tied_run(d)
    so = score_order(run)
    sorted_sizes = _counting(monkeypatch, records, "sorted_codes")
    hashed_sizes = _counting(monkeypatch, hashing, "string_hashes")
    monkeypatch.setattr(policy, "string_hashes", hashing.string_hashes)
    order = tie_order(run, so, policy_name)
    tied = 10
    # trec_eval and docid sort the tied rows' docids; the hash policy hashes them (and its 2 users)
    # and sorts docids only on a collision of 64-bit keys
    assert sum(sorted_sizes) <= tied, sorted_sizes
    assert sum(hashed_sizes) <= tied + 2, hashed_sizes
    # the order itself: inside each tie block (positions 5-9 of each query) the policy's order
    f = run.frame.iloc[order]
    block = f.docid.to_numpy()[5:10].tolist()
    if policy_name == "trec_eval":
        assert block == sorted(block, reverse=True)
    elif policy_name == "docid":
        assert block == sorted(block)


def test_the_tie_audits_docid_order_sorts_the_tied_rows_only(monkeypatch):
    for d in (None, _dictionary()):
        run = _tied_run(d)
        qrels = Qrels.from_rows([("q1", "r_doc00", 1, "0"), ("q2", "r_doc07", 2, "0")])
        r = Ranked(run, qrels)
        sizes = _counting(monkeypatch, records, "sorted_codes")
        hashed = _counting(monkeypatch, hashing, "string_hashes")
        for how in ("trec_eval", "docid", "hash"):
            r.treatment(r.tied_rows, how, seed=3)
        assert len(r.tied_rows) == 10
        assert sum(sizes) <= 10, sizes
        assert sum(hashed) <= 10 + 2, hashed  # the tied rows' docids and the two users
        monkeypatch.undo()


def test_many_runs_sharing_a_big_dictionary_take_memory_by_their_rows():
    """Run after run, a tie order's peak memory follows the run (40 rows), not the dictionary
    (50,000 ids and growing): only the dictionary's amortised growth (doubling) may show, on a
    logarithmic number of runs."""
    d = _dictionary()
    big = 0
    for k in range(20):
        run = _tied_run(d, tag=f"r{k}")  # every run adds new docids
        so = score_order(run)
        for name in ("trec_eval", "hash"):
            tracemalloc.start()
            tie_order(run, so, name)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            big += peak > 64 * 1024  # 50,000 ids × 8 bytes = 400 KB; the run's own arrays are a few KB
    assert big <= 3, big


def test_ids_given_by_a_growing_dictionary_never_change():
    d = IdDictionary()
    held = []
    for k in range(30):
        d.encode(np.array([f"b{k}_{i}" for i in range(100)], dtype=object))
        ids = d.ids()
        held.append((ids, ids.copy()))
        assert d.issued(ids)
    for ids, copy in held:  # later ids are written past the end of what a run holds
        assert ids.tolist() == copy.tolist()
    assert len(d) == 3000 and d.ids().tolist()[:2] == ["b0_0", "b0_1"]
    np.testing.assert_array_equal(d.hashes_of(np.array([2999, 0])),
                                  hashing.string_hashes(["b29_99", "b0_0"]))


@pytest.mark.parametrize("n", [100, 9000])  # pandas below 4,096 values, polars above
def test_sorted_codes_is_pythons_string_order_with_equal_codes_for_equal_strings(n):
    rng = np.random.default_rng(n)
    alphabet = ["a", "b", "Z", "é", "€", "𝄞", " ", "\x7f", "ÿ", "0"]
    values = ["".join(rng.choice(alphabet, int(rng.integers(0, 5)))) for _ in range(n)]
    codes = records.sorted_codes(np.array(values, dtype=object))
    distinct = sorted(set(values))  # Python compares code points: UTF-8 byte order, trec_eval's strcmp
    assert codes.tolist() == [distinct.index(v) for v in values]


def test_one_code_per_string_whichever_way_the_dictionary_learnt_it():
    """Ids added by a string lookup (encode) and by a run's categorical column share one code space."""
    d = IdDictionary()
    a = read_run("q Q0 x 1 2 t\nq Q0 y 2 1 t\n", dictionary=d)  # the categorical path: no string index yet
    assert d.encode(np.array(["y", "z"], dtype=object)).tolist() == [1, 2]  # y known, z new
    b = read_run("q Q0 z 1 2 t\nq Q0 w 2 1 t\nq Q0 x 3 0 t\n", dictionary=d)
    assert d.ids().tolist() == ["x", "y", "z", "w"]
    for run in (a, b):
        c = run.codes
        assert [c.docids[i] for i in c.dcode] == run.frame.docid.tolist()
    assert b.codes.dcode.tolist() == [2, 3, 0]
