"""How well probabilities match frequencies: expected calibration error, Brier score, log loss.

Offline measures of the served ``ttc.confidence`` (``services/common/confidence.py``): the fit
chooses its model by them (``evaluation/confidence/selection.py``) and the routed run reports them on the
answers it was served (``evaluation/heldout/routed_plan.py``). Weighted, because a replayed configuration's
runs on one problem share that problem's weight.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from services.common.confidence import clip


def expected_calibration_error(probs: Sequence[float], right: Sequence[bool], weights: Sequence[float] | None = None,
                               bins: int = 10) -> float:  # fmt: skip
    """ECE with ``bins`` equal-width bins over [0, 1] (the last bin includes 1.0): the
    weight-averaged |mean confidence - accuracy| per bin."""
    w = [1.0] * len(probs) if weights is None else list(weights)
    total = sum(w)
    if total <= 0:
        return 0.0
    sums = [[0.0, 0.0, 0.0] for _ in range(bins)]  # weight, sum p, sum right
    for p, r, wi in zip(probs, right, w, strict=True):
        b = min(bins - 1, int(p * bins))
        sums[b][0] += wi
        sums[b][1] += wi * p
        sums[b][2] += wi * float(r)
    return sum(abs(sp - sr) for wb, sp, sr in sums if wb > 0) / total


def brier(probs: Sequence[float], right: Sequence[bool], weights: Sequence[float] | None = None) -> float:
    w = [1.0] * len(probs) if weights is None else list(weights)
    total = sum(w)
    return sum(wi * (p - float(r)) ** 2 for p, r, wi in zip(probs, right, w, strict=True)) / total if total else 0.0


def log_loss(probs: Sequence[float], right: Sequence[bool], weights: Sequence[float] | None = None) -> float:
    w = [1.0] * len(probs) if weights is None else list(weights)
    total = sum(w)
    loss = sum(-wi * math.log(clip(p) if r else 1.0 - clip(p)) for p, r, wi in zip(probs, right, w, strict=True))
    return loss / total if total else 0.0


def bootstrap_ece(probs: Sequence[float], right: Sequence[bool], weights: Sequence[float] | None,
                  groups: Sequence[Sequence[int]], *, seed: int = 0, resamples: int = 1000,
                  bins: int = 10) -> tuple[float, float]:  # fmt: skip
    """The 95% percentile bootstrap interval of the ECE, resampling ``groups`` (the row indices
    of one problem each) with replacement: rows of one problem are never split."""
    w = [1.0] * len(probs) if weights is None else list(weights)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        picked = [i for g in rng.integers(0, len(groups), len(groups)) for i in groups[g]]
        draws.append(expected_calibration_error([probs[i] for i in picked], [right[i] for i in picked],
                                                [w[i] for i in picked], bins=bins))  # fmt: skip
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)
