"""Fitting the confidence model (``services/common/confidence.py`` applies it; fitting is offline).

Pure Python (a handful of features, a few thousand merged rows): the weighted L2-penalised
logistic regression by Newton's method, weighted pool-adjacent-violators for the isotonic
model, and :func:`fit`, which builds a :class:`~services.common.confidence.Calibrator` of any
kind. ``evaluation/confidence/selection.py`` chooses the kind and supplies the rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from services.common.confidence import (
    DEFAULT_BASE_RATE,
    DEFAULT_PRIOR_VOTES,
    FEATURES,
    Calibrator,
    ConfidenceSignals,
    Isotonic,
    LinearPrior,
    ModelKind,
    features,
    logit,
    sigmoid,
)

Row = tuple[ConfidenceSignals, bool, float]  # signals, answer right, weight
# L2 penalty of the logistic fits, in units of row weight (one problem-configuration weighs 1):
# cross-validation on the first pools preferred 10 to 1 and 100.
DEFAULT_L2 = 10.0


def fit_logistic(x: Sequence[Sequence[float]], y: Sequence[float], w: Sequence[float], l2: float = 1.0,
                 penalize: Sequence[bool] | None = None, iterations: int = 50) -> list[float]:  # fmt: skip
    """Weighted L2-penalised logistic regression by Newton's method (pure Python; a handful of
    features). ``penalize[j]`` False leaves coefficient ``j`` (an intercept) unpenalised."""
    d = len(x[0]) if x else 0
    pen = [True] * d if penalize is None else list(penalize)
    beta = [0.0] * d
    for _ in range(iterations):
        grad = [(-l2 * beta[j] if pen[j] else 0.0) for j in range(d)]
        hess = [[(l2 if (i == j and pen[j]) else 0.0) for j in range(d)] for i in range(d)]
        for row, target, weight in zip(x, y, w, strict=True):
            p = sigmoid(sum(b * v for b, v in zip(beta, row, strict=True)))
            r = weight * (target - p)
            h = weight * p * (1.0 - p)
            for i in range(d):
                grad[i] += r * row[i]
                hi = h * row[i]
                for j in range(i, d):
                    hess[i][j] += hi * row[j]
        for i in range(d):
            for j in range(i):
                hess[i][j] = hess[j][i]
            hess[i][i] += 1e-9
        step = _solve(hess, grad)
        beta = [b + s for b, s in zip(beta, step, strict=True)]
        if max((abs(s) for s in step), default=0.0) < 1e-8:
            break
    return beta


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (small dense systems)."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        if abs(m[col][col]) < 1e-15:
            continue
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for c in range(col, n + 1):
                m[r][c] -= f * m[col][c]
    out = [0.0] * n
    for r in range(n - 1, -1, -1):
        if abs(m[r][r]) < 1e-15:
            continue
        out[r] = (m[r][n] - sum(m[r][c] * out[c] for c in range(r + 1, n))) / m[r][r]
    return out


def fit_isotonic(xs: Sequence[float], ys: Sequence[float], ws: Sequence[float]) -> Isotonic:
    """Weighted pool-adjacent-violators: the non-decreasing step function of least squared error."""
    grouped: dict[float, list[float]] = {}  # x -> [weighted sum of y, weight]
    for x, y, w in zip(xs, ys, ws, strict=True):
        group = grouped.setdefault(x, [0.0, 0.0])
        group[0] += y * w
        group[1] += w
    blocks: list[list[float]] = []  # [first x, weighted sum of y, weight]
    for x in sorted(grouped):
        if grouped[x][1] <= 0:
            continue
        blocks.append([x, *grouped[x]])
        while len(blocks) > 1 and blocks[-2][1] / blocks[-2][2] >= blocks[-1][1] / blocks[-1][2]:
            last = blocks.pop()
            blocks[-1][1] += last[1]
            blocks[-1][2] += last[2]
    if not blocks:
        return Isotonic((0.0,), (DEFAULT_BASE_RATE,))
    return Isotonic(tuple(b[0] for b in blocks), tuple(b[1] / b[2] for b in blocks))


def base_rate(rows: Sequence[Row]) -> float:
    total = sum(w for _, _, w in rows)
    return sum(w for _, right, w in rows if right) / total if total > 0 else DEFAULT_BASE_RATE


def fit(rows: Sequence[Row], kind: ModelKind, *, l2: float = DEFAULT_L2, prior_votes: float = DEFAULT_PRIOR_VOTES,
        provenance: Mapping[str, Any] | None = None, priors: Mapping[str, LinearPrior] | None = None,
        prior_features: str = "") -> Calibrator:  # fmt: skip
    """Fit a calibrator of ``kind`` on weighted rows. Rows where nothing answered are left out
    (their probability is the floor by definition). ``priors`` (fitted elsewhere:
    ``evaluation/confidence/prior.py``) are stored with it; the rows' ``prior`` signals must be
    what they predict out of sample."""
    rows = [r for r in rows if r[0].vote_share > 0.0]
    families = tuple(sorted({s.family for s, _, _ in rows}))
    common = {
        "kind": kind,
        "base_rate": base_rate(rows),
        "prior_votes": prior_votes,
        "families": families if kind != "shrunk" else (),
        "provenance": dict(provenance or {}),
        "priors": dict(priors or {}),
        "prior_features": prior_features,
    }
    if kind == "shrunk":
        return Calibrator(**common)  # type: ignore[arg-type]
    if kind == "logistic":
        k = len(FEATURES)
        # A shared intercept (unpenalised) and per-family offsets (penalised: shrunk toward the
        # shared one, so a family seen on few problems does not get an intercept of its own).
        x = [[*features(s), 1.0] + [1.0 if s.family == f else 0.0 for f in families] for s, _, _ in rows]
        beta = fit_logistic(x, [float(r) for _, r, _ in rows], [w for _, _, w in rows], l2,
                            [True] * k + [False] + [True] * len(families))  # fmt: skip
        coefficients: dict[str, Sequence[float]] = {"features": tuple(beta[:k]), "intercept": (beta[k],)}
        coefficients |= {f"family:{f}": (beta[k + 1 + i],) for i, f in enumerate(families)}
        return Calibrator(coefficients=coefficients, **common)  # type: ignore[arg-type]
    per: dict[str, list[Row]] = {f: [r for r in rows if r[0].family == f] for f in families}
    if kind == "platt":
        platt: dict[str, Sequence[float]] = {}
        for f, part in per.items():
            x = [[logit(s.vote_share), 1.0] for s, _, _ in part]
            platt[f] = tuple(
                fit_logistic(x, [float(r) for _, r, _ in part], [w for _, _, w in part], l2, [True, False])
            )
        return Calibrator(coefficients=platt, **common)  # type: ignore[arg-type]
    iso = {
        f: fit_isotonic([s.vote_share for s, _, _ in part], [float(r) for _, r, _ in part], [w for _, _, w in part])
        for f, part in per.items()
    }
    return Calibrator(isotonic=iso, **common)  # type: ignore[arg-type]
