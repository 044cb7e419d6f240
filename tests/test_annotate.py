"""recjudge annotate without a browser: the tasks shown are the judge's, the log keeps every label, the
server's guards (CSRF, the access token, the Host check, no path from the page), overlap, export, report."""

from __future__ import annotations

import asyncio
import html
import json
import re
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

import recjudge as rj
from recjudge.annotation.export import export_qrels, labelling_report
from recjudge.annotation.log import LabelLog, log_name, read_events, read_logs
from recjudge.annotation.queue import Board
from recjudge.annotation.security import Guard
from recjudge.annotation.server import Annotation, make_app
from recjudge.annotation.tasks import TaskSet, scale_levels, task_id
from recjudge.cli import main
from recjudge.errors import ConfigError, InputError
from recjudge.judging.profile import HistoryProfiles
from recjudge.judging.prompts import load_template
from recjudge.judging.select import judge_selection

from annotate_data import HOSTILE, workspace

PROFILE = {"prompt": "defined-scale", "fields": "title+genres", "profile_size": 4, "sampling": "random",
           "history_order": "chronological", "seed": 7, "items_per_call": 1}


@pytest.fixture
def space(tmp_path) -> Path:
    return workspace(tmp_path, hostile=True)


def _pairs(space: Path, depth: int = 3):
    runs = {"sys": rj.read_run(space / "sys.run")}
    return [(p.qid, p.docid) for p in judge_selection(runs, depth=depth, seed=PROFILE["seed"])]


def _tasks(space: Path, pairs=None, **profile) -> TaskSet:
    return TaskSet(pairs or _pairs(space), rj.load_collection(space / "tiny"), None, **{**PROFILE, **profile})


# ------------------------------------------------------------------------------- what is shown

def test_the_scale_is_the_templates_with_its_definitions():
    levels = dict(scale_levels(load_template("defined-scale")))
    assert sorted(levels) == list(range(8))
    assert levels[0] == "not interested: the user would not want to watch or use it."
    assert levels[7] == "the user's favourite (the item they would rank 1st)."
    # the baseline defines its two ends only, inside "from {scale_min} (not interested) to {scale_max} (...)"
    base = dict(scale_levels(load_template("baseline")))
    assert base[0] == "not interested" and base[7] == "one of the items they would like most"
    assert all(base[k] == "" for k in range(1, 7))


@pytest.mark.parametrize("items_per_call", [1, 2])
def test_a_task_shows_what_the_judges_prompt_shows(space, items_per_call):
    """The history lines and the candidate line the judge's prompt holds, built by the judge's code with
    its seed, the candidates of the judge's request left out of the history."""
    pairs = _pairs(space)
    tasks = _tasks(space, pairs, items_per_call=items_per_call)
    collection = rj.load_collection(space / "tiny")
    judge = HistoryProfiles(collection, PROFILE["fields"], PROFILE["profile_size"], sampling="random",
                            seed=PROFILE["seed"], users={q for q, _ in pairs}, order="chronological")
    assert sorted(tasks.index.values()) == sorted(pairs)
    by_user: dict = {}
    for q, d in sorted(pairs):
        by_user.setdefault(q, []).append(d)
    for q, items in by_user.items():
        for start in range(0, len(items), items_per_call):
            chunk = tuple(items[start:start + items_per_call])
            for d in chunk:
                task = tasks.task(task_id(q, d))
                lines = "\n".join("- " + " | ".join(f"{k}: {v}" for k, v in fields) + f" | Rating: {r}"
                                  for fields, r in task.history)
                assert lines == judge.profile_text(q, exclude=chunk)
                assert " | ".join(f"{k}: {v}" for k, v in task.candidate) == judge.render_item(d, q)
    assert len(tasks.task(tasks.ids()[0]).history) == PROFILE["profile_size"]


def test_tasks_keep_a_user_together_in_a_seeded_order(space):
    a, b = _tasks(space).ids(), _tasks(space).ids()
    assert a == b
    users = [t.split("\t")[0] for t in a]
    assert users == sorted(users)  # one user's candidates one after another
    other = _tasks(space, seed=8).ids()
    assert sorted(other) == sorted(a)


def test_a_query_template_is_refused(space):
    with pytest.raises(ConfigError, match="shows queries"):
        _tasks(space, prompt="relevance")


def test_a_pair_without_history_is_refused_with_its_user(space):
    with pytest.raises(ConfigError, match="user 'nobody' has no rated history"):
        _tasks(space, [("nobody", "21")])


# --------------------------------------------------------------------------------------- the log

