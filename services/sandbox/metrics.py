"""Sandbox metrics on the service's registry: outcomes, durations, queue, kills."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from services.common.metrics import ServiceMetrics

DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class SandboxMetrics:
    """Families named ``ttc_sandbox_*``; every label value comes from a small fixed set."""

    def __init__(self, base: ServiceMetrics) -> None:
        r = base.registry
        self.service = base.service
        self.executions = Counter(
            "ttc_sandbox_executions_total",
            "Sandboxed runs (program and test runs), by status.",
            ["service", "status"],
            registry=r,
        )
        self.duration = Histogram(
            "ttc_sandbox_execution_duration_seconds",
            "Wall-clock time of one sandboxed run, by status.",
            ["service", "status"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.cpu = Histogram(
            "ttc_sandbox_cpu_seconds",
            "CPU time of one sandboxed run.",
            ["service"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.queue_wait = Histogram(
            "ttc_sandbox_queue_wait_seconds",
            "Time a request waited for a free execution slot.",
            ["service"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "ttc_sandbox_queue_depth",
            "Requests waiting for an execution slot.",
            ["service"],
            registry=r,
        )
        self.running = Gauge(
            "ttc_sandbox_running",
            "Requests holding an execution slot.",
            ["service"],
            registry=r,
        )
        self.kills = Counter(
            "ttc_sandbox_kills_total",
            "Process trees the service killed, by reason.",
            ["service", "reason"],
            registry=r,
        )
        self.rejected = Counter(
            "ttc_sandbox_rejected_total",
            "Requests refused because the queue was full.",
            ["service"],
            registry=r,
        )

    def pool_changed(self, waiting: int, running: int) -> None:
        self.queue_depth.labels(self.service).set(waiting)
        self.running.labels(self.service).set(running)

    def killed(self, reason: str) -> None:
        self.kills.labels(self.service, reason).inc()

    def observe_run(self, status: str, wall_seconds: float, cpu_seconds: float) -> None:
        self.executions.labels(self.service, status).inc()
        self.duration.labels(self.service, status).observe(wall_seconds)
        self.cpu.labels(self.service).observe(cpu_seconds)
