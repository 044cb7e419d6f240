"""The one TREC reader: every input form (path, .gz, text or binary file object, inline string)
gives the same table, or the same clear error naming the file, the line and the fix.

Tables are checked against a reading by hand (Python's split and float, line by line); errors
against the rules the reader states (recjudge.data.trec.reading).
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
from recjudge.errors import InputError

BOM = b"\xef\xbb\xbf"


def _careful_run(text: str) -> pd.DataFrame:
    """The run as read by hand: Python's split and float, line by line."""
    rows = [line.split() for line in text.splitlines() if line.strip()]
    return pd.DataFrame({"qid": [r[0] for r in rows], "docid": [r[2] for r in rows],
                         "rank": [int(r[3]) for r in rows], "score": [float(r[4]) for r in rows],
                         "tag": [r[5] for r in rows]})


def _forms(data: bytes, tmp_path, stem: str = "r.run") -> dict:
    """The same content as every input form: inline text, path, .gz path, text and binary file objects."""
    plain, gz = tmp_path / stem, tmp_path / f"{stem}.gz"
    plain.write_bytes(data)
    gz.write_bytes(gzip.compress(data))
    forms = {"path": plain, "gz path": gz, "binary file object": io.BytesIO(data),
             "gzip file object": io.BytesIO(gzip.compress(data))}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return forms
    return {"inline": text if "\n" in text else text + "\n", "text file object": io.StringIO(text), **forms}


def _outcome(read, source):
    """('ok', frame as lists) or ('error', message without the file name, line)."""
    try:
        return "ok", read(source, name="x").frame.to_dict("list")
    except InputError as exc:
        return "error", (exc.problem, exc.fix, exc.line)


RUNS = [
    "u1 Q0 i1 1 2.5 t\nu1 Q0 i2 2 1 t\nu2 Q0 i1 1 3 t\n",
    "NA Q0 null 1 1e3 tag\n\n  u1\tQ0 nan 2 -0.5 tag  \nNone Q0 007 1 2.50 t2\nu1 Q0 None 3 0 tag\n",
    "u1 Q0 i1 1 2.5 t\r\nu1 Q0 i2 2 1 t\r\nu2 Q0 i1 1 3 t",          # CRLF, no final newline
    "é Q0 ü 1 .5 t\né Q0 日本 2 -.25e-2 tag\n",                          # UTF-8 ids, short decimals
    "q Q0 a-very-long-document-identifier-0001 1 0.12345678901234568 t\n"
    "q Q0 a-very-long-document-identifier-0002 2 1.7976931348623157e308 t\n"
    "q Q0 x 3 5e-324 t\nq Q0 y 4 -0 t\nq Q0 z 5 +00012.500 t\n",         # long ids, extreme doubles
    "q1 Q0 d1 1 1 t\nq2 Q0 d1 1 1 t\nq1 Q0 d2 2 0 t\n",                  # a query seen again later
    "#u1 Q0 \"d1 1 1 'x'\n",                                              # no comments, no quoting
]


@pytest.mark.parametrize("text", RUNS)
def test_every_form_gives_the_table_read_by_hand(text, tmp_path):
    want = _careful_run(text)
    for form, source in _forms(text.encode(), tmp_path).items():
        run = read_run(source)
        f = run.frame
        assert f.qid.tolist() == want.qid.tolist() and f.docid.tolist() == want.docid.tolist(), form
        assert f["rank"].tolist() == want["rank"].tolist() and f.tag.tolist() == want.tag.tolist(), form
        assert f.score.to_numpy().tobytes() == want.score.to_numpy().tobytes(), form  # bit for bit, -0 too
        c = run.codes
        assert c.qids[c.qcode].tolist() == want.qid.tolist() and c.docids[c.dcode].tolist() == want.docid.tolist()
        assert c.qcode.dtype == np.int32 and c.dcode.dtype == np.int32


# Lines the reader refuses, whatever the form: each with the message it names and the line.
REFUSED = [
    ("u\x0bQ0 d 1 1 t\n", "U+000B"),                 # vertical tab: whitespace to str.split, not to polars
    ("u Q0 d\x1c 1 1 t\n", "U+001C"),                # file separator: whitespace to str.split
    ("u Q0 d\u00a01 1 1 t\n", "U+00A0"),             # no-break space inside an id
    ("u Q0 d\u3000x 1 1 t\n", "U+3000"),             # ideographic space
    ("u Q0 d\u2028x 1 1 t\n", "U+2028"),             # line separator
    ("u Q0 d\x00x 1 1 t\n", "U+0000"),
    ("u Q0 d 1 2 t\ru Q0 e 2 1 t\n", "U+000D"),      # a lone carriage return
    ("u Q0 d 1 1_000 t\n", "not a number"),          # float() takes underscores; TREC tools do not
    ("u Q0 d 1 0x10 t\n", "not a number"),
    ("u Q0 d 1.0 1 t\n", "rank '1.0' is not an integer"),
    ("u Q0 d 1 1e400 t\n", "not a finite number"),   # overflows
    ("u Q0 d 99999999999999999999 1 t\n", "does not fit a 64-bit integer"),
]


