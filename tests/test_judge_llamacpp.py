"""``recjudge judge`` with its defaults against a real local server: llama.cpp's OpenAI-compatible
server (llama-cpp-python 0.3.36) with SmolLM2-135M on CPU, started from ``../shared/llamacpp``
(its README). The model is far too small to judge well: these tests check the client path — the
endpoint's kind found by probing, its structured-output form, one request at a time, its tokenizer,
the context window — never the labels' quality. They skip when ``../shared`` is absent
(``RECJUDGE_SHARED`` names another folder)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from recjudge.cli import main

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("RECJUDGE_SHARED") or REPO.parent / "shared")
N_USERS, PER_USER = 3, 2


@pytest.fixture(scope="module")
def llama():
    """The base URL of a running llama.cpp server (model alias smollm2); stopped after the module."""
    serve = SHARED / "llamacpp" / "serve.sh"
    if not serve.is_file():
        pytest.skip(f"the llama.cpp server script is not available at {serve}")
    venv = REPO / ".recjudge-cache" / "llamacpp-venv"  # installed on first use (about a minute), then reused
    venv.parent.mkdir(exist_ok=True)
    run_dir = REPO / ".recjudge-cache"
    port_file, log = run_dir / f"llamacpp-{os.getpid()}.port", run_dir / f"llamacpp-{os.getpid()}.log"
    started = subprocess.run(["bash", str(serve), str(venv), str(port_file), str(log)], capture_output=True,
                             text=True, timeout=900)
    if started.returncode != 0 and "Illegal instruction" in started.stderr:
        # the shared wheel is built with -march=native: a host without those instructions cannot run it
        pytest.skip("the llama.cpp wheel in ../shared/llamacpp uses CPU instructions this machine lacks "
                    "(SIGILL); build llama-cpp-python 0.3.36 here from its PyPI source to run these tests")
    if started.returncode != 0:
        pytest.fail(f"the llama.cpp server did not start: {started.stderr[-2000:]}")
    pid = int(started.stdout.strip().splitlines()[-1])
    try:
        yield f"http://127.0.0.1:{port_file.read_text().strip()}/v1"
    finally:
        os.kill(pid, 15)
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        port_file.unlink(missing_ok=True)


@pytest.fixture
def ws(tmp_path, monkeypatch):
    """RecBole atomic files (items 'Movie k <word>', a genre each) and one run ranking 2 items per user."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    coll = tmp_path / "tiny"
    coll.mkdir()
    inter = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    inter += [f"u{u}\t{(7 * u + k) % 30}\t{1 + (u + k) % 5}\t{1000 + 10 * u + k}" for u in range(N_USERS)
              for k in range(8)]
    (coll / "tiny.inter").write_text("\n".join(inter) + "\n")
    words = ("Night", "River", "City", "King")
    genres = ("Drama", "Comedy", "Action", "Horror", "Romance")
    items = ["item_id:token\tmovie_title:token_seq\tclass:token_seq"]
    items += [f"{k}\tMovie {k} The {words[k % 4]}\t{genres[k % 5]}" for k in range(40)]
    (coll / "tiny.item").write_text("\n".join(items) + "\n")
    run = [f"u{u} Q0 {30 + r} {r + 1} {PER_USER - r} sys" for u in range(N_USERS) for r in range(PER_USER)]
    (tmp_path / "sys.run").write_text("\n".join(run) + "\n")
    return tmp_path


def judge_args(ws, url, out="q/llm.qrels", *extra):
    return ["judge", "--runs", str(ws / "sys.run"), "--collection", str(ws / "tiny"), "--split", "none",
            "--out", str(ws / out), "--cache", str(ws / "cache.sqlite"), "--model", "smollm2", "--base-url", url,
            *extra]


