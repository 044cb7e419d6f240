"""The annotation server: an aiohttp application serving the labelling page and its small JSON API.

Pages are Jinja2 templates with autoescaping; the data a page needs travels in a
``<script type="application/json">`` block (escaped by ``tojson``) that the static script parses;
the script builds every task with ``textContent``, so item text is never markup. Each action
(label, skip, flag, undo) is one POST whose answer carries the next task, so it shows at once; it is
in the assessor's log, fsynced, before the answer leaves.
"""

from __future__ import annotations

import asyncio
import math
import signal
from pathlib import Path
from typing import Callable
from urllib.parse import quote

import jinja2
from aiohttp import web

from ..errors import ConfigError
from .queue import Board
from .security import Guard, check_name
from .tasks import TaskSet

__all__ = ["Annotation", "make_app", "serve"]

HERE = Path(__file__).resolve().parent
MAX_NOTE = 2000
ACTIONS = ("label", "skip", "flag", "undo")


class Annotation:
    """What one server holds: the tasks, the assessors' board, the LLM's labels (for adjudication)."""

    def __init__(self, tasks: TaskSet, board: Board, *, annotator: str | None = None, self_mode: bool = False,
                 llm: dict[str, int] | None = None):
        self.tasks, self.board, self.annotator, self.self_mode = tasks, board, annotator, self_mode
        self.llm = llm

    def view(self, name: str, task: str | None) -> dict:
        """The page's state for ``name``: the task to show (None when done) and the progress."""
        state = self.board.state(name)
        shown = None if task is None else self.tasks.task(task).as_json()
        return {"task": shown, "progress": self.board.progress(name), "can_undo": state.last_undoable() is not None,
                "flagged": task in state.flagged if task else False, "adjudicate": self.llm is not None}

    def act(self, name: str, body: dict) -> dict:
        """Apply one action of ``name``'s page; the view to show next. Bad input raises ValueError."""
        action, task = body.get("action"), body.get("task")
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {', '.join(ACTIONS)}")
        log = self.board.log(name)
        if action == "undo":
            back = log.state.last_undoable()
            if back is None:
                return self.view(name, self.board.next_task(name))
            log.append("undo", back)
            self.board.show(name, back)
            return self.view(name, back)
        if not isinstance(task, str) or not self.board.mine(task, name):
            raise ValueError("task is none of this assessor's tasks")
        if action == "flag":
            log.append("flag", task, on=task not in log.state.flagged)
            self.board.show(name, task)
            return self.view(name, task)
        extra = {"seconds": _seconds(body.get("seconds")), "note": _note(body.get("note"))}
        if action == "label":
            label = body.get("label")
            lo, hi = self.tasks.template.scale
            if type(label) is not int or not lo <= label <= hi:
                raise ValueError(f"label must be a whole number from {lo} to {hi}")
            log.append("label", task, label=label, **extra)
        else:
            log.append("skip", task, **extra)
        return self.view(name, self.board.next_task(name))

    def disagreements(self, name: str) -> list[dict]:
        """The tasks ``name`` labelled where the LLM's label differs, largest difference first."""
        state = self.board.state(name)
        rows = []
        for tid, human in state.labels.items():
            llm = (self.llm or {}).get(tid)
            if llm is not None and llm != human:
                task = self.tasks.task(tid)
                title = task.candidate[0][1] if task.candidate else task.docid
                rows.append({"user": task.qid, "item": task.docid, "title": title, "human": human, "llm": llm,
                             "difference": human - llm, "note": state.notes.get(tid, "")})
        return sorted(rows, key=lambda r: (-abs(r["difference"]), r["user"], r["item"]))