def test_every_event_is_on_disk_before_append_returns(tmp_path):
    lg = LabelLog(tmp_path, "alice", {"seed": 3, "template_sha256": "abc"})
    lg.append("label", "u1\t5", label=4, seconds=2.0, note="long film")
    lg.append("skip", "u1\t6", seconds=1.0, note=None)
    lg.append("label", "u1\t7", label=0, seconds=3.0, note=None)
    lg.append("undo", "u1\t7")
    lg.append("flag", "u1\t6", on=True)
    events = read_events(lg.path)  # read back from the file, not the object
    assert [e["event"] for e in events] == ["label", "skip", "label", "undo", "flag"]
    first = events[0]
    assert first["annotator"] == "alice" and first["user"] == "u1" and first["item"] == "5"
    assert first["seed"] == 3 and first["template_sha256"] == "abc" and first["seconds"] == 2.0
    state = LabelLog(tmp_path, "alice", {}).state  # a restart folds the same state
    assert state.labels == {"u1\t5": 4}  # the undo took back the label of u1 7
    assert state.skipped == ["u1\t6"] and state.flagged == {"u1\t6"} and state.notes == {"u1\t5": "long film"}


def test_a_line_cut_short_at_the_end_is_ignored_one_in_the_middle_is_an_error(tmp_path):
    lg = LabelLog(tmp_path, "bob", {})
    lg.append("label", "u1\t5", label=2, seconds=1.0, note=None)
    with open(lg.path, "ab") as fh:
        fh.write(b'{"v":1,"event":"lab')  # the process died mid-write
    assert LabelLog(tmp_path, "bob", {}).state.labels == {"u1\t5": 2}
    text = lg.path.read_text()
    lg.path.write_text(text + "\n" + text.splitlines()[0] + "\n")
    with pytest.raises(InputError, match="line 2"):
        LabelLog(tmp_path, "bob", {})


@pytest.mark.parametrize("name", ["../../etc/passwd", "..", "a b/c", "C:\\x", "<script>", "é" * 30])
def test_a_name_never_becomes_a_path(tmp_path, name):
    stem = log_name(name)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,24}-[0-9a-f]{8}", stem)
    assert log_name(name) != log_name(name + "x")


# ------------------------------------------------------------------------------------ the server

def _annotation(space: Path, out: Path, *, annotator=None, overlap=1, self_mode=False, llm=None) -> Annotation:
    tasks = _tasks(space)
    board = Board(tasks.ids(), out / "labels", {"seed": 7}, overlap=overlap, self_mode=self_mode)
    return Annotation(tasks, board, annotator=annotator, self_mode=self_mode, llm=llm)


def _serve(annotation: Annotation, check, host: str = "127.0.0.1"):
    async def go():
        guard = Guard(host)
        server = TestServer(make_app(annotation, guard), host="127.0.0.1", port=0)
        client = TestClient(server)
        await client.start_server()
        guard.listening(server.port)
        try:
            await check(client, guard)
        finally:
            await client.close()
    asyncio.run(go())


async def _act(client, guard, **body):
    return await client.post("/api/act", json=body, headers={"X-CSRF-Token": guard.csrf})


def test_a_post_without_the_csrf_token_is_refused_and_logs_nothing(space, tmp_path):
    a = _annotation(space, tmp_path / "out")
    task = a.tasks.ids()[0]

    async def check(client, guard):
        body = {"annotator": "alice", "action": "label", "task": task, "label": 3}
        assert (await client.post("/api/act", json=body)).status == 403
        bad = await client.post("/api/act", json=body, headers={"X-CSRF-Token": "x" + guard.csrf})
        assert bad.status == 403 and (await bad.json())["error"] == "csrf"
        assert (await client.post("/start", data={"name": "alice"})).status == 403
        assert not (tmp_path / "out" / "labels").exists()
        ok = await _act(client, guard, **body)
        assert ok.status == 200 and (await ok.json())["progress"]["done"] == 1
    _serve(a, check)
    assert read_logs(tmp_path / "out" / "labels")["alice"].labels == {task: 3}


def test_a_request_for_another_host_name_is_refused(space, tmp_path):
    async def check(client, guard):
        assert (await client.get("/", headers={"Host": "attacker.example:80"})).status == 421
        assert (await client.get("/")).status == 200
    _serve(_annotation(space, tmp_path / "out"), check)


