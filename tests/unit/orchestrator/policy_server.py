"""An in-process policy servicer behind real gRPC on 127.0.0.1, for the client-side tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc

from services.gen.ttc.v1 import policy_pb2_grpc


@asynccontextmanager
async def serving(servicer: policy_pb2_grpc.PolicyServicer) -> AsyncIterator[str]:
    """``servicer`` as the policy service on a free port; yields its target."""
    server = grpc.aio.server()
    policy_pb2_grpc.add_PolicyServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)
