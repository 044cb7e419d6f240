"""The training cache trusts a run file only while it is byte for byte the file it wrote."""

from __future__ import annotations

import hashlib
import io
import json
import re

import pandas as pd
import pytest

from recjudge.data.collections import Collection
from recjudge.data.splits import global_time_split
from recjudge.systems import train_systems


@pytest.fixture
def split():
    # three users with two training items each and one test item after t = 10
    inter = pd.DataFrame({"user": ["u1", "u1", "u2", "u2", "u3", "u3", "u1", "u2", "u3"],
                          "item": ["a", "b", "a", "c", "b", "d", "c", "b", "a"],
                          "rating": 4.0, "timestamp": [1, 2, 3, 4, 5, 6, 10, 11, 12]})
    coll = Collection("t", inter, pd.DataFrame(index=pd.Index(["a", "b", "c", "d"], name="item")))
    return global_time_split(coll, timestamp=10)


def train(split, out, messages=None):
    return train_systems(split, systems=["Pop"], out_dir=out, k=3,
                         progress=(messages.append if messages is not None else lambda m: None))[0]


def test_sidecar_keeps_the_sha256_of_the_run_as_written(split, tmp_path):
    first = train(split, tmp_path)
    assert first.status == "trained"
    meta = json.loads((tmp_path / "Pop.json").read_text())
    assert meta["run_sha256"] == hashlib.sha256((tmp_path / "Pop.run").read_bytes()).hexdigest()
    assert train(split, tmp_path).status == "cached"


def test_a_truncated_run_with_a_foreign_item_is_retrained(split, tmp_path):
    train(split, tmp_path)
    run = tmp_path / "Pop.run"
    original = run.read_bytes()
    # the reported case: the run cut to 5 lines, one of them naming an item the catalogue lacks
    lines = original.decode().splitlines()[:4] + ["u1 Q0 FOREIGN 5 0.5 Pop"]
    run.write_text("\n".join(lines) + "\n")
    messages = []
    again = train(split, tmp_path, messages)
    assert again.status == "trained"
    assert run.read_bytes() == original  # the same deterministic run is back
    assert any("run file changed" in m and "retraining" in m for m in messages)


def test_a_sidecar_without_a_hash_is_not_trusted(split, tmp_path):
    train(split, tmp_path)
    meta_path = tmp_path / "Pop.json"
    meta = json.loads(meta_path.read_text())
    del meta["run_sha256"]  # e.g. written by a version that kept no hash
    meta_path.write_text(json.dumps(meta))
    messages = []
    assert train(split, tmp_path, messages).status == "trained"
    assert any("no hash" in m for m in messages)
    assert "run_sha256" in json.loads(meta_path.read_text())


def test_a_sidecar_that_is_not_an_object_means_retrain(split, tmp_path):
    train(split, tmp_path)
    (tmp_path / "Pop.json").write_text("[1, 2]")
    assert train(split, tmp_path).status == "trained"


def test_the_results_table_pads_every_column_but_the_last():
    from pathlib import Path

    from recjudge.systems import TrainResult, results_table

    results = [TrainResult("pop", "Pop", "trained", Path("runs/x/pop.run"), "k", 1.23, 1.0, 100, 0.31),
               TrainResult("bpr-long", "BPR", "failed", None, "k", 12.0, error="ValueError: bad")]
    assert results_table(results) == ("system    model  status   seconds  users  tied@k  note\n"
                                      "pop       Pop    trained  1.2      100    31%     runs/x/pop.run\n"
                                      "bpr-long  BPR    failed   12.0                    ValueError: bad")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_train_shows_a_bar_on_a_terminal_and_only_its_lines_elsewhere(split, tmp_path):
    from recjudge.progress import Reporter

    screen = _Terminal()
    train_systems(split, systems=["Pop", "Random"], out_dir=tmp_path / "a", k=3, progress=Reporter(screen))
    text = screen.getvalue()
    assert "[1/2] Pop: training Pop" in text and "[2/2] Random: training Random" in text
    assert re.search(r"train .*2/2 systems \(100%\)[^;]*; 2 trained", text)
    plain = io.StringIO()  # CI logs: the lines, no bar and no meter line (they say [n/N] already)
    train_systems(split, systems=["Pop", "Random"], out_dir=tmp_path / "a", k=3, progress=Reporter(plain))
    assert plain.getvalue().splitlines() == [f"[1/2] Pop: cached ({tmp_path / 'a' / 'Pop.run'})",
                                             f"[2/2] Random: cached ({tmp_path / 'a' / 'Random.run'})"]
