"""Deterministic splits of a collection and historical qrels from the test part.

Every split orders interactions by (timestamp, user, item), so equal timestamps never depend on
file order, and records its method and parameters in ``Split.info``. Cuts are made on exact
integer timestamps here, not inside RecBole (which stores time as float32).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Callable, Mapping

import numpy as np
import pandas as pd
from pydantic import AfterValidator

from ..errors import ConfigError
from ..settings import checked
from .collections import Collection
from .trec import Qrels

__all__ = [
    "Split",
    "SPLITS",
    "SplitName",
    "check_split",
    "make_split",
    "global_time_split",
    "user_ratio_split",
    "leave_one_out_split",
    "timestamp_split",
    "full_split",
    "historical_qrels",
    "RATING_LABELS",
]


@dataclass(frozen=True, eq=False)
class Split:
    """A deterministic train/test (and optional validation) split of a collection's interactions.

    ``train``/``valid``/``test`` have the collection's interaction columns. ``info`` records the
    method and every parameter (cut timestamps, ratio, counts) so the split can be reproduced.
    """

    collection: Collection
    train: pd.DataFrame
    test: pd.DataFrame
    valid: pd.DataFrame | None = None
    info: Mapping[str, object] = field(default_factory=dict)

    @property
    def test_users(self) -> list[str]:
        return sorted(self.test.user.unique())

    def history(self) -> pd.DataFrame:
        """Interactions a recommender may see for a test user: train plus validation."""
        if self.valid is None or len(self.valid) == 0:
            return self.train
        return pd.concat([self.train, self.valid], ignore_index=True)


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["timestamp", "user", "item"], kind="stable").reset_index(drop=True)


def _by_user(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["user", "timestamp", "item"], kind="stable").reset_index(drop=True)


def _quantile_cut(ts: np.ndarray, q: float) -> int:
    """The timestamp at sorted position floor(q·n): rows strictly before it are train."""
    s = np.sort(ts)
    return int(s[min(int(math.floor(q * len(s))), len(s) - 1)])


def _keep_warm(part: pd.DataFrame, train: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    warm = part.user.isin(set(train.user))
    return part[warm].reset_index(drop=True), int(part.loc[~warm, "user"].nunique())


def _require_order(collection: Collection, method: str) -> None:
    """Time-ordered splits need timestamps that order something: ML-32M-ext's profiles carry none."""
    if collection.info.get("ordered") is False:
        raise ConfigError(f"collection {collection.name!r} gives its ratings no order (one timestamp for all), "
                          f"so the {method} split would cut at random; use the full split against its human "
                          "qrels, or load its ratings with timestamps (ML-32M-ext: explicit-ratings.csv)")


def _counts(train, test, valid=None) -> dict:
    out = {"train_interactions": len(train), "test_interactions": len(test),
           "train_users": int(train.user.nunique()), "test_users": int(test.user.nunique())}
    if valid is not None:
        out.update(valid_interactions=len(valid), valid_users=int(valid.user.nunique()))
    return out


def global_time_split(collection: Collection, *, quantile: float = 0.8, timestamp: int | None = None,
                      keep_cold_users: bool = False) -> Split:
    """Train on interactions before a global cut, test on those at or after it.

    The cut is ``timestamp`` when given, else the timestamp at sorted position floor(quantile·n).
    Test users without training history are dropped unless ``keep_cold_users`` (on ML-100K a
    global cut otherwise leaves most test users cold).
    """
    if timestamp is None and not 0 < quantile < 1:
        raise ConfigError(f"quantile must be between 0 and 1 (exclusive), got {quantile}")
    _require_order(collection, "global_time")
    inter = _ordered(collection.interactions)
    cut = int(timestamp) if timestamp is not None else _quantile_cut(inter.timestamp.to_numpy(), quantile)
    before = inter.timestamp.to_numpy() < cut
    train, test = _by_user(inter[before]), _by_user(inter[~before])
    if len(train) == 0 or len(test) == 0:
        raise ConfigError(f"cut at timestamp {cut} leaves an empty {'train' if len(train) == 0 else 'test'} part; "
                          f"interactions span {int(inter.timestamp.min())}–{int(inter.timestamp.max())}")
    cold = 0
    if not keep_cold_users:
        test, cold = _keep_warm(test, train)
    info = {"method": "global_time", "cut_timestamp": cut, "quantile": None if timestamp is not None else quantile,
            "keep_cold_users": keep_cold_users, "cold_test_users_dropped": cold, **_counts(train, test)}
    return Split(collection, train, test, None, info)


