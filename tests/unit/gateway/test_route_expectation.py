"""``RouteExpectation``: the calibrated figures a route may carry (the contract with the route fitter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from services.gateway.protocol import TTCOptions
from services.gateway.routing import Route, RouteExpectation, apply_overrides, load_routing_table

TABLE = Path("services/gateway/routing/routing.v2.json")
EXPECTED = {
    "accuracy": 0.6,
    "interval": [0.4, 0.78],
    "problems": 30,
    "generated_tokens": 210.5,
    "prompt_tokens": 80.0,
    "p50_latency_s": 1.2,
    "source": "pools: docs/data/calibration/pools/x (30 problems)",
}


def test_a_table_with_expectations_loads_and_keeps_them(tmp_path: Path) -> None:
    raw = json.loads(TABLE.read_text())
    raw["routes"]["none"]["*"]["expected"] = EXPECTED
    path = tmp_path / "routing.m.json"
    path.write_text(json.dumps(raw))
    route = load_routing_table(path).route("none", None)
    assert route.expected is not None
    assert route.expected.interval == (0.4, 0.78)
    assert route.expected.problems == 30
    assert load_routing_table(TABLE).route("none", None).expected is None  # the shipped table: uncalibrated


@pytest.mark.parametrize(
    "change",
    [
        {"accuracy": 1.2},
        {"interval": [0.8, 0.4]},
        {"interval": [-0.1, 0.5]},
        {"problems": -1},
        {"generated_tokens": -3},
        {"source": ""},
        {"surprise": 1},
    ],
)
def test_expectations_are_strict(change: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        RouteExpectation.model_validate({**EXPECTED, **change})


def test_an_overridden_route_drops_the_figures_measured_for_the_table_route() -> None:
    route = Route(strategy="single", token_budget=100, expected=RouteExpectation.model_validate(EXPECTED))
    assert apply_overrides(route, None).expected is not None
    assert apply_overrides(route, TTCOptions()).expected is not None
    assert apply_overrides(route, TTCOptions(n=3)).expected is None
