"""Tables with a header (``user,item,score``, comma or tab separated) and ranx's JSON runs and qrels.

What a recommender user writes besides TREC files: pandas' to_csv, RecBole's exports, a table by
hand. :func:`sniff` tells them from a TREC file by the first bytes.
"""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from .dictionary import IdDictionary
from .fields import ODD_POLARS, load_polars
from .parsing import TABLE_EXAMPLE, Layout, coded_columns, looks_trec
from .records import MAX_LABEL
from .sources import HEAD_BYTES, source_run_name

# accepted column names, case-insensitive; a RecBole type suffix (``user_id:token``) is dropped
QUERY_COLUMNS = ("user", "user_id", "userid", "qid", "query", "query_id", "q_id")
ITEM_COLUMNS = ("item", "item_id", "itemid", "docid", "doc", "doc_id")
SCORE_COLUMNS = ("score", "prediction", "rating")
LABEL_COLUMNS = ("label", "relevance", "rel")
_ROLES = {"run": (("qid", "user", QUERY_COLUMNS), ("docid", "item", ITEM_COLUMNS), ("score", "score", SCORE_COLUMNS)),
          "qrels": (("qid", "user", QUERY_COLUMNS), ("docid", "item", ITEM_COLUMNS), ("label", "label", LABEL_COLUMNS))}
_JSON_EXAMPLE = {"run": '{"u1": {"i1": 0.9, "i2": 0.4}}', "qrels": '{"u1": {"i1": 1, "i2": 0}}'}


def _column_key(name: str) -> str:
    return name.strip().strip('"').split(":", 1)[0].strip().lower()


def column_roles(names, what: str) -> tuple[dict[str, int], str, str]:
    """Which of ``names`` (a header's, or a DataFrame's columns) hold the user, item and score (a run)
    or label (qrels): ``({"qid": i, "docid": j, "score": k}, "", "")``, or ``({}, problem, fix)``."""
    keys = [_column_key(str(n)) for n in names]
    found, problems = {}, []
    for role, noun, accepted in _ROLES[what]:
        hits = [i for i, k in enumerate(keys) if k in accepted]
        if len(hits) > 1:
            both = " and ".join(repr(str(names[i])) for i in hits)
            return {}, f"columns {both} both name the {noun}", f"keep one {noun} column"
        if hits:
            found[role] = hits[0]
        else:
            problems.append((noun, accepted))
    if problems:
        shown = ", ".join(repr(str(n)) for n in names)
        missing = "; ".join(f"{'an' if noun == 'item' else 'a'} {noun} column ({', '.join(accepted)})"
                            for noun, accepted in problems)
        other = ""
        if what == "run" and any(k in LABEL_COLUMNS for k in keys):
            other = "; it has a label column: is it qrels?"
        elif what == "qrels" and any(k in SCORE_COLUMNS for k in keys):
            other = "; it has a score column: is it a run?"
        nouns = [noun for noun, _ in problems]
        nouns = nouns[0] if len(nouns) == 1 else ", ".join(nouns[:-1]) + " or " + nouns[-1]
        return {}, f"no {nouns} column among the columns {shown}{other}", \
            f"name {missing}, e.g. the header {TABLE_EXAMPLE[what]}"
    return found, "", ""


def sniff(head: bytes, layout: Layout, name: str) -> tuple[str, str]:
    """("trec" | "table" | "json", the table's separator) from the first bytes: ``{`` opens ranx's JSON;
    a first line that is not a TREC line is a header when it names a user or item column (comma or
    tab separated), or holds commas and no space. A TREC file reads no further than its first line here."""
    text = head.lstrip()
    if text[:1] == b"{":
        return "json", ""
    if name.lower().removesuffix(".gz").endswith(".json") and text:
        raise InputError(name, f"a .json {layout.what} must hold ranx's JSON (an object of users), not "
                         f"{text[:20].decode('utf-8', 'replace')!r}…", f"write it as {_JSON_EXAMPLE[layout.what]}")
    first = next((line for line in text.split(b"\n") if line.strip()), b"").decode("utf-8", "replace").rstrip("\r")
    if not first or looks_trec(first, layout):
        return "trec", ""
    for sep in (",", "\t"):
        named = any(_column_key(f) in QUERY_COLUMNS + ITEM_COLUMNS for f in first.split(sep))
        # a comma line without spaces is a table too (a header to ask for); a spaced one, a broken TREC line
        if sep in first and (named or sep == "," and " " not in first.strip()):
            return "table", sep
    return "trec", ""


_ID_FAULT = "[ " + ODD_POLARS[1:]  # a space, a control character or a Unicode space