def full_split(collection: Collection, *, users: str = "qrels") -> Split:
    """Train on every interaction and rank the users that external labels judge (Cranfield setting).

    For collections with human qrels (ML-32M-ext): the systems see each judged user's whole
    profile, which is also masked from their lists. ``users="qrels"`` ranks the users of
    ``collection.qrels`` that have interactions (those without are counted and named in ``info``:
    ``unranked_judged_users``, ``unranked_judged``); ``"all"`` ranks every user. There is no held-out
    part: ``test`` holds each ranked user's latest interaction only so that RecBole can build its
    data loaders; it is also in ``train``, is never evaluated, and :func:`historical_qrels` refuses
    this split.
    """
    if users not in ("qrels", "all"):
        raise ConfigError(f"full split: users must be 'qrels' or 'all', not {users!r}")
    inter = _by_user(_ordered(collection.interactions))
    if users == "qrels":
        if collection.qrels is None:
            raise ConfigError(f"collection {collection.name!r} has no human qrels; use the full split with "
                              "users='all', or a time split")
        judged = set(collection.qrels.frame.qid.unique())
        ranked = sorted(judged & set(inter.user.unique()))
        if not ranked:
            raise ConfigError(f"no user judged by {collection.name!r}'s qrels has interactions: check that qrels "
                              "topics and profile user ids agree")
    else:
        ranked = sorted(inter.user.unique())
    last = inter[inter.user.isin(set(ranked))].groupby("user", sort=False).tail(1)
    # judged users without a rating cannot be ranked: counted and named, since every measure
    # scores a user a run leaves out as 0
    unranked = sorted(set(collection.qrels.frame.qid.unique()) - set(ranked)) if users == "qrels" else []
    info = {"method": "full", "users": users, "ranked_users": len(ranked),
            "unranked_judged_users": len(unranked), "unranked_judged": unranked[:100],
            "train_interactions": len(inter), "train_users": int(inter.user.nunique()),
            "test": "placeholder (each ranked user's latest interaction, also in train; never evaluated)"}
    return Split(collection, inter.reset_index(drop=True), last.reset_index(drop=True), None, info)


