"""Policy-specific metric families, added to the service's ``ServiceMetrics`` registry.

Token counts (prompt / generated / cached) and the KV-cache gauge are the common families in
``services.common.metrics``; this module adds what only a policy engine has: aborted
requests and the tokens they had generated, queue lengths, candidates and prefix-cache
counters read from the engine. An aborted or failed call's tokens are counted in
``ttc_tokens_total`` like a finished call's: an abort never hides work the engine did.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from services.common.metrics import LATENCY_BUCKETS, ServiceMetrics
from services.policy.engines.base import EngineStats, Spent


class PolicyMetrics:
    """The policy service's metrics; one instance per process, built in ``server.py``."""

    def __init__(self, base: ServiceMetrics, engine: str, model: str) -> None:
        self.base = base
        self.engine = engine
        self.model = model
        r = base.registry
        self.aborted = Counter(
            "ttc_policy_aborted_requests_total",
            "Engine requests stopped before they finished, by reason: deadline or cancelled.",
            ["service", "model", "reason"],
            registry=r,
        )
        self.aborted_tokens = Counter(
            "ttc_policy_aborted_tokens_total",
            "Tokens the engine generated for requests stopped before they finished, by reason: deadline or "
            "cancelled (also counted in ttc_tokens_total).",
            ["service", "model", "reason"],
            registry=r,
        )
        self.candidates = Counter(
            "ttc_policy_candidates_total",
            "Candidates generated, by finish reason.",
            ["service", "model", "finish"],
            registry=r,
        )
        self.running = Gauge(
            "ttc_policy_requests_running",
            "Requests the engine is running now.",
            ["service", "engine", "model"],
            registry=r,
        )
        self.waiting = Gauge(
            "ttc_policy_requests_waiting",
            "Requests queued for the engine.",
            ["service", "engine", "model"],
            registry=r,
        )
        self.prefix_queries = Gauge(
            "ttc_policy_prefix_cache_queries",
            "Prompt tokens looked up in the engine's prefix cache (cumulative).",
            ["service", "engine", "model"],
            registry=r,
        )
        self.prefix_hits = Gauge(
            "ttc_policy_prefix_cache_hits",
            "Prompt tokens served from the engine's prefix cache (cumulative).",
            ["service", "engine", "model"],
            registry=r,
        )
        self.peak_batch = Gauge(
            "ttc_policy_peak_batch_requests",
            "The most requests one decode step has advanced together since the engine started.",
            ["service", "engine", "model"],
            registry=r,
        )
        self.time_to_first_token = Histogram(
            "ttc_policy_time_to_first_token_seconds",
            "Streaming: time until the first text delta.",
            ["service", "model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )

    def count_abort(self, reason: str, spent: Spent) -> None:
        """A request stopped before it finished, and what the engine had spent on it (the tokens
        first: whoever sees the abort counter move finds them counted)."""
        self.count_unfinished(spent)
        self.aborted_tokens.labels(self.base.service, self.model, reason).inc(spent.completion_tokens)
        self.aborted.labels(self.base.service, self.model, reason).inc()

    def count_unfinished(self, spent: Spent) -> None:
        """The tokens of a request that ended without a result (aborted, or the engine failed)."""
        self.base.count_tokens(
            self.model, prompt=spent.prompt_tokens, generated=spent.completion_tokens, cached=spent.cached_tokens
        )

    def count_candidates(self, finish_reasons: list[str]) -> None:
        for reason in finish_reasons:
            self.candidates.labels(self.base.service, self.model, reason).inc()

    def observe_stats(self, stats: EngineStats) -> None:
        """Copy a fresh engine snapshot into the gauges."""
        labels = (self.base.service, self.engine, self.model)
        self.base.kv_cache_utilization.labels(*labels).set(stats.kv_cache_utilization)
        self.running.labels(*labels).set(stats.running_requests)
        self.waiting.labels(*labels).set(stats.waiting_requests)
        self.prefix_queries.labels(*labels).set(stats.prefix_cache_queries)
        self.prefix_hits.labels(*labels).set(stats.prefix_cache_hits)
        self.peak_batch.labels(*labels).set(stats.peak_batch_requests)