def _check_ids(col, noun: str, name: str, where) -> None:
    """Refuse an empty id, or one holding a character a TREC file cannot hold (``where(i)``: the
    keywords naming row i)."""
    bad = (col.str.contains(_ID_FAULT) | (col.str.len_bytes() == 0)).fill_null(False)
    if bad.any():
        i = int(bad.arg_true()[0])
        raise InputError(name, f"{noun} id {col[i]!r} is empty or holds a space, tab or control character, which "
                         "TREC files (and so recjudge's outputs) cannot hold",
                         "replace those characters in the ids, e.g. by _", **where(i))


def _coded(layout: Layout, qid, docid, values, name: str, dictionary: IdDictionary | None) -> dict:
    """The columns of :func:`coded_columns` from polars series of users, items (strings) and scores or labels;
    each user's rows ranked in file order."""
    pl = load_polars()
    n = len(qid)
    if layout.what == "run":
        rank = pl.DataFrame({"q": qid}).select(pl.int_range(pl.len()).over("q") + 1).to_series()
        df = pl.DataFrame({"qid": qid, "q0": pl.repeat("Q0", n, eager=True), "docid": docid.cast(pl.Categorical),
                           "rank": rank.cast(pl.Int64), "score": values.cast(pl.Float64),
                           "tag": pl.repeat(source_run_name(name), n, eager=True)})
    else:
        df = pl.DataFrame({"qid": qid, "iteration": pl.repeat("0", n, eager=True),
                           "docid": docid.cast(pl.Categorical), "label": values.cast(pl.Int64)})
    cols = coded_columns(df, layout, dictionary)
    if cols is None:  # pragma: no cover - the ids and values were checked
        raise InputError(name, f"the {layout.what} does not parse", f"write it as {TABLE_EXAMPLE[layout.what]}")
    return cols


def _values(text_col, noun: str, layout: Layout, name: str, where):
    """Scores (decimals, finite is checked with the run) or labels (whole numbers) from text."""
    pl = load_polars()
    num = text_col.str.strip_chars().cast(pl.Float64, strict=False)
    bad = num.is_null()
    if layout.what == "qrels":
        bad = bad | (num != num.floor()).fill_null(True) | (num.abs() > MAX_LABEL).fill_null(True)
    if bad.any():
        i = int(bad.arg_true()[0])
        fix = ("use whole-number labels (ir-measures and trec_eval reject fractions)" if layout.what == "qrels"
               else "write a decimal score")
        what = "a whole number" if layout.what == "qrels" else "a number"
        raise InputError(name, f"{noun} {text_col[i]!r} is not {what}", fix, **where(i))
    return num


def table_columns(raw: bytes, sep: str, layout: Layout, name: str, dictionary: IdDictionary | None
                   ) -> tuple[dict, np.ndarray]:
    """A table with a header line: the columns :func:`column_roles` names, each row's line."""
    import csv

    pl = load_polars()
    lines_head = raw[:HEAD_BYTES * 16].decode("utf-8", "replace").split("\n")
    skip = next((i for i, line in enumerate(lines_head) if line.strip()), 0)  # blank lines before the header
    header = next(csv.reader([lines_head[skip].rstrip("\r")], delimiter=sep))
    roles, problem, fix = column_roles(header, layout.what)
    if problem:
        kind = "a CSV" if sep == "," else "a tab-separated"
        raise InputError(name, f"{problem}; read as {kind} table with a header line, since the first line is not "
                         f"a TREC line '{layout.layout}'", fix, line=skip + 1)
    order = [roles[r] for r, _, _ in _ROLES[layout.what]]
    empty = InputError(name, f"holds a header but no {layout.what} rows", "add rows such as " +
                       TABLE_EXAMPLE[layout.what].replace("user", "u1").replace("item", "i1")
                       .replace("score", "0.5").replace("label", "1"))
    try:
        df = pl.read_csv(raw, separator=sep, has_header=False, infer_schema=False, quote_char='"',
                         skip_rows=skip + 1, raise_if_empty=False)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        _utf8(raw, name)
        _ragged(raw, sep, len(header), name, skip)
        if not raw.split(b"\n", skip + 1)[-1].strip():
            raise empty from None
        raise InputError(name, f"the table does not parse ({str(exc).splitlines()[0]})",
                         f"write {len(header)} fields per line, as the header") from None
    if df.width > len(header):
        _ragged(raw, sep, len(header), name, skip)
    if df.width < len(header):  # rows shorter than the header all along
        df = df.with_columns([pl.lit(None, pl.String).alias(f"_pad{i}") for i in range(len(header) - df.width)])
    df = pl.DataFrame({k: df.to_series(i) for k, i in zip("qdv", order)})
    lines = np.arange(df.height, dtype=np.int64) + skip + 2
    blank = (df["q"].is_null() & df["d"].is_null() & df["v"].is_null()).to_numpy()
    if blank.any():  # a blank line reads as a row of nulls
        df, lines = df.filter(~pl.Series(blank)), lines[~blank]
    if df.height == 0:
        raise empty

    def where(i):
        return {"line": int(lines[i])}

    nouns = dict(zip("qdv", [_column_key(header[i]) for i in order]))
    for key in "qdv":
        missing = df[key].is_null()
        if missing.any():
            i = int(missing.arg_true()[0])
            raise InputError(name, f"no {nouns[key]!r} value (the line has fewer fields than the header's "
                             f"{len(header)})", f"write {len(header)} fields per line, as the header", **where(i))
    # spaces around a field (user, item, score) are the writer's layout, not part of the id
    q, d = df["q"].str.strip_chars(" "), df["d"].str.strip_chars(" ")
    _check_ids(q, "user", name, where)
    _check_ids(d, "item", name, where)
    values = _values(df["v"], nouns["v"], layout, name, where)
    return _coded(layout, q, d, values, name, dictionary), lines


