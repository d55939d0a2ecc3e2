"""Policy service entry point: settings → logging → tracing → engine → gRPC → close engine."""

from __future__ import annotations

import asyncio
import contextlib

from services.common.grpc_server import ServicerBinding, serve_grpc
from services.common.logging import configure_logging
from services.common.metrics import ServiceMetrics
from services.common.settings import CommonSettings
from services.common.tracing import configure_tracing
from services.gen.ttc.v1 import policy_pb2, policy_pb2_grpc
from services.policy.engines import create_engine
from services.policy.metrics import PolicyMetrics
from services.policy.servicer import PolicyServicer
from services.policy.settings import PolicySettings

SERVICE = "policy"


async def serve(settings: PolicySettings, common: CommonSettings) -> None:
    engine = await create_engine(settings)
    metrics = PolicyMetrics(
        ServiceMetrics(SERVICE, tokens_family=True, kv_cache_family=True), engine.kind, engine.model_id
    )
    servicer = PolicyServicer(engine, settings, metrics)
    refresher = asyncio.create_task(servicer.refresh_stats(settings.stats_interval_s))
    try:
        await serve_grpc(
            [
                ServicerBinding(
                    servicer,
                    policy_pb2_grpc.add_PolicyServicer_to_server,
                    policy_pb2.DESCRIPTOR.services_by_name["Policy"].full_name,
                )
            ],
            metrics=metrics.base,
            host=settings.host,
            port=settings.port,
            metrics_port=settings.metrics_port,
        )
    finally:
        refresher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await refresher
        await engine.close()


def main() -> None:
    settings, common = PolicySettings(), CommonSettings()
    configure_logging(SERVICE, common.log_level, common.log_json)
    configure_tracing(SERVICE, common.otel_endpoint, common.otel_console)
    asyncio.run(serve(settings, common))
