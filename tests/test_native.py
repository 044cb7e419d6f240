"""The compiled inner loops (recjudge._native) against what they replace, and every reader against the others.

The tokenizer must give exactly what the careful reader gives (Python's split and float) or step
aside; the join must give what numpy's searchsorted over all judgments gives.
"""

from __future__ import annotations

import gzip
import io

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from recjudge.data import trec
from recjudge.data.trec import read_qrels, read_run
from recjudge.errors import ConfigError, InputError

native = pytest.importorskip("recjudge._native", reason="recjudge._native was not built (no C compiler at install)")


def _plain(result):
    """A scanner result with its Blocks as bytes, to compare by value."""
    if isinstance(result, native.Block):
        return bytes(memoryview(result))
    if isinstance(result, (list, tuple)):
        return type(result)(_plain(x) for x in result)
    return result


def _readers() -> list[str]:
    return trec.available_readers()


@pytest.fixture(params=_readers())
def reader(request, monkeypatch):
    monkeypatch.setenv("RECJUDGE_READER", request.param)
    return request.param


def _careful_run(text: str) -> pd.DataFrame:
    """The run as the careful reader reads it: Python's split and float, line by line."""
    rows = [line.split() for line in text.splitlines() if line.strip()]
    return pd.DataFrame({"qid": [r[0] for r in rows], "docid": [r[2] for r in rows],
                         "rank": [int(r[3]) for r in rows], "score": [float(r[4]) for r in rows],
                         "tag": [r[5] for r in rows]})


RUNS = [
    "u1 Q0 i1 1 2.5 t\nu1 Q0 i2 2 1 t\nu2 Q0 i1 1 3 t\n",
    "NA Q0 null 1 1e3 tag\n\n  u1\tQ0 nan 2 -0.5 tag  \nNone Q0 007 1 2.50 t2\nu1 Q0 None 3 0 tag\n",
    "u1 Q0 i1 1 2.5 t\r\nu1 Q0 i2 2 1 t\r\nu2 Q0 i1 1 3 t",          # CRLF, no final newline
    "é Q0 ü 1 .5 t\né Q0 日本 2 -.25e-2 tag\n",                          # UTF-8 ids, short decimals
    "q Q0 a-very-long-document-identifier-0001 1 0.12345678901234568 t\n"
    "q Q0 a-very-long-document-identifier-0002 2 1.7976931348623157e308 t\n"
    "q Q0 x 3 5e-324 t\nq Q0 y 4 -0 t\nq Q0 z 5 +00012.500 t\n",         # long ids, extreme doubles
    "q1 Q0 d1 1 1 t\nq2 Q0 d1 1 1 t\nq1 Q0 d2 2 0 t\n",                  # a query seen again later
]


@pytest.mark.parametrize("text", RUNS)
def test_every_reader_gives_the_careful_readers_table(text, reader):
    run = read_run(text)
    want = _careful_run(text)
    f = run.frame
    assert f.qid.tolist() == want.qid.tolist() and f.docid.tolist() == want.docid.tolist()
    assert f["rank"].tolist() == want["rank"].tolist() and f.tag.tolist() == want.tag.tolist()
    assert np.array_equal(f.score.to_numpy(), want.score.to_numpy())
    assert all(np.signbit(f.score.to_numpy()) == np.signbit(want.score.to_numpy()))  # -0 stays -0
    c = run.codes
    assert c.qids[c.qcode].tolist() == want.qid.tolist() and c.docids[c.dcode].tolist() == want.docid.tolist()


@pytest.mark.parametrize("text", RUNS)
def test_runs_from_every_source_and_reader_are_equal(text, reader, tmp_path):
    plain, gz = tmp_path / "a.run", tmp_path / "b.run.gz"
    plain.write_bytes(text.encode())
    gz.write_bytes(gzip.compress(text.encode()))
    frames = [read_run(s).frame for s in (text, plain, gz, io.StringIO(text), io.BytesIO(text.encode()),
                                          io.BytesIO(b"\xef\xbb\xbf" + text.encode()))]
    for f in frames[1:]:
        pd.testing.assert_frame_equal(frames[0], f)


