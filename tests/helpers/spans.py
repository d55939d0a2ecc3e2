"""Finished spans of this test process, from an in-memory exporter on the SDK tracer provider
(OpenTelemetry allows one global provider per process: installed once, shared by test modules)."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

EXPORTER = InMemorySpanExporter()


def install() -> InMemorySpanExporter:
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        current = trace.get_tracer_provider()
    assert isinstance(current, TracerProvider), "another provider was installed first"
    if not getattr(current, "_ttc_test_exporter", False):
        current.add_span_processor(SimpleSpanProcessor(EXPORTER))
        current._ttc_test_exporter = True  # type: ignore[attr-defined]
    return EXPORTER


def finished(name_prefix: str = "") -> list[ReadableSpan]:
    return [s for s in EXPORTER.get_finished_spans() if s.name.startswith(name_prefix)]
