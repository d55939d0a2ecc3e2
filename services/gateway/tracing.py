"""The gateway's server span: one per HTTP request, the root of the request's trace.

Pure ASGI (like ``middleware.py``) so streaming responses stay streams: the span ends when
the last byte of the response is sent, so a streamed completion's span covers the whole
stream. A caller that sends a W3C ``traceparent`` header joins its own trace. Everything the
request does runs inside this span's context: the planning children (difficulty, admission),
the enqueue, and - through ``SearchJob.trace_context`` - the worker's search and every gRPC
call it makes. Liveness, readiness and metrics scrapes are not traced (``UNTRACED``): they
are probes, not requests, and would bury the traces people look for.

The completion attributes (GenAI semantic conventions plus ``ttc.*``) are set by
``annotate_plan`` and ``annotate_usage``, called where the plan and the usage are known.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.common.tracing import extract_context, set_genai_attributes
from services.gateway.admission import Decision

UNTRACED = frozenset({"/healthz", "/readyz", "/metrics"})
tracer = trace.get_tracer("ttc.gateway")


def operation_of(path: str) -> str:
    """The GenAI operation name of an endpoint (``chat``, ``text_completion``), else empty."""
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/completions"):
        return "text_completion"
    if path.endswith("/responses"):
        return "chat"
    return ""


class TracingMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if scope["type"] != "http" or path in UNTRACED:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        method = scope.get("method", "GET")
        attributes: dict[str, Any] = {"http.request.method": method, "url.path": path}
        operation = operation_of(path)
        if operation:
            attributes["gen_ai.operation.name"] = operation
        with tracer.start_as_current_span(
            f"{method} {path}", context=extract_context(headers), kind=trace.SpanKind.SERVER, attributes=attributes
        ) as span:

            async def send_traced(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(trace.Status(trace.StatusCode.ERROR, f"HTTP {status}"))
                await send(message)

            await self.app(scope, receive, send_traced)
            route = scope.get("route")
            template = getattr(route, "path", "")
            if template:  # low cardinality: /v1/jobs/{job_id}, not the id itself
                span.update_name(f"{method} {template}")
                span.set_attribute("http.route", template)


def annotate_plan(
    model: str, effort: str, effort_requested: str, strategy: str, job_id: str, max_tokens: int = 0
) -> None:
    """The planned request's attributes, on the current (server) span."""
    set_genai_attributes(
        trace.get_current_span(),
        model=model,
        effort=effort,
        effort_requested=effort_requested,
        strategy=strategy,
        job_id=job_id,
        max_tokens=max_tokens,
    )


def annotate_usage(input_tokens: int, output_tokens: int) -> None:
    """The finished request's token usage (``gen_ai.usage.*``), on the current (server) span."""
    set_genai_attributes(trace.get_current_span(), input_tokens=input_tokens, output_tokens=output_tokens)


def admission_attributes(decision: Decision, queue_depth: int, kv_utilization: float) -> dict[str, Any]:
    """The ``gateway/admission`` span's attributes: the signals and what they decided."""
    attributes: dict[str, Any] = {
        "ttc.queue_depth": queue_depth,
        "ttc.kv_utilization": kv_utilization,
        "ttc.effort": decision.effort,
    }
    if decision.degraded_by:
        attributes["ttc.degraded_by"] = list(decision.degraded_by)
    if decision.shed:
        attributes["ttc.shed_reason"] = decision.shed_reason
    return attributes
