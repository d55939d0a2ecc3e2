"""Grid specs are validated before any request is sent."""

from __future__ import annotations

import pytest

from loadtests.grid import Cell, GridError, build_grid, parse_strategy


def test_grid_is_the_product_of_efforts_and_strategies() -> None:
    cells = build_grid(["low", "high"], ["auto", "self_consistency:4", "best_of_n:n=8:budget=512"])
    assert len(cells) == 6
    assert cells[0] == Cell("low", None)
    assert cells[1].label == "self_consistency:n=4"
    assert cells[2].extension() == {"strategy": "best_of_n", "n": 8, "token_budget": 512}
    assert cells[0].extension() is None and cells[0].label == ""
    assert build_grid(["low"], ["single"])[0].extension() == {"strategy": "single", "n": 1}


@pytest.mark.parametrize(
    ("efforts", "strategies", "field"),
    [
        ([], ["auto"], "efforts"),
        (["low"], [], "strategies"),
        (["ultra"], ["auto"], "efforts"),
        (["low"], ["monte_carlo"], "strategy"),
        (["low"], ["single:n=0"], "strategy"),
        (["low"], ["single:bad-key=3"], "strategy"),
    ],
)
def test_bad_grids_name_the_field(efforts: list[str], strategies: list[str], field: str) -> None:
    with pytest.raises(GridError, match=f"^{field}"):
        build_grid(efforts, strategies)


def test_parse_strategy_auto() -> None:
    assert parse_strategy("auto") == (None, None, None, None, ())