def _utf8(raw: bytes, name: str) -> str:
    """``raw`` as text, or the InputError naming the line of its first byte that is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(name, f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", "save the file as UTF-8",
                         line=raw.count(b"\n", 0, exc.start) + 1) from None


def _ragged(raw: bytes, sep: str, width: int, name: str, skip: int) -> None:
    """The line with more fields than the header, named (polars refuses such a table)."""
    import csv
    import io

    reader = csv.reader(io.StringIO(raw.decode("utf-8", "replace")), delimiter=sep)
    for row in reader:
        if reader.line_num > skip + 1 and len(row) > width:
            raise InputError(name, f"{len(row)} fields, the header names {width}",
                             "quote fields that hold the separator, or remove the extra fields", line=reader.line_num)


def json_columns(raw: bytes, layout: Layout, name: str, dictionary: IdDictionary | None) -> dict:
    """ranx's JSON run ``{"user": {"item": score}}`` (qrels: labels)."""
    import json
    import math

    pl = load_polars()
    fix = f"write ranx's JSON {layout.what}: {_JSON_EXAMPLE[layout.what]}"
    try:
        # pairs keep what a dict would hide: a key given twice
        top = json.loads(_utf8(raw, name), object_pairs_hook=lambda pairs: ("object", pairs),
                         parse_constant=lambda c: float("nan"))
    except json.JSONDecodeError as exc:
        raise InputError(name, f"not valid JSON ({exc.msg}, column {exc.colno})", fix, line=exc.lineno) from None
    if not (isinstance(top, tuple) and top[0] == "object"):
        raise InputError(name, f"the JSON holds a {type(top).__name__}, not an object of users", fix)
    value_word = "score" if layout.what == "run" else "label"
    qids, docids, values, seen = [], [], [], set()
    for user, items in top[1]:
        if user in seen:
            raise InputError(name, f"user {user!r} is given twice", "merge its items into one object")
        seen.add(user)
        if not (isinstance(items, tuple) and items[0] == "object"):
            raise InputError(name, f"user {user!r} maps to {_json_kind(items)}, not an object of items", fix)
        names = [d for d, _ in items[1]]
        if len(set(names)) != len(names):
            dup = next(d for i, d in enumerate(names) if d in names[:i])
            raise InputError(name, f"item {dup!r} is given twice for user {user!r}",
                             f"keep one {value_word} per (user, item)")
        for d, v in items[1]:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            if ok and layout.what == "qrels":
                ok = float(v).is_integer() and abs(v) <= MAX_LABEL
            if not ok:
                what = "a whole-number label" if layout.what == "qrels" else "a finite number"
                raise InputError(name, f"user {user!r}, item {d!r}: the {value_word} {_json_kind(v)} is not {what}",
                                 fix)
        qids += [user] * len(names)
        docids += names
        values += [v for _, v in items[1]]
    if not qids:
        raise InputError(name, f"empty {layout.what}: no user has an item", fix)
    q, d = pl.Series(qids, dtype=pl.String), pl.Series(docids, dtype=pl.String)

    _check_ids(q, "user", name, lambda i: {})
    _check_ids(d, "item", name, lambda i: {})
    return _coded(layout, q, d, pl.Series(values, dtype=pl.Float64), name, dictionary)


def _json_kind(value) -> str:
    if isinstance(value, tuple):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return repr(value)
