"""The sample an estimate is made from: per-user metric matrices under the human and the LLM labels,
checked to be what prediction-powered inference needs (else refused, naming the reason and the fix).

The N users are those the LLM labels judge; the n human users must be among them, each judged by the
humans on every pair the LLM judged for that user (so the per-user metric under human labels is the
metric itself), or on a random part of it for measures linear in the labels
(:mod:`recjudge.estimation.pools`). Per-user matrices come from
:func:`recjudge.evaluation.measures.score_runs`, one pass over the runs for both label sets.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, InputError
from .validity import MIN_HUMAN_USERS

__all__ = ["MIN_HUMAN_USERS", "Sample", "measure_map", "check_users", "inclusion_probabilities",
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
    partial: dict | None = None  # measure -> PairTerms where some human users are partly judged

    def terms(self, name: str):
        """The measure's :class:`~recjudge.estimation.pools.PairTerms` (None: every pool judged whole)."""
        return None if self.partial is None else self.partial.get(name)

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


def _partial_terms(runs: Mapping, pools, measures: Mapping[str, str], fh: dict, tie_policy: str, seed: int
                   ) -> dict:
    """Per measure, the per-user HT values of partly judged pools (see :mod:`recjudge.estimation.pools`)."""
    from ..evaluation.measures import parse_measures, score_runs
    from .pools import layer_qrels, pair_terms

    parsed = {name: parse_measures([key])[0] for name, key in measures.items()}
    precision = {name: m for name, m in parsed.items() if m.NAME == "P"}
    layers = {int(m["rel"]): layer_qrels(pools, int(m["rel"])) for m in precision.values()}
    sets = {q.name: q for qs, _, _ in layers.values() for q in qs}
    keys = sorted({measures[name] for name in precision})
    scored = score_runs(runs, sets, keys, tie_policy, seed, k=100).matrices if sets else {}
    out = {}
    for name, m in parsed.items():
        hits, hh, hl = None, None, None
        if name in precision:
            qs, hh, hl = layers[int(m["rel"])]
            systems = list(runs)
            hits = np.zeros(hh.shape + (len(systems),))
            for j, q in enumerate(qs):
                frame = scored[q.name][measures[name]].reindex(index=pools.users, columns=systems)
                hits[:, j, :] = frame.fillna(0.0).to_numpy(dtype=float)
        out[name] = pair_terms(pools, fh[name], hits, hh, hl, m.NAME == "Judged")
    return out


def user_matrices(runs: Mapping, human, llm, measures: Mapping[str, str], tie_policy: str, seed: int,
                  pi: np.ndarray | None = None, pools=None) -> Sample:
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
    partial = None
    if pools is not None and pools.partial:
        partial = _partial_terms(runs, pools, measures, fh, tie_policy, seed)
        y = {name: partial[name].y for name in measures}
    return Sample(systems, human_users, llm_users, y, fh, fa, pi, partial)


def path_of(value) -> str | None:
    """The path a setting was given as, for naming inputs in the output (None when in memory)."""
    return os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