def _per_user_positions(frame: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    f = _by_user(frame)
    pos = f.groupby("user", sort=False).cumcount().to_numpy()
    n = f.groupby("user", sort=False)["user"].transform("size").to_numpy()
    return f, pos, n


def user_ratio_split(collection: Collection, *, ratio: float = 0.8) -> Split:
    """Per user, time-ordered: the first ceil(ratio·n) interactions train, the rest test.

    Ties in time are ordered by item id. A user with one interaction is train only.
    """
    if not 0 < ratio < 1:
        raise ConfigError(f"ratio must be between 0 and 1 (exclusive), got {ratio}")
    _require_order(collection, "user_ratio")
    f, pos, n = _per_user_positions(collection.interactions)
    n_train = np.ceil(ratio * n - 1e-9).astype(np.int64)
    is_train = pos < n_train
    train, test = f[is_train].reset_index(drop=True), f[~is_train].reset_index(drop=True)
    info = {"method": "user_ratio", "ratio": ratio, **_counts(train, test)}
    return Split(collection, train, test, None, info)


def leave_one_out_split(collection: Collection, *, valid: bool = False) -> Split:
    """Per user, the last interaction (by time, then item id) is test; with ``valid`` the one before is validation.

    Users with too few interactions to give every part one row stay train only.
    """
    _require_order(collection, "leave_one_out")
    f, pos, n = _per_user_positions(collection.interactions)
    held = 2 if valid else 1
    eligible = n > held
    is_test = eligible & (pos == n - 1)
    is_valid = eligible & (pos == n - 2) if valid else np.zeros(len(f), dtype=bool)
    train = f[~is_test & ~is_valid].reset_index(drop=True)
    test = f[is_test].reset_index(drop=True)
    val = f[is_valid].reset_index(drop=True) if valid else None
    info = {"method": "leave_one_out", "valid": valid, **_counts(train, test, val)}
    return Split(collection, train, test, val, info)


def timestamp_split(collection: Collection, *, ratios: tuple[float, float, float] = (0.8, 0.1, 0.1),
                    keep_cold_users: bool = False) -> Split:
    """Absolute-timestamp train/valid/test (8:1:1 by default) with two global cuts at quantiles.

    Validation and test keep only users with training history unless ``keep_cold_users``.
    """
    if len(ratios) != 3 or any(r <= 0 for r in ratios):
        raise ConfigError(f"ratios must be three positive numbers, got {ratios}")
    _require_order(collection, "timestamp")
    total = float(sum(ratios))
    q1, q2 = ratios[0] / total, (ratios[0] + ratios[1]) / total
    inter = _ordered(collection.interactions)
    ts = inter.timestamp.to_numpy()
    c1, c2 = _quantile_cut(ts, q1), _quantile_cut(ts, q2)
    train = _by_user(inter[ts < c1])
    valid = _by_user(inter[(ts >= c1) & (ts < c2)])
    test = _by_user(inter[ts >= c2])
    for part, frame in (("train", train), ("validation", valid), ("test", test)):
        if len(frame) == 0:
            raise ConfigError(f"cuts at timestamps {c1} and {c2} leave an empty {part} part (many equal "
                              "timestamps?); choose other ratios or a global time split")
    cold_v = cold_t = 0
    if not keep_cold_users:
        valid, cold_v = _keep_warm(valid, train)
        # the recommender's history for a test user is train + validation
        test, cold_t = _keep_warm(test, pd.concat([train, valid], ignore_index=True))
    info = {"method": "timestamp", "ratios": list(ratios), "cut_timestamps": [c1, c2],
            "keep_cold_users": keep_cold_users, "cold_valid_users_dropped": cold_v,
            "cold_test_users_dropped": cold_t, **_counts(train, test, valid)}
    return Split(collection, train, test, valid, info)


SPLITS: dict[str, Callable[..., Split]] = {
    "global_time": global_time_split,
    "user_ratio": user_ratio_split,
    "leave_one_out": leave_one_out_split,
    "timestamp": timestamp_split,
    "full": full_split,
}


def check_split(name: str) -> str:
    """``name`` when it is a split method, else a ConfigError listing them."""
    if name not in SPLITS:
        raise ConfigError(f"must be one of {', '.join(SPLITS)}, not {name!r}")
    return name


# a settings field naming a split method (train's, an ablation file's)
SplitName = Annotated[str, AfterValidator(lambda value: checked(check_split, value))]


def make_split(collection: Collection, method: str = "global_time", **options) -> Split:
    """Split by a registered method name; unknown methods or options raise ConfigError."""
    import inspect

    if method not in SPLITS:
        raise ConfigError(f"unknown split method {method!r}; choose one of {', '.join(SPLITS)}")
    fn = SPLITS[method]
    accepted = [p for p, v in inspect.signature(fn).parameters.items() if v.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(f"split {method!r} does not take option(s) {unknown}; it accepts {accepted}")
    return fn(collection, **options)


# ---------------------------------------------------------------------------------- historical qrels

def _binary(r: np.ndarray) -> np.ndarray:
    return np.ones(len(r), dtype=np.int64)


def _rating(r: np.ndarray) -> np.ndarray:
    if not np.all(r == np.floor(r)):
        raise ConfigError("rating mapping 'rating' needs whole-number ratings; use 'half_stars' "
                          "(label = 2·rating) for 0.5-step scales")
    return r.astype(np.int64)


def _half_stars(r: np.ndarray) -> np.ndarray:
    doubled = 2 * r
    if not np.all(doubled == np.floor(doubled)):
        raise ConfigError("rating mapping 'half_stars' needs ratings in steps of 0.5")
    return doubled.astype(np.int64)


RATING_LABELS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "binary": _binary,         # every held-out interaction is relevant (label 1)
    "rating": _rating,         # label = the rating (whole stars)
    "half_stars": _half_stars,  # label = 2 × rating (0.5-step scales)
}


def _threshold(t: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda r: (r >= t).astype(np.int64)


def historical_qrels(split: Split, mapping: str | Mapping[float, int] = "binary", part: str = "test",
                     name: str | None = None) -> Qrels:
    """Qrels from the held-out interactions with a declared rating → label mapping.

    ``mapping``: ``binary``, ``rating``, ``half_stars``, ``threshold:T`` (1 if rating >= T, else
    0 — kept as a judged non-relevant) or an explicit {rating: label} dict. The default name,
    ``<collection>-historical-<mapping>``, says which mapping made the labels.
    """
    if part not in ("test", "valid"):
        raise ConfigError(f"part must be 'test' or 'valid', got {part!r}")
    if split.info.get("method") == "full":
        raise ConfigError("the full split holds nothing out: evaluate against the collection's human qrels")
    frame = split.test if part == "test" else split.valid
    if frame is None or len(frame) == 0:
        raise ConfigError(f"the split has no {part} interactions")
    r = frame.rating.to_numpy(dtype=np.float64)
    if isinstance(mapping, Mapping):
        table = {float(k): int(v) for k, v in mapping.items()}
        missing = sorted(set(np.unique(r)) - set(table))
        if missing:
            raise ConfigError(f"rating mapping has no label for rating(s) {missing[:5]}")
        labels = np.array([table[x] for x in r], dtype=np.int64)
        described = "custom"
    elif isinstance(mapping, str) and mapping.startswith("threshold:"):
        try:
            t = float(mapping.split(":", 1)[1])
        except ValueError:
            raise ConfigError(f"threshold mapping needs a number, got {mapping!r}") from None
        labels = _threshold(t)(r)
        described = mapping
    elif mapping in RATING_LABELS:
        labels = RATING_LABELS[mapping](r)
        described = mapping
    else:
        raise ConfigError(f"unknown rating mapping {mapping!r}; choose one of {', '.join(RATING_LABELS)}, "
                          "threshold:T or a {rating: label} dict")
    qname = name or f"{split.collection.name}-historical-{described.replace(':', '')}"
    return Qrels.from_frame(pd.DataFrame({"qid": frame.user, "docid": frame.item, "label": labels}), qname)
