"""The grid a load test sweeps: reasoning efforts x pinned strategies.

A cell is one effort with either free routing (``auto``: the gateway picks strategy and budget
from its routing table) or a pinned strategy, optionally with its sample count and token
budget. Specs are parsed and validated here, before any request is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

from services.gateway.protocol import Effort, StrategyName

# The gateway's own lists (services/gateway/protocol.py), so the grid cannot drift from them.
EFFORTS: tuple[str, ...] = get_args(Effort)
STRATEGIES: tuple[str, ...] = get_args(StrategyName)
AUTO = "auto"


class GridError(ValueError):
    """A grid spec that cannot be run; the message names the offending value."""


@dataclass(frozen=True)
class Cell:
    """One grid cell. ``strategy is None`` means the gateway routes freely."""

    effort: str
    strategy: str | None = None
    n: int | None = None
    token_budget: int | None = None
    verifier: str | None = None
    params: tuple[tuple[str, ParamValue], ...] = ()

    @property
    def label(self) -> str:
        """The pinned-strategy label used in records and reports (``auto`` when routed)."""
        if self.strategy is None:
            return ""
        parts = [self.strategy]
        if self.n is not None:
            parts.append(f"n={self.n}")
        if self.token_budget is not None:
            parts.append(f"budget={self.token_budget}")
        if self.verifier:
            parts.append(f"verifier={self.verifier}")
        parts.extend(f"{key}={_format_value(value)}" for key, value in self.params)
        return ":".join(parts)

    def extension(self) -> dict[str, Any] | None:
        """The request's pinning object, or ``None`` for free routing."""
        if self.strategy is None:
            return None
        ext: dict[str, Any] = {"strategy": self.strategy}
        # Always pin n: a route's n for another strategy must not leak into the pinned one
        # (a routed n=5 is invalid for `single`).
        ext["n"] = self.n if self.n is not None else 1
        if self.token_budget is not None:
            ext["token_budget"] = self.token_budget
        if self.verifier:
            ext["verifier"] = self.verifier
        if self.params:
            ext["params"] = dict(self.params)
        return ext


ParamValue = int | float | bool | str


def _format_value(value: ParamValue) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _parse_value(value: str) -> ParamValue:
    """Strategy parameter values as the JSON the gateway expects: bool, int, float, else str."""
    if value in ("true", "false"):
        return value == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def parse_strategy(
    spec: str, known: tuple[str, ...] = STRATEGIES
) -> tuple[str | None, int | None, int | None, str | None, tuple[tuple[str, ParamValue], ...]]:
    """``auto`` | ``name[:n=N][:budget=T][:verifier=V][:param=value...]`` (``name:N`` is short for
    ``name:n=N``; any other ``key=value`` is a strategy parameter, e.g. ``mode=hybrid``)."""
    spec = spec.strip()
    if not spec:
        raise GridError("strategy: empty entry in the strategy list")
    if spec == AUTO:
        return None, None, None, None, ()
    name, *options = spec.split(":")
    if name not in known:
        raise GridError(f"strategy: unknown strategy {name!r}; known: {AUTO}, {', '.join(known)}")
    n = budget = None
    verifier = None
    params: list[tuple[str, ParamValue]] = []
    for option in options:
        key, _, value = option.partition("=")
        if not value:
            key, value = "n", key
        try:
            if key == "n":
                n = int(value)
                if n < 1:
                    raise ValueError
            elif key == "budget":
                budget = int(value)
                if budget < 1:
                    raise ValueError
            elif key == "verifier":
                verifier = value
            elif key.isidentifier():
                params.append((key, _parse_value(value)))
            else:
                raise GridError(f"strategy: bad option {key!r} in {spec!r} (use n=, budget=, verifier=, param=value)")
        except ValueError as exc:
            raise GridError(f"strategy: {key} must be a positive integer in {spec!r}") from exc
    return name, n, budget, verifier, tuple(params)


def build_grid(efforts: list[str], strategies: list[str], known: tuple[str, ...] = STRATEGIES) -> list[Cell]:
    """Every (effort, strategy) pair; raises :class:`GridError` on an empty or unknown entry."""
    efforts = [e.strip() for e in efforts if e.strip()]
    strategies = [s.strip() for s in strategies if s.strip()]
    if not efforts:
        raise GridError(f"efforts: the grid has no efforts; give at least one of {', '.join(EFFORTS)}")
    if not strategies:
        raise GridError("strategies: the grid has no strategies; give `auto` and/or pinned strategies")
    for effort in efforts:
        if effort not in EFFORTS:
            raise GridError(f"efforts: unknown effort {effort!r}; known: {', '.join(EFFORTS)}")
    cells = []
    for effort in dict.fromkeys(efforts):
        for spec in dict.fromkeys(strategies):
            name, n, budget, verifier, params = parse_strategy(spec, known)
            cells.append(Cell(effort, name, n, budget, verifier, params))
    return cells


def split_list(value: str) -> list[str]:
    return [v for v in (x.strip() for x in value.split(",")) if v]