def test_off_loopback_every_request_needs_the_access_token(space, tmp_path):
    async def check(client, guard):
        assert guard.token and len(guard.token) >= 30
        assert (await client.get("/")).status == 403
        assert (await client.get("/?token=wrong")).status == 403
        first = await client.get(f"/?token={guard.token}")
        assert first.status == 200
        assert "recjudge_annotate_token" in first.cookies  # then kept in an HttpOnly cookie
        assert (await client.get("/static/annotate.js")).status == 200
    _serve(_annotation(space, tmp_path / "out"), check, host="0.0.0.0")
    assert Guard("127.0.0.1").token is None and Guard("::1").token is None


def test_every_answer_forbids_inline_scripts_and_the_page_has_none(space, tmp_path):
    async def check(client, guard):
        page = await client.get("/a/alice")
        csp = page.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
        assert page.headers["Referrer-Policy"] == "no-referrer" and page.headers["X-Frame-Options"] == "DENY"
        text = await page.text()
        scripts = re.findall(r"<script([^>]*)>(.*?)</script>", text, re.S)
        assert [attrs for attrs, body in scripts if body.strip()] == [' type="application/json" id="recjudge-data"']
        assert all("src=" in attrs for attrs, body in scripts if not body.strip())
        for hostile in HOSTILE[:3]:  # markup in item text reaches the page escaped, never as markup
            assert hostile not in text
        data = json.loads(re.search(r'id="recjudge-data">(.*?)</script>', text, re.S).group(1))
        shown = [v for h in data["task"]["history"] for _, v in h["fields"]]
        assert HOSTILE[0] in shown and "<" not in re.search(r'id="recjudge-data">(.*?)</script>', text, re.S).group(1)
        assert (await client.get("/nothing")).headers["Content-Security-Policy"] == csp
    _serve(_annotation(space, tmp_path / "out"), check)


def test_nothing_from_the_page_becomes_a_file(space, tmp_path):
    out = tmp_path / "out"
    a = _annotation(space, out)

    async def check(client, guard):
        for name in ("../../escape", "a/b", "..\\x", "x" * 65, ""):
            r = await _act(client, guard, annotator=name, action="label", task=a.tasks.ids()[0], label=1)
            assert r.status == 400, name
        for task in ("../../etc/passwd", "u0\t../x", None, 5):
            r = await _act(client, guard, annotator="alice", action="label", task=task, label=1)
            assert r.status == 400 and "none of this assessor's tasks" in (await r.json())["message"]
        for label in (8, -1, "3", 2.0, True, None):
            r = await _act(client, guard, annotator="alice", action="label", task=a.tasks.ids()[0], label=label)
            assert r.status == 400, label
        for path in ("/static/../server.py", "/static/%2e%2e/server.py", "/a/..%2F..%2Fetc", "/static/"):
            assert (await client.get(path)).status in (400, 403, 404), path
        r = await _act(client, guard, annotator="..", action="label", task=a.tasks.ids()[0], label=1)
        assert r.status == 200  # a strange name is a name: hashed into a file name under labels/
    _serve(a, check)
    files = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert [str(f) for f in files if "tiny" not in str(f) and f.name != "sys.run"] == [f"out/labels/{log_name('..')}.jsonl"]


def test_the_llm_label_stays_hidden_until_labelling_is_done(space, tmp_path):
    a0 = _annotation(space, tmp_path / "probe")
    llm = {t: 5 for t in a0.tasks.ids()}
    a = _annotation(space, tmp_path / "out", llm=llm)
    ids = a.tasks.ids()

    async def check(client, guard):
        assert (await client.get("/adjudicate/alice")).status == 409
        for i, _ in enumerate(ids):
            view = await (await _act(client, guard, annotator="alice", action="label",
                                     task=(await (await client.get("/api/state?annotator=alice")).json())["task"]["id"],
                                     label=5 if i % 2 else 1)).json()
            assert "5" not in json.dumps({k: v for k, v in view.items() if k == "llm"}) and "llm" not in view
        page = await client.get("/adjudicate/alice")
        assert page.status == 200
        text = await page.text()
        rows = re.findall(r"<tr><td>", text)
        assert len(rows) == len(ids) - len(ids) // 2  # the labels 1, against the LLM's 5
        assert "-4" in text
    _serve(a, check)


# ------------------------------------------------------------------------------ assessors, overlap

def _label_all(board: Board, names, label_of=lambda name, task: 2):
    """Round-robin: each assessor labels the task offered to them until none is left."""
    active = list(names)
    while active:
        for name in list(active):
            task = board.next_task(name)
            if task is None:
                active.remove(name)
                continue
            board.log(name).append("label", task, label=label_of(name, task), seconds=1.0, note=None)


