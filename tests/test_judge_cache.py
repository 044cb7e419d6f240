"""The judgment cache under faults: foreign and damaged files refused unchanged, rows checked like
answers, one process at a time, and a write that cannot succeed named with its cause."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

import pytest

from recjudge.errors import ConfigError
from recjudge.judging.cache import APPLICATION_ID, CacheWriteError, CallRecord, JudgeCache


def _rec(key="k1", items=("10",), labels=None, status="ok") -> CallRecord:
    return CallRecord(key=key, qid="u1", items=items, repeat=0, status=status,
                      labels={"10": 4} if labels is None else labels)


def _put(cache: JudgeCache, rec: CallRecord) -> CallRecord:
    return cache.put(rec, "tpl", "model", {}, "psha")


# ------------------------------------------------------------------------------ foreign and damaged files

def test_someone_elses_sqlite_file_is_refused_and_left_unchanged(tmp_path):
    path = tmp_path / "app.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    before = path.read_bytes()
    with pytest.raises(ConfigError, match=r"app.sqlite is not a recjudge judgment cache \(its tables: customers\); "
                                          "it was left unchanged"):
        JudgeCache(path)
    assert path.read_bytes() == before and not (tmp_path / "app.sqlite-wal").exists()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_file_marked_by_another_program_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA application_id = 1234")
        db.execute("CREATE TABLE calls (key TEXT)")
        db.execute("CREATE TABLE meta (k TEXT, v TEXT)")
    with pytest.raises(ConfigError, match=r"another program's SQLite file \(application_id 0x4d2\)"):
        JudgeCache(path)


def test_a_new_cache_is_marked_as_recjudges(tmp_path):
    path = tmp_path / "c.sqlite"
    JudgeCache(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_an_unmarked_cache_of_this_schema_is_adopted(tmp_path):
    """A cache written before the mark: its tables are recjudge's, so it is kept and marked."""
    path = tmp_path / "c.sqlite"
    with JudgeCache(path) as cache:
        _put(cache, _rec())
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA application_id = 0")
    with JudgeCache(path, scale=(0, 7)) as cache:
        assert set(cache.get_ok(["k1"])) == {"k1"}


@pytest.mark.parametrize("damage, message", [
    ("DROP TABLE meta", r"is damaged: table\(s\) meta missing"),
    ("ALTER TABLE calls DROP COLUMN endpoint", r"is damaged: table calls lacks column\(s\) endpoint"),
])
def test_a_damaged_cache_says_what_is_missing(tmp_path, damage, message):
    path = tmp_path / "c.sqlite"
    JudgeCache(path).close()
    with sqlite3.connect(path) as db:
        db.execute(damage)
    with pytest.raises(ConfigError, match=message):
        JudgeCache(path)


# ------------------------------------------------------------------------------ rows checked like answers

@pytest.mark.parametrize("labels_json, why", [
    ('{"10": 99}', "label 99 of item 10 is outside the scale 0-7"),
    ('{"10": -5}', "label -5 of item 10 is outside the scale 0-7"),
    ('{"10": "4"}', "label '4' of item 10 is not a whole number"),
    ('{"10": true}', "label True of item 10 is not a whole number"),
    ('"four"', "labels 'four' are not a mapping of item to label"),
    ("{", "unreadable row"),
    ("{}", "labels for [] where the call asked for ['10']"),
    ('{"11": 4}', "labels for ['11'] where the call asked for ['10']"),
])
def test_an_invalid_cached_row_is_a_miss_that_is_asked_again(tmp_path, labels_json, why):
    path = tmp_path / "c.sqlite"
    with JudgeCache(path) as cache:
        _put(cache, _rec())
    with sqlite3.connect(path) as db:
        db.execute("UPDATE calls SET labels = ? WHERE key = 'k1'", (labels_json,))
    with JudgeCache(path, scale=(0, 7)) as cache:
        assert cache.get_ok(["k1"]) == {}
        assert len(cache.invalid) == 1 and cache.invalid[0][0] == "k1" and why in cache.invalid[0][1]
        # the new answer replaces the invalid row (an ok row is otherwise never replaced)
        stored = _put(cache, _rec(labels={"10": 5}))
        assert stored.labels == {"10": 5}
        assert cache.get_ok(["k1"])["k1"].labels == {"10": 5}


# ------------------------------------------------------------------------------ one process at a time

_HOLD = """
import sys, time
from recjudge.judging.cache import JudgeCache
c = JudgeCache(sys.argv[1])
print("ready", flush=True)
time.sleep(float(sys.argv[2]))
c.close()
"""


