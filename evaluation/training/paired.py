"""Two models on the same problems: each one's accuracy and the difference, with paired 95%
intervals (pure).

Each problem gives each side a value in [0, 1]: 1 or 0 for one greedy answer, an expected
accuracy for a vote priced over a pool's subsets. The difference's interval is Newcombe's hybrid
score interval for paired proportions (Newcombe 1998, *Statistics in Medicine* 17:2635, method
10): each side's Wilson interval (:func:`evaluation.stats.intervals.wilson`, fractional counts
allowed) combined through the correlation of the two sides over the problems, the phi
coefficient of his 2x2 table, which for 0/1 values is their Pearson correlation and for expected
accuracies is the same formula on the values. A positive correlation takes his continuity
correction (``AD - BC - N/2``, from method 11): without it two sides that agree on every
problem get an interval of zero width, a certainty twenty problems cannot give. Pairing matters:
two models that fail on the same hard problems differ far less noisily than two independent
samples would.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from evaluation.stats.intervals import wilson


@dataclass(frozen=True)
class Paired:
    """``a`` against ``b`` on ``n`` problems both sides answered. ``both``, ``a_only``,
    ``b_only``, ``neither``: problems right for both, for one side only, for neither (expected
    counts where a side's value is fractional)."""

    n: int
    a: float
    a_interval: tuple[float, float]
    b: float
    b_interval: tuple[float, float]
    difference: float
    interval: tuple[float, float]
    both: float
    a_only: float
    b_only: float
    neither: float

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else [round(x, 4) for x in v] if isinstance(v, tuple) else v)
                for k, v in asdict(self).items()}  # fmt: skip


def correlation(xs: list[float], ys: list[float]) -> float:
    """The two sides' phi (Pearson's correlation of their values), a positive one continuity
    corrected (module docstring); 0 when either side is constant."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / n
    vx, vy = sum((x - mx) ** 2 for x in xs) / n, sum((y - my) ** 2 for y in ys) / n
    if vx <= 0 or vy <= 0:
        return 0.0
    return (max(cov - 1 / (2 * n), 0.0) if cov > 0 else cov) / math.sqrt(vx * vy)


def paired(a: Mapping[str, float], b: Mapping[str, float]) -> Paired:
    """``a`` against ``b`` over the problems both map (module docstring)."""
    common = sorted(set(a) & set(b))
    if not common:
        raise ValueError("no problem is scored on both sides")
    xs, ys = [float(a[p]) for p in common], [float(b[p]) for p in common]
    n = len(common)
    p1, p2 = sum(xs) / n, sum(ys) / n
    (l1, u1), (l2, u2) = wilson(sum(xs), n), wilson(sum(ys), n)
    phi = correlation(xs, ys)
    d = p1 - p2
    below = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    above = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return Paired(
        n=n, a=p1, a_interval=(l1, u1), b=p2, b_interval=(l2, u2), difference=d,
        interval=(max(-1.0, d - below), min(1.0, d + above)),
        both=sum(x * y for x, y in zip(xs, ys, strict=True)),
        a_only=sum(x * (1 - y) for x, y in zip(xs, ys, strict=True)),
        b_only=sum((1 - x) * y for x, y in zip(xs, ys, strict=True)),
        neither=sum((1 - x) * (1 - y) for x, y in zip(xs, ys, strict=True)),
    )  # fmt: skip