@pytest.mark.parametrize("overlap", [1, 2, 3])
def test_each_task_gets_overlap_assessors(tmp_path, overlap):
    ids = [task_id(f"u{u}", str(i)) for u in range(3) for i in range(4)]
    board = Board(ids, tmp_path, {}, overlap=overlap)
    _label_all(board, ["a", "b", "c"])
    counts = {t: sum(t in board.state(n).labels for n in "abc") for t in ids}
    assert set(counts.values()) == {overlap}


def test_two_assessors_at_once_are_never_given_the_same_task(tmp_path):
    ids = [task_id("u0", str(i)) for i in range(6)]
    board = Board(ids, tmp_path, {}, overlap=1)
    a, b = board.next_task("a"), board.next_task("b")
    assert a != b  # b's first task is not the one on a's screen


def test_in_self_assessment_each_user_gets_their_own_pairs(space, tmp_path):
    a = _annotation(space, tmp_path / "out", self_mode=True)

    async def check(client, guard):
        r = await client.post("/start", data={"name": "stranger", "csrf": guard.csrf}, allow_redirects=False)
        assert r.status == 400 and "no pair of user 'stranger'" in html.unescape(await r.text())
        r = await client.post("/start", data={"name": "u1", "csrf": guard.csrf}, allow_redirects=False)
        assert r.status == 303 and r.headers["Location"] == "/a/u1"
        page = await (await client.get("/a/u1")).text()
        assert "Would you be interested in this item?" in page and "Items you rated" in page
    _serve(a, check)
    board = a.board
    _label_all(board, ["u1"])
    assert {t.split("\t")[0] for t in board.state("u1").labels} == {"u1"}
    assert len(board.state("u1").labels) == 3


def test_a_restart_resumes_where_the_assessor_stopped(tmp_path):
    ids = [task_id("u0", str(i)) for i in range(5)]
    board = Board(ids, tmp_path, {})
    for _ in range(2):
        board.log("a").append("label", board.next_task("a"), label=1, seconds=1.0, note=None)
    again = Board(ids, tmp_path, {})
    assert again.next_task("a") == ids[2]
    assert again.progress("a") == {**again.progress("a"), "done": 2, "total": 5, "left": 3}


# --------------------------------------------------------------------------------- export, report

def test_export_writes_each_assessors_qrels_that_agreement_reads(tmp_path, capsys):
    ids = [task_id(f"u{u}", str(i)) for u in range(3) for i in range(4)]
    board = Board(ids, tmp_path / "labels", {}, overlap=2)
    _label_all(board, ["ann", "ben"], label_of=lambda n, t: int(t[-1]) if n == "ann" else 3 - int(t[-1]))
    paths = export_qrels(tmp_path)
    ann = rj.read_qrels(paths["ann"])
    assert sorted(zip(ann.frame.qid, ann.frame.docid, ann.frame.label)) == sorted(
        (f"u{u}", str(i), i) for u in range(3) for i in range(4))
    assert (tmp_path / "qrels" / "assessors.tsv").read_text().splitlines()[1:] == [
        f"ann\t{paths['ann'].name}\t12\t0\t0", f"ben\t{paths['ben'].name}\t12\t0\t0"]
    assert main(["agreement", "--reference", str(paths["ann"]), "--candidate", str(paths["ben"]),
                 "--json", str(tmp_path / "agree.json")]) == 0
    ben = json.loads((tmp_path / "agree.json").read_text())[log_name("ben")]
    # ben reverses ann's order in every user: each of the 3 x C(4, 2) pairs disagrees; the labels never
    # match (p_o = 0) with four labels used 3 times each by both (p_e = 4 * (3/12)^2 = 1/4)
    assert ben["pairwise"]["n_pairs"] == 18 and ben["pairwise"]["disagree"] == 1.0
    assert ben["cohen_kappa"] == pytest.approx((0 - 1 / 4) / (1 - 1 / 4))


def test_the_report_counts_labels_per_hour_and_the_distribution(tmp_path):
    lg = LabelLog(tmp_path / "labels", "ann", {})
    for i, (label, secs) in enumerate([(1, 10.0), (1, 20.0), (3, 30.0), (0, 0.0)]):
        lg.append("label", task_id("u", str(i)), label=label, seconds=secs, note=None)
    lg.append("skip", task_id("u", "9"), seconds=1.0, note=None)
    report = labelling_report(tmp_path)
    (a,) = report.assessors
    assert a.labels == 4 and a.skipped == 1
    assert a.per_hour == round(4 / (60 / 3600), 1)  # 4 labels in 60 s: 240 per hour
    assert a.median_seconds == 20.0  # of the timed labels 10, 20, 30
    assert a.distribution == {0: 1, 1: 2, 3: 1} and report.distribution() == {0: 1, 1: 2, 3: 1}
    assert "240" in report.format() and report.to_json()["distribution"] == {"0": 1, "1": 2, "3": 1}


