"""The strategy registry: ``StrategySpec.name`` → strategy class (names as in orchestrator.proto)."""

from __future__ import annotations

from services.common.errors import InvalidArgument
from services.orchestrator.strategies.ab_mcts import ABMCTSA, ABMCTSM
from services.orchestrator.strategies.base import Strategy
from services.orchestrator.strategies.best_of_n import BestOfN
from services.orchestrator.strategies.budget_forcing import BudgetForcing
from services.orchestrator.strategies.cascade import Cascade
from services.orchestrator.strategies.code_execution import CodeExecution
from services.orchestrator.strategies.config import StrategyInput
from services.orchestrator.strategies.mcts import MCTS
from services.orchestrator.strategies.program import ProgramOfThought
from services.orchestrator.strategies.revision import Revision
from services.orchestrator.strategies.single import Single
from services.orchestrator.strategies.stepwise import DVTS, BeamSearch
from services.orchestrator.strategies.voting import SelfConsistency, WeightedVote

REGISTRY: dict[str, type[Strategy]] = {
    cls.name: cls
    for cls in (
        Single,
        SelfConsistency,
        WeightedVote,
        BestOfN,
        BeamSearch,
        DVTS,
        MCTS,
        ABMCTSA,
        ABMCTSM,
        BudgetForcing,
        Revision,
        ProgramOfThought,
        CodeExecution,
        Cascade,
    )
}


def build(name: str, spec: StrategyInput) -> Strategy:
    """Validate and build the named strategy; unknown names are an ``InvalidArgument``."""
    cls = REGISTRY.get(name)
    if cls is None:
        raise InvalidArgument(f"unknown strategy {name!r}; known: {', '.join(sorted(REGISTRY))}", field="strategy.name")
    return cls.from_input(spec)