@pytest.mark.parametrize("text,match", REFUSED)
def test_refused_lines_give_one_error_on_every_form(text, match, tmp_path):
    outcomes = {form: _outcome(read_run, s) for form, s in _forms(text.encode(), tmp_path).items()}
    first = next(iter(outcomes.values()))
    assert first[0] == "error" and match in first[1][0] and first[1][2] == 1, first
    assert all(o == first for o in outcomes.values()), outcomes


@pytest.mark.parametrize("data", [b"u Q0 d\xff 1 1 t\n", b"u Q0 d\xc0\xaf 1 1 t\n", b"u Q0 d\xed\xa0\x80 1 1 t\n",
                                  b"u Q0 \xe2\x82 1 1 t\n"])
def test_invalid_utf8_is_reported_with_its_line_on_every_form(data, tmp_path):
    for form, source in _forms(b"u Q0 a 1 2 t\n" + data, tmp_path).items():
        with pytest.raises(InputError, match="not UTF-8") as err:
            read_run(source)
        assert err.value.line == 2, form


@pytest.mark.parametrize("text,line,match", [
    ("u1 Q0 i1 1 1.0 t\nu1 Q0 i2 2 1.0\n", 2, "expected 6 columns"),
    ("u1 Q0 i1 1 abc t\n", 1, "not a number"),
    ("u1 Q0 i1 1 1 t\nu1 Q0 i2 2 nan t\n", 2, "not a finite number"),
    ("u1 Q0 i1 1 1 t\n\nu1 Q0 i1 2 0.5 t\n", 3, "appears twice"),
    ("u1 Q0 i1 1 1 t\nu2 Q0 i1 1 1 t\nu1 Q0 i1 2 0.5 t\n", 3, "appears twice"),  # not grouped by query
    ("\n\nu1 Q0 i1 1 1 t\nu1 Q0 i2 2 inf t\n", 4, "not a finite number"),        # blank lines counted
])
def test_faults_are_named_by_line_on_every_form(text, line, match, tmp_path):
    for form, source in _forms(text.encode(), tmp_path).items():
        with pytest.raises(InputError, match=match) as err:
            read_run(source)
        assert err.value.line == line, form


def test_qrels_on_every_form(tmp_path):
    text = "NA 0 null 2\n\nu1 Q0 nan -1\nu1 0 007 +3\nu2 0 null 0\n"
    for form, source in _forms(text.encode(), tmp_path, "q.qrels").items():
        f = read_qrels(source).frame
        assert f.qid.tolist() == ["NA", "u1", "u1", "u2"] and f.docid.tolist() == ["null", "nan", "007", "null"], form
        assert f.label.tolist() == [2, -1, 3, 0] and f.iteration.tolist() == ["0", "Q0", "0", "0"], form
    for bad, line, match in (("u 0 d 1.5\n", 1, "not an integer"), ("u 0 d 1\nu 0 d 2\n", 2, "judged twice"),
                             ("u 0 d 1000000000\n", 1, "out of range"),
                             ("u 0 e 1\nu 0 d 99999999999999999999\n", 2, "out of range")):
        with pytest.raises(InputError, match=rf"<inline>:{line}: .*{match}"):
            read_qrels(bad)


def test_a_label_written_as_a_decimal_is_refused_on_every_form(tmp_path):
    # labels are integers (ir-measures and trec_eval reject fractions): 1.0 is refused, not rounded
    for form, source in _forms(b"u1 0 d1 2\nu1 0 d2 1.0\n", tmp_path, "q.qrels").items():
        with pytest.raises(InputError, match="label '1.0' is not an integer") as err:
            read_qrels(source)
        assert err.value.line == 2 and "whole-number" in err.value.fix, form


# ------------------------------------------------------------------------------- input forms

def test_a_byte_order_mark_is_not_part_of_the_first_id(tmp_path):
    text = "u1 Q0 d1 1 2 t\nu2 Q0 d1 1 2 t\n"
    sources = [("\ufeff" + text), io.StringIO("\ufeff" + text), io.BytesIO(BOM + text.encode())]
    sources += list(_forms(BOM + text.encode(), tmp_path).values())
    for source in sources:
        assert read_run(source).frame.qid.tolist() == ["u1", "u2"], source
    assert read_qrels("\ufeffu1 0 d1 1\n").frame.qid.tolist() == ["u1"]


