"""recjudge annotate in a real browser: headless Chromium driven by Playwright (the system's Chromium,
no browser download). Labelling by keyboard through a server killed halfway, hostile item text that
must stay text, and two assessors at once. Without Playwright or a Chromium the tests skip with the
reason; CI installs both (.ci/run)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import recjudge as rj
from recjudge.annotation.log import log_name, read_logs

from annotate_data import HOSTILE, workspace
from conftest import REPO

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed: pip install -e '.[dev]'")
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: install it (Debian: apt-get install -y chromium)")
VIEWPORT = {"width": 1280, "height": 900}


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield b
        b.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``recjudge annotate`` in a subprocess; ``url`` is the one it prints."""

    def __init__(self, args: list[str], cwd: Path):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, "-c", "import sys; from recjudge.cli import main; "
                                      "sys.exit(main(sys.argv[1:]))", "annotate", *args], cwd=cwd, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        found = threading.Event()

        def read():
            for line in self.proc.stdout:
                self.lines.append(line)
                if line.startswith("annotate: open "):
                    found.set()
        threading.Thread(target=read, daemon=True).start()
        if not found.wait(60):
            self.proc.kill()
            raise AssertionError(f"the server printed no URL: {self.lines} {self.proc.stderr.read()[-2000:]}")
        self.url = next(line for line in self.lines if line.startswith("annotate: open ")).split()[2]

    def stop(self, sig=signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(30)


def _current(page) -> str | None:
    return page.evaluate("document.getElementById('done').hidden ? document.getElementById('task').dataset.task : null")


def _press(page, key: str) -> str | None:
    """Press ``key`` on the task shown; wait until the next task (or the end) is shown."""
    before = _current(page)
    page.keyboard.press(key)
    page.wait_for_function("(prev) => !document.getElementById('done').hidden || "
                           "document.getElementById('task').dataset.task !== prev", arg=before, timeout=10000)
    return before


def _qrels(path: Path) -> dict:
    f = rj.read_qrels(path).frame
    return {(q, d): int(label) for q, d, label in zip(f.qid, f.docid, f.label)}


def test_twenty_labels_by_keyboard_survive_a_killed_server(browser, tmp_path):
    space = workspace(tmp_path, users=4)
    port = _free_port()
    args = ["--runs", "sys.run", "--collection", "tiny", "--split", "none", "--depth", "5", "--out", "out",
            "--annotator", "alice", "--port", str(port), "--prompt", "defined-scale"]
    server = Server(args, space)
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server.url)
    page.wait_for_selector("body[data-ready='1']")
    pressed: dict[tuple[str, str], int] = {}
    for i in range(10):
        label = (3 * i + 1) % 8
        task = _press(page, str(label))
        pressed[tuple(task.split("\t"))] = label
    assert server.stop(signal.SIGKILL) == -signal.SIGKILL  # no export, no goodbye: only the log
    assert len(read_logs(space / "out" / "labels")["alice"].labels) == 10
    server = Server(args, space)  # the same port: the open tab carries on (a new CSRF token, fetched once)
    assert "10 labels already in" in "".join(server.lines) + server.proc.stderr.readline()
    for i in range(10, 20):
        label = (3 * i + 1) % 8
        task = _press(page, str(label))
        pressed[tuple(task.split("\t"))] = label
    assert page.locator("#done").is_visible() and "20 of 20 labelled" in page.inner_text("#progress")
    assert server.stop() == 0  # SIGTERM: the qrels are exported on the way out
    assert _qrels(space / "out" / "qrels" / f"{log_name('alice')}.qrels") == pressed
    assert len(pressed) == 20


