"""The gateway's request-body checks (services/gateway/middleware.py), driven with scripted ASGI
messages: bytes counted as they stream (chunked, no Content-Length), invalid UTF-8 and deep
nesting refused with OpenAI error objects, the checked body handed on once."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from services.common.metrics import ServiceMetrics
from services.gateway.middleware import MAX_JSON_DEPTH, ObserveMiddleware, body_problem, json_depth

LIMIT = 4096


def test_json_depth_counts_nesting_and_skips_strings() -> None:
    assert json_depth(b"1") == 0
    assert json_depth(b"{}") == 1
    assert json_depth(b'{"a": [1, {"b": "[[[[\\"{{"}]}') == 3
    assert json_depth(b'["]]]]", ["x"]]') == 2
    assert json_depth(b"[" * 50_000 + b"]" * 50_000) == 50_000


def test_json_depth_of_a_hostile_megabyte_is_fast() -> None:
    for body in (b"[" * 1_000_000, b'["\\\\",' * 150_000, b'"' + b"\\a" * 400_000):
        start = time.perf_counter()
        json_depth(body)
        assert time.perf_counter() - start < 2.0


def _error(response: Any) -> dict[str, Any]:
    return dict(json.loads(response.body)["error"])


def test_body_problem_refuses_invalid_utf8_and_deep_nesting_only_for_json() -> None:
    bad = _error(body_problem(b'{"x": "\xff"}', b"application/json"))
    assert bad["code"] == "invalid_utf8" and bad["type"] == "invalid_request_error"
    deep = b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1)
    assert _error(body_problem(deep, b"application/json; charset=utf-8"))["code"] == "json_too_deep"
    assert _error(body_problem(deep, b""))["code"] == "json_too_deep"
    ok = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert body_problem(ok, b"application/json") is None
    assert body_problem(b'{"s": "' + b"[" * 500 + b'"}', b"application/json") is None
    assert body_problem(b"\xff" + deep, b"application/octet-stream") is None


class Echo:
    """An app that reads the body the usual way and answers it back."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})


def _run(chunks: list[bytes], headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes, int, Echo, dict[bytes, bytes]]:
    """Run one request whose body arrives in ``chunks``; status, body, chunks read, app, headers."""
    app = Echo()
    middleware = ObserveMiddleware(app, ServiceMetrics("gateway-test"), max_request_bytes=LIMIT)
    messages: list[Message] = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)
    ]
    read = 0
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal read
        if read < len(messages):
            read += 1
            return messages[read - 1]
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {"type": "http", "path": "/v1/chat/completions", "method": "POST", "headers": headers}
    asyncio.run(middleware(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return int(sent[0]["status"]), body, read, app, dict(sent[0]["headers"])


CHUNKED = [(b"transfer-encoding", b"chunked"), (b"content-type", b"application/json")]


def test_chunked_body_over_the_limit_is_413_before_it_is_all_read() -> None:
    chunks = [b"[" + b" " * 1023] * 100  # 100 KiB offered, limit 4 KiB
    status, body, read, app, headers = _run(chunks, CHUNKED)
    assert status == 413
    error = json.loads(body)["error"]
    assert error["code"] == "request_too_large" and error["type"] == "invalid_request_error"
    assert read == 5  # stopped at the first chunk past the limit
    assert not app.bodies
    assert headers[b"connection"] == b"close"


def test_chunked_body_within_the_limit_reaches_the_app_once() -> None:
    chunks = [b'{"a": ', b"[1, 2], ", b'"b": "\xc3\xa9"}']
    status, body, _, app, _ = _run(chunks, CHUNKED)
    assert status == 200 and body == b"".join(chunks)
    assert app.bodies == [b"".join(chunks)]


@pytest.mark.parametrize(
    ("chunks", "code"),
    [
        ([b'{"messages": "', b"\xc3\x28", b'"}'], "invalid_utf8"),
        ([b"[" * 200, b"]" * 200], "json_too_deep"),
    ],
)
def test_hostile_json_is_400_and_never_reaches_the_app(chunks: list[bytes], code: str) -> None:
    status, body, _, app, _ = _run(chunks, CHUNKED)
    assert status == 400 and json.loads(body)["error"]["code"] == code
    assert not app.bodies


def test_declared_length_over_the_limit_is_413_without_reading() -> None:
    status, body, read, _, _ = _run([b"x" * 10], [(b"content-length", str(LIMIT + 1).encode())])
    assert status == 413 and read == 0
    assert str(LIMIT + 1) in json.loads(body)["error"]["message"]
