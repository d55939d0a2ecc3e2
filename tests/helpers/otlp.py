"""A real OTLP/gRPC trace receiver for end-to-end tests: the OpenTelemetry collector's
``TraceService.Export`` (from ``opentelemetry-proto``, what every OTLP exporter calls), keeping
the spans it receives in memory. Services export to it as they would to a collector or Jaeger
(``TTC_OTEL_ENDPOINT``)."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

from tests.helpers.processes import free_port


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any] = field(default_factory=dict)


def _value(v: common_pb2.AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


class _Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.lock = threading.Lock()

    def Export(self, request: Any, context: Any) -> Any:
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            service=str(resource.get("service.name", "")),
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        with self.lock:
            self.spans.extend(received)
        return trace_service_pb2.ExportTraceServiceResponse()


class OtlpReceiver:
    """``start()`` listens on a free 127.0.0.1 port; ``endpoint`` is what TTC_OTEL_ENDPOINT takes."""

    def __init__(self) -> None:
        self.port = free_port()
        self._receiver = _Receiver()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self._receiver, self._server)  # type: ignore[no-untyped-call]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> OtlpReceiver:
        if self._server.add_insecure_port(f"127.0.0.1:{self.port}") == 0:
            raise RuntimeError(f"cannot bind the OTLP receiver on {self.port}")
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(1)

    def spans(self) -> list[ReceivedSpan]:
        with self._receiver.lock:
            return list(self._receiver.spans)

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        return [s for s in self.spans() if s.trace_id == trace_id]

    def wait_for(self, trace_id: str, services: set[str], timeout: float = 30.0) -> list[ReceivedSpan]:
        """The trace's spans once every one of ``services`` has exported into it (or what arrived)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.trace(trace_id)
            if services <= {s.service for s in spans} or time.monotonic() > deadline:
                return spans
            time.sleep(0.2)
