"""``recjudge judge`` end to end: RecBole atomic files written here, the local OpenAI server, SIGKILL resume."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from fake_openai import FakeOpenAI, Reply

from recjudge.cli import main

N_USERS, N_ITEMS, PER_USER = 5, 40, 8


@pytest.fixture
def workspace(tmp_path):
    """A collection as RecBole atomic files and one run: user u ranks items 20..27 ('Movie k')."""
    coll = tmp_path / "tiny"
    coll.mkdir()
    inter = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    for u in range(N_USERS):
        for k in range(6):
            inter.append(f"u{u}\t{u + k}\t{1 + (u + k) % 5}\t{1000 + 10 * u + k}")
    (coll / "tiny.inter").write_text("\n".join(inter) + "\n")
    items = ["item_id:token\tmovie_title:token_seq\tclass:token_seq"]
    items += [f"{k}\tMovie {k}\t{'Drama' if k % 2 else 'Comedy Drama'}" for k in range(N_ITEMS)]
    (coll / "tiny.item").write_text("\n".join(items) + "\n")
    run = [f"u{u} Q0 {20 + r} {r + 1} {PER_USER - r} sys" for u in range(N_USERS) for r in range(PER_USER)]
    (tmp_path / "sys.run").write_text("\n".join(run) + "\n")
    return tmp_path


def base_args(ws, out="qrels/j.qrels"):
    return ["judge", "--runs", str(ws / "sys.run"), "--collection", str(ws / "tiny"), "--split", "none",
            "--out", str(ws / out), "--cache", str(ws / "cache.sqlite")]


def expected_lines():
    return sorted(f"u{u} 0 {k} {k % 8}" for u in range(N_USERS) for k in range(20, 20 + PER_USER))


def test_offline_baseline_judge(workspace, capsys):
    code = main(base_args(workspace) + ["--judge", "overlap", "--depth", "3"])
    assert code == 0
    qrels = (workspace / "qrels" / "j.qrels").read_text().splitlines()
    assert len(qrels) == N_USERS * 3 and all(0 <= int(x.split()[3]) <= 7 for x in qrels)
    summary = json.loads((workspace / "qrels" / "j.summary.json").read_text())
    assert summary["provenance"]["kind"] == "baseline" and summary["summary"]["judged"] == 15
    assert "judged  15" in capsys.readouterr().out


def test_a_pool_beside_a_reference_sample_judges_their_union(workspace):
    # the run ranks items 20..27 for u0..u4; the reference judges items 30..33 of u0..u2 and of u9,
    # whom the run does not rank. Depth 2 → (u, 20), (u, 21) for 5 users = 10 pairs; K = 2 of the
    # 4 reference items for u0..u2 only = 6 pairs; nothing shared → 16 pairs
    (workspace / "ref.qrels").write_text("".join(f"u{u} 0 {k} 1\n" for u in (0, 1, 2, 9) for k in range(30, 34)))
    code = main(base_args(workspace) + ["--judge", "overlap", "--depth", "2", "--reference",
                                        str(workspace / "ref.qrels"), "--per-user", "2"])
    assert code == 0
    pairs = {tuple(line.split()[::2]) for line in (workspace / "qrels" / "j.qrels").read_text().splitlines()}
    pool = {(f"u{u}", str(k)) for u in range(N_USERS) for k in (20, 21)}
    sampled = pairs - pool
    assert pool <= pairs and len(pairs) == 16
    assert {q for q, _ in sampled} == {"u0", "u1", "u2"} and all(30 <= int(d) <= 33 for _, d in sampled)
    assert all(sum(q == u for q, _ in sampled) == 2 for u in ("u0", "u1", "u2"))
    # --depth cuts runs: without them it is refused, naming both flags
    assert main(["judge", "--collection", str(workspace / "tiny"), "--out", str(workspace / "x.qrels"), "--depth", "2",
                 "--reference", str(workspace / "ref.qrels"), "--per-user", "2"]) == 2


def test_llm_judge_cli_failures_exit_status_and_secret(workspace, capsys, caplog, monkeypatch):
    secret = "sk-cli-SECRETSECRET0123456789"
    monkeypatch.setenv("MY_KEY", secret)
    caplog.set_level(logging.DEBUG)
    with FakeOpenAI() as server:
        server.rule = lambda call: Reply(500, f"boom {secret}") if "Movie 21" in call.user else None
        args = base_args(workspace) + ["--base-url", server.url, "--api-key-env", "MY_KEY", "--retries", "2",
                                       "--items-per-call", "2", "--repeats", "2", "--concurrency", "3"]
        assert main(["-v"] + args + ["--dry-run"]) == 0
        assert server.log == [] and not (workspace / "qrels").exists()
        code = main(["-v"] + args)
        assert code == 4  # pairs (u, 20) and (u, 21) share a call that always fails
        # (u, 20) and (u, 21) share a call; it fails, so both are absent from the qrels
        lines = sorted((workspace / "qrels" / "j.qrels").read_text().splitlines())
        assert lines == [x for x in expected_lines() if x.split()[2] not in ("20", "21")]
        assert all(r.headers["authorization"] == f"Bearer {secret}" for r in server.chat_log())
    out = capsys.readouterr()
    assert "server_error: 10" in out.out and "calls made" in out.out
    for text in (out.out, out.err, caplog.text):
        assert "SECRETSECRET" not in text
    for path in workspace.rglob("*"):
        if path.is_file():
            assert b"SECRETSECRET" not in path.read_bytes(), path


def test_bad_options_exit_non_zero(workspace, capsys, monkeypatch):
    assert main(base_args(workspace) + ["--judge", "overlap", "--fields", "title+cast"]) == 2
    assert "no cast" in capsys.readouterr().err
    # no key and no --base-url: the message names the variable and the ways out
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(base_args(workspace) + ["--depth", "1"]) == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY" in err and "--api-key-env" in err and "Traceback" not in err
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unit")
    missing = workspace / "missing.txt"
    assert main(base_args(workspace) + ["--prompt", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "fix:" in err.lower()
    # a price table with a non-number, and an extra_body that is not an object
    prices = workspace / "prices.json"
    prices.write_text('{"fake": {"input": "cheap", "output": 1}}')
    assert main(base_args(workspace) + ["--model", "fake", "--prices", str(prices), "--max-cost", "1",
                                        "--base-url", "http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err
    assert str(prices) in err and "'fake'" in err and "input" in err and "Traceback" not in err
    assert main(base_args(workspace) + ["--param", "extra_body=3", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "extra_body must be a JSON object" in capsys.readouterr().err


def test_sigkill_mid_run_then_resume_asks_no_answered_pair_again(workspace):
    with FakeOpenAI(latency=0.05) as server:
        args = base_args(workspace) + ["--base-url", server.url, "--concurrency", "2"]
        cmd = [sys.executable, "-c", "import sys; from recjudge.cli import main; sys.exit(main(sys.argv[1:]))",
               *args]
        env = {**os.environ, "OPENAI_API_KEY": "sk-kill-test"}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while len(server.chat_log()) < 12 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        first = len(server.chat_log())
        with sqlite3.connect(workspace / "cache.sqlite") as db:
            answered = {h for (h,) in db.execute("SELECT prompt_hash FROM calls WHERE status = 'ok'")}
        total = N_USERS * PER_USER
        assert 10 <= len(answered) < total and not (workspace / "qrels" / "j.qrels").exists()

        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        second = server.chat_log()[first:]
        # nothing answered before the kill is asked again, and everything else is asked once
        assert not answered & {r.prompt_sha for r in second}
        assert len(second) == total - len(answered)
        assert sorted((workspace / "qrels" / "j.qrels").read_text().splitlines()) == expected_lines()
        assert f"cache hits     {len(answered)}" in done.stdout


def test_batch_killed_while_polling_is_collected_not_resubmitted(workspace):
    with FakeOpenAI(batch_polls=10**9) as server:  # the batch never finishes during the first run
        args = base_args(workspace) + ["--base-url", server.url, "--batch", "--batch-poll", "0.05"]
        cmd = [sys.executable, "-c", "import sys; from recjudge.cli import main; sys.exit(main(sys.argv[1:]))",
               *args]
        env = {**os.environ, "OPENAI_API_KEY": "sk-batch-test"}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while not any(r.path.startswith("/v1/batches/") for r in server.log) and time.time() < deadline:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        created = [r for r in server.log if r.method == "POST" and r.path == "/v1/batches"]
        assert len(created) == 1
        server.batch_polls = 0
        n = len(server.log)
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        routes = [(r.method, r.path.split("/")[2]) for r in server.log[n:]]
        # the second run polls the batch the first one created and downloads its output: no new upload
        assert ("POST", "files") not in routes and ("POST", "batches") not in routes
        assert ("GET", "batches") in routes and ("GET", "files") in routes
        assert sorted((workspace / "qrels" / "j.qrels").read_text().splitlines()) == expected_lines()


def test_a_refused_key_names_the_flags_on_the_command_line(workspace, capsys, monkeypatch):
    # the errors raised during calls name the settings as the caller wrote them: flags here
    monkeypatch.setenv("MY_KEY", "sk-wrong-key-000000")
    with FakeOpenAI() as server:
        server.require_key = "sk-the-right-one"
        assert main(base_args(workspace) + ["--base-url", server.url, "--api-key-env", "MY_KEY", "--yes"]) != 0
    err = capsys.readouterr().err
    assert "refused the API key" in err and "named by --api-key-env" in err and "api_key_env=" not in err
