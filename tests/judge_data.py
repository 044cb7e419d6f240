"""A small movie collection and pair lists shared by the judge tests (the fake labels 'Movie k' as k % 8)."""

from __future__ import annotations

from pathlib import Path

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


def tiny_workspace(tmp_path: Path) -> Path:
    """A collection as RecBole atomic files (``tiny``) and one run (``sys.run``): user u ranks items
    20..27 ('Movie k')."""
    coll = tmp_path / "tiny"
    coll.mkdir()
    inter = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    inter += [f"u{u}\t{u + k}\t{1 + (u + k) % 5}\t{1000 + 10 * u + k}" for u in range(5) for k in range(6)]
    (coll / "tiny.inter").write_text("\n".join(inter) + "\n")
    items = ["item_id:token\tmovie_title:token_seq\tclass:token_seq"]
    items += [f"{k}\tMovie {k}\tDrama" for k in range(40)]
    (coll / "tiny.item").write_text("\n".join(items) + "\n")
    (tmp_path / "sys.run").write_text("".join(f"u{u} Q0 {20 + r} {r + 1} {8 - r} sys\n"
                                              for u in range(5) for r in range(8)))
    return tmp_path
