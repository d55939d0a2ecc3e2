"""``build_app``: the FastAPI application with every part of the gateway wired in.

All state lives on one ``Gateway`` object (``state.py``) created in the lifespan (no module
globals), so a test can build several apps side by side and every router reaches its
collaborators through ``request.app.state.gateway``; no router imports this module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

from fastapi import FastAPI

from services.common.grpc_client import insecure_channel
from services.common.metrics import ServiceMetrics
from services.common.settings import CommonSettings
from services.gateway.auth import Authenticator, parse_api_keys
from services.gateway.difficulty import load_encoder, make_estimator
from services.gateway.effort import EFFORTS, parse_model_defaults
from services.gateway.errors import install_error_handlers
from services.gateway.fleet import PolicyFleet, RoutedPolicy, fleet_targets, parse_pairs
from services.gateway.limits import Limiter
from services.gateway.metrics import GatewayMetrics
from services.gateway.middleware import ObserveMiddleware
from services.gateway.modality import load_modality_models, modality_classifiers
from services.gateway.model_tables import ModelRouting, TableFile, check_escalation, load_model_tables
from services.gateway.planning import Planner
from services.gateway.responses.service import ResponsesService
from services.gateway.responses.store import ResponseStore
from services.gateway.routers import chat, completions, health, jobs, models, responses, traces
from services.gateway.serving import Serving
from services.gateway.session import Sessions
from services.gateway.settings import GatewaySettings
from services.gateway.state import Gateway
from services.gateway.tracing import TracingMiddleware
from services.gateway.upstream import PolicyWatch
from services.gen.ttc.v1 import policy_pb2_grpc
from services.jobs import validation
from services.jobs.celery_app import make_celery
from services.jobs.queue import JobQueue
from services.jobs.redis_client import redis_client
from services.jobs.settings import JobsSettings
from services.jobs.trace_store import TraceStore
from services.jobs.validation import JobValidator


def _check_settings(settings: GatewaySettings) -> None:
    if settings.default_effort not in EFFORTS:
        raise ValueError(f"TTC_GATEWAY_DEFAULT_EFFORT={settings.default_effort!r} is not one of {EFFORTS}")


def build_app(
    settings: GatewaySettings,
    common: CommonSettings,
    validate_job: JobValidator = validation.validate,
    jobs_settings: JobsSettings | None = None,
) -> FastAPI:
    """The gateway app; connections open in its lifespan and close when it stops.

    ``validate_job`` checks a job before it is enqueued: the structural rules by default, the
    orchestrator's full validation when the process entry point hands it in (``ttc serve``).
    ``jobs_settings`` names the queue (``TTC_JOBS_*``, read from the environment when not given)."""
    queue = (jobs_settings or JobsSettings()).queue
    _check_settings(settings)
    model_defaults = parse_model_defaults(settings.model_default_efforts)
    aliases = parse_pairs(settings.model_aliases, "TTC_GATEWAY_MODEL_ALIASES")  # fail at start-up
    # Every table, the default and each model's own, is read and validated now, not on a request.
    tables = load_model_tables(settings.routing_table, settings.routing_tables, aliases)
    check_escalation(tables, parse_pairs(settings.policy_targets, "TTC_GATEWAY_POLICY_TARGETS"))
    # The MiniLM weights, once per app, when some table's estimator embeds.
    embedding = [
        f.table.estimator for f in [tables.default, *tables.by_model.values()] if f.table.estimator.kind == "embedding"
    ]
    encoder = load_encoder(embedding[0]) if embedding else None
    modality = modality_classifiers(load_modality_models(settings.modality_models), encoder)
    fleet_targets(settings.policy_target, settings.policy_targets)
    auth = Authenticator(parse_api_keys(settings.api_keys), parse_api_keys(settings.admin_api_keys))
    base_metrics = ServiceMetrics("gateway")
    metrics = GatewayMetrics(base_metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = redis_client(common.redis_url)
        channels = {t: insecure_channel(t) for t in fleet_targets(settings.policy_target, settings.policy_targets)}
        watch = PolicyFleet(
            [
                PolicyWatch(policy_pb2_grpc.PolicyStub(c), t, settings.stats_interval_s, settings.policy_grace_s)
                for t, c in channels.items()
            ],
            aliases,
        )
        stub = cast(policy_pb2_grpc.PolicyStub, RoutedPolicy(watch))  # the probe goes to the model's deployment
        metrics.watch_kv_utilization(lambda: watch.kv_utilization)
        celery = make_celery(common.redis_url, queue)  # only to build messages; the broker options are the workers'
        jobs_queue = JobQueue(client, celery, queue, settings.result_ttl_s)

        def routing(source: TableFile) -> ModelRouting:
            table = source.table
            return ModelRouting(table, make_estimator(table.estimator, stub, settings.job_timeout_s, encoder))

        default = routing(tables.default)
        planner = Planner(
            settings,
            default.table,
            default.estimator,
            watch,
            metrics,
            model_defaults,
            validate_job,
            {model: routing(source) for model, source in tables.by_model.items()},
            modality,
        )
        limiter = Limiter(client, settings.rate_limit_per_minute, settings.token_limit_per_minute)
        sessions = Sessions(planner, jobs_queue, limiter, metrics, settings.job_timeout_s, settings.retry_after_s)
        serving = Serving(sessions)
        app.state.gateway = Gateway(
            settings,
            client,
            watch,
            serving,
            TraceStore(client, settings.result_ttl_s),
            auth,
            metrics,
            ResponsesService(sessions, ResponseStore(client, settings.response_ttl_s)),
            tables,
        )
        await watch.refresh()
        watch.start()
        try:
            yield
        finally:
            await sessions.aclose()
            await watch.stop()
            for channel in channels.values():
                await channel.close()
            await client.aclose()

    app = FastAPI(
        title="ttc-serve gateway",
        version="1.0.0",
        description="OpenAI-compatible API whose reasoning effort buys test-time compute.",
        lifespan=lifespan,
    )
    install_error_handlers(app)

    app.add_middleware(ObserveMiddleware, metrics=base_metrics, max_request_bytes=settings.max_request_bytes)
    app.add_middleware(TracingMiddleware)  # outermost: the server span covers every answer, 413 included

    for router in (
        chat.router,
        completions.router,
        responses.router,
        models.router,
        jobs.router,
        traces.router,
        health.router,
    ):
        app.include_router(router)
    return app
