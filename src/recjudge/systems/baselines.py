"""Pop and Random, implemented here because RecBole's versions are wrong for evaluation.

RecBole's Pop counts an item at most once per training batch and counts sampled negatives
(upstream #2198); its Random gives every user in a batch the same order. Ours: Pop scores the
true number of training interactions; Random gives each user an independent permutation seeded
by (seed, user), so a user's list does not depend on batching or on the other users.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..data.splits import Split
from .registry import SystemConfig


def catalogue(split: Split) -> np.ndarray:
    """Every item in any part of the split, sorted: the same catalogue RecBole builds from the files."""
    parts = [split.train.item, split.test.item]
    if split.valid is not None:
        parts.append(split.valid.item)
    return np.array(sorted(pd.concat(parts).unique()), dtype=object)


def _user_seed(seed: int, user: str) -> list[int]:
    digest = hashlib.blake2b(user.encode("utf-8"), digest_size=8).digest()
    return [seed & 0xFFFFFFFF, int.from_bytes(digest, "little")]


@dataclass
class NativeModel:
    config: SystemConfig
    items: np.ndarray
    counts: np.ndarray | None = None
    recbole_test: dict | None = None

    def score(self, users: list[str]) -> np.ndarray:
        n = len(self.items)
        if self.config.model == "Pop":
            return np.broadcast_to(self.counts, (len(users), n)).astype(np.float64)
        out = np.empty((len(users), n), dtype=np.float64)
        for row, user in enumerate(users):
            rng = np.random.Generator(np.random.PCG64(_user_seed(self.config.seed, user)))
            out[row] = rng.permutation(n) + 1.0
        return out


def train(config: SystemConfig, split: Split) -> NativeModel:
    items = catalogue(split)
    if config.model == "Pop":
        counts = split.history().item.value_counts()
        return NativeModel(config, items, counts.reindex(items, fill_value=0).to_numpy(dtype=np.float64))
    return NativeModel(config, items)
