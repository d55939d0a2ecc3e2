"""The adaptive routes from ``medium`` up, fitted on priced calibration problems (pure).

From ``medium`` up an effort's route is the adaptive vote (:mod:`services.search.strategies.adaptive`):
a first wave of two, then more compute only while the request's own candidates disagree. What is
fitted, per task kind (and once over every text problem for the default routes):

1. the *shape* shared by every adaptive effort: the starting modality, the step order and the
   chains of thought's weight. It is the shape whose per-effort choices (step 2) have the best
   summed accuracy, fewer generated tokens breaking ties;
2. per effort, in order ``medium``, ``high``, ``xhigh``, the stop ``confidence``: the cheapest
   confidence within :data:`TOLERANCE` of the best accuracy at that effort's cap, never lower than
   the effort below's.

The caps double (:data:`CAPS`) and the confidence never falls, with one shape for all three, so a
higher effort never stops earlier than a lower one on the same candidates: the ladder is
monotone by construction. Every configuration is priced by replaying each problem's draws in
order (:mod:`evaluation.pricing.adaptive`, through :class:`evaluation.pricing.pricer.Pricer`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluation.pricing.pricer import Config
from evaluation.pricing.table import ADAPTIVE_CAPS
from evaluation.routing.types import ANY_BIN, ProblemStats

CAPS: dict[str, int] = dict(zip(("medium", "high", "xhigh"), ADAPTIVE_CAPS, strict=True))
TOLERANCE = 0.005  # accuracy within half a point counts as equal; then the cheaper confidence wins


@dataclass(frozen=True)
class AdaptiveChoice:
    """The fitted adaptive route per effort, with the shape they share."""

    shape: tuple[str, str, float]  # start, steps, thought weight
    efforts: dict[str, Config]
    accuracy: dict[str, float]
    generated: dict[str, float]


def _mean(members: Sequence[ProblemStats], label: str, field: str) -> float | None:
    values = [getattr(m.configs[label], field) for m in members if label in m.configs]
    return float(np.mean(values)) if len(values) == len(members) and values else None


def fit_adaptive(members: Sequence[ProblemStats], configs: Sequence[Config],
                 caps: Mapping[str, int] = CAPS) -> AdaptiveChoice | None:  # fmt: skip
    """The adaptive routes for ``members`` (problems priced on every adaptive configuration);
    ``None`` when no shape is priced on all of them (code problems have no programs to vote)."""
    by_shape: dict[tuple[str, str, float], dict[tuple[int, float], Config]] = {}
    for c in configs:
        if c.family == "adaptive":
            by_shape.setdefault((c.start, c.steps, c.cot_weight), {})[(c.n, c.confidence)] = c
    best: AdaptiveChoice | None = None
    best_key: tuple[float, float] | None = None
    for shape, grid in sorted(by_shape.items()):
        chosen = _per_effort(members, grid, caps)
        if chosen is None:
            continue
        efforts, accuracy, generated = chosen
        key = (round(sum(accuracy.values()), 9), -sum(generated.values()))
        if best_key is None or key > best_key:
            best, best_key = AdaptiveChoice(shape, efforts, accuracy, generated), key
    return best


def _per_effort(
    members: Sequence[ProblemStats], grid: Mapping[tuple[int, float], Config], caps: Mapping[str, int]
) -> tuple[dict[str, Config], dict[str, float], dict[str, float]] | None:
    efforts: dict[str, Config] = {}
    accuracy: dict[str, float] = {}
    generated: dict[str, float] = {}
    floor = 0.0
    for effort, cap in caps.items():
        priced: list[tuple[float, float, float, Config]] = []
        for (n, confidence), config in grid.items():
            if n != cap or confidence < floor:
                continue
            acc = _mean(members, config.name, "accuracy")
            gen = _mean(members, config.name, "generated_tokens")
            if acc is not None and gen is not None:
                priced.append((acc, gen, confidence, config))
        if not priced:
            return None
        top = max(p[0] for p in priced)
        acc, gen, confidence, config = min((p for p in priced if p[0] >= top - TOLERANCE), key=lambda p: (p[1], p[2]))
        efforts[effort], accuracy[effort], generated[effort], floor = config, acc, gen, confidence
    return efforts, accuracy, generated


def is_adaptive(label: str) -> bool:
    """Whether a configuration label names an adaptive configuration (they compete only from
    ``medium`` up, through :func:`fit_adaptive`, never in the fixed routes' choice)."""
    return label.startswith("adaptive@")


RouteOf = Callable[[str, Sequence[ProblemStats], str], dict[str, Any]]


def adaptive_routes(
    members: Sequence[ProblemStats], configs: Sequence[Config], groups: Mapping[str, Sequence[ProblemStats]],
    route: RouteOf, where: str,
) -> tuple[dict[str, dict[str, dict[str, Any]]], AdaptiveChoice] | None:  # fmt: skip
    """The adaptive efforts' routes for ``members``, one per key of ``groups`` (a difficulty bin,
    or the every-bin key) with its ``expected`` over that group's problems (``route`` builds a
    route from a label, its problems and a source line); ``None`` where no adaptive
    configuration is priced on every member."""
    choice = fit_adaptive(members, configs)
    if choice is None:
        return None
    start, steps, weight = choice.shape
    shape = f"adaptive: {start} first, then {steps}, thoughts weigh {weight:g}"
    out = {
        effort: {
            key: route(config.name, inside, f"{where}, {'every bin' if key == ANY_BIN else f'bin {key}'}, {shape}")
            for key, inside in groups.items()
        }
        for effort, config in choice.efforts.items()
    }
    return out, choice
