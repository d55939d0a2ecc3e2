"""Gateway metric families, on the shared ``ServiceMetrics`` registry (``ttc_gateway_*``)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import Counter, Gauge, Histogram

from services.common.metrics import LATENCY_BUCKETS, ServiceMetrics

TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)


class GatewayMetrics:
    """Requests by effort/strategy/status, queue depth and wait, degradations, reasoning tokens, TTFT."""

    def __init__(self, base: ServiceMetrics) -> None:
        self.base = base
        r = base.registry
        self.requests = Counter(
            "ttc_gateway_requests_total",
            "Completion requests by applied effort, strategy and HTTP status.",
            ["endpoint", "effort", "strategy", "status"],
            registry=r,
        )
        self.queue_depth = Gauge("ttc_gateway_queue_depth", "Jobs waiting in the search queue.", registry=r)
        self.queue_wait = Histogram(
            "ttc_gateway_queue_wait_seconds",
            "Time a job waited in the queue before a worker took it.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.degradations = Counter(
            "ttc_gateway_effort_degradations_total",
            "Requests whose effort admission control lowered, by requested and applied effort and signal.",
            ["requested", "applied", "signal"],
            registry=r,
        )
        self.shed = Counter(
            "ttc_gateway_shed_total", "Requests refused with 429 by admission control.", ["reason"], registry=r
        )
        self.reasoning_tokens = Counter(
            "ttc_gateway_reasoning_tokens_total",
            "Hidden reasoning tokens spent, by applied effort.",
            ["effort"],
            registry=r,
        )
        self.completion_tokens = Counter(
            "ttc_gateway_completion_tokens_total",
            "Completion tokens (answer + reasoning), by applied effort.",
            ["effort"],
            registry=r,
        )
        self.ttft = Histogram(
            "ttc_gateway_time_to_first_token_seconds",
            "Time from request to the first model token streamed (the model's reasoning tokens or the answer; "
            "never an event line the search wrote), or to the full response when not streamed.",
            ["stream"],
            buckets=TTFT_BUCKETS,
            registry=r,
        )
        self.ttfat = Histogram(
            "ttc_gateway_time_to_first_answer_token_seconds",
            "Streamed requests: time from the request to the first token of the answer itself (the "
            "search's reasoning tokens do not count; time_to_first_token counts them).",
            buckets=TTFT_BUCKETS,
            registry=r,
        )
        self.kv_utilization = Gauge(
            "ttc_gateway_engine_kv_utilization",
            "Engine KV-cache utilization (0..1) the gateway last polled from the policy's GetStats: the value "
            "admission control degrades and sheds on.",
            registry=r,
        )
        self.cancellations = Counter(
            "ttc_gateway_cancellations_total", "Jobs cancelled, by cause (disconnect, api).", ["cause"], registry=r
        )

    def watch_kv_utilization(self, read: Callable[[], float]) -> None:
        """Read ``ttc_gateway_engine_kv_utilization`` from ``read`` at every scrape (the policy watch's
        last polled value), so the gauge is always what admission control sees."""
        self.kv_utilization.set_function(read)
