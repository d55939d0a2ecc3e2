"""The confidence model's prompt priors: fitted on calibration pools, predicted out of fold.

A prior (``ConfidenceSignals.prior``, docs/confidence.md) is the share of a kind's candidates
(programs, chains of thought: :data:`PRIOR_KINDS`) that a ridge over the prompt's zero-token
features predicts right. It is what lets the confidence tell apart two families that share a
task type and a unanimous vote: one program agreeing with itself on a leg-counting question the
0.5B model always gets wrong, and on a GSM problem it gets right half the time.

Two uses, kept apart so the calibrator never learns from a prior that has seen its own problem:

- :func:`fit_priors`: one ridge per kind on every calibration problem; shipped in the confidence
  JSON and served (``services/common/confidence_prompt.py``);
- :func:`out_of_fold`: each calibration problem's prior from ridges fitted on the other folds
  (folds by a hash of the problem id), the ``prior`` of the rows the calibrator is fitted on,
  so its weight is the one an unseen prompt's prior deserves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from evaluation.pools.store import ProblemPool, prompt_text
from evaluation.routing.difficulty import fit_ridge
from evaluation.routing.embeddings import feature_rows
from services.common.confidence import LinearPrior

# prior_kind's values with a prior, each a pool draw. Not "code": fitted on the 16 HumanEval
# problems of the calibration split, a ridge over 390 features made the code families' development
# ECE worse (code vote 0.216 against 0.075 without it; docs/confidence.md), so code answers read
# no prior until there are enough code problems to fit one.
PRIOR_KINDS = ("program", "cot")

ALPHA = 10.0  # as the difficulty estimator's ridge; 1 measured worse on development log loss (docs/confidence.md)
Priors = dict[str, dict[str, float]]  # problem id -> kind -> prior


def features_of(pools: Sequence[ProblemPool]) -> dict[str, np.ndarray]:
    """Each problem's feature row, computed as the worker computes it (one encoder pass)."""
    rows = feature_rows([prompt_text(p) for p in pools])
    return {p.id: row for p, row in zip(pools, rows, strict=True)}


def right_share(pool: ProblemPool, kind: str) -> float | None:
    """The share of the pool's candidates of ``kind`` that are right (``None`` without any)."""
    draw = pool.draws.get(kind)
    if draw is None or not draw.candidates:
        return None
    return float(np.mean([bool(c.correct) for c in draw.candidates]))


def fit_priors(pools: Sequence[ProblemPool], features: Mapping[str, np.ndarray],
               alpha: float = ALPHA) -> dict[str, LinearPrior]:  # fmt: skip
    """One ridge per kind on the problems that have candidates of it (a kind with fewer than two
    such problems gets no prior), standardization folded into the weights."""
    out: dict[str, LinearPrior] = {}
    for kind in PRIOR_KINDS:
        shares = [(p, s) for p in pools if (s := right_share(p, kind)) is not None]
        if len(shares) < 2:
            continue
        ridge = fit_ridge(np.vstack([features[p.id] for p, _ in shares]), np.array([s for _, s in shares]), alpha)
        weights = ridge.weights / ridge.scale
        out[kind] = LinearPrior(tuple(float(w) for w in weights), float(ridge.bias - ridge.mean @ weights))
    return out


def predict(models: Mapping[str, LinearPrior], pools: Sequence[ProblemPool],
            features: Mapping[str, np.ndarray]) -> Priors:  # fmt: skip
    """Every problem's prior of every kind ``models`` has."""
    return {p.id: {k: m(features[p.id].tolist()) for k, m in models.items()} for p in pools}


def out_of_fold(pools: Sequence[ProblemPool], features: Mapping[str, np.ndarray], fold_of: Callable[[str], int],
                folds: int, alpha: float = ALPHA) -> Priors:  # fmt: skip
    """Each problem's priors from ridges fitted on the problems of the other folds."""
    out: Priors = {}
    for k in range(folds):
        test = [p for p in pools if fold_of(p.id) == k]
        train = [p for p in pools if fold_of(p.id) != k]
        if test and train:
            out |= predict(fit_priors(train, features, alpha), test, features)
    return out