def test_the_command_exports_and_reports(tmp_path, capsys):
    lg = LabelLog(tmp_path / "out" / "labels", "ann", {})
    lg.append("label", task_id("u0", "21"), label=6, seconds=4.0, note=None)
    assert main(["annotate", "--out", str(tmp_path / "out"), "--export"]) == 0
    out = capsys.readouterr().out
    assert f"qrels of ann: {tmp_path / 'out' / 'qrels' / log_name('ann')}.qrels" in out
    assert (tmp_path / "out" / "qrels" / f"{log_name('ann')}.qrels").read_text() == "u0 0 21 6\n"
    assert main(["annotate", "--out", str(tmp_path / "out"), "--report"]) == 0
    assert "900" in capsys.readouterr().out  # one label in 4 s


@pytest.mark.parametrize("argv, message", [
    ([], "give --runs (run files), --pairs QRELS, or --reference QRELS with --per-user K"),
    (["--self", "--overlap", "2", "RUN"], "--self gives each user's pairs to that user alone"),
    (["--annotator", "a/b", "RUN"], "without '/'"),
    (["--prompt", "nope", "RUN"], "unknown prompt template"),
])
def test_bad_options_are_refused_in_the_users_words(space, capsys, argv, message):
    argv = [x for a in argv for x in ((["--runs", str(space / "sys.run")]) if a == "RUN" else [a])]
    code = main(["annotate", *argv, "--collection", str(space / "tiny"), "--out", str(space / "out")])
    assert code != 0 and message in capsys.readouterr().err


def test_an_out_that_is_a_file_is_refused_before_anything_is_served(space, capsys):
    (space / "taken").write_text("x")
    code = main(["annotate", "--runs", str(space / "sys.run"), "--collection", str(space / "tiny"),
                 "--out", str(space / "taken")])
    assert code != 0 and "--out is a file, not a folder" in capsys.readouterr().err


def test_the_pairs_are_the_judges_selection(space, monkeypatch):
    """--runs with --per-user: the pairs judge_selection gives the judge, with the same seed."""
    import recjudge.annotation.command as command

    seen = {}
    monkeypatch.setattr(command, "serve", lambda annotation, host, port, ready: seen.update(ids=annotation.tasks.ids()))
    rj.annotate(str(space / "sys.run"), str(space / "tiny"), out=space / "out", split="none", per_user=3, seed=11)
    runs = {"sys": rj.read_run(space / "sys.run")}
    expected = {task_id(p.qid, p.docid) for p in judge_selection(runs, per_user=3, seed=11)}
    assert set(seen["ids"]) == expected and len(expected) == 4 * 3
    other = {task_id(p.qid, p.docid) for p in judge_selection(runs, per_user=3, seed=12)}
    assert other != expected  # the seed decides the sample: the same one as the judge's


def test_progress_counts_rate_and_time_left_from_the_median_label_time(tmp_path):
    ids = [task_id("u0", str(i)) for i in range(8)]
    board = Board(ids, tmp_path, {})
    for secs in (10.0, 30.0, 20.0):
        board.log("a").append("label", board.next_task("a"), label=1, seconds=secs, note=None)
    p = board.progress("a")
    # median 20 s a label: 3600 / 20 = 180 per hour; 5 tasks left take 5 x 20 s
    assert (p["done"], p["total"], p["left"], p["per_hour"], p["eta_seconds"]) == (3, 8, 5, 180.0, 100)


def test_a_restart_with_other_profile_settings_is_told(space, monkeypatch, caplog):
    import recjudge.annotation.command as command

    monkeypatch.setattr(command, "serve", lambda *a: None)
    pairs = _pairs(space)
    coll = rj.load_collection(space / "tiny")
    command.annotate(pairs, coll, None, space / "out", profile=PROFILE)
    lg = LabelLog(space / "out" / "labels", "ann", command.provenance(_tasks(space), PROFILE))
    lg.append("label", task_id(*pairs[0]), label=1, seconds=1.0, note=None)
    caplog.clear()
    command.annotate(pairs, coll, None, space / "out", profile=PROFILE)
    assert "other settings" not in caplog.text
    command.annotate(pairs, coll, None, space / "out", profile={**PROFILE, "seed": 8, "profile_size": 3})
    assert "ann's last label was made with other settings (seed, profile_size)" in caplog.text
