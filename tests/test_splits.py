"""Splits on hand-made interactions; expectations written out from the definitions."""

from __future__ import annotations

import pandas as pd
import pytest

from recjudge.data.collections import Collection
from recjudge.data.splits import (
    SPLITS,
    global_time_split,
    historical_qrels,
    leave_one_out_split,
    make_split,
    timestamp_split,
    user_ratio_split,
)
from recjudge.errors import ConfigError


def collection(rows) -> Collection:
    inter = pd.DataFrame(rows, columns=["user", "item", "rating", "timestamp"])
    inter["rating"] = inter.rating.astype("float64")
    inter["timestamp"] = inter.timestamp.astype("int64")
    return Collection("toy", inter, pd.DataFrame(index=pd.Index(sorted(inter.item.unique()), name="item")))


# ten interactions at times 1..10; user c only appears after the cut
TEN = [
    ("a", "i1", 5, 1), ("a", "i2", 4, 2), ("b", "i1", 3, 3), ("a", "i3", 2, 4), ("b", "i2", 1, 5),
    ("b", "i3", 4, 6), ("a", "i4", 5, 7), ("b", "i4", 2, 8), ("a", "i5", 4, 9), ("c", "i1", 5, 10),
]


def pairs(frame):
    return sorted(zip(frame.user, frame.item))


def test_global_time_quantile_cut_and_cold_users():
    s = global_time_split(collection(TEN))
    # sorted timestamps 1..10, position floor(0.8 * 10) = 8 holds timestamp 9: train is t < 9
    assert s.info["cut_timestamp"] == 9
    assert len(s.train) == 8
    # test rows (a, i5, t=9) and (c, i1, t=10); c has no training history and is dropped
    assert pairs(s.test) == [("a", "i5")]
    assert s.info["cold_test_users_dropped"] == 1
    kept = global_time_split(collection(TEN), keep_cold_users=True)
    assert pairs(kept.test) == [("a", "i5"), ("c", "i1")]


def test_global_time_exact_timestamp_and_ties_go_to_one_side():
    rows = TEN[:-1] + [("b", "i5", 3, 7)]  # a second interaction at t = 7
    s = global_time_split(collection(rows), timestamp=7)
    assert s.info["quantile"] is None and s.info["cut_timestamp"] == 7
    assert pairs(s.test) == [("a", "i4"), ("a", "i5"), ("b", "i4"), ("b", "i5")]  # every t >= 7
    with pytest.raises(ConfigError, match="empty train"):
        global_time_split(collection(TEN), timestamp=0)


def test_splits_do_not_depend_on_row_order():
    shuffled = collection(list(reversed(TEN)))
    for method in SPLITS:
        opts = {"users": "all"} if method == "full" else {}  # the toy collection has no qrels
        a, b = make_split(collection(TEN), method, **opts), make_split(shuffled, method, **opts)
        assert a.train.equals(b.train) and a.test.equals(b.test), method
        assert a.info == b.info


def test_user_ratio_ceil_and_time_order():
    s = user_ratio_split(collection(TEN), ratio=0.8)
    # a has 5 interactions: ceil(0.8 * 5) = 4 train, the latest (i5 at t=9) test
    # b has 4: ceil(3.2) = 4 train, none test; c has 1: train only
    assert pairs(s.test) == [("a", "i5")]
    assert len(s.train) == 9
    s2 = user_ratio_split(collection(TEN), ratio=0.5)
    # a: ceil(2.5) = 3 train → test i4 (t=7), i5 (t=9); b: ceil(2) = 2 → test i3 (t=6), i4 (t=8)
    assert pairs(s2.test) == [("a", "i4"), ("a", "i5"), ("b", "i3"), ("b", "i4")]


def test_leave_one_out_with_time_ties_broken_by_item():
    rows = [("u", "z", 1, 5), ("u", "y", 1, 5), ("u", "x", 1, 1), ("v", "x", 1, 1)]
    s = leave_one_out_split(collection(rows))
    # u's last two share t=5; by item id 'y' < 'z' so 'z' is last; v has one interaction: train only
    assert pairs(s.test) == [("u", "z")]
    sv = leave_one_out_split(collection(rows), valid=True)
    assert pairs(sv.valid) == [("u", "y")] and pairs(sv.test) == [("u", "z")]
    assert pairs(sv.train) == [("u", "x"), ("v", "x")]


def test_timestamp_811():
    s = timestamp_split(collection(TEN))
    # cuts at sorted positions floor(0.8 * 10) = 8 → t=9 and floor(0.9 * 10) = 9 → t=10
    assert s.info["cut_timestamps"] == [9, 10]
    assert pairs(s.valid) == [("a", "i5")]
    assert len(s.test) == 0 and s.info["cold_test_users_dropped"] == 1  # (c, i1) is cold
    assert pairs(s.history()) == pairs(pd.concat([s.train, s.valid]))


# seven interactions at t = 10, 20, …, 70, users alternating so both stay warm
SEVEN = [("a", "i1", 5, 10), ("b", "i1", 4, 20), ("a", "i2", 3, 30), ("b", "i2", 2, 40), ("a", "i3", 1, 50),
         ("b", "i3", 5, 60), ("a", "i4", 4, 70)]


