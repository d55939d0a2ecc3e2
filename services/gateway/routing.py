"""The routing table: (task type, effort, difficulty bin) → strategy and budget, from a versioned file.

The table is data, not code, so the calibration pipeline can refit it (and the difficulty
estimator it names, with its fitted parameters) without touching the gateway. It is validated
completely at start-up: a table that names an unknown task type, effort, strategy or bin, or
whose estimator parameters do not fit the gateway's features, fails loudly there, not on a
request. ``routes`` serve every task type; ``task_routes`` override them per task type and
effort. Any strategy may serve any task type (the task type is a default, not a gate); what a
request's features forbid (tools, response formats, logprobs) is rerouted per request
(``services/jobs/compat.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.common.difficulty_features import FEATURE_DIM, FEATURE_SET
from services.common.task_type import TaskType
from services.gateway.effort import EFFORTS
from services.gateway.protocol import Effort, StrategyName, TTCOptions, VerifierName
from services.gateway.protocol.ladder import RouteExpectation as RouteExpectation  # a route's field; the card's too

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
    params: dict[str, float | int | str | bool | dict[str, Any] | list[Any]] = Field(default_factory=dict)
    expected: RouteExpectation | None = Field(
        None, description="Calibration's figures for this route; absent: uncalibrated (never sent to a worker)."
    )


class RidgeParams(_Strict):
    """A fitted ridge (``evaluation.routing.difficulty.RidgeEstimator.to_json``):
    difficulty = clip(((x - mean) / scale) · weights + bias, 0, 1)."""

    kind: Literal["ridge"] = "ridge"
    alpha: float = Field(..., ge=0)
    bias: float
    weights: list[float]
    mean: list[float]
    scale: list[float]

    @model_validator(mode="after")
    def _shapes(self) -> RidgeParams:
        for name in ("weights", "mean", "scale"):
            if len(getattr(self, name)) != FEATURE_DIM:
                raise ValueError(f"ridge.{name} has {len(getattr(self, name))} values; the features have {FEATURE_DIM}")
        if any(not s > 0 for s in self.scale):
            raise ValueError("ridge.scale values must be positive")
        return self


class EstimatorSpec(_Strict):
    """``probe``: a few short policy samples (their tokens are counted); ``embedding``: a ridge
    over the prompt's MiniLM embedding and text features (no tokens); ``none``: no estimate."""

    kind: Literal["probe", "embedding", "none"] = "probe"
    samples: int = Field(3, ge=2, le=16)
    max_tokens: int = Field(48, ge=1, le=1024)
    temperature: float = Field(0.8, ge=0, le=2)
    features: str | None = Field(None, description=f"embedding only: the feature layout, {FEATURE_SET!r}.")
    ridge: RidgeParams | None = Field(None, description="embedding only: the fitted parameters.")

    @model_validator(mode="after")
    def _embedding_params(self) -> EstimatorSpec:
        if self.kind == "embedding":
            if self.ridge is None:
                raise ValueError("estimator kind 'embedding' needs its fitted 'ridge' parameters")
            if self.features != FEATURE_SET:
                raise ValueError(
                    f"estimator.features is {self.features!r}, but this gateway computes {FEATURE_SET!r}: "
                    "recalibrate with the current feature function"
                )
        elif self.ridge is not None or self.features is not None:
            raise ValueError(f"'ridge' and 'features' belong to the 'embedding' estimator, not {self.kind!r}")
        return self


class DifficultyBin(_Strict):
    name: str = Field(..., min_length=1)
    max: float = Field(..., ge=0, le=1, description="Upper bound (inclusive) of the bin's difficulty in [0, 1].")


EffortRoutes = dict[Effort, dict[str, Route]]


