"""polars' parse of TREC lines into columns: ids as int32 codes, numbers typed, no Python object per row."""

from __future__ import annotations

import zlib
from typing import NamedTuple

import numpy as np

from .dictionary import ODD_VALUE, IdDictionary
from .fields import has_odd, load_polars
from .records import factorize32


class Layout(NamedTuple):
    what: str                   # "run" or "qrels"
    layout: str                 # the columns as the error messages spell them
    names: tuple[str, ...]
    kinds: tuple[str, ...]      # per column: "id" (coded), "label" (coded, usually one value), "int", "float"


RUN = Layout("run", "qid Q0 docid rank score tag", ("qid", "q0", "docid", "rank", "score", "tag"),
             ("id", "label", "id", "int", "float", "label"))
QRELS = Layout("qrels", "qid iter docid label", ("qid", "iteration", "docid", "label"), ("id", "label", "id", "int"))
TABLE_EXAMPLE = {"run": "user,item,score", "qrels": "user,item,label"}


def parse(data, layout: Layout, numbers: bool = True):
    """polars' parse of ``data`` (a path or bytes), or None when it refuses it: docids as
    categoricals (coded while parsing, so their strings are never held whole), the other ids as
    strings in polars' buffers (no Python object), numbers typed unless ``numbers`` is False."""
    pl = load_polars()
    typed = {"int": pl.Int64, "float": pl.Float64}
    schema = {n: typed[k] if numbers and k in typed else pl.String for n, k in zip(layout.names, layout.kinds)}
    try:
        frame = pl.scan_csv(data, separator=" ", has_header=False, quote_char=None, schema=schema,
                            raise_if_empty=False)
        # qrels are six times a run's size: every text column coded while parsing keeps the peak low
        # (the iteration column held as strings alone took 40-70 MB at 6 million lines); a run's qids
        # are coded by segment instead (cheaper)
        coded = ["docid"] if layout.what == "run" else [n for n, k in zip(layout.names, layout.kinds)
                                                         if k in ("id", "label")]
        # the streaming engine parses in pieces (a third less peak memory on big qrels); rows keep file order
        return frame.with_columns(pl.col(*coded).cast(pl.Categorical)).collect(engine="streaming")
    except (pl.exceptions.PolarsError, OSError, EOFError, zlib.error, ValueError):
        return None


# Characters a field may not hold: control characters (tab and CR included: the careful reader

def _one_code(phys) -> bool:
    return phys.min() == phys.max()


def _codes(col, kind: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """(int32 code per row, the distinct strings in first-seen order, whether one is odd).

    Three ways, cheapest first, all giving codes in first-seen order: a column of one value (Q0, a
    tag, an iteration); a column grouped in segments of one value (the qids of a run or qrels
    written user by user: only the segments' first strings become Python strings); otherwise
    polars' categorical encoding.
    """
    pl = load_polars()
    n = len(col)
    if kind == "label" and n and (col.dtype == pl.String and (col == col[0]).all()
                                  or col.dtype == pl.Categorical and _one_code(col.to_physical())):
        values = col.head(1).cast(pl.String)
        # one code for every row: a read-only view of one zero, no memory per row
        return np.broadcast_to(np.int32(0), (n,)), np.asarray(values.to_numpy(), dtype=object), has_odd(values)
    if kind == "qid" and col.dtype == pl.String:
        starts = np.flatnonzero((col != col.shift(1)).fill_null(True).to_numpy())
        if len(starts) <= n // 4:
            seg_codes, values = factorize32(np.asarray(col.gather(starts).to_numpy(), dtype=object))
            return (np.repeat(seg_codes, np.diff(np.r_[starts, n])).astype(np.int32, copy=False), values,
                    has_odd(pl.Series(values, dtype=pl.String)))
    if col.dtype == pl.String:
        col = col.cast(pl.Categorical)
    phys = col.to_physical().to_numpy()
    distinct = col.unique(maintain_order=True)
    dphys = distinct.to_physical().to_numpy()
    lut = np.empty(int(dphys.max()) + 1 if len(dphys) else 1, dtype=np.int32)  # untouched pages cost nothing
    lut[dphys] = np.arange(len(dphys), dtype=np.int32)
    strings = distinct.cast(pl.String)
    return lut[phys], np.asarray(strings.to_numpy(), dtype=object), has_odd(strings)


def coded_columns(df, layout: Layout, dictionary: IdDictionary | None = None) -> dict | None:
    """The parsed columns as numpy (ids as codes), or None when a field is missing or holds an odd character.

    With a ``dictionary``, a run's docids are coded in it at once when polars allows it
    (:meth:`IdDictionary.encode_categorical`): ``out["docid"]`` is then ``(codes, dictionary)``.
    """
    if df is None or df.height == 0 or sum(df.null_count().row(0)) > 0:
        return None
    out = {}
    for name, kind in zip(layout.names, layout.kinds):
        col = df.get_column(name)
        df = df.drop(name)  # each column's buffers go once it is converted
        if dictionary is not None and name == "docid" and layout.what == "run":
            coded = dictionary.encode_categorical(col)
            if coded is not None:
                if coded is ODD_VALUE:
                    return None
                out[name] = (coded, dictionary)
                continue
        if kind in ("id", "label"):
            codes, values, odd = _codes(col, "qid" if name == "qid" else kind)
            if odd:
                return None
            out[name] = (codes, values)
        else:
            out[name] = col.to_numpy()
    return out


def looks_trec(line: str, layout: Layout) -> bool:
    fields = line.split()
    if len(fields) != len(layout.names):
        return False
    try:
        int(fields[3])
        if layout.what == "run":
            float(fields[4])
    except ValueError:
        return False
    return True
