"""The judge and its endpoints, against the local OpenAI server: credentials in URLs, quiet HTTP
loggers, cache identity."""

from __future__ import annotations

import logging
import sqlite3

import pytest
from fake_openai import FakeOpenAI
from judge_data import movies, pairs_for

from recjudge.cli import main
from recjudge.errors import ConfigError
from recjudge.judging import JudgeSettings, judge_pairs

FAST = dict(backoff_initial=0.01, backoff_max=0.05, concurrency=4, timeout=5.0, model="fake-model")
PASSWORD = "hunter2PASSWORD"


def with_userinfo(url: str) -> str:
    return url.replace("http://", f"http://alice:{PASSWORD}@")


# ------------------------------------------------------------------------------------ credentials

def test_credentials_in_the_base_url_are_refused_without_echoing_them(fake_openai):
    url = with_userinfo(fake_openai.url)
    with pytest.raises(ConfigError) as err:
        JudgeSettings(base_url=url, **FAST)
    text = str(err.value)
    assert PASSWORD not in text and "alice" not in text
    assert fake_openai.url in text and "api_key_env=" in text  # named as Python's caller wrote it
    # one of several endpoints is enough
    with pytest.raises(ConfigError):
        JudgeSettings(base_url=(fake_openai.url, url), **FAST)