# Inputs the tokenizer must refuse (the careful reader decides): the line splits differently in
# Python, or holds what only a careful reader may judge.
DEFERRED = [
    "u\x0bQ0 d 1 1 t\n",          # vertical tab: whitespace to str.split
    "u Q0 d\x1c 1 1 t\n",          # file separator: whitespace to str.split
    "u Q0 d\u00a01 1 1 t\n",       # no-break space inside an id
    "u Q0 d\u3000x 1 1 t\n",       # ideographic space
    "u Q0 d\u2028x 1 1 t\n",       # line separator
    "u Q0 d 1 1_000 t\n",          # float() takes underscores
    "u Q0 d 1.0 1 t\n",            # a rank with a fraction
    "u Q0 d 1 0x10 t\n",
    "u Q0 d 1 1e400 t\n",          # overflows: not finite
]


@pytest.mark.parametrize("text", DEFERRED)
def test_the_tokenizer_defers_whitespace_and_numbers_python_reads_differently(text):
    scanner = native.Scanner(trec.RUN_KINDS, (0, 2))
    scanner.feed(text.encode())
    assert scanner.finish() is None and scanner.error is not None
    try:  # whatever the careful path decides, it is what every reader decides
        want = ("ok", read_run(text, name="x").frame.to_dict("list"))
    except InputError as exc:
        want = ("error", str(exc))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RECJUDGE_READER", "pandas")
        try:
            got = ("ok", read_run(text, name="x").frame.to_dict("list"))
        except InputError as exc:
            got = ("error", str(exc))
    assert got == want


@pytest.mark.parametrize("data", [b"u Q0 d\xff 1 1 t\n", b"u Q0 d\xc0\xaf 1 1 t\n", b"u Q0 d\xed\xa0\x80 1 1 t\n",
                                  b"u Q0 \xe2\x82 1 1 t\n"])
def test_invalid_utf8_is_reported_with_its_line_by_every_reader(data, tmp_path, reader):
    path = tmp_path / "bad.run"
    path.write_bytes(b"u Q0 a 1 2 t\n" + data)
    with pytest.raises(InputError, match="not UTF-8") as err:
        read_run(path)
    assert err.value.line == 2


@pytest.mark.parametrize("text,line,match", [
    ("u1 Q0 i1 1 1.0 t\nu1 Q0 i2 2 1.0\n", 2, "expected 6 columns"),
    ("u1 Q0 i1 1 abc t\n", 1, "not a number"),
    ("u1 Q0 i1 1 1 t\nu1 Q0 i2 2 nan t\n", 2, "not a finite number"),
    ("u1 Q0 i1 1 1 t\n\nu1 Q0 i1 2 0.5 t\n", 3, "appears twice"),
    ("u1 Q0 i1 1 1 t\nu2 Q0 i1 1 1 t\nu1 Q0 i1 2 0.5 t\n", 3, "appears twice"),  # not grouped by query
])
def test_faults_are_named_by_line_whichever_reader_runs(text, line, match, reader):
    with pytest.raises(InputError, match=match) as err:
        read_run(text)
    assert err.value.line == line


def test_qrels_from_every_reader_agree(reader):
    text = "NA 0 null 2\n\nu1 Q0 nan -1\nu1 0 007 +3\nu2 0 null 0\n"
    q = read_qrels(text)
    assert q.frame.qid.tolist() == ["NA", "u1", "u1", "u2"] and q.frame.docid.tolist() == ["null", "nan", "007", "null"]
    assert q.frame.label.tolist() == [2, -1, 3, 0] and q.frame.iteration.tolist() == ["0", "Q0", "0", "0"]
    for bad in ("u 0 d 1.5\n", "u 0 d 1\nu 0 d 2\n", "u 0 d 1000000000\n", "u 0 d 99999999999999999999\n"):
        with pytest.raises(InputError, match=r"<inline>:\d"):
            read_qrels(bad)


def test_an_unknown_or_unavailable_reader_is_a_config_error(monkeypatch):
    monkeypatch.setenv("RECJUDGE_READER", "fastest")
    with pytest.raises(ConfigError, match="RECJUDGE_READER"):
        read_run("u Q0 d 1 1 t\n")


