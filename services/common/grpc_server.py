"""Wiring every gRPC service shares: interceptor, health, metrics endpoint, graceful stop.

The interceptor is the one place where a servicer's exceptions become gRPC statuses, where
the caller's trace context and request id are adopted, and where requests are counted.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from opentelemetry import trace

from services.common.errors import FIELD_METADATA_KEY, ServiceError
from services.common.logging import request_id_var
from services.common.metrics import ServiceMetrics, serve_metrics
from services.common.tracing import extract_context

log = logging.getLogger(__name__)

REQUEST_ID_KEY = "x-request-id"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# Polled every second by each gateway: a span only when the caller is itself traced, so the
# polls do not fill the trace backend with one-span root traces.
QUIET_METHODS = frozenset({"GetStats", "ListModels"})


class ObservabilityInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Adopts trace context and request id, maps ``ServiceError`` to statuses, counts calls."""

    def __init__(self, metrics: ServiceMetrics) -> None:
        self.metrics = metrics
        self.tracer = trace.get_tracer("ttc.grpc.server")

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith("/grpc.health"):
            return handler
        method = handler_call_details.method.rsplit("/", 1)[-1]
        metadata = {k: v for k, v in (handler_call_details.invocation_metadata or ()) if isinstance(v, str)}
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap_unary(method, metadata, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._wrap_stream(method, metadata, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _wrap_unary(self, method: str, metadata: dict[str, str], behavior: Callable[..., Any]) -> Callable[..., Any]:
        async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> Any:
            async with self._observed(method, metadata, context):
                return await behavior(request, context)

        return wrapped

    def _wrap_stream(self, method: str, metadata: dict[str, str], behavior: Callable[..., Any]) -> Callable[..., Any]:
        async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async with self._observed(method, metadata, context):
                async for item in behavior(request, context):
                    yield item

        return wrapped

    def _observed(self, method: str, metadata: dict[str, str], context: grpc.aio.ServicerContext) -> _Observation:
        return _Observation(self, method, metadata, context)


class _Observation:
    """Async context manager holding one call's span, request id and metrics."""

    def __init__(
        self, owner: ObservabilityInterceptor, method: str, metadata: dict[str, str], context: grpc.aio.ServicerContext
    ) -> None:
        self.owner, self.method, self.metadata, self.context = owner, method, metadata, context

    async def __aenter__(self) -> None:
        m = self.owner.metrics
        self.start = time.perf_counter()
        self.token = request_id_var.set(self.metadata.get(REQUEST_ID_KEY) or uuid.uuid4().hex[:16])
        if self.method in QUIET_METHODS and "traceparent" not in self.metadata:
            self.span_cm: Any = trace.use_span(trace.INVALID_SPAN)
        else:
            self.span_cm = self.owner.tracer.start_as_current_span(
                f"{m.service}/{self.method}",
                context=extract_context(self.metadata),
                kind=trace.SpanKind.SERVER,
                attributes={"rpc.system": "grpc", "rpc.method": self.method, "ttc.service": m.service},
            )
        self.span = self.span_cm.__enter__()
        m.in_flight.labels(m.service, self.method).inc()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        m = self.owner.metrics
        code = grpc.StatusCode.OK
        suppress = False
        try:
            if isinstance(exc, ServiceError):
                code = exc.code
                if exc.field:
                    self.context.set_trailing_metadata(((FIELD_METADATA_KEY, exc.field),))
                await self.context.abort(code, str(exc))
            elif isinstance(exc, asyncio.CancelledError):
                code = grpc.StatusCode.CANCELLED
            elif exc is not None and not isinstance(exc, grpc.aio.AbortError):
                code = grpc.StatusCode.INTERNAL
                log.exception("unhandled error in %s", self.method, exc_info=exc)
                await self.context.abort(code, f"internal error: {type(exc).__name__}: {exc}")
            elif exc is not None:
                code = self.context.code() or grpc.StatusCode.UNKNOWN
        finally:
            m.in_flight.labels(m.service, self.method).dec()
            m.latency.labels(m.service, self.method).observe(time.perf_counter() - self.start)
            m.requests.labels(m.service, self.method, code.name).inc()
            self.span.set_attribute("rpc.grpc.status_code", code.value[0])
            if code != grpc.StatusCode.OK:
                m.errors.labels(m.service, self.method, code.name).inc()
                self.span.set_status(trace.Status(trace.StatusCode.ERROR, code.name))
            self.span_cm.__exit__(exc_type, exc, tb)
            request_id_var.reset(self.token)
        return suppress


@dataclass
class ServicerBinding:
    """A servicer, the generated ``add_..._to_server`` function, and its full service name."""

    servicer: object
    add_to_server: Callable[[Any, grpc.aio.Server], None]
    service_name: str


async def serve_grpc(
    bindings: Sequence[ServicerBinding],
    *,
    metrics: ServiceMetrics,
    host: str,
    port: int,
    metrics_port: int,
    grace_seconds: float = 5.0,
    on_stop: Callable[[], Awaitable[None]] | None = None,
    options: Iterable[tuple[str, Any]] = (),
    stop_event: asyncio.Event | None = None,
) -> None:
    """Run a gRPC server until SIGTERM/SIGINT (or ``stop_event``), then drain and stop."""
    server = grpc.aio.server(
        interceptors=[ObservabilityInterceptor(metrics)],
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            *options,
        ],
    )
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    for binding in bindings:
        binding.add_to_server(binding.servicer, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise RuntimeError(f"cannot bind gRPC port {host}:{port}")
    http_server, _ = serve_metrics(metrics.registry, metrics_port, host)
    await server.start()
    for binding in bindings:
        await health.set(binding.service_name, health_pb2.HealthCheckResponse.SERVING)
    await health.set("", health_pb2.HealthCheckResponse.SERVING)
    log.info("serving", extra={"grpc_port": bound, "metrics_port": metrics_port})

    stop = stop_event or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("stopping", extra={"grace_seconds": grace_seconds})
    await health.enter_graceful_shutdown()
    await server.stop(grace_seconds)
    http_server.shutdown()
    if on_stop is not None:
        await on_stop()
