"""Orchestrator process: a Celery worker consuming ``ttc.search`` plus its /metrics endpoint.

Wiring only: settings → logging → tracing → metrics → Celery app and task → worker. The
worker uses a thread pool (jobs wait on gRPC, not CPU) and one asyncio runner per process.
SIGTERM is Celery's warm shutdown: running jobs are not acknowledged, so they are delivered
again to another worker.
"""

from __future__ import annotations

import logging
import os
import socket

from services.common.logging import configure_logging
from services.common.metrics import ServiceMetrics, serve_metrics
from services.common.settings import CommonSettings
from services.common.tracing import configure_tracing
from services.jobs.celery_app import make_celery
from services.jobs.settings import JobsSettings
from services.orchestrator.metrics import OrchestratorMetrics
from services.orchestrator.settings import OrchestratorSettings
from services.orchestrator.worker import JobRunner, register_search_task


def main() -> None:
    common = CommonSettings()
    settings = OrchestratorSettings()
    queue = JobsSettings().queue
    configure_logging("orchestrator", common.log_level, common.log_json)
    if common.log_level.upper() != "DEBUG":
        # Celery's two INFO lines per task ("received", "succeeded in") are logging work on the
        # hot path that says nothing the job metrics and traces do not.
        for name in ("celery.worker.strategy", "celery.app.trace"):
            logging.getLogger(name).setLevel(logging.WARNING)
    configure_tracing("orchestrator", common.otel_endpoint, common.otel_console)
    metrics = OrchestratorMetrics(ServiceMetrics("orchestrator"))
    serve_metrics(metrics.base.registry, settings.metrics_port, settings.host)
    app = make_celery(common.redis_url, queue, settings.visibility_timeout_s, settings.restore_interval_s)
    runner: list[JobRunner] = []

    def get_runner() -> JobRunner:
        if not runner:
            runner.append(JobRunner(settings, common.redis_url, metrics, queue))
        return runner[0]

    register_search_task(app, get_runner)
    get_runner()  # connect before taking jobs
    name = settings.worker_name or f"ttc-worker-{socket.gethostname()}-{os.getpid()}"
    app.worker_main(
        [
            "worker",
            "--pool=threads",
            f"--concurrency={settings.concurrency}",
            f"--queues={queue}",
            f"--hostname={name}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            f"--loglevel={common.log_level}",
        ]
    )


if __name__ == "__main__":
    main()
