"""The metric families every service exports, under one naming scheme.

All names start with ``ttc_``; the ``service`` label says which process counted. Each process
builds one ``ServiceMetrics`` over its own registry (no module-level globals), and services
add their own families to the same registry in their ``metrics.py``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


@dataclass
class ServiceMetrics:
    """Request metrics every service exports, and the token and KV-cache families for the
    services that have them (``tokens``: the policy and the verifier's judges; ``kv_cache``: the
    policy). A family is registered only where code sets it: an exported series that nothing
    moves would read 0 and lie on a dashboard (tests/e2e/test_observability.py checks)."""

    service: str
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    tokens_family: bool = False
    kv_cache_family: bool = False

    def __post_init__(self) -> None:
        r = self.registry
        self.requests = Counter(
            "ttc_requests_total",
            "Requests handled, by method and status code.",
            ["service", "method", "code"],
            registry=r,
        )
        self.errors = Counter(
            "ttc_errors_total",
            "Requests that ended in an error, by method and status code.",
            ["service", "method", "code"],
            registry=r,
        )
        self.latency = Histogram(
            "ttc_request_duration_seconds",
            "Request latency.",
            ["service", "method"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "ttc_requests_in_flight",
            "Requests being handled now.",
            ["service", "method"],
            registry=r,
        )
        if self.tokens_family:
            self.tokens = Counter(
                "ttc_tokens_total",
                "Tokens processed, by kind: prompt, generated or cached.",
                ["service", "model", "kind"],
                registry=r,
            )
        if self.kv_cache_family:
            self.kv_cache_utilization = Gauge(
                "ttc_kv_cache_utilization",
                "Fraction of the engine's KV cache in use (0..1).",
                ["service", "engine", "model"],
                registry=r,
            )

    def count_tokens(self, model: str, prompt: int = 0, generated: int = 0, cached: int = 0) -> None:
        """Add one call's token counts."""
        for kind, value in (("prompt", prompt), ("generated", generated), ("cached", cached)):
            if value:
                self.tokens.labels(self.service, model, kind).inc(value)


def serve_metrics(registry: CollectorRegistry, port: int, host: str = "0.0.0.0") -> tuple[WSGIServer, threading.Thread]:
    """Serve ``/metrics`` for ``registry`` on a background thread (gRPC services)."""
    return start_http_server(port, addr=host, registry=registry)
