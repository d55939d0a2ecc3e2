"""A stand-in for the gateway's view of the policy fleet (``fleet.Watch``), as the planner reads it:
whether the policy is up, its KV utilization, model aliases and each model's context window."""

from __future__ import annotations

from collections.abc import Mapping

from services.common.errors import Unavailable
from services.gen.ttc.v1 import policy_pb2


class ModelWatch:
    """Every model name is served (through ``aliases`` where one is given) with ``max_context``;
    ``model()`` counts its calls and raises :class:`Unavailable` while ``up`` is false."""

    def __init__(self, *, up: bool = True, max_context: int = 8192, aliases: Mapping[str, str] | None = None) -> None:
        self.up = up
        self.kv_utilization = 0.0
        self.max_context = max_context
        self.aliases = dict(aliases or {})
        self.model_calls = 0

    def resolve(self, name: str) -> str:
        return self.aliases.get(name, name)

    def model(self, name: str) -> policy_pb2.ModelInfo:
        self.model_calls += 1
        if not self.up:
            raise Unavailable("the policy service is down")
        return policy_pb2.ModelInfo(id=self.resolve(name), max_context=self.max_context)