def _seconds(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return 0.0
    return round(min(float(value), 86400.0), 3)


def _note(value) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError("note must be text")
    return value[:MAX_NOTE]


def _templates() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def make_app(annotation: Annotation, guard: Guard) -> web.Application:
    """The application: the pages, the API and the static files, behind the guard's middleware."""
    env = _templates()
    app = web.Application(middlewares=[guard.middleware()], client_max_size=64 * 1024)
    routes = _Routes(annotation, guard, env)
    app.add_routes([web.get("/", routes.index), web.post("/start", routes.start),
                    web.get("/a/{name}", routes.page), web.get("/api/state", routes.state),
                    web.post("/api/act", routes.act), web.get("/adjudicate/{name}", routes.adjudicate),
                    web.static("/static", HERE / "static", show_index=False, follow_symlinks=False)])
    return app


class _Routes:
    def __init__(self, annotation: Annotation, guard: Guard, env: jinja2.Environment):
        self.a, self.guard, self.env = annotation, guard, env

    def _html(self, template: str, status: int = 200, **values) -> web.Response:
        text = self.env.get_template(template).render(**values)
        return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")

    def _name(self, text: str) -> str:
        name = check_name(text)
        if self.a.annotator is not None and name != self.a.annotator:
            raise ConfigError(f"this server is {self.a.annotator!r}'s (--annotator)")
        if self.a.self_mode and not any(self.a.board.mine(t, name) for t in self.a.board.ids):
            raise ConfigError(f"no pair of user {name!r} is to be labelled: in self-assessment the name is your "
                              "user id")
        return name

    async def index(self, request: web.Request) -> web.Response:
        if self.a.annotator is not None:
            raise web.HTTPSeeOther(f"/a/{quote(self.a.annotator, safe='')}")
        return self._html("start.html.j2", csrf=self.guard.csrf, self_mode=self.a.self_mode, error=None)

    async def start(self, request: web.Request) -> web.Response:
        form = await request.post()
        try:
            name = self._name(str(form.get("name", "")))
        except ConfigError as exc:
            return self._html("start.html.j2", status=400, csrf=self.guard.csrf, self_mode=self.a.self_mode,
                              error=str(exc))
        raise web.HTTPSeeOther(f"/a/{quote(name, safe='')}")

    def _named(self, request: web.Request, text: str) -> str:
        try:
            return self._name(text)
        except ConfigError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None

    async def page(self, request: web.Request) -> web.Response:
        name = self._named(request, request.match_info["name"])
        data = {"annotator": name, "csrf": self.guard.csrf, "scale": self.a.tasks.scale(),
                "self": self.a.self_mode, **self.a.view(name, self.a.board.next_task(name))}
        return self._html("page.html.j2", data=data, annotator=name, scale=self.a.tasks.scale(),
                          self_mode=self.a.self_mode)

    async def state(self, request: web.Request) -> web.Response:
        name = self._named(request, request.query.get("annotator", ""))
        return web.json_response({"csrf": self.guard.csrf, **self.a.view(name, self.a.board.next_task(name))})

    async def act(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("the request is a JSON object")
            name = self._name(str(body.get("annotator", "")))
            return web.json_response(self.a.act(name, body))
        except (ValueError, ConfigError) as exc:
            return web.json_response({"error": "bad_request", "message": str(exc)}, status=400)

    async def adjudicate(self, request: web.Request) -> web.Response:
        name = self._named(request, request.match_info["name"])
        left = self.a.board.progress(name)["left"]
        if self.a.llm is None or left:
            why = ("no LLM labels were given (--llm QRELS)" if self.a.llm is None else
                   f"{left} task(s) are still to label: the LLM's labels are shown only after labelling")
            return self._html("message.html.j2", status=409, title="Adjudication not available", message=why,
                              back=f"/a/{quote(name, safe='')}")
        rows = self.a.disagreements(name)
        labelled = [t for t in self.a.board.state(name).labels if t in self.a.llm]
        return self._html("adjudicate.html.j2", annotator=name, rows=rows, compared=len(labelled),
                          back=f"/a/{quote(name, safe='')}")


async def _run(app: web.Application, guard: Guard, host: str, port: int, ready: Callable[[str], None]) -> None:
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (fix: choose another --port, "
                              "or 0 for a free one)") from None
        bound = runner.addresses[0][1]
        guard.listening(bound)
        ready(guard.url(bound))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                pass
        await stop.wait()
    finally:
        await runner.cleanup()


def serve(annotation: Annotation, host: str, port: int, ready: Callable[[str], None]) -> None:
    """Serve until SIGINT or SIGTERM; ``ready`` hears the URL once the server listens."""
    guard = Guard(host)
    asyncio.run(_run(make_app(annotation, guard), guard, host, port, ready))
