"""Verifier service entry point: wiring only (settings → logging → tracing → clients → serve)."""

from __future__ import annotations

import asyncio

from services.common.grpc_server import ServicerBinding, serve_grpc
from services.common.logging import configure_logging
from services.common.metrics import ServiceMetrics
from services.common.settings import CommonSettings
from services.common.targets import parse_targets
from services.common.tracing import configure_tracing
from services.gen.ttc.v1 import verifier_pb2, verifier_pb2_grpc
from services.verifier.clients import GrpcPolicyScorer, GrpcSandboxRunner
from services.verifier.metrics import VerifierMetrics
from services.verifier.registry import build_registry
from services.verifier.servicer import VerifierServicer
from services.verifier.settings import VerifierSettings

SERVICE = "verifier"


async def serve(settings: VerifierSettings) -> None:
    """Run the verifier until SIGTERM, then close its downstream channels."""
    metrics = ServiceMetrics(SERVICE, tokens_family=True)
    policy = GrpcPolicyScorer(
        settings.policy_target,
        settings.policy_timeout_s,
        concurrency=settings.judge_concurrency,
        targets=parse_targets(settings.policy_targets),
    )
    sandbox = GrpcSandboxRunner(settings.sandbox_target, settings.sandbox_timeout_s)
    servicer = VerifierServicer(build_registry(settings, policy, sandbox), settings, VerifierMetrics(metrics))

    async def close() -> None:
        await policy.close()
        await sandbox.close()

    await serve_grpc(
        [
            ServicerBinding(
                servicer,
                verifier_pb2_grpc.add_VerifierServicer_to_server,
                verifier_pb2.DESCRIPTOR.services_by_name["Verifier"].full_name,
            )
        ],
        metrics=metrics,
        host=settings.host,
        port=settings.port,
        metrics_port=settings.metrics_port,
        on_stop=close,
    )


def main() -> None:
    common = CommonSettings()
    configure_logging(SERVICE, common.log_level, common.log_json)
    configure_tracing(SERVICE, common.otel_endpoint, common.otel_console)
    asyncio.run(serve(VerifierSettings()))
