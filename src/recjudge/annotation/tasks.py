"""The tasks of an annotation: each (user, item) pair with what the judge's prompt shows of it.

A task shows the user's sampled history (items with their fields and the user's ratings) and the
candidate with its fields, built by the judge's own :class:`~recjudge.judging.profile.HistoryProfiles`
with the judge's settings and seed, leaving out of the history the candidates of the judge's request
(``items_per_call``), as the judge's prompt does; and the scale of the prompt template in use with
the definitions its text gives each level.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..data.trec import hash_keys
from ..errors import ConfigError
from ..judging.profile import HistoryProfiles
from ..judging.prompts import Template, load_template

__all__ = ["Task", "TaskSet", "scale_levels", "task_id"]


def task_id(qid: str, docid: str) -> str:
    """A task's key as the page and the log carry it."""
    return f"{qid}\t{docid}"


def scale_levels(template: Template) -> tuple[tuple[int, str], ...]:
    """Each level of the template's scale with the definition its user text gives (``3 = very
    interested: ...``, or ``from {scale_min} (not interested)``), else empty."""
    lo, hi = template.scale
    defined = {int(m.group(1)): m.group(2).strip()
               for m in re.finditer(r"(?m)^\s*(\d+)\s*=\s*(.+?)\s*$", template.user)}
    for key, level in (("scale_min", lo), ("scale_max", hi)):
        found = re.search(r"\{" + key + r"\}\s*\(([^)]*)\)", template.user)
        if found and level not in defined:
            defined[level] = " ".join(found.group(1).split())
    return tuple((level, defined.get(level, "")) for level in range(lo, hi + 1))


@dataclass(frozen=True)
class Task:
    """One pair as the page shows it: the history (fields and rating of each item) and the candidate."""

    qid: str
    docid: str
    history: tuple[tuple[tuple[tuple[str, str], ...], str], ...]
    candidate: tuple[tuple[str, str], ...]

    @property
    def id(self) -> str:
        return task_id(self.qid, self.docid)

    def as_json(self) -> dict:
        return {"id": self.id, "user": self.qid, "item": self.docid,
                "candidate": [list(f) for f in self.candidate],
                "history": [{"fields": [list(f) for f in fields], "rating": rating} for fields, rating in self.history]}


class TaskSet:
    """The tasks of one annotation in the order they are offered: users in pair order, each user's
    candidates in a seeded order (the judge's sorted order would show item ids in sequence)."""

    def __init__(self, pairs: Sequence[tuple[str, str]], collection, history, *, prompt: str, fields: str,
                 profile_size: int, sampling: str, history_order: str, seed: int, items_per_call: int = 1):
        self.template = load_template(prompt)
        if self.template.profile_kind != "history":
            raise ConfigError(f"prompt template {self.template.name!r} shows queries, not user histories: annotate "
                              "shows a user's rated history; give a template with profile = \"history\"")
        pairs = sorted({(str(q), str(d)) for q, d in pairs})
        self.profiles = HistoryProfiles(collection, fields, profile_size, history=history, sampling=sampling,
                                        seed=seed, users={q for q, _ in pairs}, order=history_order)
        self.seed = int(seed)
        self.levels = scale_levels(self.template)
        self.rating_scale = collection.rating_scale
        self._chunks = _judge_chunks(pairs, items_per_call)
        self.order = _offer_order(pairs, self.seed)
        self.index = {task_id(q, d): (q, d) for q, d in self.order}
        self.missing = [task_id(q, d) for q, d in self.order
                        if not self.profiles.has(q) or not self.profiles.knows_item(d)]
        if self.missing:
            q, d = self.index[self.missing[0]]
            what = "has no rated history" if not self.profiles.has(q) else f"has no item {d!r} in the collection"
            raise ConfigError(f"{len(self.missing):,} of the {len(self.order):,} pairs cannot be shown: user {q!r} "
                              f"{what} (fix: check the collection, --split and the pairs; the judge leaves such "
                              "pairs out too)")

    def __len__(self) -> int:
        return len(self.order)

    def ids(self) -> list[str]:
        return [task_id(q, d) for q, d in self.order]

    @functools.lru_cache(maxsize=512)
    def task(self, tid: str) -> Task:
        """The task ``tid`` (KeyError when it is none of this set's)."""
        qid, docid = self.index[tid]
        p = self.profiles
        history = tuple((p.item_fields(item), f"{rating:g}")
                        for item, rating in p.sample(qid, self._chunks[(qid, docid)]))
        return Task(qid, docid, history, p.item_fields(docid, qid))

    def scale(self) -> dict:
        """What the page says of the scale and the ratings shown."""
        return {"levels": [[level, text] for level, text in self.levels],
                "rating_min": self.rating_scale.low_text, "rating_max": self.rating_scale.high_text,
                "template": self.template.name, "template_sha256": self.template.sha256}


def _judge_chunks(pairs: Sequence[tuple[str, str]], m: int) -> dict[tuple[str, str], tuple[str, ...]]:
    """Each pair's request as the judge makes them: a user's items in pair order, ``m`` per call."""
    by_user: dict[str, list[str]] = {}
    for q, d in pairs:
        by_user.setdefault(q, []).append(d)
    out = {}
    for q, items in by_user.items():
        for start in range(0, len(items), m):
            chunk = tuple(items[start:start + m])
            out.update({(q, d): chunk for d in chunk})
    return out


def _offer_order(pairs: Sequence[tuple[str, str]], seed: int) -> list[tuple[str, str]]:
    if not pairs:
        return []
    qids = np.array([q for q, _ in pairs], dtype=object)
    salted = np.array([f"annotate\x1f{d}" for _, d in pairs], dtype=object)
    keys = hash_keys(qids, salted, seed).astype(np.uint64)
    return sorted(pairs, key=lambda p, k=dict(zip(pairs, keys.tolist())): (p[0], k[p], p[1]))
