"""Progress of long work on stderr: a live bar (rich) on a terminal, throttled plain lines otherwise.

A command says what it is doing through a *progress sink*, a callable taking one line of text
(:class:`Reporter` on the command line, ``log.info`` in the library, or the caller's own function).
Long work opens a :class:`Meter` on that sink with :func:`meter`: done out of a total, the rate, the
time left, counts by outcome and, for the judge, the money spent. On a terminal the meter is a live
bar that messages print above; anywhere else (CI logs, a file, a caller's function) it is one plain
line every few seconds, e.g.::

    judge: 40/100 calls (40%), 2.0/s, ETA 30 s; 35 answered, 5 failed, 12 from cache; $0.0123 spent

Nothing goes to stdout, which carries a command's results.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Callable, Mapping, TextIO

__all__ = ["Reporter", "Meter", "meter", "progress_text", "duration"]

log = logging.getLogger("recjudge")

Sink = Callable[[str], None]


def duration(seconds: float) -> str:
    """``42 s``, ``4 min 05 s``, ``2 h 10 min``: a time left as people read it."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def progress_text(done: int, total: int, unit: str, elapsed: float, counts: Mapping[str, int] = {},
                  spent: float | None = None) -> str:
    """``40/100 calls (40%), 2.0/s, ETA 30 s; 35 answered, 5 failed; $0.0123 spent``: the rate and the
    time left from what was done in ``elapsed`` seconds (left out until something is done)."""
    head = f"{done:,}/{total:,} {unit}" + (f" ({done / total:.0%})" if total else "")
    if done and elapsed > 0:
        rate = done / elapsed
        head += f", {rate:.1f}/s" if rate >= 0.1 else f", {60 * rate:.1f}/min"
        if total > done:
            head += f", ETA {duration((total - done) / rate)}"
    parts = [head]
    if counts:
        parts.append(", ".join(f"{n:,} {what}" for what, n in counts.items()))
    if spent is not None:
        parts.append(f"${spent:.4f} spent")
    return "; ".join(parts)


class Meter:
    """One long task's progress: :meth:`update` with what is done so far, :meth:`close` at the end.
    ``show(text, final)`` displays it; ``every`` seconds at least between two plain lines."""

    def __init__(self, what: str, total: int, unit: str, show: Callable[[Meter, bool], None],
                 every: float | None = 5.0, clock: Callable[[], float] = time.monotonic):
        self.what, self.total, self.unit = what, int(total), unit
        self.done = 0
        self.counts: dict[str, int] = {}
        self.spent: float | None = None
        self.every = every
        self._show = show
        self._clock = clock
        self.closed = False
        self.started = self._last = clock()

    @property
    def elapsed(self) -> float:
        return self._clock() - self.started

    def text(self) -> str:
        return f"{self.what}: " + progress_text(self.done, self.total, self.unit, self.elapsed, self.counts,
                                                self.spent)

    def update(self, done: int, counts: Mapping[str, int] | None = None, spent: float | None = None) -> None:
        if self.closed:
            return
        self.done = int(done)
        if counts is not None:
            self.counts = dict(counts)
        if spent is not None:
            self.spent = spent
        self._show(self, False)

    def due(self) -> bool:
        """Whether a plain line is due (at most one per ``every`` seconds; never with ``every`` None)."""
        if self.every is None:
            return False
        now = self._clock()
        if now - self._last < self.every:
            return False
        self._last = now
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._show(self, True)

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def meter(sink: Sink | None, what: str, total: int, unit: str, every: float | None = 5.0) -> Meter:
    """A meter on ``sink``: live on a :class:`Reporter` writing to a terminal, else plain lines through
    ``sink`` (``log.info`` when None) every ``every`` seconds (``every`` None: the bar only, for work
    whose own lines already say how far it is)."""
    opener = getattr(sink, "meter", None)
    if opener is not None:
        return opener(what, total, unit, every)
    say = sink or log.info

    def show(m: Meter, final: bool) -> None:
        if not final and m.due():
            say(m.text())

    return Meter(what, total, unit, show, every)


class Reporter:
    """A command's progress sink: each message one line on ``stream`` (default: stderr, looked up when
    written), flushed at once; meters on a terminal are live bars the messages print above."""

    def __init__(self, stream: TextIO | None = None):
        self._stream = stream
        self._live = None  # the rich Progress while a bar is shown

    @property
    def stream(self) -> TextIO:
        return self._stream or sys.stderr

    def __call__(self, message: str) -> None:
        if self._live is not None:
            self._live.console.print(message, markup=False, highlight=False, emoji=False, soft_wrap=True)
        else:
            print(message, file=self.stream, flush=True)

    def is_terminal(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def meter(self, what: str, total: int, unit: str, every: float | None = 5.0, console=None) -> Meter:
        """A live bar when the stream is a terminal (or ``console``, a rich Console, is given) and there
        is work to show, else plain lines through this reporter (also inside another meter's bar)."""
        if total <= 0 or self._live is not None or (console is None and not self.is_terminal()):
            return meter(self.__call__, what, total, unit, every)
        from rich.console import Console

        return _live_meter(self, console or Console(file=self.stream), what, total, unit)


def _live_meter(reporter: Reporter, console, what: str, total: int, unit: str) -> Meter:
    from rich.progress import BarColumn, Progress, TextColumn
    from rich.table import Column

    # the figures fold onto a second line on a narrow terminal rather than being cut
    bar = Progress(TextColumn("{task.description}", table_column=Column(no_wrap=True)), BarColumn(bar_width=24),
                   TextColumn("{task.fields[status]}", markup=False, table_column=Column(overflow="fold")),
                   console=console, refresh_per_second=4, redirect_stdout=False, redirect_stderr=False)
    task = bar.add_task(what, total=max(total, 1), status="")
    reporter._live = bar
    bar.start()

    def show(m: Meter, final: bool) -> None:
        bar.update(task, completed=min(m.done, max(m.total, 1)),
                   status=progress_text(m.done, m.total, m.unit, m.elapsed, m.counts, m.spent))
        if final:
            bar.refresh()
            bar.stop()
            reporter._live = None

    return Meter(what, total, unit, show, None)
