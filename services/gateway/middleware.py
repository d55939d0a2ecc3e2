"""Pure ASGI middleware for every route: request id, request body checks, request metrics.

Pure ASGI rather than ``@app.middleware("http")``: the latter wraps every request and
response in extra tasks and buffers, a measurable cost on the per-request overhead budget,
and it interferes with streaming responses.

A request body is read here, once, before any route sees it, and counted as it streams in: a
declared ``Content-Length`` over the limit is refused at once, and a chunked body without one
is refused (413) as soon as the bytes received pass the limit, so memory per request stays
bounded. A JSON body (or one without a content type) must be UTF-8 and nested at most
``MAX_JSON_DEPTH`` arrays/objects deep (checked without recursion), else 400; the route then
reads the checked body from memory.
"""

from __future__ import annotations

import re
import time
import uuid
from itertools import accumulate

import anyio.to_thread
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.common.logging import request_id_var
from services.common.metrics import ServiceMetrics
from services.gateway.errors import error_response

MAX_JSON_DEPTH = 64
_INLINE_CHECK_BYTES = 64 * 1024
# A JSON string (escapes included); possessive, so a hostile body cannot make it backtrack.
_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# Opening brackets step +1, closing ones -1 (0xff as a signed byte).
_STEPS = bytes.maketrans(b"[]{}", b"\x01\xff\x01\xff")


def json_depth(body: bytes) -> int:
    """How deep arrays and objects nest in ``body`` (strings skipped). Linear, no recursion,
    and every step runs in C (a 1 MB body of brackets takes milliseconds)."""
    steps = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS).translate(_STEPS)
    if not steps:
        return 0
    return max(0, max(accumulate(memoryview(steps).cast("b"))))


def body_problem(body: bytes, content_type: bytes, max_depth: int = MAX_JSON_DEPTH) -> JSONResponse | None:
    """The 400 for a JSON body that is not UTF-8 or nests deeper than ``max_depth``; None if fine."""
    media = content_type.split(b";", 1)[0].strip().lower()
    if media not in (b"", b"application/json") and not media.endswith(b"+json"):
        return None
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as err:
        return error_response(
            400, f"request body is not valid UTF-8 (byte {err.start})", "invalid_request_error", code="invalid_utf8"
        )
    if body.count(b"[") + body.count(b"{") > max_depth and json_depth(body) > max_depth:
        return error_response(
            400,
            f"request body nests arrays/objects more than {max_depth} deep",
            "invalid_request_error",
            code="json_too_deep",
        )
    return None


class _TooLarge(Exception):
    def __init__(self, size: int) -> None:
        self.size = size


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, counted as it streams; None when the client went away first.
    Raises ``_TooLarge`` as soon as more than ``limit`` bytes arrived."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge(size)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app ``body`` once, then the server's own messages
    (a disconnect while the response streams)."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _too_large(size: int, limit: int, declared: bool) -> JSONResponse:
    what = f"request body of {size} bytes" if declared else f"request body of more than {limit} bytes"
    response = error_response(
        413, f"{what} exceeds the limit of {limit}", "invalid_request_error", code="request_too_large"
    )
    # The rest of the body is not read: the connection cannot carry another request.
    response.headers["connection"] = "close"
    return response


def route_label(path: str) -> str:
    """A low-cardinality label: ``/v1/<surface>`` for API paths, else ``other``."""
    parts = path.split("/")
    if len(parts) > 2 and parts[1] == "v1":
        return f"/v1/{parts[2]}"
    return path if path in ("/healthz", "/readyz", "/metrics") else "other"


class ObserveMiddleware:
    def __init__(self, app: ASGIApp, metrics: ServiceMetrics, max_request_bytes: int) -> None:
        self.app = app
        self.metrics = metrics
        self.max_request_bytes = max_request_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        request_id = (headers.get(b"x-request-id") or b"").decode("latin-1") or uuid.uuid4().hex[:16]
        token = request_id_var.set(request_id)
        route = route_label(scope.get("path", ""))
        start = time.perf_counter()
        status = 500
        in_flight = self.metrics.in_flight.labels(self.metrics.service, route)
        in_flight.inc()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode("latin-1"))]
            await send(message)

        try:
            length = headers.get(b"content-length", b"")
            if length.isdigit() and int(length) > self.max_request_bytes:
                await _too_large(int(length), self.max_request_bytes, True)(scope, receive, send_with_id)
            elif length in (b"", b"0") and b"transfer-encoding" not in headers:
                await self.app(scope, receive, send_with_id)  # no body
            else:
                try:
                    body = await read_body(receive, self.max_request_bytes)
                except _TooLarge as err:
                    await _too_large(err.size, self.max_request_bytes, False)(scope, receive, send_with_id)
                    return
                if body is None:
                    status = 499  # client closed the request
                    return
                content_type = headers.get(b"content-type", b"")
                if len(body) > _INLINE_CHECK_BYTES:  # keep the event loop answering meanwhile
                    problem = await anyio.to_thread.run_sync(body_problem, body, content_type)
                else:
                    problem = body_problem(body, content_type)
                if problem is not None:
                    await problem(scope, receive, send_with_id)
                else:
                    await self.app(scope, _replay(body, receive), send_with_id)
        finally:
            in_flight.dec()
            self.metrics.requests.labels(self.metrics.service, route, str(status)).inc()
            if status >= 500:  # the server's failures; a 4xx is the client's request, answered
                self.metrics.errors.labels(self.metrics.service, route, str(status)).inc()
            self.metrics.latency.labels(self.metrics.service, route).observe(time.perf_counter() - start)
            request_id_var.reset(token)
