"""The ids shared by the runs of one evaluation: one code per distinct string for all of them."""

from __future__ import annotations

import threading
import weakref

import numpy as np

from .fields import has_odd, load_polars

__all__ = ["IdDictionary", "ODD_VALUE"]

ODD_VALUE = object()  # IdDictionary.encode_categorical: a new id holds an odd character


def _room(buf: np.ndarray, n: int, fill) -> np.ndarray:
    """``buf``, or a copy at least twice as long when it holds fewer than ``n`` values (the rest
    ``fill``): growing an array by appending then costs the values appended, not the array each time."""
    if n <= len(buf):
        return buf
    out = np.full(max(n, 2 * len(buf), 1024), fill, dtype=buf.dtype)
    out[:len(buf)] = buf
    return out


class IdDictionary:
    """Ids shared by the runs of one evaluation: each distinct string gets one code for all of them.

    Runs read with a dictionary (``read_run(..., dictionary=d)``) hold ``d.ids()`` as their docids,
    which may then list ids a run does not use, and ``d`` as their table's ``ids``. What depends
    only on the string is then computed once per string for every run: its code in some qrels, its
    disclosed hash (:meth:`hashes_of`). Safe to share between a reading thread and a scoring one.

    Every per-id array grows by doubling, and what :meth:`ids` gave is a view that later ids never
    reach: a run costs the ids it adds, not the dictionary's size (that made 60 runs quadratic).
    """

    def __init__(self):
        self._code: dict[str, int] = {}  # code per id; the ids past its length are indexed on the next encode()
        self._plain = False  # encode() added ids: the categorical path must then look its strings up too
        self._buf = np.empty(0, dtype=object)  # the ids by code, with room at the end
        self._ids = self._buf[:0]
        self._hashes = np.zeros(0, dtype=np.uint64)  # B(id) per code where _hashed, with room
        self._hashed = np.zeros(0, dtype=bool)
        self._issued: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()
        self._by_phys = np.zeros(0, dtype=np.int32)  # code per polars global categorical code (-1: not seen)
        self._categories: list = []  # a categorical column per batch of new strings: their table stays alive
        self._lock = threading.Lock()

    def encode(self, values: np.ndarray) -> np.ndarray:
        """The code of each of ``values`` (distinct strings; int32), new strings added."""
        with self._lock:
            return self._encode(values)

    def _encode(self, values: np.ndarray) -> np.ndarray:
        code = self._code
        if len(code) < len(self._ids):  # ids the categorical path added: indexed when a string lookup needs them
            code.update(zip(self._ids[len(code):].tolist(), range(len(code), len(self._ids))))
        before = len(code)
        out = np.fromiter((code.setdefault(v, len(code)) for v in values.tolist()), dtype=np.int32,
                          count=len(values))
        if len(code) > before:
            self._append(np.asarray(values, dtype=object)[out >= before])
            self._plain = True
        return out

    def _append(self, new: np.ndarray) -> None:
        """New ids, in code order, written past the end of every view given."""
        n = len(self._ids)
        self._buf = _room(self._buf, n + len(new), None)
        self._buf[n:n + len(new)] = new
        self._ids = self._buf[:n + len(new)]
        self._issued[id(self._ids)] = self._ids

    def encode_categorical(self, col):
        """The code of each row of a polars categorical column of the global categories (int32), new
        strings added; :data:`ODD_VALUE` when a new string holds a character a field may not hold
        (nothing added); None when the column is not such a column.

        polars codes such a column with the process's one string table, whose codes stay (a string
        keeps its code while categories are alive; the dictionary holds a column of them). So
        only strings new to this dictionary become Python strings: each one once for all the runs.
        """
        pl = load_polars()
        if col.dtype != pl.Categorical or not col.dtype.categories.is_global() or len(col) == 0:
            return None
        phys = col.to_physical().to_numpy()
        with self._lock:
            top = int(phys.max())
            self._by_phys = _room(self._by_phys, top + 1, -1)
            out = self._by_phys[phys]
            new = np.flatnonzero(out < 0)
            if len(new) == 0:
                return out
            # the new strings in first-seen order, as encode() would number them
            _, first = np.unique(phys[new], return_index=True)
            rows = new[np.sort(first)]
            strings = col.gather(rows).cast(pl.String)
            if has_odd(strings):
                return ODD_VALUE
            strings = np.asarray(strings.to_numpy(), dtype=object)
            if self._plain:  # a string lookup added ids the physical codes do not know: look the strings up
                codes = self._encode(strings)
            else:  # new physical codes are new strings: appended, the string index built only if asked for
                codes = np.arange(len(self._ids), len(self._ids) + len(strings), dtype=np.int32)
                self._append(strings)
            self._by_phys[phys[rows]] = codes
            self._categories.append(col.gather(rows[:1]))
            return self._by_phys[phys]

    def ids(self) -> np.ndarray:
        """Every id so far, by code."""
        return self._ids

    def issued(self, docids: np.ndarray) -> bool:
        """Whether ``docids`` is an array :meth:`ids` gave: its codes are this dictionary's."""
        return self._issued.get(id(docids)) is docids

    def hashes_of(self, codes: np.ndarray) -> np.ndarray:
        """``B(id)`` (:func:`~recjudge.data.trec.hashing.string_hashes`) of the id of each of ``codes``:
        an id is hashed when first asked for, once for every run, and ids never asked for are not."""
        from .hashing import string_hashes

        codes = np.asarray(codes)
        with self._lock:
            n = len(self._ids)
            self._hashes, self._hashed = _room(self._hashes, n, 0), _room(self._hashed, n, False)
            todo = codes[~self._hashed[codes]]
            if len(todo):
                todo = np.unique(todo)
                self._hashes[todo] = string_hashes(self._buf[todo])
                self._hashed[todo] = True
            return self._hashes[codes]

    def hashes(self) -> np.ndarray:
        """``B(id)`` per code, every id so far (:meth:`hashes_of`)."""
        return self.hashes_of(np.arange(len(self._ids)))

    def __len__(self) -> int:
        return len(self._ids)
