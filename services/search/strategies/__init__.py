"""The strategy registry: ``StrategySpec.name`` → strategy class (names as in orchestrator.proto)."""

from __future__ import annotations

from services.common.errors import InvalidArgument
from services.search.strategies.ab_mcts import ABMCTSA, ABMCTSM
from services.search.strategies.adaptive import Adaptive
from services.search.strategies.base import Strategy
from services.search.strategies.best_of_n import BestOfN
from services.search.strategies.budget_forcing import BudgetForcing
from services.search.strategies.cascade import Cascade
from services.search.strategies.code_execution import CodeExecution
from services.search.strategies.config import StrategyInput
from services.search.strategies.mcts import MCTS
from services.search.strategies.program import ProgramOfThought
from services.search.strategies.revision import Revision
from services.search.strategies.single import Single
from services.search.strategies.stepwise import DVTS, BeamSearch
from services.search.strategies.voting import SelfConsistency, WeightedVote

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
        Adaptive,
    )
}


def build(name: str, spec: StrategyInput) -> Strategy:
    """Validate and build the named strategy; unknown names are an ``InvalidArgument``."""
    cls = REGISTRY.get(name)
    if cls is None:
        raise InvalidArgument(f"unknown strategy {name!r}; known: {', '.join(sorted(REGISTRY))}", field="strategy.name")
    return cls.from_input(spec)