# ---------------------------------------------------------------------------------- streaming

@st.composite
def run_texts(draw):
    n = draw(st.integers(1, 40))
    qids = draw(st.lists(st.sampled_from(["u1", "u2", "NA", "é", "x" * 12]), min_size=n, max_size=n))
    lines, seen = [], set()
    for i, q in enumerate(qids):
        d = draw(st.sampled_from(["d1", "d2", "007", "null", "日本", "a-long-document-id-%d" % i]))
        if (q, d) in seen:
            continue
        seen.add((q, d))
        score = draw(st.floats(allow_nan=False, allow_infinity=False, width=64))
        sep = draw(st.sampled_from([" ", "  ", "\t", " \t"]))
        lines.append(sep.join([q, "Q0", d, str(len(lines) + 1), repr(score), "tag"]))
    ends = draw(st.sampled_from(["\n", "\r\n"]))
    return ends.join(lines) + draw(st.sampled_from(["", ends, ends + "\n"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=run_texts(), chunk=st.integers(1, 64))
def test_chunked_feeding_gives_the_one_shot_result(text, chunk):
    data = text.encode()
    whole = native.Scanner(trec.RUN_KINDS, (0, 2))
    whole.feed(data)
    want = whole.finish()
    parts = native.Scanner(trec.RUN_KINDS, (0, 2))
    for i in range(0, len(data), chunk):
        parts.feed(data[i:i + chunk])
    got = parts.finish()
    assert _plain(got) == _plain(want)
    frame = read_run(io.StringIO(text)).frame
    careful = _careful_run(text)
    assert frame.docid.tolist() == careful.docid.tolist()
    assert np.array_equal(frame.score.to_numpy(), careful.score.to_numpy())


@settings(max_examples=2000, deadline=None)
@given(x=st.floats(allow_nan=False, allow_infinity=False, width=64))
@example(x=0.1 + 0.2)
@example(x=2.2250738585072014e-308)
@example(x=9007199254740993.0)
def test_scores_are_parsed_exactly_as_python_floats(x):
    tokens = [repr(x), f"{x:.6g}", f"{x:.15g}", f"{x:.17e}", f"{x:.3f}" if abs(x) < 1e15 else repr(x)]
    tokens = [t for t in tokens if np.isfinite(float(t))]  # rounding to 15 digits can pass the largest double
    text = "".join(f"u Q0 d{i} {i + 1} {t} t\n" for i, t in enumerate(tokens))
    scanner = native.Scanner(trec.RUN_KINDS, (0, 2))
    scanner.feed(text.encode())
    got = np.frombuffer(scanner.finish()[1][4], dtype=np.float64)
    want = np.array([float(t) for t in tokens])
    assert got.tobytes() == want.tobytes()  # bit for bit, sign of zero included


@settings(max_examples=500, deadline=None)
@given(mantissa=st.integers(0, 10**25), point=st.integers(0, 26), exp=st.integers(-350, 330),
       sign=st.sampled_from(["", "-", "+"]))
def test_decimal_strings_of_any_length_are_correctly_rounded(mantissa, point, exp, sign):
    digits = str(mantissa)
    point = min(point, len(digits))
    token = sign + (digits[:len(digits) - point] or "0") + ("." + digits[len(digits) - point:] if point else "") + f"e{exp}"
    want = float(token)
    scanner = native.Scanner("f", (-1, -1))
    scanner.feed(token.encode())
    result = scanner.finish()
    if not np.isfinite(want):
        assert result is None  # left to the careful reader, which refuses it
    else:
        assert np.frombuffer(result[1][0], dtype=np.float64).tobytes() == np.array([want]).tobytes()


def test_the_scanner_refuses_misuse():
    with pytest.raises(ValueError, match="kinds"):
        native.Scanner("sx")
    with pytest.raises(ValueError, match="pair"):
        native.Scanner("si", (0, 1))
    s = native.Scanner("s")
    s.feed(b"a\n")
    assert _plain(s.finish()) == (1, [(b"\x00\x00\x00\x00", ["a"])], -1, True)
    with pytest.raises(ValueError, match="finished"):
        s.finish()


# --------------------------------------------------------------------------------------- join

@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_the_compiled_join_equals_a_search_over_every_judgment(data):
    from recjudge.evaluation import measures
    from recjudge.evaluation.measures import Judgments

    nq, ndoc = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 12))
    pairs = sorted(data.draw(st.sets(st.tuples(st.integers(0, nq - 1), st.integers(0, ndoc - 1)), max_size=40)))
    qcode = np.array([q for q, _ in pairs], dtype=np.int32)
    dcode = np.array([d for _, d in pairs], dtype=np.int32)
    starts = np.searchsorted(qcode, np.arange(nq + 1)).astype(np.int64)
    jd = Judgments([str(i) for i in range(nq)], None, None, ndoc, qcode, dcode, np.zeros(len(pairs), np.int64),
                   np.arange(len(pairs)), np.zeros(len(pairs), np.int64), starts)
    # a run's own query and document codes, mapped to the judgments' (-1: not evaluated / not judged)
    qmap = np.array(data.draw(st.lists(st.integers(-1, nq - 1), min_size=1, max_size=8)), dtype=np.int64)
    dmap = np.array(data.draw(st.lists(st.integers(-1, ndoc - 1), min_size=1, max_size=15)), dtype=np.int32)
    rows = data.draw(st.lists(st.tuples(st.integers(-1, len(qmap) - 1), st.integers(-1, len(dmap) - 1)), max_size=60))
    qidx = np.array([q for q, _ in rows], dtype=np.int64)
    didx = np.array([d for _, d in rows], dtype=np.int32)
    keys = {(q, d): i for i, (q, d) in enumerate(pairs)}
    want = [(r, keys[(int(qmap[q]), int(dmap[d]))], int(qmap[q])) for r, (q, d) in enumerate(rows)
            if q >= 0 and d >= 0 and (int(qmap[q]), int(dmap[d])) in keys]
    got = jd.join(qmap, dmap, qidx, didx)
    assert list(zip(*(a.tolist() for a in got))) == want
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(measures, "_native", lambda: None)  # the numpy join
        got = jd.join(qmap, dmap, qidx, didx)
    assert list(zip(*(a.tolist() for a in got))) == want


