"""The judge's one HTTP path (the openai client on its aiohttp backend), against the local OpenAI
server: the request sent, the answers read, error handling; and against hostile local servers that speak broken
or malicious HTTP byte by byte: a connection closed after the request was written, a trickled answer,
malformed chunk sizes, two Content-Lengths, an interim 100/103 as the only answer, an oversized body,
a redirect; a proxy the environment sets; a private CA; a key holding a line break."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import subprocess
import threading
import time

import pytest
from fake_openai import Reply
from judge_data import movies as _movies
from judge_data import pairs_for

from recjudge.errors import ConfigError
from recjudge.judging import JudgeSettings, judge_pairs
from recjudge.judging.transport import MAX_BODY, http_client, resolve_proxy, send, ssl_context


def movies():
    return _movies(40)  # these tests ask for items up to 39


FAST = dict(backoff_initial=0.01, backoff_max=0.05, timeout=5.0, model="fake-model")


def judge(url, pairs, **cfg):
    return judge_pairs(pairs, movies(), JudgeSettings(base_url=url, **{**FAST, "concurrency": 2, **cfg}))


def test_the_request_sent_and_the_answers_read(fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-transport-test")
    pairs = pairs_for([10, 11, 12])
    res = judge(fake_openai.url, pairs)
    assert res.labels == {(u, d): int(d) % 8 for u, d in pairs}
    r = fake_openai.chat_log()[0]
    assert r.headers["authorization"] == "Bearer sk-transport-test"
    assert r.headers["content-type"].startswith("application/json")
    assert r.json["model"] == "fake-model" and r.json["response_format"]["type"] == "json_schema"


def test_429_500_timeouts_and_bad_bodies_are_retried(fake_openai):
    script = {0: Reply(429, headers={"Retry-After": "0"}), 1: Reply(500), 2: Reply(delay=1.0),
              3: Reply(raw=b"<html>busy</html>"), 4: Reply(raw=b'{"choices": [')}
    fake_openai.rule = lambda call: script.get(call.index)
    res = judge(fake_openai.url, pairs_for([10]), timeout=0.3, concurrency=1, max_attempts=6)
    # one pair after five failed attempts of five kinds, each retried
    assert res.labels == {("u0", "10"): 2, ("u1", "10"): 2, ("u2", "10"): 2}
    assert res.summary.attempts == 3 + 5 and res.summary.failures == {}


def test_connections_are_kept_alive(fake_openai):
    res = judge(fake_openai.url, pairs_for(range(10, 20)), concurrency=2)
    assert res.summary.judged == 30
    peers = {r.peer for r in fake_openai.chat_log()}
    assert 1 <= len(peers) <= 2  # 30 requests over at most two connections


def test_chunked_bodies_are_read(fake_openai):
    fake_openai.rule = lambda call: Reply(chunked=True)
    pairs = pairs_for([10, 13])
    res = judge(fake_openai.url, pairs)
    assert res.labels == {(u, d): int(d) % 8 for u, d in pairs} and res.summary.attempts == 6


def test_connection_close_is_honoured(fake_openai):
    fake_openai.rule = lambda call: Reply(headers={"Connection": "close"})
    res = judge(fake_openai.url, pairs_for([10, 11]), concurrency=1)
    assert res.summary.judged == 6 and res.summary.attempts == 6
    assert len({r.peer for r in fake_openai.chat_log()}) == 6  # a new connection each time


def test_error_answers_name_the_endpoint_and_status(fake_openai):
    fake_openai.rule = lambda call: Reply(404, "The model `fake-model` does not exist")
    with pytest.raises(ConfigError) as err:
        judge(fake_openai.url, pairs_for([10], ["u0"]))
    text = str(err.value)
    assert fake_openai.url in text and "HTTP 404" in text and "does not exist" in text


def test_a_bad_request_answer_is_a_recorded_failure_with_its_message(fake_openai):
    fake_openai.rule = lambda call: Reply(400, json.dumps({"detail": "messages too long"}))
    res = judge(fake_openai.url, pairs_for([10], ["u0"]))
    assert res.labels == {} and res.summary.failures == {"bad_request": 1}
    # the server's words reach the summary, not only the cache
    assert "messages too long" in res.summary.failure_messages["bad_request"]
    assert "messages too long" in res.summary.format()


# ------------------------------------------------------------------------------ hostile servers

class RawServer:
    """A TCP server on 127.0.0.1 whose every connection is handled by ``script(conn, n)`` (n: the
    0-based number of the connection); counts the chat requests that arrived."""

    def __init__(self, script):
        self.script = script
        self.requests = 0
        self.connections = 0
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._stop = False
        self._lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"

    def _serve(self):
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                n = self.connections
                self.connections += 1
            threading.Thread(target=self._run, args=(conn, n), daemon=True).start()

    def _run(self, conn, n):
        try:
            self.script(self, conn, n)
        except OSError:
            pass
        finally:
            conn.close()

    def read_request(self, conn) -> bytes | None:
        """One request (head and Content-Length body), or None when the client closed."""
        data = b""
        while b"\r\n\r\n" not in data:
            piece = conn.recv(65536)
            if not piece:
                return None
            data += piece
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            body += conn.recv(65536)
        self.body = body
        if head.startswith(b"POST") and b"/chat/completions" in head.split(b"\r\n", 1)[0]:
            with self._lock:
                self.requests += 1
        return head

    def close(self):
        self._stop = True
        self._sock.close()


def answer(label: int = 3) -> bytes:
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(
        {"label": label})}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 2}}
    ).encode()


def http(status: str, body: bytes, *headers: str) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n" + "".join(h + "\r\n" for h in headers)
    return head.encode() + b"\r\n" + body


@pytest.fixture
def raw():
    servers = []

    def make(script) -> RawServer:
        s = RawServer(script)
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.close()


def ok_for_probes(server, conn, head) -> bool:
    """Answer a probe (GET, or a POST that is not a chat request) with 404; True when it was one."""
    if head.startswith(b"GET") or b"/chat/completions" not in head.split(b"\r\n", 1)[0]:
        body = b'{"error": "no route"}'
        conn.sendall(http("404 Not Found", body, f"Content-Length: {len(body)}"))
        return True
    return False


def test_a_connection_closed_after_the_request_is_a_counted_attempt_never_a_silent_resend(raw):
    # the server reads each chat request and closes the connection without a byte of answer:
    # every POST that reached it is one attempt counted against --retries, never resent behind it
    def script(server, conn, n):
        while (head := server.read_request(conn)) is not None:
            if not ok_for_probes(server, conn, head):
                return  # close after the request was written
    srv = raw(script)
    res = judge(srv.url, pairs_for([10], ["u0"]), max_attempts=3, concurrency=1)
    assert res.labels == {} and res.summary.failures == {"connection": 1}
    assert srv.requests == 3 and res.summary.attempts == 3


def test_a_trickling_server_cannot_keep_a_call_past_the_timeout(raw):
    # headers at once, then one byte of body a second: a per-read timeout never fires; the
    # deadline over the whole attempt does
    def script(server, conn, n):
        while (head := server.read_request(conn)) is not None:
            if ok_for_probes(server, conn, head):
                continue
            body = answer()
            conn.sendall(http("200 OK", b"", f"Content-Length: {len(body)}"))
            for b in body:
                conn.sendall(bytes([b]))
                time.sleep(0.2)
    srv = raw(script)
    start = time.perf_counter()
    res = judge(srv.url, pairs_for([10], ["u0"]), timeout=1.0, max_attempts=2, concurrency=1)
    elapsed = time.perf_counter() - start
    assert res.summary.failures == {"timeout": 1} and res.summary.attempts == 2
    assert elapsed < 2 * 1.0 + 1.5  # two attempts of 1 s each, and the run's own overhead


@pytest.mark.parametrize("case, reply", [
    ("malformed chunk size", http("200 OK", b"zz\r\n" + answer() + b"\r\n0\r\n\r\n", "Transfer-Encoding: chunked")),
    ("conflicting Content-Length", None),
    ("100 Continue as the final answer", b"HTTP/1.1 100 Continue\r\n\r\n"),
    ("103 Early Hints as the final answer", b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"),
])
def test_malformed_answers_are_failures_never_labels(raw, case, reply):
    body = answer(5)
    if reply is None:
        reply = http("200 OK", body, f"Content-Length: {len(body)}", "Content-Length: 3")

    def script(server, conn, n):
        while (head := server.read_request(conn)) is not None:
            if ok_for_probes(server, conn, head):
                continue
            conn.sendall(reply)
            time.sleep(0.3)  # then close: an interim answer gets no final one
            return
    srv = raw(script)
    res = judge(srv.url, pairs_for([10], ["u0"]), timeout=2.0, max_attempts=2, concurrency=1)
    assert res.labels == {}, case
    assert res.summary.judged == 0 and sum(res.summary.failures.values()) == 1
    assert res.summary.attempts == 2 and srv.requests == 2


def test_an_oversized_answer_is_cut_off_not_read_whole(raw):
    sent = []

    def script(server, conn, n):
        while (head := server.read_request(conn)) is not None:
            if ok_for_probes(server, conn, head):
                continue
            # an endless error body, announced by no length: the client must stop reading
            conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"x" * (1 << 20)
            frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
            total = 0
            while total < max(4 * MAX_BODY, 128 << 20):  # more than the socket buffers hold
                conn.sendall(frame)
                total += len(chunk)
            sent.append(total)
    srv = raw(script)
    res = judge(srv.url, pairs_for([10], ["u0"]), max_attempts=1, timeout=30.0)
    assert res.summary.failures == {"connection": 1}
    assert "exceeds" in res.summary.failure_messages["connection"]
    assert not sent  # the server never finished writing its 128 MiB: the client hung up


def test_an_announced_oversized_answer_is_refused_at_once(raw):
    def script(server, conn, n):
        while (head := server.read_request(conn)) is not None:
            if ok_for_probes(server, conn, head):
                continue
            conn.sendall(http("200 OK", b"{", f"Content-Length: {2 * MAX_BODY}"))
            time.sleep(1)
            return
    srv = raw(script)
    start = time.perf_counter()
    res = judge(srv.url, pairs_for([10], ["u0"]), max_attempts=1, timeout=30.0)
    assert res.summary.failures == {"connection": 1} and time.perf_counter() - start < 10
    assert "announces" in res.summary.failure_messages["connection"]


def test_a_redirect_is_not_followed(raw):
    def script(server, conn, n):
        while (head := server.read_request(conn)) is not None:
            if ok_for_probes(server, conn, head):
                continue
            conn.sendall(http("307 Temporary Redirect", b"", "Location: http://127.0.0.1:9/v1/chat/completions",
                              "Content-Length: 0"))
    srv = raw(script)
    with pytest.raises(ConfigError, match="redirect to http://127.0.0.1:9/v1/chat/completions"):
        judge(srv.url, pairs_for([10], ["u0"]), max_attempts=3)
    assert srv.requests == 1  # the POST went out once, and nowhere else


@pytest.mark.parametrize("var", ["OPENAI_API_KEY", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"])
def test_a_line_break_in_a_header_value_is_refused_before_anything_is_sent(fake_openai, monkeypatch, var):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-good-key-123456")
    monkeypatch.setenv(var, "sk-evil\r\nX-Injected: 1")
    with pytest.raises(ConfigError) as err:
        judge(fake_openai.url, pairs_for([10], ["u0"]))
    assert "line break" in str(err.value) and "X-Injected" not in str(err.value)
    assert fake_openai.log == []


# ------------------------------------------------------------------------------ proxy and TLS

def test_the_proxy_is_resolved_once_from_the_environment(monkeypatch):
    for v in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
              "NO_PROXY"):
        monkeypatch.delenv(v, raising=False)
    assert resolve_proxy("https://api.example.com/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert resolve_proxy("https://api.example.com/v1") == "http://proxy.internal:3128"
    assert resolve_proxy("http://api.example.com/v1") is None  # HTTPS_PROXY is for https URLs
    monkeypatch.setenv("NO_PROXY", "example.com")
    assert resolve_proxy("https://api.example.com/v1") is None


def test_chat_requests_go_through_the_proxy_the_environment_sets(fake_openai, raw, monkeypatch):
    # a forwarding proxy: it sees the absolute URL of every request and relays it to the server
    import urllib.request

    seen = []
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the proxy itself goes direct

    def script(server, conn, n):
        while (head := server.read_request(conn)) is not None:
            line = head.split(b"\r\n", 1)[0].decode()
            seen.append(line)
            method, url, _ = line.split(" ", 2)
            req = urllib.request.Request(url, data=server.body or None, method=method,
                                         headers={"Content-Type": "application/json"})
            try:
                with direct.open(req, timeout=5) as r:
                    status, data = f"{r.status} OK", r.read()
            except urllib.error.HTTPError as e:
                status, data = f"{e.code} Error", e.read()
            conn.sendall(http(status, data, f"Content-Length: {len(data)}"))
    proxy = raw(script)
    for v in ("no_proxy", "NO_PROXY", "https_proxy", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url.removesuffix("/v1"))
    res = judge(fake_openai.url, pairs_for([13], ["u0"]))
    assert res.labels == {("u0", "13"): 13 % 8}
    assert f"POST {fake_openai.url}/chat/completions HTTP/1.1" in seen


def test_ssl_cert_file_is_the_trust_store_when_set(tmp_path, monkeypatch):
    """A private CA named by SSL_CERT_FILE is trusted (and only it, not certifi's store)."""
    if subprocess.run(["openssl", "version"], capture_output=True).returncode != 0:
        pytest.skip("openssl is not installed")
    key, cert = tmp_path / "ca.key", tmp_path / "ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    port = sock.getsockname()[1]

    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            try:
                tls = ctx.wrap_socket(conn, server_side=True)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += tls.recv(65536)
                tls.sendall(http("200 OK", b"{}", "Content-Length: 2"))
                tls.close()
            except (OSError, ssl.SSLError):
                conn.close()
    threading.Thread(target=serve, daemon=True).start()

    async def get():
        client = http_client(f"https://127.0.0.1:{port}/v1", {}, 2, 5.0)
        try:
            return await send(client, "GET", f"https://127.0.0.1:{port}/v1/models")
        finally:
            await client.aclose()
    try:
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        from recjudge.judging.transport import TransportError
        with pytest.raises(TransportError):
            asyncio.run(get())  # certifi does not know the private CA
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert asyncio.run(get()).status == 200
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
        with pytest.raises(ConfigError, match="SSL_CERT_FILE"):
            ssl_context()
    finally:
        sock.close()


def test_the_probe_and_the_calls_take_the_same_proxy(fake_openai, monkeypatch):
    """HTTP_PROXY reaches the chat calls as it reaches the probe: behind a proxy both go through it (the
    endpoint's own host is not even resolvable here)."""
    from judge_data import movies, pairs_for

    from recjudge.judging import JudgeSettings, judge_pairs

    monkeypatch.setenv("HTTP_PROXY", fake_openai.url.split("/v1")[0])
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proxy-test")
    res = judge_pairs(pairs_for([10, 11]), movies(), JudgeSettings(base_url="http://judge.invalid:8000/v1", model="m",
                                                                   max_attempts=1, yes=True))
    assert len(res.labels) == 6
    chat = [t for t in fake_openai.proxied if t.endswith("/v1/chat/completions")]
    assert len(chat) == 6 and all(t.startswith("http://judge.invalid:8000/") for t in chat)
    assert any(t.endswith("/v1/models") for t in fake_openai.proxied)  # the probe went the same way


# ------------------------------------------------------------------------------ one path, sized caps

def test_an_answer_of_a_few_mib_is_refused_the_cap_is_sized_for_answers_of_a_few_kb(raw):
    # 3 MiB: far more than any chat answer (a few KB), under the former 32 MiB cap
    body = b'{"choices": [], "pad": "' + b"x" * (3 << 20) + b'"}'

    def script(server, conn, n):
        while (head := server.read_request(conn)) is not None:
            if not ok_for_probes(server, conn, head):
                conn.sendall(http("200 OK", body, f"Content-Length: {len(body)}"))
    srv = raw(script)
    res = judge(srv.url, pairs_for([10], ["u0"]), max_attempts=1)
    assert res.summary.failures == {"connection": 1}
    assert "announces 3,145,7" in res.summary.failure_messages["connection"]
    assert MAX_BODY <= 4 << 20


def test_a_batch_result_file_larger_than_the_answer_cap_is_read_whole(fake_openai):
    # a batch's result file holds every answer: the answer cap does not apply to it
    pad = " " * 100_000
    fake_openai.rule = lambda call: Reply(content=json.dumps({"label": 5}) + pad)
    pairs = pairs_for(range(10, 20))
    res = judge(fake_openai.url, pairs, batch=True, batch_poll=0.05)
    assert res.labels == {p: 5 for p in pairs}
    assert 30 * len(pad) > MAX_BODY  # the file was over the answer cap


def test_the_transport_setting_is_gone():
    # one HTTP path: the former choice between two clients is an unknown setting, said so
    with pytest.raises(ConfigError, match="transport"):
        JudgeSettings(transport="aiohttp")
