"""A small movie collection and pair lists shared by the judge tests (the fake labels 'Movie k' as k % 8)."""

from __future__ import annotations

import pandas as pd

from recjudge.data.collections import Collection


def movies(n_items: int = 30, n_users: int = 3, history: int = 6) -> Collection:
    """Items 'Movie k' (the fake labels them k % 8); user u rated items u..u+history-1."""
    items = pd.DataFrame({"title": [f"Movie {k}" for k in range(n_items)],
                          "genres": [("Drama",) if k % 2 else ("Comedy",) for k in range(n_items)]},
                         index=[str(k) for k in range(n_items)])
    rows = [(f"u{u}", str(u + k), float(1 + (u + k) % 5), 100 * u + k)
            for u in range(n_users) for k in range(history)]
    return Collection("movies", pd.DataFrame(rows, columns=["user", "item", "rating", "timestamp"]), items)


def pairs_for(items, users=("u0", "u1", "u2")):
    return [(u, str(i)) for u in users for i in items]