@pytest.mark.parametrize("quantile,cut", [
    (0.8, 60),  # q·n = 5.6: floor → sorted position 5 (0-based) → t = 60; ceil/round would give 70
    (0.3, 30),  # q·n = 2.1: floor → position 2 → t = 30; ceil would give 40, floor − 1 gives 20
    (0.5, 40),  # q·n = 3.5: floor → position 3 → t = 40; round-half-up would give 50
])
def test_global_time_quantile_position_with_a_fractional_q_times_n(quantile, cut):
    s = global_time_split(collection(SEVEN), quantile=quantile)
    assert s.info["cut_timestamp"] == cut
    assert sorted(s.train.timestamp) == [t for t in range(10, cut, 10)]  # strictly before the cut
    assert sorted(s.test.timestamp) == [t for t in range(cut, 80, 10)]


def test_timestamp_split_cuts_with_fractional_positions():
    s = timestamp_split(collection(SEVEN), ratios=(0.7, 0.2, 0.1))
    # q1 = 0.7: 0.7 · 7 = 4.9 → position 4 → t = 50 (round or ceil: 60);
    # q2 = 0.9: 0.9 · 7 = 6.3 → position 6 → t = 70 (floor − 1: 60)
    assert s.info["cut_timestamps"] == [50, 70]
    assert sorted(s.train.timestamp) == [10, 20, 30, 40]
    assert pairs(s.valid) == [("a", "i3"), ("b", "i3")]  # t = 50, 60
    assert pairs(s.test) == [("a", "i4")]  # t = 70


def test_historical_qrels_mappings():
    s = user_ratio_split(collection(TEN), ratio=0.5)
    # test rows: (a, i4, 5), (a, i5, 4), (b, i3, 4), (b, i4, 2)
    def labels(q):
        return {(r.qid, r.docid): r.label for r in q}

    assert set(labels(historical_qrels(s)).values()) == {1}
    assert labels(historical_qrels(s, "threshold:4")) == {("a", "i4"): 1, ("a", "i5"): 1, ("b", "i3"): 1,
                                                          ("b", "i4"): 0}
    assert labels(historical_qrels(s, "rating"))[("b", "i4")] == 2
    assert labels(historical_qrels(s, {5: 3, 4: 2, 2: 0}))[("a", "i4")] == 3
    assert historical_qrels(s, "threshold:4").name == "toy-historical-threshold4"
    with pytest.raises(ConfigError, match="no label for rating"):
        historical_qrels(s, {5: 1})
    half = user_ratio_split(collection([("a", "x", 3.5, 1), ("a", "y", 4.5, 2)]), ratio=0.5)
    with pytest.raises(ConfigError, match="half_stars"):
        historical_qrels(half, "rating")
    assert labels(historical_qrels(half, "half_stars")) == {("a", "y"): 9}  # 2 × 4.5


def test_bad_split_options():
    with pytest.raises(ConfigError, match="unknown split method"):
        make_split(collection(TEN), "random")
    with pytest.raises(ConfigError, match="ratio"):
        make_split(collection(TEN), "global_time", ratio=0.5)
    with pytest.raises(ConfigError, match="quantile"):
        global_time_split(collection(TEN), quantile=1.0)


def test_full_split_ranks_the_qrels_users_and_masks_their_whole_profile(tmp_path):
    """Cranfield setting (ML-32M-ext): train on everything, rank the judged users, mask every rating."""
    import pandas as pd

    from recjudge.data.collections import Collection
    from recjudge.data.splits import historical_qrels, make_split
    from recjudge.data.trec import Qrels, read_run
    from recjudge.errors import ConfigError
    from recjudge.systems import train_systems

    inter = pd.DataFrame({"user": ["a", "a", "a", "b", "b", "c"], "item": ["1", "2", "3", "1", "4", "5"],
                          "rating": 4.0, "timestamp": [1, 2, 300, 4, 5, 6]})
    items = pd.DataFrame({"title": [f"t{i}" for i in range(1, 7)]}, index=pd.Index([str(i) for i in range(1, 7)],
                                                                                     name="item"))
    qrels = Qrels.from_frame(pd.DataFrame({"qid": ["a", "b", "z"], "docid": ["6", "6", "6"], "label": [3, 1, 2]}))
    coll = Collection("tiny", inter, items, qrels)
    split = make_split(coll, "full")
    assert split.test_users == ["a", "b"]            # z has no profile; c is not judged
    assert len(split.train) == len(inter)            # nothing held out
    assert split.info["unranked_judged_users"] == 1
    with pytest.raises(ConfigError, match="holds nothing out"):
        historical_qrels(split)
    res = train_systems(split, systems=["Pop"], out_dir=tmp_path / "runs", k=10)
    run = read_run(res[0].run_path).frame
    assert sorted(run.qid.unique()) == ["a", "b"]
    seen = set(zip(inter.user, inter.item))
    assert not seen & set(zip(run.qid, run.docid))   # item 3 (rated after any time cut) is masked too
    # the catalogue is the items anyone interacted with (1–5); a has rated 1, 2, 3
    assert set(run[run.qid == "a"].docid) == {"4", "5"}
