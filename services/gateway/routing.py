"""The routing table: (effort, difficulty bin) → strategy and budget, loaded from a versioned file.

The table is data, not code, so the load-test issue can recalibrate it (and the difficulty
estimator it names) without touching the gateway. It is validated completely at start-up:
a table that names an unknown effort, strategy or bin fails loudly there, not on a request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.gateway.effort import EFFORTS
from services.gateway.protocol import Effort, StrategyName, TTCOptions, VerifierName

ANY_BIN = "*"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Route(_Strict):
    strategy: StrategyName
    n: int = Field(1, ge=1, le=64)
    token_budget: int = Field(..., ge=1, description="Cap on generated tokens of the whole search.")
    max_policy_calls: int = Field(0, ge=0)
    max_verifier_calls: int = Field(0, ge=0)
    verifier: VerifierName | None = None
    params: dict[str, float | int | str | bool] = Field(default_factory=dict)


class EstimatorSpec(_Strict):
    kind: Literal["probe", "none"] = "probe"
    samples: int = Field(3, ge=2, le=16)
    max_tokens: int = Field(48, ge=1, le=1024)
    temperature: float = Field(0.8, ge=0, le=2)


class DifficultyBin(_Strict):
    name: str = Field(..., min_length=1)
    max: float = Field(..., ge=0, le=1, description="Upper bound (inclusive) of the bin's difficulty in [0, 1].")


class RoutingTable(_Strict):
    version: int = Field(..., ge=1)
    description: str = ""
    estimator: EstimatorSpec = Field(default_factory=EstimatorSpec)
    difficulty_bins: list[DifficultyBin] = Field(..., min_length=1)
    routes: dict[Effort, dict[str, Route]]

    @model_validator(mode="after")
    def _complete(self) -> RoutingTable:
        names = [b.name for b in self.difficulty_bins]
        if sorted(b.max for b in self.difficulty_bins) != [b.max for b in self.difficulty_bins]:
            raise ValueError("difficulty_bins must be sorted by max")
        if self.difficulty_bins[-1].max < 1.0:
            raise ValueError("the last difficulty bin must reach 1.0")
        for effort in EFFORTS:
            bins = self.routes.get(effort)
            if not bins:
                raise ValueError(f"routes has no entry for effort {effort!r}")
            if ANY_BIN in bins:
                if len(bins) != 1:
                    raise ValueError(f"routes.{effort}: '*' cannot be combined with per-bin routes")
            elif sorted(bins) != sorted(names):
                raise ValueError(f"routes.{effort} must name every bin {names} or use '*'")
        return self

    def needs_difficulty(self, effort: Effort) -> bool:
        """Whether routing ``effort`` depends on the difficulty estimate."""
        return ANY_BIN not in self.routes[effort] and self.estimator.kind != "none"

    def bin_of(self, difficulty: float) -> str:
        for b in self.difficulty_bins:
            if difficulty <= b.max:
                return b.name
        return self.difficulty_bins[-1].name

    def route(self, effort: Effort, difficulty_bin: str | None) -> Route:
        bins = self.routes[effort]
        if ANY_BIN in bins:
            return bins[ANY_BIN]
        if difficulty_bin is None:  # estimator disabled: take the middle bin
            names = [b.name for b in self.difficulty_bins]
            difficulty_bin = names[len(names) // 2]
        return bins[difficulty_bin]


def load_routing_table(path: str | Path) -> RoutingTable:
    """Read and validate a routing table file (raises on any problem)."""
    return RoutingTable.model_validate(json.loads(Path(path).read_text()))


def apply_overrides(route: Route, options: TTCOptions | None) -> Route:
    """The route with the request's pinned strategy, n, budget and verifier applied."""
    if options is None:
        return route
    update: dict[str, object] = {}
    if options.strategy is not None:
        update["strategy"] = options.strategy
        if options.strategy != route.strategy:
            update["params"] = {}
    if options.n is not None:
        update["n"] = options.n
    if options.token_budget is not None:
        update["token_budget"] = options.token_budget
    if options.verifier is not None:
        update["verifier"] = options.verifier
    if options.params is not None:
        update["params"] = dict(options.params)
    return route.model_copy(update=update)
