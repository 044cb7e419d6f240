"""A real HTTP server on 127.0.0.1 that speaks enough of the OpenAI API for the judge's tests.

Endpoints: ``POST /v1/chat/completions`` (with or without ``response_format`` json_schema),
``POST /v1/files`` (multipart upload), ``GET /v1/files/{id}`` and ``/content``, ``POST /v1/batches``,
``GET /v1/batches/{id}``. Every request is logged (method, path, headers, JSON body, status).

Answers are scripted per test:
- ``labeler(candidate_text) -> int``: the label the "model" gives a rendered candidate (default:
  the number in ``Movie N``, modulo 8);
- ``latency``: seconds each chat answer takes;
- ``rule(call) -> Reply | None``: per-request override (errors, Retry-After, malformed or truncated
  JSON, delays beyond the client's timeout); ``call.seen`` counts earlier requests with the same
  messages, so "fail the first attempt of every prompt" is one line;
- ``require_key``: answer 401 (echoing the presented key, as providers do) to any other key;
- ``models``: the model ids ``GET /v1/models`` lists (default ``fake-model``; chat answers any name).
A reply can also come chunked, or close its connection afterwards without saying so (a server
dropping idle keep-alive connections); ``LoggedRequest.peer`` tells connections apart.

``kind`` makes it answer as one kind of local server does, quirks included (see
:mod:`recjudge.judging.dialects`):
- ``openai``: ``/v1/models`` only (owned_by ``system``); json_schema structured output;
- ``llama-cpp-python``: HTTP 500 to ``response_format: json_schema`` (its message names
  response_format), grammar JSON through ``json_object`` + ``schema``, ``max_tokens`` honoured and
  ``max_completion_tokens`` ignored, one request at a time, ``/extras/tokenize/count``, no cached-token
  report, HTTP 400 ``context_length_exceeded`` above ``n_ctx``;
- ``llama.cpp`` (llama-server): ``/props`` (n_ctx, total_slots), ``/tokenize``, json_object + schema;
- ``vllm``: ``owned_by: vllm`` with ``max_model_len``, ``/tokenize`` over chat messages;
- ``ollama``: ``/api/version``, json_schema.
Their tokenizer is :func:`fake_tokens` (words and punctuation), the same one that counts
``usage.prompt_tokens`` (plus the chat template's :data:`TEMPLATE_TOKENS`).
"""

from __future__ import annotations

import email.parser
import hashlib
import itertools
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

__all__ = ["FakeOpenAI", "Reply", "ChatCall", "LoggedRequest", "default_labeler", "fake_tokens", "KINDS"]

_MOVIE = re.compile(r"Movie (\d+)")
_TOKEN = re.compile(r"\w+|[^\w\s]")
KINDS = ("openai", "llama-cpp-python", "llama.cpp", "vllm", "ollama")
TEMPLATE_TOKENS = 13  # ChatML around a system and a user message, and the assistant's opening


def fake_tokens(text: str) -> int:
    """The local kinds' tokenizer: one token per word and per punctuation mark."""
    return len(_TOKEN.findall(text))


def default_labeler(candidate: str) -> int:
    m = _MOVIE.search(candidate)
    return int(m.group(1)) % 8 if m else 0


@dataclass(frozen=True)
class Reply:
    """A scripted answer. ``content`` replaces the model's text; ``raw`` replaces the whole HTTP body."""

    status: int = 200
    content: str | None = None
    headers: dict = field(default_factory=dict)
    delay: float | None = None
    finish_reason: str = "stop"
    raw: bytes | None = None
    usage: dict | None = None        # replaces the usage block (e.g. cached prompt tokens)
    chunked: bool = False            # send the body with Transfer-Encoding: chunked
    drop_after: bool = False         # close the connection after answering, without saying so