def test_the_join_checks_its_arguments():
    starts = np.array([0, 1], dtype=np.int64)
    docs = np.array([3], dtype=np.int32)
    ident_q, ident_d = np.array([0], np.int64), np.array([0, 1, 2, 3], np.int32)
    out_r, out_j, out_q = (np.empty(1, dtype=np.int64) for _ in range(3))
    with pytest.raises(TypeError, match="didx"):
        native.join(starts, docs, ident_q, ident_d, np.zeros(1, np.int32), np.zeros(1, np.int64), out_r, out_j, out_q)
    with pytest.raises(ValueError, match="outside"):
        native.join(starts, docs, ident_q, ident_d, np.array([5], np.int32), np.array([3], np.int32), out_r, out_j, out_q)
    with pytest.raises(ValueError, match="starts"):
        native.join(np.array([0, 2], np.int64), docs, ident_q, ident_d, np.array([0], np.int32),
                    np.array([3], np.int32), out_r, out_j, out_q)
    assert native.join(starts, docs, ident_q, ident_d, np.array([0], np.int32), np.array([3], np.int32),
                       out_r, out_j, out_q) == 1
    assert (out_r[0], out_j[0]) == (0, 0)


# ------------------------------------------------------------------------------- dictionary

def test_runs_read_with_one_dictionary_share_codes_and_keep_their_rows(tmp_path):
    texts = ["u1 Q0 a 1 3 t\nu1 Q0 b 2 2 t\nu2 Q0 c 1 1 t\n",
             "u1 Q0 c 1 5 s\nu3 Q0 d 1 4 s\nu3 Q0 a 2 3 s\n",
             "u1 Q0 a 1 1 t\nu1 Q0 a 2 0 t\n",            # a duplicate: the careful reader refuses it
             "u9 Q0 e 1 1 t\n"]
    paths = []
    for i, text in enumerate(texts):
        paths.append(tmp_path / f"r{i}.run")
        paths[-1].write_text(text)
    dictionary = trec.IdDictionary()
    shared = [read_run(paths[0], dictionary=dictionary), read_run(paths[1], dictionary=dictionary)]
    with pytest.raises(InputError, match="appears twice"):
        read_run(paths[2], dictionary=dictionary)
    shared.append(read_run(paths[3], dictionary=dictionary))
    for run, path in zip(shared, (paths[0], paths[1], paths[3])):
        alone = read_run(path)
        pd.testing.assert_frame_equal(run.frame, alone.frame)  # the rows do not depend on the dictionary
        assert dictionary.issued(run.codes.docids)
    ids = dictionary.ids()
    assert ids.tolist()[:4] == ["a", "b", "c", "d"] and "e" in ids.tolist()
    a, b = shared[0].codes, shared[1].codes
    assert a.docids[a.dcode[0]] == b.docids[b.dcode[2]] == "a" and a.dcode[0] == b.dcode[2]  # one code for "a"
    assert not dictionary.issued(np.array(["a"], dtype=object))


