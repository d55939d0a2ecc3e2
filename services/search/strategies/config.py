"""A strategy's configuration as the job carries it, before and after validation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.common.errors import InvalidArgument


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0


@dataclass(frozen=True)
class StrategyInput:
    """A strategy's raw configuration, as the job carries it (before validation)."""

    n: int = 0
    verifier: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    reference: str = ""
    sampling: Sampling = field(default_factory=Sampling)


def read_n(spec: StrategyInput, default: int, *, minimum: int = 1, maximum: int = 256) -> int:
    n = spec.n or default
    if not minimum <= n <= maximum:
        raise InvalidArgument(f"must be between {minimum} and {maximum}, got {n}", field="strategy.n")
    return n
