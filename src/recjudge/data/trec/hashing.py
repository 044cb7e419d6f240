"""The disclosed hash of (seed, user, item): the default tie-break and recjudge's seeded sampling key.

``splitmix64(splitmix64(B(qid) ^ seed) ^ B(docid))`` with ``B`` the first 8 bytes (little-endian)
of BLAKE2b of the UTF-8 string: stable across platforms, processes and Python versions (unlike
``hash()``), so a report can state it and anyone can recompute it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np
import pandas as pd


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x += np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return x


def string_hashes(values: Iterable[str]) -> np.ndarray:
    """``B(v)`` of each string: the first 8 bytes (little-endian) of BLAKE2b of its UTF-8 encoding."""
    blake = hashlib.blake2b
    return np.fromiter((int.from_bytes(blake(v.encode("utf-8"), digest_size=8).digest(), "little") for v in values),
                       dtype=np.uint64)


def seeded_hash_keys(user_hashes: np.ndarray, item_hashes: np.ndarray, user_of_row: np.ndarray,
                     seed: int = 0) -> np.ndarray:
    """The disclosed tie-break key from string hashes: ``splitmix64(splitmix64(B(qid) ^ seed) ^ B(docid))``.

    ``user_hashes`` holds ``B`` per distinct user, ``item_hashes`` ``B`` per row and ``user_of_row``
    each row's index into ``user_hashes``: callers that draw many seeds hash the strings once.
    """
    hq = _splitmix64(user_hashes ^ np.uint64(seed & 0xFFFFFFFFFFFFFFFF))
    return _splitmix64(hq[user_of_row] ^ item_hashes)


def hash_keys(qids: np.ndarray | pd.Series, docids: np.ndarray | pd.Series, seed: int = 0) -> np.ndarray:
    """The disclosed tie-break key: ``splitmix64(splitmix64(B(qid) ^ seed) ^ B(docid))``.

    ``B`` is the first 8 bytes (little-endian) of BLAKE2b of the UTF-8 string. Stable across
    platforms, processes and Python versions (unlike ``hash()``); docid is the collision fallback.
    """
    q_codes, q_uniq = pd.factorize(np.asarray(qids, dtype=object), sort=False)
    d_codes, d_uniq = pd.factorize(np.asarray(docids, dtype=object), sort=False)
    hd = string_hashes(np.asarray(d_uniq, dtype=object))
    return seeded_hash_keys(string_hashes(np.asarray(q_uniq, dtype=object)), hd[d_codes], q_codes, seed)
