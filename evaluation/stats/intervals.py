"""95% intervals for accuracies over problems: one definition for every report.

A proportion gets Wilson's score interval, which stays sane at 0 and n (the normal one collapses
there). A mean of per-problem values in [0, 1] (a configuration's expected accuracy on each
problem, averaged over the pool's subsets) gets the percentile bootstrap over problems, widened
to at least the Wilson interval of the same mean counting each problem as one trial: the
bootstrap alone collapses to a point when every problem scores alike (12 of 12 programs right
gives [1, 1]), which would claim certainty from 12 problems.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

BOOTSTRAP = 2000


def wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of ``successes`` out of ``n`` (a fractional count is allowed:
    the sum of per-problem expected outcomes)."""
    if n <= 0:
        return 0.0, 0.0
    p = min(1.0, max(0.0, successes / n))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_interval(values: Sequence[float], *, seed: int = 0, resamples: int = BOOTSTRAP) -> tuple[float, float]:
    """95% interval of the mean of per-problem values in [0, 1]: the percentile bootstrap over
    problems, widened to at least the Wilson interval of the same mean (module docstring)."""
    if not values:
        return (0.0, 0.0)
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    low, high = float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))
    floor_low, floor_high = wilson(float(data.sum()), len(data))
    return min(low, floor_low), max(high, floor_high)
