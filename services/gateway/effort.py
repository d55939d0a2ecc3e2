"""Reasoning effort: the one ordered scale, and the per-model defaults read at start-up.

The order matters: admission control lowers the effective effort one step at a time along it.
Reading a request's effort (either OpenAI spelling) and lowering it under load is the admission
step's (``admission.py``), so serving a request never enters this module.
"""

from __future__ import annotations

from typing import cast

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
