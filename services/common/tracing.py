"""OpenTelemetry setup, W3C trace-context propagation and the span attributes every service uses.

Trace context crosses process boundaries in two carriers: gRPC metadata (the client
interceptor in ``grpc_client.py`` injects ``traceparent``, the server interceptor in
``grpc_server.py`` extracts it) and the ``trace_context`` map of a queued ``SearchJob``. One
request is therefore one trace: the gateway's server span, its admission, difficulty and
enqueue children, the worker's search span, and every policy, verifier and sandbox call under it.

Attributes follow the OpenTelemetry GenAI semantic conventions where one applies
(``gen_ai.*``); what only test-time compute has is under ``ttc.*``.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import context, propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

# GenAI semantic conventions (https://opentelemetry.io/docs/specs/semconv/gen-ai/).
GEN_AI_SYSTEM = "gen_ai.system"
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
# Test-time compute: the effort asked for and applied, the strategy, the job.
TTC_EFFORT = "ttc.effort"
TTC_EFFORT_REQUESTED = "ttc.effort_requested"
TTC_STRATEGY = "ttc.strategy"
TTC_JOB_ID = "ttc.job_id"
SYSTEM = "ttc-serve"


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


def set_genai_attributes(
    span: trace.Span,
    *,
    operation: str = "",
    model: str = "",
    effort: str = "",
    effort_requested: str = "",
    strategy: str = "",
    job_id: str = "",
    max_tokens: int = 0,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
) -> None:
    """Set the GenAI (and ``ttc.*``) attributes that are known; empty values are left unset."""
    if not span.is_recording():
        return
    values: dict[str, str | int] = {
        GEN_AI_SYSTEM: SYSTEM if (operation or model) else "",
        GEN_AI_OPERATION: operation,
        GEN_AI_REQUEST_MODEL: model,
        TTC_EFFORT: effort,
        TTC_EFFORT_REQUESTED: effort_requested,
        TTC_STRATEGY: strategy,
        TTC_JOB_ID: job_id,
        GEN_AI_REQUEST_MAX_TOKENS: max_tokens,
    }
    for key, value in values.items():
        if value:
            span.set_attribute(key, value)
    if input_tokens is not None:
        span.set_attribute(GEN_AI_INPUT_TOKENS, input_tokens)
    if output_tokens is not None:
        span.set_attribute(GEN_AI_OUTPUT_TOKENS, output_tokens)
