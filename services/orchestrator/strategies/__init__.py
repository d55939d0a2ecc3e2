"""The strategy registry: ``StrategySpec.name`` → strategy class (names as in orchestrator.proto)."""

from __future__ import annotations

from services.common.errors import InvalidArgument
from services.orchestrator.strategies.base import Strategy, StrategyInput
from services.orchestrator.strategies.single import Single
from services.orchestrator.strategies.voting import SelfConsistency, WeightedVote

REGISTRY: dict[str, type[Strategy]] = {
    cls.name: cls
    for cls in (
        Single,
        SelfConsistency,
        WeightedVote,
    )
}


def build(name: str, spec: StrategyInput) -> Strategy:
    """Validate and build the named strategy; unknown names are an ``InvalidArgument``."""
    cls = REGISTRY.get(name)
    if cls is None:
        raise InvalidArgument(f"unknown strategy {name!r}; known: {', '.join(sorted(REGISTRY))}", field="strategy.name")
    return cls.from_input(spec)
