"""The shared gRPC wiring: error mapping, field trailer, health, metrics and request ids."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.errors import InvalidArgument, error_field
from services.common.grpc_client import insecure_channel
from services.common.grpc_server import ServicerBinding, serve_grpc
from services.common.logging import request_id_var
from services.common.metrics import ServiceMetrics
from services.gen.ttc.v1 import policy_pb2, policy_pb2_grpc
from tests.helpers.processes import free_port


class ScriptedPolicy(policy_pb2_grpc.PolicyServicer):
    """Raises what the test asks for, so the interceptor's mapping can be observed."""

    seen_request_ids: list[str]

    def __init__(self) -> None:
        self.seen_request_ids = []

    async def Tokenize(
        self, request: policy_pb2.TokenizeRequest, context: grpc.aio.ServicerContext
    ) -> policy_pb2.TokenizeResponse:
        self.seen_request_ids.append(request_id_var.get())
        if request.model == "bad":
            raise InvalidArgument("unknown model 'bad'", field="model")
        if request.model == "crash":
            raise RuntimeError("boom")
        return policy_pb2.TokenizeResponse(token_ids=[1, 2], count=2, max_context=8)

    async def GenerateStream(
        self, request: policy_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[policy_pb2.GenerateChunk]:
        yield policy_pb2.GenerateChunk(index=0, text_delta="a")
        raise InvalidArgument("n too large", field="sampling.n")


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, int, ScriptedPolicy]]:
    port, metrics_port = free_port(), free_port()
    servicer = ScriptedPolicy()
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve_grpc(
            [ServicerBinding(servicer, policy_pb2_grpc.add_PolicyServicer_to_server, "ttc.v1.Policy")],
            metrics=ServiceMetrics("test"),
            host="127.0.0.1",
            port=port,
            metrics_port=metrics_port,
            stop_event=stop,
            grace_seconds=0.1,
        )
    )
    target = f"127.0.0.1:{port}"
    for _ in range(100):
        async with grpc.aio.insecure_channel(target) as ch:
            try:
                await health_pb2_grpc.HealthStub(ch).Check(
                    health_pb2.HealthCheckRequest(service="ttc.v1.Policy"), timeout=0.5
                )
                break
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.05)
    yield target, metrics_port, servicer
    stop.set()
    await task


async def test_service_errors_become_status_codes_with_the_field(server: tuple[str, int, ScriptedPolicy]) -> None:
    target, metrics_port, servicer = server
    async with insecure_channel(target) as channel:
        stub = policy_pb2_grpc.PolicyStub(channel)
        token = request_id_var.set("req-123")
        try:
            ok = await stub.Tokenize(policy_pb2.TokenizeRequest(model="m"))
            assert ok.count == 2
            with pytest.raises(grpc.aio.AioRpcError) as bad:
                await stub.Tokenize(policy_pb2.TokenizeRequest(model="bad"))
            with pytest.raises(grpc.aio.AioRpcError) as crash:
                await stub.Tokenize(policy_pb2.TokenizeRequest(model="crash"))
            stream = stub.GenerateStream(policy_pb2.GenerateRequest())
            with pytest.raises(grpc.aio.AioRpcError) as streamed:
                async for _ in stream:
                    pass
        finally:
            request_id_var.reset(token)
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_field(bad.value) == "model"
    assert "unknown model" in (bad.value.details() or "")
    assert crash.value.code() == grpc.StatusCode.INTERNAL
    assert streamed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_field(streamed.value) == "sampling.n"
    assert servicer.seen_request_ids[0] == "req-123"

    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
    assert 'ttc_requests_total{code="OK",method="Tokenize",service="test"} 1.0' in text
    assert 'ttc_errors_total{code="INVALID_ARGUMENT",method="Tokenize",service="test"} 1.0' in text
    assert 'ttc_errors_total{code="INTERNAL",method="Tokenize",service="test"} 1.0' in text


async def test_trace_context_crosses_the_call_and_stats_polls_stay_quiet(
    server: tuple[str, int, ScriptedPolicy],
) -> None:
    """The client channel injects ``traceparent``; the server's span is a child of the caller's.
    A ``GetStats`` poll with no trace context opens no span (it would be a root trace a second)."""
    from opentelemetry import trace

    from tests.helpers import spans

    exporter = spans.install()
    exporter.clear()
    target, _, _ = server
    tracer = trace.get_tracer("test")
    async with insecure_channel(target) as channel:
        stub = policy_pb2_grpc.PolicyStub(channel)
        with tracer.start_as_current_span("caller") as caller:
            await stub.Tokenize(policy_pb2.TokenizeRequest(model="m"))
        with pytest.raises(grpc.aio.AioRpcError):  # unimplemented here; still no span
            await stub.GetStats(policy_pb2.StatsRequest())
    (served,) = spans.finished("test/Tokenize")
    assert served.kind == trace.SpanKind.SERVER
    assert served.context.trace_id == caller.get_span_context().trace_id
    assert served.parent is not None and served.parent.span_id == caller.get_span_context().span_id
    assert served.attributes is not None and served.attributes["rpc.grpc.status_code"] == 0
    assert spans.finished("test/GetStats") == []
