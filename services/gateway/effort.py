"""Reasoning effort: one ordered scale, read from either spelling OpenAI clients use.

``reasoning_effort: "high"`` (Chat Completions) and ``reasoning: {"effort": "high"}``
(Responses style) mean the same; when both are given they must agree. The order matters:
admission control lowers the effective effort one step at a time along it.
"""

from __future__ import annotations

from typing import cast

from services.common.errors import InvalidArgument
from services.gateway.protocol import Effort

EFFORTS: tuple[Effort, ...] = ("none", "minimal", "low", "medium", "high", "xhigh")


def parse_model_defaults(spec: str) -> dict[str, Effort]:
    """``"model=effort,model2=effort"`` → mapping; raises ``ValueError`` on an unknown effort."""
    defaults: dict[str, Effort] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        model, _, effort = item.partition("=")
        if effort.strip() not in EFFORTS:
            raise ValueError(f"unknown effort {effort!r} for model {model!r}; expected one of {EFFORTS}")
        defaults[model.strip()] = cast(Effort, effort.strip())
    return defaults


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