def test_judge_with_only_model_and_base_url_labels_every_pair(llama, ws, capsys):
    assert main(judge_args(ws, llama)) == 0
    out, err = capsys.readouterr()
    summary = json.loads((ws / "q" / "llm.summary.json").read_text())["summary"]
    assert summary["judged"] == summary["pairs"] == N_USERS * PER_USER and summary["failures"] == {}
    (ep,) = summary["endpoints"].values()
    # found by probing, asked in its own structured form, one request at a time
    assert ep["kind"] == "llama-cpp-python" and ep["structured"] == "json_object+schema" and ep["slots"] == 1
    assert ep["fallback"] is None and ep["concurrency"] == 1
    assert "llama-cpp-python" in out and "json_object+schema" in out
    assert "default 0.8" in err  # the server's own temperature, said once
    labels = [int(line.split()[3]) for line in (ws / "q" / "llm.qrels").read_text().splitlines()]
    assert len(labels) == N_USERS * PER_USER and all(0 <= v <= 7 for v in labels)
    # a rerun asks nothing again
    assert main(judge_args(ws, llama)) == 0
    again = json.loads((ws / "q" / "llm.summary.json").read_text())["summary"]
    assert again["cache_hits"] == again["planned_calls"] == N_USERS * PER_USER and again["attempts"] == 0


def test_multi_item_calls_get_the_grammar_of_their_candidates(llama, ws, capsys):
    assert main(judge_args(ws, llama, "q/multi.qrels", "--items-per-call", "2", "--max-tokens", "60",
                           "--reasoning-effort", "low")) == 0
    out = capsys.readouterr().out
    summary = json.loads((ws / "q" / "multi.summary.json").read_text())
    s = summary["summary"]
    assert s["judged"] == s["pairs"] and s["calls"] == N_USERS  # one call per user: both candidates
    (ep,) = s["endpoints"].values()
    assert ep["structured"] == "json_object+schema" and ep["ignored"] == ["reasoning_effort"]
    assert "reasoning_effort: accepted by the server without effect" in out
    assert summary["provenance"]["endpoints"][next(iter(s["endpoints"]))]["structured"] == "json_object+schema"


def test_the_endpoint_counts_prompt_tokens_within_5_percent_of_what_it_bills(llama):
    from recjudge.judging.client import ClientSettings, OpenAIJudgeClient, Request
    from recjudge.judging.profile import candidates_block
    from recjudge.judging.prompts import load_template

    template = load_template("baseline")
    history = "\n".join(f"- Movie {k}: The {('Night', 'River', 'City')[k % 3]} ({1950 + k}) | Drama, Comedy "
                        f"| rated {1 + k % 5}/5" for k in range(60))

    async def go():
        client = OpenAIJudgeClient(ClientSettings("smollm2", llama, "not-needed", timeout=300, max_attempts=3,
                                                  params={"max_tokens": 20}), template)
        try:
            out = []
            for size in (5, 60):
                msgs = template.render("\n".join(history.splitlines()[:size]),
                                       candidates_block(["Movie 99: The King (1999) | Horror"], None), None)
                counted = await client.count_tokens(msgs)
                rec = await client.call(Request(f"k{size}", "u0", ("99",), None, 0, msgs, f"s{size}"))
                out.append((counted, rec.usage.prompt))
            return out
        finally:
            await client.close()
    for counted, billed in asyncio.run(go()):
        print(f"tokens counted {counted}, billed {billed}: {counted / billed - 1:+.2%}")
        assert billed > 0 and abs(counted - billed) <= 0.05 * billed, (counted, billed)


def test_a_prompt_the_window_cannot_hold_is_never_sent(llama, ws, capsys):
    assert main(judge_args(ws, llama, "q/small.qrels", "--context-tokens", "100")) == 4
    s = json.loads((ws / "q" / "small.summary.json").read_text())["summary"]
    assert s["failures"] == {"context_overflow": N_USERS * PER_USER} and s["attempts"] == 0
    assert s["token_counts"] == {"the endpoint's tokenizer": N_USERS * PER_USER}


def test_an_overflow_answer_teaches_the_window(llama):
    # the server's own 400 (context_length_exceeded) is a context_overflow failure with its words,
    # and its window is known from then on
    body = {"model": "smollm2", "messages": [{"role": "user", "content": "hello " * 9000}], "max_tokens": 1}
    req = urllib.request.Request(llama + "/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=60)
    from recjudge.judging.dialects import window_from_message
    message = json.loads(err.value.read())["error"]["message"]
    assert err.value.code == 400 and window_from_message(message) == 8192