def _src_env():
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_a_second_process_on_the_same_cache_is_refused_at_once_naming_the_first(tmp_path):
    path = tmp_path / "c.sqlite"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(path), "30"], stdout=subprocess.PIPE, text=True,
                              env=_src_env())
    try:
        assert holder.stdout.readline().strip() == "ready"
        started = time.monotonic()
        with pytest.raises(ConfigError, match=rf"is in use by another recjudge run \(PID {holder.pid}\); wait"):
            JudgeCache(path)
        assert time.monotonic() - started < 2  # at once, not after a busy timeout
    finally:
        holder.kill()
        holder.wait()
    JudgeCache(path).close()  # the lock went with the process


def test_opens_within_one_process_share_the_lock(tmp_path):
    path = tmp_path / "c.sqlite"
    a = JudgeCache(path)
    b = JudgeCache(path)
    b.close()
    _put(a, _rec())  # still usable after the other handle closed
    a.close()


_LOCK = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(30)
"""


def test_a_write_blocked_by_another_process_names_the_file_and_its_pid(tmp_path, monkeypatch):
    import recjudge.judging.cache as cache_mod

    monkeypatch.setattr(cache_mod, "BUSY_SECONDS", 0.5)
    path = tmp_path / "c.sqlite"
    cache = JudgeCache(path)
    _put(cache, _rec())
    locker = subprocess.Popen([sys.executable, "-c", _LOCK, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout.readline().strip() == "locked"
        cache._db.execute(f"PRAGMA busy_timeout = {int(cache_mod.BUSY_SECONDS * 1000)}")
        with pytest.raises(CacheWriteError) as exc:
            _put(cache, _rec(key="k2"))
        text = str(exc.value)
        assert str(path) in text and f"locked by PID {locker.pid}" in text and "no further call is made" in text
    finally:
        locker.kill()
        locker.wait()
        cache.close()


def test_a_cache_locked_by_another_process_at_open_is_refused_naming_the_pid(tmp_path, monkeypatch):
    """The lock is held before the judge opens the cache: a clear refusal naming the file and the
    holder, within the busy time, and the other process's file left as it was."""
    import recjudge.judging.cache as cache_mod

    monkeypatch.setattr(cache_mod, "BUSY_SECONDS", 0.5)
    path = tmp_path / "c.sqlite"
    cache = JudgeCache(path)
    _put(cache, _rec())
    cache.close()
    before = path.read_bytes()
    locker = subprocess.Popen([sys.executable, "-c", _LOCK, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout.readline().strip() == "locked"
        with pytest.raises(ConfigError) as exc:
            JudgeCache(path)
        text = str(exc.value)
        assert str(path) in text and f"locked by PID {locker.pid}" in text and "--cache" in text
    finally:
        locker.kill()
        locker.wait()
    assert path.read_bytes() == before
    with JudgeCache(path) as again:  # usable once the other process is gone
        assert again.get(_rec().key) is not None


def test_a_full_cache_names_the_file_and_the_free_space(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = JudgeCache(path)
    # SQLite's own limit stands in for a full disk: the same error, SQLITE_FULL
    (pages,) = cache._db.execute("PRAGMA page_count").fetchone()
    cache._db.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(CacheWriteError, match=r"the disk is full \([\d,]+ bytes free on "):
        for i in range(200):
            _put(cache, CallRecord(key=f"k{i}", qid="u1", items=("10",), repeat=0, status="ok", labels={"10": 3},
                                   raw="x" * 4000))
    cache.close()


# ------------------------------------------------------------------------------ smaller faults

def test_a_fragment_in_the_endpoint_url_is_refused():
    from recjudge.judging import JudgeSettings

    with pytest.raises(ConfigError, match=r"http://127.0.0.1:8000/v1#… carries a #fragment; give base_url= without"):
        JudgeSettings(base_url="http://127.0.0.1:8000/v1#secret", model="m")
    with pytest.raises(ConfigError, match="carries a #fragment"):
        JudgeSettings(base_url="http://127.0.0.1:8000/v1#", model="m")


def test_a_cache_on_a_full_disk_is_refused_before_any_call(tmp_path, fake_openai):
    from judge_data import movies, pairs_for

    from recjudge.judging import JudgeSettings, judge_pairs

    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)],
                                           capture_output=True).returncode != 0:
        pytest.skip("a tmpfs cannot be mounted here (needs root and mount)")
    try:
        path = disk / "c.sqlite"
        JudgeCache(path).close()
        with open(disk / "filler", "wb", buffering=0) as fh:  # the disk full to the last byte
            try:
                while True:
                    fh.write(b"\0" * 4096)
                    fh.flush()
            except OSError:
                pass
        with pytest.raises(ConfigError, match=r"c.sqlite could not be opened: the disk is full \([\d,]+ bytes free"):
            judge_pairs(pairs_for([10, 11]), movies(), JudgeSettings(base_url=fake_openai.url, model="m", yes=True),
                        cache_path=path)
        assert fake_openai.chat_log() == []  # nothing paid for an answer the cache could not keep
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
