"""OpenTelemetry setup and W3C trace-context propagation helpers.

Trace context crosses process boundaries in two carriers: gRPC metadata (see
``grpc_interceptors``) and the ``trace_context`` map of a queued ``SearchJob``.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import context, propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter


def configure_tracing(service: str, endpoint: str = "", console: bool = False) -> TracerProvider:
    """Create this process's tracer provider; spans are exported only when asked to."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))
    if console:
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def inject_context() -> dict[str, str]:
    """The current trace context as a W3C carrier (``traceparent``/``tracestate``)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def extract_context(carrier: Mapping[str, str]) -> context.Context:
    """A context whose parent span is the one described by ``carrier``."""
    return propagate.extract(dict(carrier))
