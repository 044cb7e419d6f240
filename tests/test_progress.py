"""Progress of long work: the text (done of total, rate, time left, counts, money), its throttling in
plain mode, the live bar on a terminal, and the judge's meter (answered / cached / failed, $ spent)."""

from __future__ import annotations

import functools
import io
import json
import re

from fake_openai import Reply
from judge_data import movies, pairs_for
from rich.console import Console
from test_judge_cli import base_args, workspace  # noqa: F401 (a fixture)

import recjudge.judging.orchestrate as orchestrate
from recjudge.judging import JudgeSettings, judge_pairs
from recjudge.progress import Meter, Reporter, duration, meter, progress_text

FAST = dict(backoff_initial=0.01, backoff_max=0.05, concurrency=2, timeout=10.0, model="fake-model")


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_text_says_done_of_total_rate_time_left_counts_and_money():
    # 40 of 100 in 20 s: 2 a second, 60 left take 30 s
    assert progress_text(40, 100, "calls", 20.0, {"answered": 35, "failed": 5, "from cache": 12}, 0.01234) == \
        "40/100 calls (40%), 2.0/s, ETA 30 s; 35 answered, 5 failed, 12 from cache; $0.0123 spent"
    # 3 of 10 in 6 min: 0.5 a minute, 7 left take 14 min
    assert progress_text(3, 10, "systems", 360.0) == "3/10 systems (30%), 0.5/min, ETA 14 min 00 s"
    assert progress_text(0, 1_500, "calls", 9.0) == "0/1,500 calls (0%)"  # no rate before the first
    assert progress_text(5, 5, "calls", 2.0) == "5/5 calls (100%), 2.5/s"  # nothing left: no ETA
    assert [duration(s) for s in (42, 245, 7_800)] == ["42 s", "4 min 05 s", "2 h 10 min"]


def test_plain_lines_come_at_most_every_few_seconds_and_not_at_the_close():
    lines, clock = [], Clock()
    m = meter(lines.append, "judge", 10, "calls", every=5.0)
    m._clock = clock
    m.started = m._last = clock.now
    for t, done in ((1, 1), (5, 2), (6, 3), (10, 4)):
        clock.now = 100.0 + t
        m.update(done, {"answered": done})
    m.close()
    assert lines == ["judge: 2/10 calls (20%), 0.4/s, ETA 20 s; 2 answered",
                     "judge: 4/10 calls (40%), 0.4/s, ETA 15 s; 4 answered"]
    m.update(9)  # closed: nothing more
    assert len(lines) == 2
    quiet = meter(lines.append, "train", 3, "systems", every=None)  # its own lines say how far it is
    quiet.update(1)
    assert len(lines) == 2


def test_a_reporter_off_a_terminal_writes_plain_lines_to_its_stream():
    stream = io.StringIO()  # not a terminal, as in CI logs
    say = Reporter(stream)
    m = say.meter("judge", 4, "calls", every=0.0)
    say("plan: 4 calls")
    m.update(2, {"answered": 2})
    m.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "plan: 4 calls" and lines[1].startswith("judge: 2/4 calls (50%), ") and len(lines) == 2


def test_a_reporter_on_a_terminal_shows_a_live_bar_with_messages_above_it():
    stream, screen = io.StringIO(), io.StringIO()
    say = Reporter(stream)
    console = Console(file=screen, force_terminal=True, width=160, color_system=None)
    m = say.meter("judge", 4, "calls", console=console)
    assert isinstance(m, Meter) and m.every is None  # the bar, no plain lines
    say("context overflow: u1")
    m.update(3, {"answered": 2, "failed": 1, "from cache": 5}, 0.5)
    m.close()
    text = screen.getvalue()
    assert "context overflow: u1" in text
    assert re.search(r"judge .*3/4 calls \(75%\), [\d.]+/(s|min)(, ETA [^;]+)?; 2 answered, 1 failed, 5 from cache; "
                     r"\$0\.5000 spent", text)
    assert stream.getvalue() == ""  # the bar and the messages went to the terminal's console
    say("after")  # the bar is gone: plain lines again
    assert stream.getvalue() == "after\n"


def test_the_judge_meter_counts_calls_by_outcome_and_the_money_spent(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setattr(orchestrate, "meter", functools.partial(orchestrate.meter, every=0.0))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-model": {"input": 1000.0, "output": 1000.0}}))  # $0.001 per token
    cache = tmp_path / "cache.sqlite"
    config = JudgeSettings(base_url=fake_openai.url, prices=str(prices), max_cost=100.0, **FAST)
    judge_pairs(pairs_for([10, 11], ["u0"]), movies(), config, cache_path=cache, progress=lambda m: None)
    lines = []
    res = judge_pairs(pairs_for([10, 11, 12, 13], ["u0"]), movies(), config, cache_path=cache,
                      progress=lines.append)
    meters = [ln for ln in lines if ln.startswith("judge: ")]
    # two calls made (the other two were cached by the first run), each line one more
    assert [m.split(" calls")[0] for m in meters] == ["judge: 1/2", "judge: 2/2"]
    spent = float(re.search(r"\$([\d.]+) spent", meters[-1]).group(1))
    assert meters[-1].endswith(f"; 2 answered, 0 failed, 2 from cache; ${spent:.4f} spent")
    assert abs(spent - res.summary.cost) < 1e-4 and spent > 0


def test_a_failed_call_is_never_counted_as_answered(fake_openai, monkeypatch):
    monkeypatch.setattr(orchestrate, "meter", functools.partial(orchestrate.meter, every=0.0))
    fake_openai.rule = lambda call: Reply(500, "down")
    lines = []
    judge_pairs(pairs_for([10, 11], ["u0"]), movies(), JudgeSettings(base_url=fake_openai.url, max_attempts=1,
                                                                     **FAST), progress=lines.append)
    last = [ln for ln in lines if ln.startswith("judge: ")][-1]
    assert last.startswith("judge: 2/2 calls (100%)") and last.endswith("; 0 answered, 2 failed, 0 from cache")
    assert "spent" not in last  # an unpriced model: no money figure rather than $0


def test_the_cli_shows_progress_on_stderr_and_nothing_of_it_on_stdout(workspace, capsys, monkeypatch):
    from fake_openai import FakeOpenAI

    from recjudge.cli import main

    monkeypatch.setattr(orchestrate, "meter", functools.partial(orchestrate.meter, every=0.0))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeOpenAI() as server:
        assert main(base_args(workspace) + ["--base-url", server.url, "--model", "fake-model", "--yes"]) == 0
    out = capsys.readouterr()
    # captured stderr is no terminal: plain lines, one per call here (5 users x 8 items, one per call)
    lines = [ln for ln in out.err.splitlines() if ln.startswith("judge: ")]
    assert len(lines) == 40 and lines[-1].startswith("judge: 40/40 calls (100%), ")
    assert lines[-1].endswith("; 40 answered, 0 failed, 0 from cache")
    assert "judge: " not in out.out and "calls made" in out.out
