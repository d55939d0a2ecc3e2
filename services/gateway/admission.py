"""Effort and admission: the effort a request asks for, and what the load makes of it.

The requested effort comes from either spelling OpenAI clients use: ``reasoning_effort: "high"``
(Chat Completions) and ``reasoning: {"effort": "high"}`` (Responses style) mean the same; when
both are given they must agree. Absent both, the model's default applies, else the server's.

Admission control then degrades that effort step by step under pressure and sheds only past
that. Two signals: jobs waiting in the queue and the engines' KV-cache utilization. Each
``degrade_queue_depth`` waiting jobs lower the effective effort one step, as does a KV cache
above ``degrade_kv_utilization``; beyond ``max_queue_depth`` or ``shed_kv_utilization`` the
request is refused with 429 and ``Retry-After``. Pure: the caller supplies the signals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.common.errors import InvalidArgument
from services.gateway.effort import EFFORTS
from services.gateway.protocol import Effort


def normalize_effort(
    reasoning_effort: Effort | None,
    reasoning: Effort | None,
    model: str,
    model_defaults: dict[str, Effort],
    default: Effort,
) -> Effort:
    """The requested effort: explicit field, else the model's default, else the global default."""
    if reasoning_effort is not None and reasoning is not None and reasoning_effort != reasoning:
        raise InvalidArgument(
            f"reasoning_effort={reasoning_effort!r} contradicts reasoning.effort={reasoning!r}",
            field="reasoning_effort",
        )
    explicit = reasoning_effort if reasoning_effort is not None else reasoning
    if explicit is not None:
        return explicit
    return model_defaults.get(model, default)


def step_down(effort: Effort, steps: int) -> Effort:
    """``effort`` lowered by ``steps`` levels, never below ``none``."""
    return EFFORTS[max(0, EFFORTS.index(effort) - max(0, steps))]


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
