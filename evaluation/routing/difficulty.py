"""The difficulty estimator of a fitted table: a ridge over the prompt's zero-token features,
regressed on 1 - pass@1, and bins at the calibration quantiles of its predictions.

The gateway serves the ridge's parameters inline in the routing table
(``services/gateway/difficulty.py`` applies them); the confidence model's prompt priors are
ridges of the same kind. Pure numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class RidgeEstimator:
    """Predicted difficulty (1 - pass@1) = clip(x·w + b, 0, 1) on standardized features."""

    weights: np.ndarray
    bias: float
    mean: np.ndarray
    scale: np.ndarray
    alpha: float

    def predict(self, features: np.ndarray) -> np.ndarray:
        z = (features - self.mean) / self.scale
        return np.asarray(np.clip(z @ self.weights + self.bias, 0.0, 1.0))

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "ridge",
            "alpha": self.alpha,
            "bias": self.bias,
            "weights": self.weights.tolist(),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
        }


def fit_ridge(features: np.ndarray, targets: np.ndarray, alpha: float = 10.0) -> RidgeEstimator:
    """Closed-form ridge regression (the bias is not penalized)."""
    if features.ndim != 2 or len(features) != len(targets) or len(targets) < 2:
        raise ValueError("need a 2-D feature matrix with one row per target and at least two rows")
    mean = features.mean(axis=0)
    scale = features.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = (features - mean) / scale
    bias = float(targets.mean())
    gram = z.T @ z + alpha * np.eye(z.shape[1])
    weights = np.linalg.solve(gram, z.T @ (targets - bias))
    return RidgeEstimator(weights, bias, mean, scale, alpha)


def quantile_edges(predictions: np.ndarray, names: Sequence[str]) -> list[tuple[str, float]]:
    """Bin edges at the calibration quantiles of an estimator's predictions, so each bin holds an
    equal share of the calibration problems; the last edge is 1.0 (the routing table's rule)."""
    inner = np.quantile(predictions, np.linspace(0, 1, len(names) + 1)[1:-1]).tolist() if len(predictions) else []
    if len(inner) < len(names) - 1:
        inner = [(i + 1) / len(names) for i in range(len(names) - 1)]
    return [(name, float(q)) for name, q in zip(names, [*inner, 1.0], strict=True)]


def strictly_rising(edges: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Bin edges clipped to [0, 1] and non-decreasing, the last at 1.0 (the table's rules)."""
    out: list[tuple[str, float]] = []
    low = 0.0
    for name, upper in edges[:-1]:
        low = max(low, min(1.0, max(0.0, upper)))
        out.append((name, low))
    out.append((edges[-1][0], 1.0))
    return out


def difficulty_bin(difficulty: float, edges: Sequence[tuple[str, float]]) -> str:
    """The bin a difficulty falls in: the first whose upper edge it does not pass (the table's rule)."""
    return next((name for name, upper in edges if difficulty <= upper), edges[-1][0])
