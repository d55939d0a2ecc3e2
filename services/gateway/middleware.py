"""Pure ASGI middleware for every route: request id, body-size limit, request metrics.

Pure ASGI rather than ``@app.middleware("http")``: the latter wraps every request and
response in extra tasks and buffers, a measurable cost on the per-request overhead budget,
and it interferes with streaming responses.
"""

from __future__ import annotations

import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.common.logging import request_id_var
from services.common.metrics import ServiceMetrics
from services.gateway.errors import error_response


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
                response = error_response(
                    413,
                    f"request body of {int(length)} bytes exceeds the limit of {self.max_request_bytes}",
                    "invalid_request_error",
                    code="request_too_large",
                )
                await response(scope, receive, send_with_id)
            else:
                await self.app(scope, receive, send_with_id)
        finally:
            self.metrics.requests.labels(self.metrics.service, route, str(status)).inc()
            self.metrics.latency.labels(self.metrics.service, route).observe(time.perf_counter() - start)
            request_id_var.reset(token)