@dataclass(frozen=True)
class ChatCall:
    body: dict
    user: str
    candidates: list          # [(key or None, rendered candidate text)]
    labels: dict              # key (or "_") -> label the labeler gives
    seen: int                 # earlier requests with the same messages
    index: int                # 0-based count of chat requests so far
    prompt_sha: str


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str
    headers: dict
    json: Any
    status: int
    time: float
    prompt_sha: str | None = None
    peer: tuple | None = None        # the client's (host, port): one per TCP connection


def _candidates(user: str) -> list:
    if "Candidate items:\n" in user:
        block = user.split("Candidate items:\n", 1)[1]
        return [(m.group(1), m.group(2)) for m in re.finditer(r"^\[(c\d+)\] (.*)$", block, re.M)]
    if "Candidate item:\n" in user:
        return [(None, user.split("Candidate item:\n", 1)[1].split("\n", 1)[0])]
    return []


class FakeOpenAI:
    def __init__(self, latency: float = 0.0, labeler: Callable[[str], int] = default_labeler,
                 require_key: str | None = None, batch_polls: int = 1, kind: str = "openai",
                 n_ctx: int | None = None, slots: int | None = None):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}")
        self.kind = kind
        self.n_ctx = n_ctx if n_ctx is not None else (8192 if kind != "openai" else None)
        self.slots = slots if slots is not None else (1 if kind == "llama-cpp-python" else None)
        self._serial = threading.Semaphore(self.slots) if self.slots else None
        self.max_inflight = 0    # chat requests being answered at once, at most
        self.proxied: list = []  # absolute-form targets asked of this server as a proxy
        self._inflight = 0
        self.latency = latency
        self.labeler = labeler
        self.require_key = require_key
        self.models: tuple[str, ...] = ("fake-model",)  # what GET /v1/models lists (chat answers any name)
        self.rule: Callable[[ChatCall], Reply | None] | None = None
        self.batch_polls = batch_polls
        self.log: list[LoggedRequest] = []
        self.files: dict[str, tuple[str, bytes]] = {}
        self.batches: dict[str, dict] = {}
        self._polls: Counter = Counter()
        self._seen: Counter = Counter()
        self._chat_index = itertools.count()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # lifecycle ---------------------------------------------------------------------------------
    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in separate writes

            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                fake._handle(self, "GET")

            def do_POST(self):
                fake._handle(self, "POST")

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

        self._server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def chat_log(self) -> list[LoggedRequest]:
        with self._lock:
            return [r for r in self.log if r.path.endswith("/chat/completions")]

    # plumbing ----------------------------------------------------------------------------------
    def _read_body(self, h: BaseHTTPRequestHandler) -> bytes:
        if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(h.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    h.rfile.readline()
                    return out
                out += h.rfile.read(size)
                h.rfile.readline()
        return h.rfile.read(int(h.headers.get("Content-Length") or 0))

    def _send(self, h: BaseHTTPRequestHandler, status: int, payload, headers: dict | None = None,
              reply: Reply | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
        chunked = reply is not None and reply.chunked
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            if chunked:
                h.send_header("Transfer-Encoding", "chunked")
            else:
                h.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                h.send_header(k, str(v))
            h.end_headers()
            if chunked:  # in pieces of 7 bytes, with a chunk extension on the first
                for i in range(0, len(data), 7):
                    piece = data[i:i + 7]
                    h.wfile.write(f"{len(piece):x}{';ext=1' if i == 0 else ''}\r\n".encode() + piece + b"\r\n")
                h.wfile.write(b"0\r\n\r\n")
            else:
                h.wfile.write(data)
            if reply is not None and reply.drop_after:
                h.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a scripted timeout)

    def _record(self, method, path, headers, body, status, prompt_sha=None, peer=None) -> None:
        with self._lock:
            self.log.append(LoggedRequest(method, path, headers, body, status, time.time(), prompt_sha, peer))

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        raw = self._read_body(h) if method == "POST" else b""
        headers = {k.lower(): v for k, v in h.headers.items()}
        path = h.path.split("?", 1)[0]
        if path.startswith(("http://", "https://")):  # asked as a proxy: the absolute form of the target
            self.proxied.append(path)
            path = "/" + path.split("/", 3)[3] if path.count("/") >= 3 else "/"
        body: Any = None
        if raw and headers.get("content-type", "").startswith("application/json"):
            body = json.loads(raw)
        presented = headers.get("authorization", "").removeprefix("Bearer ")
        if self.require_key is not None and presented != self.require_key:
            self._record(method, path, headers, body, 401)
            self._send(h, 401, {"error": {"message": f"Incorrect API key provided: {presented}.",
                                          "type": "invalid_request_error", "code": "invalid_api_key"}})
            return
        if method == "POST" and path == "/v1/chat/completions":
            if self._serial is not None:
                self._serial.acquire()  # a server with N slots answers N requests at a time
            try:
                with self._lock:
                    self._inflight += 1
                    self.max_inflight = max(self.max_inflight, self._inflight)
                status, payload, extra, sha, delay, reply = self._chat(body)
                self._record(method, path, headers, body, status, sha, tuple(h.client_address))  # logged on arrival
                if delay:
                    time.sleep(delay)
                with self._lock:
                    self._inflight -= 1
            finally:
                if self._serial is not None:
                    self._serial.release()
            self._send(h, status, payload, extra, reply)
        elif (answer := self._kind_route(method, path, body)) is not None:
            self._record(method, path, headers, body, answer[0])
            self._send(h, *answer)
        elif method == "POST" and path == "/v1/files":
            status, payload = self._upload(headers, raw)
            self._record(method, path, headers, None, status)
            self._send(h, status, payload)
        elif method == "GET" and (m := re.fullmatch(r"/v1/files/([^/]+)(/content)?", path)):
            fid = m.group(1)
            self._record(method, path, headers, None, 200 if fid in self.files else 404)
            if fid not in self.files:
                self._send(h, 404, {"error": {"message": f"no file {fid}"}})
            elif m.group(2):
                self._send(h, 200, self.files[fid][1])
            else:
                self._send(h, 200, self._file_obj(fid))
        elif method == "POST" and path == "/v1/batches":
            status, payload = self._create_batch(body)
            self._record(method, path, headers, body, status)
            self._send(h, status, payload)
        elif method == "GET" and (m := re.fullmatch(r"/v1/batches/([^/]+)", path)):
            status, payload = self._get_batch(m.group(1))
            self._record(method, path, headers, None, status)
            self._send(h, status, payload)
        else:
            self._record(method, path, headers, body, 404)
            self._send(h, 404, {"error": {"message": f"no route {method} {path}"}})

    # the routes of each kind ---------------------------------------------------------------------
    def _kind_route(self, method: str, path: str, body):
        """(status, payload) of a route the server's kind has, else None (404)."""
        kind = self.kind
        if method == "GET" and path == "/v1/models":
            rows = [{"id": name, "object": "model", "owned_by": {
                "openai": "system", "llama-cpp-python": "me", "llama.cpp": "llamacpp", "vllm": "vllm",
                "ollama": "library"}[kind]} for name in self.models]
            if kind == "vllm":
                for row in rows:
                    row["max_model_len"] = self.n_ctx
            return 200, {"object": "list", "data": rows}
        if kind == "llama.cpp" and method == "GET" and path == "/props":
            return 200, {"default_generation_settings": {"n_ctx": self.n_ctx}, "total_slots": self.slots or 4}
        if kind == "ollama" and method == "GET" and path == "/api/version":
            return 200, {"version": "0.9.0"}
        if kind == "llama-cpp-python" and method == "POST" and path == "/extras/tokenize/count":
            return 200, {"count": fake_tokens(body.get("input", ""))}
        if kind == "llama.cpp" and method == "POST" and path == "/tokenize":
            return 200, {"tokens": list(range(fake_tokens(body.get("content", ""))))}
        if kind == "vllm" and method == "POST" and path == "/tokenize":
            text = "\n".join(m.get("content") or "" for m in body.get("messages", []))
            return 200, {"count": fake_tokens(text) + TEMPLATE_TOKENS - 1, "max_model_len": self.n_ctx}
        return None

    def _prompt_tokens(self, messages: list) -> int:
        if self.kind == "openai":
            return sum(len(m.get("content") or "") for m in messages) // 4
        return fake_tokens("\n".join(m.get("content") or "" for m in messages)) + TEMPLATE_TOKENS - 1

    def _quirk(self, body: dict):
        """The kind's answer to what it refuses, or None."""
        fmt = body.get("response_format") or {}
        if self.kind == "llama-cpp-python" and fmt.get("type") == "json_schema":
            return 500, {"error": {"message": "1 validation error: {'type': 'literal_error', 'loc': ('body', "
                                              "'response_format', 'type'), 'msg': \"Input should be 'text' or "
                                              "'json_object'\", 'input': 'json_schema'}",
                                   "type": "internal_server_error", "param": None, "code": None}}
        tokens = self._prompt_tokens(body.get("messages") or [])
        if self.n_ctx is not None and tokens > self.n_ctx:
            return 400, {"error": {"message": f"This model's maximum context length is {self.n_ctx} tokens. "
                                              f"However, you requested {tokens} tokens.",
                                   "type": "invalid_request_error", "code": "context_length_exceeded"}}
        return None

    # chat --------------------------------------------------------------------------------------
    def _chat(self, body: dict):
        messages = body.get("messages") or []
        user = next((m["content"] for m in messages if m.get("role") == "user"), "")
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        sha = hashlib.sha256((system + "\x00" + user).encode("utf-8")).hexdigest()
        cands = _candidates(user)
        labels = {(k or "_"): self.labeler(text) for k, text in cands}
        with self._lock:
            seen = self._seen[sha]
            self._seen[sha] += 1
        call = ChatCall(body, user, cands, labels, seen, next(self._chat_index), sha)
        reply = (self.rule(call) if self.rule else None) or Reply()
        delay = self.latency if reply.delay is None else reply.delay
        quirk = self._quirk(body) if reply.status == 200 and reply.raw is None else None
        if quirk is not None:
            return quirk[0], quirk[1], {}, sha, 0.0, reply
        if reply.raw is not None:
            return reply.status, reply.raw, reply.headers, sha, delay, reply
        if reply.status != 200:
            kind = {429: "rate_limit_exceeded", 500: "server_error"}.get(reply.status, "invalid_request_error")
            return reply.status, {"error": {"message": reply.content or f"scripted {reply.status}",
                                            "type": kind}}, reply.headers, sha, delay, reply
        content = reply.content if reply.content is not None else self._answer(body, cands, labels)
        cap = body.get("max_tokens") if self.kind != "openai" else \
            body.get("max_completion_tokens", body.get("max_tokens"))
        finish = reply.finish_reason
        if isinstance(cap, int) and max(1, len(content) // 4) > cap:  # cut at the cap, as a server does
            content, finish = content[: cap * 4], "length"
        prompt_tokens = self._prompt_tokens(messages)
        payload = {
            "id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": max(1, len(content) // 4),
                      "total_tokens": prompt_tokens + max(1, len(content) // 4),
                      "prompt_tokens_details": {"cached_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": 0}},
        }
        if self.kind != "openai":  # local servers report no cached or reasoning tokens
            for k in ("prompt_tokens_details", "completion_tokens_details"):
                payload["usage"].pop(k)
        if reply.usage is not None:
            payload["usage"] = reply.usage
        return 200, payload, reply.headers, sha, delay, reply

    def _answer(self, body: dict, cands: list, labels: dict) -> str:
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else \
            fmt.get("schema") if fmt.get("type") == "json_object" else None
        multi = bool(cands) and cands[0][0] is not None
        if schema is not None:
            props = schema.get("properties", {})
            if multi:
                one = next(iter(props.get("labels", {}).get("properties", {}).values()), {})
                criteria = [c for c in one.get("properties", {}) if c != "label"]
            else:
                criteria = [c for c in props if c != "label"]

            def value(k):
                return {**{c: labels[k] for c in criteria}, "label": labels[k]} if criteria else labels[k]
            if multi:
                return json.dumps({"labels": {k: value(k) for k in labels}})
            return json.dumps(value("_") if criteria else {"label": labels["_"]})
        if multi:
            return "\n".join(f"{k}: {v}" for k, v in labels.items())
        return f"Score: {labels.get('_', 0)}"

    # files and batches -------------------------------------------------------------------------
    def _upload(self, headers: dict, raw: bytes):
        msg = email.parser.BytesParser().parsebytes(
            b"Content-Type: " + headers.get("content-type", "").encode() + b"\r\n\r\n" + raw)
        content, name, purpose = None, "upload", None
        for part in msg.walk():
            disp = part.get("Content-Disposition", "")
            if 'name="file"' in disp:
                content = part.get_payload(decode=True)
                name = part.get_filename() or name
            elif 'name="purpose"' in disp:
                purpose = part.get_payload(decode=True).decode()
        if content is None:
            return 400, {"error": {"message": "no file part"}}
        fid = f"file-{next(self._ids)}"
        with self._lock:
            self.files[fid] = (name, content)
        return 200, self._file_obj(fid, purpose or "batch")

    def _file_obj(self, fid: str, purpose: str = "batch") -> dict:
        name, content = self.files[fid]
        return {"id": fid, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                "filename": name, "purpose": purpose, "status": "processed"}

    def _create_batch(self, body: dict):
        fid = body.get("input_file_id")
        if fid not in self.files:
            return 400, {"error": {"message": f"no input file {fid}"}}
        out_lines, err_lines = [], []
        for line in self.files[fid][1].decode("utf-8").splitlines():
            if not line.strip():
                continue
            req = json.loads(line)
            status, payload, _, sha, _, _ = self._chat(req["body"])  # a batch takes no latency
            self._record("BATCH", "/v1/chat/completions", {}, req["body"], status, sha)
            entry = {"id": f"batch_req_{next(self._ids)}", "custom_id": req["custom_id"],
                     "response": {"status_code": status, "request_id": f"req_{next(self._ids)}",
                                  "body": payload if isinstance(payload, dict) else {}}, "error": None}
            (out_lines if status == 200 else err_lines).append(json.dumps(entry))
        bid = f"batch_{next(self._ids)}"
        out_id = err_id = None
        if out_lines:
            out_id = f"file-{next(self._ids)}"
            self.files[out_id] = ("output.jsonl", ("\n".join(out_lines) + "\n").encode())
        if err_lines:
            err_id = f"file-{next(self._ids)}"
            self.files[err_id] = ("errors.jsonl", ("\n".join(err_lines) + "\n").encode())
        n = len(out_lines) + len(err_lines)
        self.batches[bid] = {
            "id": bid, "object": "batch", "endpoint": body.get("endpoint"), "errors": None,
            "input_file_id": fid, "completion_window": body.get("completion_window", "24h"),
            "status": "validating", "created_at": int(time.time()),
            "request_counts": {"total": n, "completed": len(out_lines), "failed": len(err_lines)},
            "_output": out_id, "_error": err_id,
        }
        return 200, self._batch_view(bid)

    def _batch_view(self, bid: str) -> dict:
        b = self.batches[bid]
        return {k: v for k, v in b.items() if not k.startswith("_")}

    def _get_batch(self, bid: str):
        if bid not in self.batches:
            return 404, {"error": {"message": f"no batch {bid}"}}
        with self._lock:
            self._polls[bid] += 1
            done = self._polls[bid] > self.batch_polls
        b = self.batches[bid]
        if done:
            b.update(status="completed", output_file_id=b["_output"], error_file_id=b["_error"],
                     completed_at=int(time.time()))
        else:
            b["status"] = "in_progress"
        return 200, self._batch_view(bid)


if __name__ == "__main__":  # run standalone: python tests/fake_openai.py [latency]
    import sys

    srv = FakeOpenAI(latency=float(sys.argv[1]) if len(sys.argv) > 1 else 0.0).start()
    print(srv.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()