def test_undo_skip_flag_and_note_by_keyboard(browser, tmp_path):
    space = workspace(tmp_path, users=1)
    server = Server(["--runs", "sys.run", "--collection", "tiny", "--split", "none", "--depth", "3", "--out", "out",
                     "--annotator", "bo"], space)
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server.url)
    page.wait_for_selector("body[data-ready='1']")
    first = _press(page, "2")
    page.keyboard.press("u")  # back to the first task, its label taken back
    page.wait_for_function("(t) => document.getElementById('task').dataset.task === t", arg=first)
    page.keyboard.press("f")
    page.wait_for_selector("#flag:not([hidden])")
    page.keyboard.press("n")
    page.keyboard.type("seen it twice")
    page.keyboard.press("Enter")
    assert _press(page, "5") == first
    assert not page.locator("#flag").is_visible()  # the next task is not flagged
    skipped = _press(page, "s")
    third = _press(page, "0")
    assert _press(page, "7") == skipped  # a skipped task comes back last
    assert server.stop() == 0
    state = read_logs(space / "out" / "labels")["bo"]
    assert state.labels == {first: 5, third: 0, skipped: 7}
    assert state.flagged == {first} and state.notes == {first: "seen it twice"}


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_hostile_item_text_renders_as_text(browser, tmp_path):
    space = workspace(tmp_path, users=1, hostile=True)
    # u0 rated items 0-5 (hostile titles in its history); the candidates 6-9 are hostile too
    (space / "pairs.qrels").write_text("".join(f"u0 0 {k} 0\n" for k in (6, 7, 8, 9)))
    server = Server(["--pairs", "pairs.qrels", "--collection", "tiny", "--split", "none", "--out", "out",
                     "--annotator", "eve", "--fields", "title"], space)
    page = browser.new_page(viewport=VIEWPORT)
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(server.url)
    page.wait_for_selector("body[data-ready='1']")
    shots = []
    for n in range(4):
        task = _current(page)
        item = int(task.split("\t")[1])
        shown = " ".join(HOSTILE[item % 5].split()).replace("<<<", "‹‹‹").replace(">>>", "›››")
        assert shown in page.inner_text("#candidate")  # the title, as text, in the DOM
        history = page.inner_text("#history")
        assert HOSTILE[0] in history and HOSTILE[1] in history and HOSTILE[2] in history
        assert page.evaluate("typeof window.__pwned") == "undefined" and dialogs == []
        assert page.locator("img").count() == 0 and page.locator("#candidate a, #history a, h1 ~ h1").count() == 0
        # the layout holds: nothing wider than the window (a 3,000-letter word wraps)
        assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
        png = tmp_path / f"task-{n}.png"
        page.screenshot(path=str(png))
        assert _png_size(png) == (VIEWPORT["width"], VIEWPORT["height"]) and png.stat().st_size > 10_000
        shots.append(png)
        _press(page, "3")
    assert server.stop() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined" and dialogs == []


def test_two_assessors_at_once_lose_nothing(browser, tmp_path):
    space = workspace(tmp_path, users=4)
    server = Server(["--runs", "sys.run", "--collection", "tiny", "--split", "none", "--depth", "3", "--out", "out"], space)
    pages = {}
    for name in ("ann", "ben"):
        context = browser.new_context(viewport=VIEWPORT)  # two browsers' worth of state
        page = context.new_page()
        page.goto(server.url)
        page.fill("#name", name)
        page.keyboard.press("Enter")
        page.wait_for_selector("body[data-ready='1']")
        pages[name] = page
    pressed: dict[str, dict] = {"ann": {}, "ben": {}}
    active = dict(pages)
    i = 0
    while active:
        shown = {}
        for name, page in list(active.items()):  # both press before either waits: requests at once
            task = _current(page)
            if task is None:
                del active[name]
                continue
            shown[name] = task
            page.keyboard.press(str(i % 8))
            pressed[name][task] = i % 8
            i += 1
        for name, task in shown.items():
            active[name].wait_for_function("(prev) => !document.getElementById('done').hidden || "
                                           "document.getElementById('task').dataset.task !== prev", arg=task)
    assert server.stop() == 0
    states = read_logs(space / "out" / "labels")
    assert {n: s.labels for n, s in states.items()} == pressed
    assert not set(pressed["ann"]) & set(pressed["ben"])  # overlap 1: no task twice
    assert len(pressed["ann"]) + len(pressed["ben"]) == 12 and min(map(len, pressed.values())) >= 4
    for name in pressed:
        got = _qrels(space / "out" / "qrels" / f"{log_name(name)}.qrels")
        assert got == {tuple(t.split("\t")): v for t, v in pressed[name].items()}
