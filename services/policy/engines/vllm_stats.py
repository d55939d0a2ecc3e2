"""vLLM's engine statistics for the policy's gauges: a stat logger registered with the engine
receives every ``SchedulerStats`` the engine core reports (KV-cache usage, running and waiting
requests, prefix-cache queries and hits), the same feed vLLM's own ``vllm:*`` metrics use.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any


@dataclass
class LiveStats:
    """What the engine core last reported, plus prefix-cache counters summed over reports."""

    kv_cache_usage: float = 0.0
    running: int = 0
    waiting: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    reports: int = 0


def stat_logger_factory(live: LiveStats) -> Any:
    """A per-engine stat logger factory feeding ``live`` (built lazily: it subclasses a vLLM class)."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class _Collector(StatLoggerBase):  # type: ignore[misc]  # vLLM is not followed by mypy (pyproject)
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            self.engine_index = engine_index

        def record(
            self,
            scheduler_stats: Any,
            iteration_stats: Any,
            mm_cache_stats: Any = None,
            engine_idx: int = 0,
        ) -> None:
            if scheduler_stats is None:
                return
            live.kv_cache_usage = float(scheduler_stats.kv_cache_usage)
            live.running = int(scheduler_stats.num_running_reqs)
            live.waiting = int(scheduler_stats.num_waiting_reqs) + int(scheduler_stats.num_skipped_waiting_reqs)
            prefix = scheduler_stats.prefix_cache_stats
            if prefix is not None:
                live.prefix_queries += int(prefix.queries)
                live.prefix_hits += int(prefix.hits)
            live.reports += 1

        def log_engine_initialized(self) -> None:
            return None

    return functools.partial(_Collector)
