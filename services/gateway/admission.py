"""Admission control: degrade effort step by step under pressure, shed only past that.

Two signals: jobs waiting in the queue and the engines' KV-cache utilization. Each
``degrade_queue_depth`` waiting jobs lower the effective effort one step, as does a KV cache
above ``degrade_kv_utilization``; beyond ``max_queue_depth`` or ``shed_kv_utilization`` the
request is refused with 429 and ``Retry-After``. Pure: the caller supplies the signals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.gateway.effort import EFFORTS, step_down
from services.gateway.protocol import Effort


@dataclass(frozen=True)
class Thresholds:
    max_queue_depth: int
    degrade_queue_depth: int
    degrade_kv_utilization: float
    shed_kv_utilization: float


@dataclass(frozen=True)
class Decision:
    effort: Effort
    degraded_by: list[str] = field(default_factory=list)
    shed_reason: str = ""

    @property
    def shed(self) -> bool:
        return bool(self.shed_reason)


def admit(requested: Effort, queue_depth: int, kv_utilization: float, t: Thresholds) -> Decision:
    """The effort to apply (or a shed reason) given the current queue depth and KV utilization."""
    if queue_depth >= t.max_queue_depth:
        return Decision(requested, shed_reason=f"queue full ({queue_depth} jobs waiting, limit {t.max_queue_depth})")
    if kv_utilization >= t.shed_kv_utilization:
        return Decision(
            requested, shed_reason=f"engine KV cache {kv_utilization:.0%} full (limit {t.shed_kv_utilization:.0%})"
        )
    steps = 0
    degraded_by: list[str] = []
    queue_steps = queue_depth // t.degrade_queue_depth
    if queue_steps:
        steps += queue_steps
        degraded_by.append("queue_depth")
    if kv_utilization >= t.degrade_kv_utilization:
        steps += 1
        degraded_by.append("kv_utilization")
    applied = step_down(requested, steps)
    if EFFORTS.index(applied) == EFFORTS.index(requested):
        degraded_by = []
    return Decision(applied, degraded_by)
