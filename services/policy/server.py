"""Policy service entry point: settings → logging → tracing → engine self-check → engine → gRPC →
close engine. A failed self-check (``engine_check.py``) is one logged line and exit status 3: the
policy never reports SERVING on an engine that dies at its first decode."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys

from services.common.grpc_server import ServicerBinding, serve_grpc
from services.common.logging import configure_logging
from services.common.metrics import ServiceMetrics
from services.common.settings import CommonSettings
from services.common.tracing import configure_tracing
from services.gen.ttc.v1 import policy_pb2, policy_pb2_grpc
from services.policy import engine_check
from services.policy.engines import create_engine
from services.policy.metrics import PolicyMetrics
from services.policy.servicer import PolicyServicer
from services.policy.settings import PolicySettings

SERVICE = "policy"
log = logging.getLogger(__name__)


async def serve(settings: PolicySettings, common: CommonSettings) -> None:
    if engine_check.should_check(settings):
        await engine_check.check_engine(settings)
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
    try:
        asyncio.run(serve(settings, common))
    except engine_check.EngineBroken as broken:
        log.error(str(broken))
        sys.exit(engine_check.EXIT_ENGINE_BROKEN)
