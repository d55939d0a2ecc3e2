"""Hostile HTTP against a real gateway process, with raw sockets on 127.0.0.1: a chunked body
without Content-Length past the limit, invalid UTF-8, deeply nested JSON, slow headers (one
byte at a time), a slow body, idle connections beyond the cap, idle kept-alive connections.
Each answer is checked, the gateway keeps answering /healthz, and its memory stays bounded.

No policy service runs: every hostile request here is answered before a route needs it."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers.processes import ROOT, RedisServer, ServiceProcess, free_port, http_healthy

pytestmark = pytest.mark.e2e
LIMIT = 65_536
HEADER_TIMEOUT = 1.5
BODY_TIMEOUT = 2.0
KEEP_ALIVE = 1
MAX_CONNECTIONS = 40


class Gateway:
    def __init__(self, process: ServiceProcess, port: int) -> None:
        self.process, self.port = process, port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return sock

    def rss_kib(self) -> int:
        assert self.process.proc is not None
        with open(f"/proc/{self.process.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def healthy(self) -> bool:
        return httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200


@pytest.fixture(scope="module")
def gateway(redis_server: RedisServer) -> Iterator[Gateway]:
    port = free_port()
    env = {
        "TTC_REDIS_URL": redis_server.url,
        "TTC_GATEWAY_HOST": "127.0.0.1",
        "TTC_GATEWAY_PORT": str(port),
        "TTC_GATEWAY_POLICY_TARGET": f"127.0.0.1:{free_port()}",  # no policy: nothing here needs one
        "TTC_GATEWAY_ROUTING_TABLE": str(ROOT / "services/gateway/routing/routing.v1.json"),
        "TTC_GATEWAY_MAX_REQUEST_BYTES": str(LIMIT),
        "TTC_GATEWAY_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT),
        "TTC_GATEWAY_BODY_TIMEOUT_S": str(BODY_TIMEOUT),
        "TTC_GATEWAY_KEEP_ALIVE_S": str(KEEP_ALIVE),
        "TTC_GATEWAY_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
    }
    process = ServiceProcess("gateway", env).start()
    g = Gateway(process, port)
    try:
        process.wait_until(lambda: http_healthy(f"{g.url}/healthz"), timeout=120)
        yield g
    finally:
        process.stop()


def _read_reply(sock: socket.socket, timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one HTTP/1.1 reply (Content-Length or chunked)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a reply: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if "content-length" in headers:
        while len(rest) < int(headers["content-length"]):
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        return status, headers, rest[: int(headers["content-length"])]
    while not rest.endswith(b"0\r\n\r\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    body, text = b"", rest
    while text:
        size_line, _, text = text.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        body, text = body + text[:size], text[size + 2 :]
    return status, headers, body


def _closed(sock: socket.socket, timeout: float) -> bool:
    """True when the server closes ``sock`` within ``timeout`` (whatever it wrote first)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


POST_HEAD = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def test_chunked_body_without_length_is_cut_off_at_the_limit(gateway: Gateway) -> None:
    sock = gateway.connect()
    sock.sendall((POST_HEAD + "Transfer-Encoding: chunked\r\n\r\n").encode())
    chunk = b'{"x": "' + b"a" * 16_000
    sent = 0
    reply = None
    try:
        for _ in range(400):  # offer up to ~6 MB, 100x the limit
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    reply = _read_reply(sock)
    status, headers, body = reply
    assert status == 413, body
    error = json.loads(body)["error"]
    assert error["code"] == "request_too_large" and error["type"] == "invalid_request_error"
    assert headers.get("connection") == "close"
    assert _closed(sock, 5)
    assert gateway.healthy()


