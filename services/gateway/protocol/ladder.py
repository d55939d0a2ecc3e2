"""The ladder card: what each effort buys on a model, as ``GET /v1/models`` and
``GET /v1/models/{model}/ladder`` serve it, so a client can pick an effort knowing its price.

``RouteExpectation`` is both a route's field in the routing table file (written by the route
fitter, ``evaluation/routing/route_fit.py``) and what the card serves, so it lives here, once;
``services/gateway/routing.py`` re-exports it. The card's ``Model`` entries keep every OpenAI
``Model`` field and add ``ttc``: the official SDK's ``Model`` allows extra fields, so stock
clients still parse the list.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from services.gateway.protocol.common import Effort, StrategyName, Strict, VerifierName
from services.gateway.protocol.replies import Model


class RouteExpectation(Strict):
    """What calibration measured for a route; a route without one is uncalibrated. The figures
    are over the calibration problems the route was fitted on."""

    accuracy: float = Field(..., ge=0, le=1, description="Mean correctness on the calibration problems.")
    interval: tuple[float, float] = Field(..., description="95% interval of the accuracy (bootstrap or Wilson).")
    problems: int = Field(..., ge=0, description="How many calibration problems the figures are over.")
    generated_tokens: float = Field(..., ge=0, description="Mean generated tokens per request.")
    prompt_tokens: float = Field(..., ge=0, description="Mean prompt tokens per request.")
    p50_latency_s: float | None = Field(None, ge=0, description="Median latency per request in seconds.")
    source: str = Field(..., min_length=1, description="What the figures were measured on.")

    @model_validator(mode="after")
    def _interval(self) -> RouteExpectation:
        low, high = self.interval
        if not 0 <= low <= high <= 1:
            raise ValueError(f"interval {list(self.interval)} must satisfy 0 <= low <= high <= 1")
        return self


class LadderConfiguration(Strict):
    """A route exactly as the planner runs it (before a request's own ``max_tokens`` raises the
    budget to fit one answer, or its tools or format reroute the strategy)."""

    strategy: StrategyName
    n: int
    token_budget: int
    max_policy_calls: int
    max_verifier_calls: int
    verifier: VerifierName | None
    params: dict[str, Any]


class LadderRung(Strict):
    configuration: LadderConfiguration
    expected: RouteExpectation | None = Field(..., description="Calibration's figures; null when not measured.")
    note: str | None = Field(None, description="Why there are no figures, when there are none.")


class LadderBin(Strict):
    name: str
    max: float


class LadderTable(Strict):
    """The routing table file the card is computed from."""

    path: str
    sha256: str
    version: int
    description: str
    estimator: Literal["probe", "embedding", "none"]
    difficulty_bins: list[LadderBin]
    provenance: dict[str, Any]


class LadderCard(Strict):
    object: Literal["ttc.ladder_card"] = "ttc.ladder_card"
    model: str
    own_table: bool = Field(..., description="The model is named in TTC_GATEWAY_ROUTING_TABLES (else: the default).")
    calibrated: bool = Field(..., description="The model has its own table and every route carries figures.")
    note: str | None = Field(None, description="What an uncalibrated model gets instead, stated.")
    table: LadderTable
    default_serves: list[str] = Field(
        ..., description="The task types the 'default' kind routes (those the table has no rows of its own for)."
    )
    kinds: dict[str, dict[Effort, dict[str, LadderRung]]] = Field(
        ..., description="task kind → effort → difficulty bin ('*': any, no estimate made) → rung."
    )


class ModelCard(Model):
    """An OpenAI ``Model`` plus its ladder card."""

    ttc: LadderCard


class ModelCardList(Strict):
    object: Literal["list"] = "list"
    data: list[ModelCard]
