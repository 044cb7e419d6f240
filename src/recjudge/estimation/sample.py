"""The sample an estimate is made from: per-user metric matrices under the human and the LLM labels,
checked to be what prediction-powered inference needs (else refused, naming the reason and the fix).

The N users are those the LLM labels judge; the n human users must be among them, each judged by the
humans on every pair the LLM judged for that user (so the per-user metric under human labels is the
metric itself, not a fraction of it). Per-user matrices come from
:func:`recjudge.evaluation.measures.score_runs`, one pass over the runs for both label sets.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, InputError
from .validity import MIN_HUMAN_USERS

__all__ = ["MIN_HUMAN_USERS", "Sample", "measure_map", "check_users", "check_pools", "inclusion_probabilities",
           "user_matrices"]



@dataclass(frozen=True)
class Sample:
    """Per measure (as the user spelled it): Y (n × K, human labels), f on the same n users and f on
    all N users (LLM labels); ``pi``: the n users' inclusion probabilities (None: uniform)."""

    systems: list[str]
    human_users: list[str]
    llm_users: list[str]
    y: dict[str, np.ndarray]
    f_human: dict[str, np.ndarray]
    f_all: dict[str, np.ndarray]
    pi: np.ndarray | None = None

    @property
    def human_rows(self) -> np.ndarray:
        """Where each human user is among the N (rows of ``f_all``)."""
        index = {u: i for i, u in enumerate(self.llm_users)}
        return np.array([index[u] for u in self.human_users], dtype=int)


def measure_map(spec) -> dict[str, str]:
    """The user's spelling of each measure → the key :func:`score_runs` gives its matrix under."""
    from ..evaluation.measures import DEFAULT_MEASURES, measure_key, measure_names, parse_measures, split_top_level

    spec = DEFAULT_MEASURES if spec is None else spec
    items = split_top_level(spec) if isinstance(spec, str) else [str(m).strip() for m in spec]
    parsed = parse_measures(items)
    return {name.replace(" ", ""): measure_key(m) for name, m in zip(measure_names(items), parsed)}


def _some(ids, n: int = 3) -> str:
    ids = sorted(ids)
    return ", ".join(ids[:n]) + (f", … ({len(ids)} in all)" if len(ids) > n else "")


def check_users(human, llm, minimum: int = MIN_HUMAN_USERS) -> tuple[list[str], list[str]]:
    """The human users and the N LLM users, refused when a human user is not among the N, or too few."""
    human_users, llm_users = human.qids, llm.qids
    outside = set(human_users) - set(llm_users)
    if outside:
        raise ConfigError(
            f"the human labels judge {len(outside)} user(s) the LLM labels do not ({_some(outside)}): the human "
            f"users must be a sample of the N = {len(llm_users)} users the LLM judged, since the estimate "
            "generalises over those; judge them with the LLM too, or leave them out of the human qrels")
    if len(human_users) < minimum:
        raise ConfigError(
            f"{len(human_users)} human user(s) is too few for an interval: at least {minimum} are needed (at "
            f"{minimum} the benchmark measured 84-94% coverage at 95% for the per-system intervals and less for "
            "the pairs, since a mean of so few skewed per-user metrics is far from normal; below it no method "
            "here is valid); judge more users by hand")
    return human_users, llm_users


def check_pools(human, llm, users: list[str]) -> None:
    """Refuse human users whose human labels miss some pair the LLM judged for them (the pair-level,
    K-per-user case, which a per-user metric under human labels does not estimate)."""
    h, g = human.frame, llm.frame
    g = g[g["qid"].isin(users)]
    judged = set(zip(h["qid"], h["docid"]))
    missing = [q for q, d in zip(g["qid"], g["docid"]) if (q, d) not in judged]
    if missing:
        from collections import Counter

        counts = Counter(missing)
        user, count = counts.most_common(1)[0]
        total = int((g["qid"] == user).sum())
        raise ConfigError(
            f"the human labels miss {len(missing)} pair(s) the LLM judged for {len(counts)} human user(s) (user "
            f"{user}: {total - count} of its {total} LLM-judged pairs have a human label): the per-user metric "
            "under human labels needs each human user's whole pool, and a correction for partly judged users "
            "(pair-level weights) is not implemented; give the human labels of every pair the LLM judged for "
            "these users, or leave the users out of the human qrels")


def inclusion_probabilities(value, users: list[str]) -> np.ndarray:
    """Each human user's probability of having been chosen for human labels, from a ``{user: π}``
    mapping or a file of 'user π' lines; every human user needs one, each in (0, 1]."""
    source = "inclusion"
    if not isinstance(value, Mapping):
        from .._io import read_text

        source, text = read_text(value, "inclusion probabilities")
        value = {}
        for number, line in enumerate(text.splitlines(), start=1):
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            try:
                value[parts[0]] = float(parts[1]) if len(parts) == 2 else None
            except ValueError:
                value[parts[0]] = None
            if value[parts[0]] is None:
                raise InputError(f"{source}:{number}", f"expected 'user probability', got {line.strip()!r}",
                                 "write one user id and its inclusion probability per line")
    missing = [u for u in users if u not in value]
    if missing:
        raise ConfigError(f"{source}: no inclusion probability for human user(s) {_some(missing)}; give one for "
                          "every user of the human labels")
    pi = np.array([float(value[u]) for u in users])
    bad = [u for u, p in zip(users, pi) if not 0 < p <= 1]
    if bad:
        raise ConfigError(f"{source}: inclusion probabilities must be in (0, 1]; user {bad[0]} has "
                          f"{value[bad[0]]!r}")
    return pi


def user_matrices(runs: Mapping, human, llm, measures: Mapping[str, str], tie_policy: str, seed: int,
                  pi: np.ndarray | None = None) -> Sample:
    """Every run scored under both label sets (one pass over the runs), as a :class:`Sample`."""
    from ..evaluation.measures import score_runs

    human_users, llm_users = human.qids, llm.qids
    scored = score_runs(runs, {"human": human, "llm": llm}, list(dict.fromkeys(measures.values())),
                        tie_policy, seed, k=100)
    if not any(scored.users_ranked["llm"].values()):
        raise ConfigError("no run ranks any user the LLM labels judge: every measure would be 0; check that runs "
                          "and qrels use the same user ids")
    systems = list(runs)
    index = {u: i for i, u in enumerate(llm_users)}
    rows = np.array([index[u] for u in human_users], dtype=int)
    y, fh, fa = {}, {}, {}
    for name, key in measures.items():
        hm = scored.matrices["human"][key].loc[human_users, systems].to_numpy(dtype=float)
        lm = scored.matrices["llm"][key].loc[llm_users, systems].to_numpy(dtype=float)
        if np.isnan(hm).any() or np.isnan(lm).any():
            raise ConfigError(f"{name} leaves some users without a value (its mean skips them), so it has no "
                              "per-user mean to estimate; choose another measure")
        y[name], fa[name] = hm, lm
        fh[name] = lm[rows]
    return Sample(systems, human_users, llm_users, y, fh, fa, pi)


def path_of(value) -> str | None:
    """The path a setting was given as, for naming inputs in the output (None when in memory)."""
    return os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
