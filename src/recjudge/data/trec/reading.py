"""Reading TREC runs and qrels: one reader, polars' CSV parser, for every input form.

A path (plain or gzip), a file object (text or binary) and an inline string all end in the same
parse: polars splits the fields on ``" "`` and parses the numbers, and ids come back as categorical
codes, turned into int32 codes without a Python string per row. A file that is not in that plain
shape (tabs, doubled or edge spaces, blank lines) or that holds a fault goes through
:func:`careful`, which reads it line by line, names the first fault with its line and a fix, and
otherwise rewrites the whitespace so that the same parser reads it: every form gives the same table
or the same error.

The rules: fields are separated by spaces or tabs, lines end with ``\\n`` (a ``\\r`` before it is
dropped), blank lines are skipped, and a leading byte-order mark is not part of the first id. Any
other control or Unicode space character in a field is refused: TREC tools disagree on whether it
separates fields (Python's ``split()``, which ir-measures reads runs with, says yes; trec_eval's
``sscanf`` says no for most). Ranks and labels are integers written as such (``1.0`` is refused:
ir-measures and trec_eval reject fractional labels); scores are decimals, and must be finite.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from ..._io import Source
from .careful import careful, check_head
from .dictionary import IdDictionary
from .discovery import run_paths
from .parsing import QRELS, RUN, Layout, coded_columns, parse
from .records import FrameCodes, Qrels, QrelsTable, Run, RunTable, check_qrels, check_run, label_column
from .sources import head_bytes, open_source, raw_bytes, source_qrels_name, source_run_name
from .tables import ITEM_COLUMNS, LABEL_COLUMNS, QUERY_COLUMNS, SCORE_COLUMNS, column_roles, json_columns, \
    sniff, table_columns

__all__ = ["read_run", "read_qrels", "read_runs", "IdDictionary", "column_roles", "QUERY_COLUMNS",
           "ITEM_COLUMNS", "SCORE_COLUMNS", "LABEL_COLUMNS"]


def _run_table(cols: dict, dictionary: IdDictionary | None) -> RunTable:
    dcode, docids = cols["docid"]
    ids = None
    if dictionary is not None:
        if docids is not dictionary:  # not coded while converting (coded_columns)
            dcode = dictionary.encode(docids)[dcode]
        docids, ids = dictionary.ids(), dictionary
    return RunTable(FrameCodes(*cols["qid"], dcode, docids), cols["rank"].astype(np.int64, copy=False),
                    cols["score"].astype(np.float64, copy=False), *cols["tag"], ids)


def _qrels_table(cols: dict) -> QrelsTable:
    return QrelsTable(FrameCodes(*cols["qid"], *cols["docid"]), *cols["iteration"],
                      label_column(cols["label"]))


def _read(source: Source, layout: Layout, dictionary: IdDictionary | None = None):
    """(name, columns, each row's line as a function of the row, or None where rows have no line);
    ``dictionary`` as in :func:`coded_columns`. A table with a header or a ranx JSON file is told from a
    TREC file by its first bytes (:func:`sniff`)."""
    src, data = open_source(source, layout.what)
    head = head_bytes(data)
    kind, sep = sniff(head, layout, src)
    if kind == "trec":
        check_head(head, layout, src)
    if kind == "json":
        return src, json_columns(raw_bytes(data, src, layout.what), layout, src, dictionary), None
    if kind == "table":
        cols, lines = table_columns(raw_bytes(data, src, layout.what), sep, layout, src, dictionary)
        return src, cols, _line_of(lines)
    cols = coded_columns(parse(data, layout), layout, dictionary)
    if cols is not None:
        return src, cols, _line_of(None)
    cols, lines = careful(data, layout, src)
    return src, cols, _line_of(lines)


def _line_of(lines: np.ndarray | None):
    if lines is not None:
        return lambda i: int(lines[i])
    return lambda i: i + 1  # polars read it as it is: no blank line, row i is line i + 1


def read_run(source: Source, name: str | None = None, *, dictionary: IdDictionary | None = None) -> Run:
    """Read a TREC run ``qid Q0 docid rank score tag`` from a path, .gz, file object or inline string;
    or a table with a header (``user,item,score``, comma or tab separated) or ranx's JSON run
    ``{"user": {"item": score}}`` (:func:`sniff`). A table's or a JSON run's ranks are the file order
    of each user's rows; scores decide the ranking, as for a TREC run.

    ``dictionary``: document ids shared with the other runs read with it (:class:`IdDictionary`).
    """
    src, cols, line_of = _read(source, RUN, dictionary)
    table = _run_table(cols, dictionary)
    check_run(table, src, line_of)
    return Run(name if name is not None else source_run_name(src), table=table)


def read_qrels(source: Source, name: str | None = None) -> Qrels:
    """Read TREC qrels ``qid iter docid label`` from a path, .gz, file object or inline string; or a table
    with a header (``user,item,label``) or ranx's JSON qrels ``{"user": {"item": label}}``."""
    src, cols, line_of = _read(source, QRELS)
    table = _qrels_table(cols)
    check_qrels(table, src, line_of)
    return Qrels(name if name is not None else source_qrels_name(src), table=table)


def read_runs(paths: Iterable[str | os.PathLike] | str | os.PathLike) -> dict[str, Run]:
    """Read runs from files and folders; keys are run names, which must be unique."""
    return {name: read_run(f, name=name) for name, f in run_paths(paths).items()}