def test_invalid_utf8_is_400(gateway: Gateway) -> None:
    body = b'{"model": "m", "messages": [{"role": "user", "content": "caf\xe9 \xff"}]}'
    sock = gateway.connect()
    sock.sendall((POST_HEAD + f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
    status, _, reply = _read_reply(sock)
    assert status == 400
    error = json.loads(reply)["error"]
    assert error["code"] == "invalid_utf8" and error["type"] == "invalid_request_error"
    sock.close()


@pytest.mark.parametrize("depth", [65, 30_000])
def test_deeply_nested_json_is_400(gateway: Gateway, depth: int) -> None:
    body = b'{"model": "m", "messages": ' + b"[" * depth + b"]" * depth + b"}"
    sock = gateway.connect()
    sock.sendall((POST_HEAD + f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
    status, _, reply = _read_reply(sock)
    assert status == 400, reply
    assert json.loads(reply)["error"]["code"] == "json_too_deep"
    sock.close()
    assert gateway.healthy()


def test_slow_headers_sent_a_byte_at_a_time_get_408_and_are_closed(gateway: Gateway) -> None:
    sock = gateway.connect()
    start = time.monotonic()
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 1000
    reply = b""
    sock.settimeout(0.3)
    for byte in request:  # never finishes its headers
        try:
            sock.send(bytes([byte]))
            reply += sock.recv(4096)
        except TimeoutError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            break
        if reply or time.monotonic() - start > HEADER_TIMEOUT + 5:
            break
    elapsed = time.monotonic() - start
    assert reply.startswith(b"HTTP/1.1 408"), reply
    assert HEADER_TIMEOUT - 0.2 <= elapsed <= HEADER_TIMEOUT + 3
    assert _closed(sock, 5)


def test_endless_headers_are_431(gateway: Gateway) -> None:
    sock = gateway.connect()
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    try:
        for i in range(200):  # 200 x 1 KB headers, never ending, limit 64 KiB
            sock.sendall(f"X-H{i}: {'b' * 1000}\r\n".encode())
    except (BrokenPipeError, ConnectionResetError):
        pass
    sock.settimeout(5)
    reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 431"), reply
    assert _closed(sock, 5)


def test_slow_body_is_closed_after_the_body_deadline(gateway: Gateway) -> None:
    sock = gateway.connect()
    sock.sendall((POST_HEAD + "Content-Length: 1000\r\n\r\n").encode() + b'{"model": ')
    start = time.monotonic()
    assert _closed(sock, BODY_TIMEOUT + 5)
    assert BODY_TIMEOUT - 0.2 <= time.monotonic() - start <= BODY_TIMEOUT + 3
    assert gateway.healthy()


def test_idle_connections_are_capped_and_expire(gateway: Gateway) -> None:
    idle = [gateway.connect() for _ in range(MAX_CONNECTIONS + 20)]
    refused = sum(_closed(s, 0.5) for s in idle[MAX_CONNECTIONS:])
    assert refused == 20, "connections above the cap must be closed at once"
    time.sleep(HEADER_TIMEOUT + 0.5)
    assert all(_closed(s, 3) for s in idle[:MAX_CONNECTIONS]), "idle connections must expire"
    for s in idle:
        s.close()
    assert gateway.healthy()


def test_idle_kept_alive_connection_is_closed(gateway: Gateway) -> None:
    sock = gateway.connect()
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    status, headers, _ = _read_reply(sock)
    assert status == 200 and headers.get("connection") != "close"
    start = time.monotonic()
    assert _closed(sock, KEEP_ALIVE + 5)
    assert time.monotonic() - start <= KEEP_ALIVE + 2


def test_memory_stays_bounded_under_repeated_hostile_bodies(gateway: Gateway) -> None:
    def round_of_abuse() -> None:
        for _ in range(10):
            test_chunked_body_without_length_is_cut_off_at_the_limit(gateway)
            test_deeply_nested_json_is_400(gateway, 30_000)
            test_invalid_utf8_is_400(gateway)

    round_of_abuse()  # warm-up: allocator pools, imports
    before = gateway.rss_kib()
    for _ in range(3):
        round_of_abuse()
    grown = gateway.rss_kib() - before
    assert grown < 32 * 1024, f"gateway RSS grew by {grown} KiB over 90 hostile requests"
    assert gateway.healthy()