class RoutingTable(_Strict):
    version: int = Field(..., ge=1)
    description: str = ""
    provenance: dict[str, Any] = Field(
        default_factory=dict, description="Free-form: the data, model, date and report the table was calibrated on."
    )
    estimator: EstimatorSpec = Field(default_factory=EstimatorSpec)
    difficulty_bins: list[DifficultyBin] = Field(..., min_length=1)
    routes: EffortRoutes
    task_routes: dict[TaskType, EffortRoutes] = Field(
        default_factory=dict, description="Per task type, efforts whose routes replace those of 'routes'."
    )
    escalation_model: str | None = Field(
        None,
        min_length=1,
        description="The larger model the table's cascade routes escalate to (fitted on its pools): a gateway "
        "serving the table must have a deployment of it (TTC_GATEWAY_POLICY_TARGETS), and the workers escalate "
        "to it (TTC_ORCHESTRATOR_ESCALATION_MODEL). Required when any route is a cascade.",
    )

    @model_validator(mode="after")
    def _complete(self) -> RoutingTable:
        names = [b.name for b in self.difficulty_bins]
        if sorted(b.max for b in self.difficulty_bins) != [b.max for b in self.difficulty_bins]:
            raise ValueError("difficulty_bins must be sorted by max")
        if self.difficulty_bins[-1].max < 1.0:
            raise ValueError("the last difficulty bin must reach 1.0")
        for effort in EFFORTS:
            if not self.routes.get(effort):
                raise ValueError(f"routes has no entry for effort {effort!r}")
        tables: list[tuple[str, EffortRoutes]] = [("routes", self.routes)]
        tables += [(f"task_routes.{t}", r) for t, r in self.task_routes.items()]
        for where, routes in tables:
            for effort, bins in routes.items():
                _check_bins(f"{where}.{effort}", bins, names)
        if self.escalation_model is None and self.escalates():
            raise ValueError("the table routes to 'cascade' but names no escalation_model to escalate to")
        return self

    def escalates(self) -> bool:
        """Whether any route is a cascade (so serving the table needs its escalation model)."""
        every = [self.routes, *self.task_routes.values()]
        return any(r.strategy == "cascade" for routes in every for bins in routes.values() for r in bins.values())

    def effort_routes(self, effort: Effort, task_type: TaskType | None = None) -> dict[str, Route]:
        """The bins → route map for ``effort``: the task type's override, else the default."""
        override = self.task_routes.get(task_type, {}) if task_type is not None else {}
        return override.get(effort) or self.routes[effort]

    def needs_difficulty(self, effort: Effort, task_type: TaskType | None = None) -> bool:
        """Whether routing ``effort`` (for ``task_type``) depends on the difficulty estimate."""
        return ANY_BIN not in self.effort_routes(effort, task_type) and self.estimator.kind != "none"

    def bin_of(self, difficulty: float) -> str:
        for b in self.difficulty_bins:
            if difficulty <= b.max:
                return b.name
        return self.difficulty_bins[-1].name

    def route(self, effort: Effort, difficulty_bin: str | None, task_type: TaskType | None = None) -> Route:
        """The route for a request; ``task_type`` None means the default ``routes``."""
        bins = self.effort_routes(effort, task_type)
        if ANY_BIN in bins:
            return bins[ANY_BIN]
        if difficulty_bin is None:  # estimator disabled: take the middle bin
            names = [b.name for b in self.difficulty_bins]
            difficulty_bin = names[len(names) // 2]
        return bins[difficulty_bin]


def _check_bins(where: str, bins: dict[str, Route], names: list[str]) -> None:
    """Either one ``"*"`` route or one route per bin name, nothing else."""
    if ANY_BIN in bins:
        if len(bins) != 1:
            raise ValueError(f"{where}: '*' cannot be combined with per-bin routes")
    elif sorted(bins) != sorted(names):
        raise ValueError(f"{where} must name every bin {names} or use '*' (it names {sorted(bins)})")


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
    if update:  # calibration measured the route as the table has it, not as the request changed it
        update["expected"] = None
    return route.model_copy(update=update)