def test_a_dictionary_is_filled_by_one_scanner_at_a_time():
    import threading

    d = native.Dictionary()
    first = native.Scanner(trec.RUN_KINDS, (0, 2), {2: d})
    second = native.Scanner(trec.RUN_KINDS, (0, 2), {2: d})
    big = b"".join(b"u%d Q0 d%d 1 1 t\n" % (i % 50, i) for i in range(400_000))
    errors = []
    go = threading.Thread(target=first.feed, args=(big,))
    go.start()
    while go.is_alive():
        try:
            second.feed(b"v Q0 x 1 1 t\n")
        except RuntimeError as exc:
            errors.append(str(exc))
            break
    go.join()
    assert first.finish()[0] == 400_000
    assert errors == [] or "another scanner" in errors[0]
    with pytest.raises((ValueError, TypeError), match="shared"):
        native.Scanner(trec.RUN_KINDS, (0, 2), {1: d})  # column 1 is not an id column


def test_blocks_lend_their_memory_to_writable_arrays():
    s = native.Scanner("if")
    s.feed(b"3 2.5\n4 -1\n")
    rows, cols, _, _ = s.finish()
    ints = np.frombuffer(cols[0], dtype=np.int64)
    floats = np.frombuffer(cols[1], dtype=np.float64)
    del cols
    assert ints.tolist() == [3, 4] and floats.tolist() == [2.5, -1.0]
    ints[0] = 7  # the arrays own (through the Block) memory nobody else sees
    assert ints.tolist() == [7, 4] and isinstance(ints.base.obj, native.Block)  # kept alive by the array


# -------------------------------------------------------------------------------- end to end

def test_compare_from_files_is_the_same_with_every_reader_and_join(tmp_path, monkeypatch):
    # the compiled scanner and join, with their shared document dictionary, against pandas' reader
    # and numpy's join on a tie-heavy folder (ties resolved by the hash policy), gzip included
    from test_metaeval import _fixture

    from recjudge.data.trec import run_paths, write_qrels, write_run
    from recjudge.evaluation import measures
    from recjudge.evaluation.metaeval import compare

    runs, human, llm = _fixture(seed=11, systems=5)
    for i, (name, run) in enumerate(runs.items()):
        write_run(run, tmp_path / (f"{name}.run.gz" if i % 2 else f"{name}.run"))
    write_qrels(human, tmp_path / "human.qrels")
    write_qrels(llm, tmp_path / "llm.qrels")

    def result(reader: str, native_join: bool) -> dict:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RECJUDGE_READER", reader)
            if not native_join:
                mp.setattr(measures, "_native", lambda: None)
            got = compare(run_paths(tmp_path), read_qrels(tmp_path / "human.qrels"),
                          [read_qrels(tmp_path / "llm.qrels")], bootstrap=50, seed=3)
        return got.to_json()

    want = result("scan", True)
    assert all(s["tied_user_share"] > 0 for s in want["systems"])  # the runs do tie
    for reader in _readers():
        for native_join in (True, False):
            assert result(reader, native_join) == want, (reader, native_join)
