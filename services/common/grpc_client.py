"""Client channels that carry the caller's trace context and request id in metadata."""

from __future__ import annotations

from typing import Any

import grpc

from services.common.grpc_server import MAX_MESSAGE_BYTES, REQUEST_ID_KEY
from services.common.logging import request_id_var
from services.common.tracing import inject_context


def call_context() -> dict[str, str]:
    """The current trace context and request id as call metadata. A caller passes it itself where
    the interceptor does not run in its context (grpc.aio's unary-stream calls)."""
    metadata = inject_context()
    request_id = request_id_var.get()
    if request_id:
        metadata.setdefault(REQUEST_ID_KEY, request_id)
    return metadata


def _with_context(details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
    """Adds what the call's own metadata does not already carry (a caller's ``call_context`` wins)."""
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    for key, value in call_context().items():
        if key not in metadata:
            metadata[key] = value
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


class ContextInjector(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """Adds ``traceparent`` and ``x-request-id`` to every outgoing call."""

    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(_with_context(client_call_details), request)

    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(_with_context(client_call_details), request)


def insecure_channel(target: str) -> grpc.aio.Channel:
    """An asyncio channel to ``target`` with context propagation and large message limits."""
    return grpc.aio.insecure_channel(
        target,
        interceptors=[ContextInjector()],
        options=[
            # Spread calls over every address a headless Service resolves to.
            ("grpc.lb_policy_name", "round_robin"),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            # Reconnect to a restarted service within about a second: gRPC's default backoff
            # (1 s growing 1.6x to 120 s) left a worker waiting ~5 s after a policy restart had
            # finished (services/orchestrator/retry.py waits for it; docs/reliability.md).
            ("grpc.initial_reconnect_backoff_ms", 200),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ],
    )