def test_cli_refuses_credentials_in_the_base_url_with_exit_2(tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    run = tmp_path / "sys.run"
    run.write_text("u0 Q0 10 1 2 sys\nu0 Q0 11 2 1 sys\n")
    coll = tmp_path / "tiny"
    coll.mkdir()
    (coll / "tiny.inter").write_text("user_id:token\titem_id:token\trating:float\n" "u0\t1\t4\nu0\t2\t5\n")
    (coll / "tiny.item").write_text("item_id:token\tmovie_title:token_seq\n"
                                    + "".join(f"{k}\tMovie {k}\n" for k in range(20)))
    with FakeOpenAI() as server:
        code = main(["-v", "judge", "--runs", str(run), "--collection", str(coll), "--split", "none",
                     "--out", str(tmp_path / "j.qrels"), "--cache", str(tmp_path / "c.sqlite"),
                     "--base-url", with_userinfo(server.url)])
        assert code == 2 and server.log == []
    out = capsys.readouterr()
    assert "credentials" in out.err
    for text in (out.out, out.err, caplog.text):
        assert PASSWORD not in text
    assert not any(PASSWORD.encode() in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())


def test_a_query_string_in_the_base_url_is_refused_without_echoing_secrets(fake_openai):
    secret = "QUERYSECRET123456"
    with pytest.raises(ConfigError) as err:
        JudgeSettings(base_url=fake_openai.url + f"?api-version=1&api-key={secret}", **FAST)
    text = str(err.value)
    assert "query string" in text and secret not in text and fake_openai.url + "?api-version=1" in text
    assert fake_openai.log == []


def test_the_redactor_scrubs_url_secrets():
    """Error texts (a connection error may quote the full URL) go through the client's redactor."""
    from recjudge.judging.client import Redactor
    from recjudge.urls import url_secrets

    assert url_secrets("http://alice:pw0@h/v1?api-key=K1&api-version=2") == ("alice:pw0", "alice", "pw0", "K1")
    assert Redactor("sk-x", *url_secrets("http://h/v1?token=TOKEN99"))("GET http://h/v1?token=TOKEN99") == \
        "GET http://h/v1?token=[redacted]"


def test_http_loggers_stay_quiet_at_debug(fake_openai, caplog):
    """-v sets the root logger to DEBUG; the HTTP stack's request lines (and headers) stay out."""
    caplog.set_level(logging.DEBUG)
    logging.getLogger("httpx2").setLevel(logging.DEBUG)  # as OPENAI_LOG=debug or a user's config would
    logging.getLogger("openai").setLevel(logging.DEBUG)
    res = judge_pairs(pairs_for([10, 11]), movies(), JudgeSettings(base_url=fake_openai.url, **FAST))
    assert res.summary.judged == 6 and len(fake_openai.chat_log()) == 6
    noisy = [r for r in caplog.records if r.name.split(".")[0] in ("httpx", "httpx2", "httpcore", "httpcore2",
                                                                      "openai") and r.levelno < logging.WARNING]
    assert noisy == []
    assert "authorization" not in caplog.text.lower() and "sk-" not in caplog.text


# --------------------------------------------------------------------------------- cache identity

def test_every_component_changes_the_cache_key():
    from recjudge.judging.cache import cache_key

    base = dict(template_sha="t" * 64, model="m", params={"structured": "auto"}, prompt_sha="p" * 64, repeat=0,
                endpoint="http://a/v1")
    key = cache_key(**base)
    assert cache_key(**base) == key  # deterministic
    # parameter order does not matter, values do
    assert cache_key(**{**base, "params": {"temperature": 0, "structured": "auto"}}) == \
        cache_key(**{**base, "params": {"structured": "auto", "temperature": 0}})
    for change in ({"template_sha": "u" * 64}, {"model": "m2"}, {"params": {"structured": "off"}},
                   {"prompt_sha": "q" * 64}, {"repeat": 1}, {"endpoint": "http://b/v1"}):
        assert cache_key(**{**base, **change}) != key, change


def _template_copy(tmp_path, name: str):
    """The shipped baseline template under another name: it renders the same prompt, but it is
    another template (another hash; a comment alone would not be)."""
    from recjudge.judging.prompts import load_template

    text = open(load_template("baseline").source, encoding="utf-8").read()
    path = tmp_path / f"baseline-{name}.toml"
    path.write_text(text.replace('name = "baseline"', f'name = "baseline-{name}"'))
    return str(path)


@pytest.fixture
def two_servers():
    with FakeOpenAI() as a, FakeOpenAI() as b:
        yield a, b


PAIRS = pairs_for([10, 11, 12], ["u0", "u1"])  # 6 calls


@pytest.mark.parametrize("change", ["nothing", "model", "temperature", "structured", "template", "endpoint",
                                    "fields", "repeat"])
def test_a_change_of_any_key_component_misses_the_cache(two_servers, tmp_path, change):
    a, b = two_servers
    cache = tmp_path / "cache.sqlite"
    template = _template_copy(tmp_path, "first")
    base = dict(FAST, base_url=a.url, prompt=template)
    judge_pairs(PAIRS, movies(), JudgeSettings(**base), cache_path=cache)
    assert len(a.chat_log()) == 6
    changed = {
        "nothing": {}, "model": {"model": "other-model"}, "temperature": {"params": {"temperature": 0.5}},
        "structured": {"structured": "off"}, "template": {"prompt": _template_copy(tmp_path, "second")},
        "endpoint": {"base_url": b.url}, "fields": {"fields": "title"}, "repeat": {"repeats": 2},
    }[change]
    res = judge_pairs(PAIRS, movies(), JudgeSettings(**{**base, **changed}), cache_path=cache)
    asked = len(a.chat_log()) - 6 + len(b.chat_log())
    if change == "nothing":
        assert asked == 0 and res.summary.cache_hits == 6  # a hit when nothing changes
    elif change == "repeat":
        assert asked == 6 and res.summary.cache_hits == 6  # repeat 0 is a hit, repeat 1 a miss
    else:
        assert asked == 6 and res.summary.cache_hits == 0
    if change == "endpoint":
        assert len(b.chat_log()) == 6  # the other server answered, and its answers are recorded as its own
        with sqlite3.connect(cache) as db:
            assert sorted(db.execute("SELECT endpoint, COUNT(*) FROM calls GROUP BY endpoint")) == \
                sorted([(a.url, 6), (b.url, 6)])


def test_an_older_cache_schema_is_refused_with_the_way_out(fake_openai, tmp_path):
    cache = tmp_path / "old.sqlite"
    with sqlite3.connect(cache) as db:
        db.execute("CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema', '1')")
    db.close()
    with pytest.raises(ConfigError) as err:
        judge_pairs(PAIRS, movies(), JudgeSettings(base_url=fake_openai.url, **FAST), cache_path=cache)
    text = str(err.value)
    assert str(cache) in text and "schema version 1" in text and "--cache" in text
    assert fake_openai.log == []


def test_a_file_that_is_not_a_cache_is_refused(fake_openai, tmp_path):
    cache = tmp_path / "notes.sqlite"
    cache.write_text("these are my notes, not a database\n" * 100)
    with pytest.raises(ConfigError) as err:
        judge_pairs(PAIRS, movies(), JudgeSettings(base_url=fake_openai.url, **FAST), cache_path=cache)
    assert str(cache) in str(err.value) and fake_openai.log == []
    assert cache.read_text().startswith("these are my notes")


def test_an_answered_row_is_never_replaced_and_put_returns_what_the_cache_holds(tmp_path):
    from recjudge.judging.cache import CallRecord, JudgeCache

    with JudgeCache(tmp_path / "c.sqlite") as cache:
        first = CallRecord("k", "u0", ("1",), 0, "ok", labels={"1": 3}, endpoint="http://a/v1")
        assert cache.put(first, "t", "m", {}, "p") == first
        # another run answered the same call: the cache keeps (and returns) the first answer
        second = CallRecord("k", "u0", ("1",), 0, "ok", labels={"1": 5}, endpoint="http://b/v1")
        assert cache.put(second, "t", "m", {}, "p").labels == {"1": 3}
        failed = CallRecord("k", "u0", ("1",), 0, "failed", "server_error")
        assert cache.put(failed, "t", "m", {}, "p").labels == {"1": 3}
        assert cache.get("k").endpoint == "http://a/v1" and cache.count() == 1


def test_cooldown_of_an_endpoint_that_keeps_failing_stays_bounded():
    # thousands of consecutive failures (a long outage) must not overflow the doubling cooldown
    import time

    from recjudge.judging.endpoints import COOLDOWN_MAX, Endpoint

    ep = Endpoint.__new__(Endpoint)
    ep.failures = ep.errors = 0
    ep.cool_until = 0.0
    for _ in range(5000):
        ep.failed(1.0, None)
    assert ep.failures == 5000
    assert ep.cool_until - time.monotonic() <= COOLDOWN_MAX + 1