def test_a_file_object_is_read_by_its_content_whatever_its_name(tmp_path):
    text = b"u1 Q0 d1 1 2 t\nu1 Q0 d2 2 1 t\n"
    want = read_run(text.decode()).frame
    named = io.BytesIO(text)
    named.name = "plain.run.gz"  # plain text under a .gz name
    text_named = io.StringIO(text.decode())
    text_named.name = "plain.run.gz"
    gz = tmp_path / "x.run.gz"
    gz.write_bytes(gzip.compress(text))
    with gzip.open(gz, "rb") as binary, gzip.open(gz, "rt") as decoded:  # decompressed, named x.run.gz
        for source in (named, text_named, binary, decoded):
            pd.testing.assert_frame_equal(read_run(source).frame, want)
    fake = tmp_path / "plain.run.gz"  # a path is opened by recjudge: its .gz name must be true
    fake.write_bytes(text)
    with pytest.raises(InputError, match="named .gz but is not gzip") as err:
        read_run(fake)
    assert str(fake) in str(err.value) and err.value.fix


def test_corrupt_gzip_is_a_clear_error_on_every_form(tmp_path):
    whole = gzip.compress(b"u1 Q0 d1 1 2 t\n" * 2000)
    for label, data in (("garbage", b"\x1f\x8b" + b"garbage" * 5), ("truncated", whole[:60]),
                        ("bad crc", whole[:-8] + b"\0\0\0\0" + whole[-4:])):
        path = tmp_path / f"{label}.run.gz"
        path.write_bytes(data)
        named = io.BytesIO(data)
        named.name = str(path)
        for source in (path, str(path), named, gzip.GzipFile(fileobj=io.BytesIO(data), filename=str(path))):
            with pytest.raises(InputError, match="unreadable gzip") as err:
                read_run(source)
            assert str(path) in str(err.value) and "fix:" in str(err.value), (label, source)


# ---------------------------------------------------------------------------------- numbers

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
        lead = draw(st.sampled_from(["", " ", "\t"]))
        lines.append(lead + sep.join([q, "Q0", d, str(len(lines) + 1), repr(score), "tag"]))
    ends = draw(st.sampled_from(["\n", "\r\n"]))
    return ends.join(lines) + draw(st.sampled_from(["", ends, ends + "\n"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=run_texts())
def test_any_spacing_gives_the_table_read_by_hand(text):
    frame = read_run(io.StringIO(text)).frame
    careful = _careful_run(text)
    assert frame.qid.tolist() == careful.qid.tolist() and frame.docid.tolist() == careful.docid.tolist()
    assert np.array_equal(frame.score.to_numpy(), careful.score.to_numpy())


@settings(max_examples=500, deadline=None)
@given(x=st.floats(allow_nan=False, allow_infinity=False, width=64))
@example(x=0.1 + 0.2)
@example(x=2.2250738585072014e-308)
@example(x=9007199254740993.0)
def test_scores_are_read_exactly_as_python_floats(x):
    tokens = [repr(x), f"{x:.6g}", f"{x:.15g}", f"{x:.17e}", f"{x:.3f}" if abs(x) < 1e15 else repr(x)]
    tokens = [t for t in tokens if np.isfinite(float(t))]  # rounding to 15 digits can pass the largest double
    text = "".join(f"u Q0 d{i} {i + 1} {t} t\n" for i, t in enumerate(tokens))
    got = read_run(text).scores
    want = np.array([float(t) for t in tokens])
    assert got.tobytes() == want.tobytes()  # bit for bit, sign of zero included


@settings(max_examples=300, deadline=None)
@given(mantissa=st.integers(0, 10**25), point=st.integers(0, 26), exp=st.integers(-350, 330),
       sign=st.sampled_from(["", "-", "+"]))
def test_decimal_strings_of_any_length_are_correctly_rounded(mantissa, point, exp, sign):
    digits = str(mantissa)
    point = min(point, len(digits))
    token = sign + (digits[:len(digits) - point] or "0") + ("." + digits[len(digits) - point:] if point else "") + f"e{exp}"
    want = float(token)
    if not np.isfinite(want):
        with pytest.raises(InputError, match="not a finite number"):
            read_run(f"u Q0 d 1 {token} t\n")
    else:
        assert read_run(f"u Q0 d 1 {token} t\n").scores.tobytes() == np.array([want]).tobytes()


@settings(max_examples=300, deadline=None)
@given(token=st.text(alphabet="0123456789.eE+-_xinfatyINFATY", min_size=1, max_size=8))
def test_a_score_is_read_only_as_python_reads_it(token):
    # never a number Python's float() (ir-measures' reader) would read otherwise or not at all
    try:
        want = float(token)
    except ValueError:
        want = None
    try:
        got = read_run(f"u Q0 d 1 {token} t\n").scores[0]
    except InputError:
        got = None
    if got is not None:
        assert want is not None and np.array([got]).tobytes() == np.array([want]).tobytes()
    elif want is not None:
        assert not np.isfinite(want) or "_" in token  # refused: infinity, NaN, or underscores


# ------------------------------------------------------------------------------- dictionary

def test_runs_read_with_one_dictionary_share_codes_and_keep_their_rows(tmp_path):
    texts = ["u1 Q0 a 1 3 t\nu1 Q0 b 2 2 t\nu2 Q0 c 1 1 t\n",
             "u1 Q0 c 1 5 s\nu3 Q0 d 1 4 s\nu3 Q0 a 2 3 s\n",
             "u1 Q0 a 1 1 t\nu1 Q0 a 2 0 t\n",            # a duplicate: refused
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
        assert dictionary.issued(run.codes.docids) and run.table.ids is dictionary
    ids = dictionary.ids()
    assert ids.tolist()[:4] == ["a", "b", "c", "d"] and "e" in ids.tolist()
    a, b = shared[0].codes, shared[1].codes
    assert a.docids[a.dcode[0]] == b.docids[b.dcode[2]] == "a" and a.dcode[0] == b.dcode[2]  # one code for "a"
    assert not dictionary.issued(np.array(["a"], dtype=object))
    # per string, once: the disclosed hash
    np.testing.assert_array_equal(dictionary.hashes()[: len(ids)], trec.string_hashes(ids))


def test_compare_from_files_equals_compare_of_runs_in_memory(tmp_path):
    # the reader (plain and gzip files, the shared dictionary) against runs built in memory, on a
    # tie-heavy folder whose ties the hash policy resolves
    from test_metaeval import _fixture

    from recjudge.data.trec import run_paths, write_qrels, write_run
    from recjudge.evaluation.metaeval import compare

    runs, human, llm = _fixture(seed=11, systems=5)
    for i, (name, run) in enumerate(runs.items()):
        write_run(run, tmp_path / (f"{name}.run.gz" if i % 2 else f"{name}.run"))
    write_qrels(human, tmp_path / "human.qrels")
    write_qrels(llm, tmp_path / "llm.qrels")
    from_files = compare(run_paths(tmp_path), read_qrels(tmp_path / "human.qrels"),
                         [read_qrels(tmp_path / "llm.qrels")], bootstrap=50, seed=3).to_json()
    in_memory = {name: trec.Run.from_frame(run.frame, name) for name, run in runs.items()}
    want = compare(in_memory, human, [llm], bootstrap=50, seed=3).to_json()
    assert all(s["tied_user_share"] > 0 for s in want["systems"])  # the runs do tie
    assert from_files == want


def test_a_dictionary_codes_each_new_docid_once_and_still_refuses_an_odd_one(tmp_path):
    # read with a dictionary, a run's docids are coded by polars' categorical codes: only strings the
    # dictionary has not seen are checked and added, so a new odd id must still be refused on its line
    good, odd, later = tmp_path / "good.run", tmp_path / "odd.run", tmp_path / "later.run"
    good.write_text("u1 Q0 a 1 2 t\nu1 Q0 b 2 1 t\n")
    odd.write_text("u1 Q0 b 1 2 t\nu1 Q0 c\u00a0x 2 1 t\n")
    later.write_text("u2 Q0 c 1 3 t\nu2 Q0 b 2 2 t\nu2 Q0 a 3 1 t\n")
    dictionary = trec.IdDictionary()
    first = read_run(good, dictionary=dictionary)
    with pytest.raises(InputError, match="U\\+00A0") as refused:
        read_run(odd, dictionary=dictionary)
    assert refused.value.line == 2
    assert dictionary.ids().tolist() == ["a", "b"]  # nothing of the refused run was added
    third = read_run(later, dictionary=dictionary)
    assert dictionary.ids().tolist() == ["a", "b", "c"]
    c = third.codes
    assert c.docids[c.dcode].tolist() == ["c", "b", "a"] and c.dcode.tolist() == [2, 1, 0]
    assert first.codes.dcode.tolist() == [0, 1]
