"""Which confidence model ships: the split it is fitted and measured on, the grouped
cross-validation that picks its kind, and the fit itself.

The calibrator is fitted on calibration pools and measured on the development split's pools
(looked at while the confidence model was built: development figures, not held-out ones). While
no development pool has been drawn, a disjoint split of the calibration problems by a hash of their id stands
in, and every output says so (``evaluation``: ``"disjoint split"``). Folds and splits are by a
hash of the problem id, so no problem is ever predicted by a model that saw it. The rows fitted
on carry out-of-fold prompt priors (:func:`evaluation.confidence.prior.out_of_fold`); the priors
shipped are fitted on every calibration problem.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evaluation.confidence.fit import fit
from evaluation.confidence.prior import ALPHA as PRIOR_ALPHA
from evaluation.confidence.prior import features_of, fit_priors
from evaluation.confidence.prior import out_of_fold as prior_oof
from evaluation.confidence.rows import Weighted, as_rows, confidence_configs, rows_of
from evaluation.pools.provenance import git_describe
from evaluation.pools.store import ProblemPool, iter_chunks, latest_pools
from evaluation.problems.datasets import DEVELOPMENT_KEY
from evaluation.stats.calibration_metrics import brier, expected_calibration_error, log_loss
from services.common.confidence import Calibrator, ModelKind
from services.common.difficulty_features import FEATURE_SET

POOLS = Path("docs/data/calibration/pools/qwen2.5-coder-0.5b")
KINDS: tuple[ModelKind, ...] = ("shrunk", "platt", "isotonic", "logistic")
FOLDS = 5
TEST_SHARE = 0.4  # of calibration problems, for the disjoint split while no development pool exists
DEVELOPMENT = "development"  # Split.evaluation when measured on the development split's pools


def bucket(problem: str, salt: str = "confidence") -> float:
    digest = hashlib.sha256(f"{salt}:{problem}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


# ------------------------------------------------------------------------------------ splits
@dataclass(frozen=True)
class Split:
    train: list[ProblemPool]
    test: list[ProblemPool]
    evaluation: str  # DEVELOPMENT or "disjoint split"
    chunks: list[str]


def load_split(directory: Path = POOLS) -> Split:
    """Calibration pools to fit, development pools to measure; while there are no development pools,
    a disjoint hash split of the calibration problems (``TEST_SHARE`` of them measured)."""
    chunks = list(iter_chunks(directory))
    latest = latest_pools(chunks)
    pools = [p for p, _ in latest.values()]
    names = sorted({c.path.name for _, c in latest.values()})
    calibration = [p for p in pools if p.split == "calibration"]
    development = [p for p in pools if p.split == DEVELOPMENT_KEY]
    if development:
        return Split(calibration, development, DEVELOPMENT, names)
    train = [p for p in calibration if bucket(p.id) >= TEST_SHARE]
    test = [p for p in calibration if bucket(p.id) < TEST_SHARE]
    return Split(train, test, "disjoint split", names)


def fold_of(problem: str, folds: int = FOLDS) -> int:
    """A problem's cross-validation fold (by a hash of its id: never split, stable across runs)."""
    return int(bucket(problem, "fold") * folds)


# ------------------------------------------------------------------------------------ selection
def out_of_fold(rows: Sequence[Weighted], kind: ModelKind, folds: int = FOLDS) -> list[float | None]:
    """Each row's probability from a model of ``kind`` fitted on the other folds (folds by a hash
    of the problem id, so no problem is ever predicted by a model that saw it); ``None`` for rows
    whose fold had nothing else to fit on."""
    fold = {r.problem: fold_of(r.problem, folds) for r in rows}
    probs: list[float | None] = [None] * len(rows)
    for k in range(folds):
        train = [r for r in rows if fold[r.problem] != k]
        test = [i for i, r in enumerate(rows) if fold[r.problem] == k]
        if not train or not test:
            continue
        model = fit(as_rows(train), kind)
        for i in test:
            probs[i] = model.probability(rows[i].signals)
    return probs


def cross_validate(rows: Sequence[Weighted], kinds: Sequence[ModelKind] = KINDS,
                   folds: int = FOLDS) -> dict[str, dict[str, float]]:  # fmt: skip
    """Grouped (by problem) k-fold log loss, Brier and ECE of each model kind on ``rows``."""
    result: dict[str, dict[str, float]] = {}
    for kind in kinds:
        scored = [(r, p) for r, p in zip(rows, out_of_fold(rows, kind, folds), strict=True) if p is not None]
        probs = [p for _, p in scored]
        right = [r.correct for r, _ in scored]
        weights = [r.weight for r, _ in scored]
        result[kind] = {
            "log_loss": log_loss(probs, right, weights),
            "brier": brier(probs, right, weights),
            "ece": expected_calibration_error(probs, right, weights),
        }
    return result


def choose(cv: dict[str, dict[str, float]]) -> ModelKind:
    """The kind of lowest cross-validated log loss (ties: the simpler kind, earlier in ``KINDS``)."""
    return min((k for k in KINDS if k in cv), key=lambda k: (round(cv[k]["log_loss"], 9), KINDS.index(k)))


def fit_model(split: Split) -> tuple[Calibrator, dict[str, dict[str, float]], list[Weighted]]:
    """The shipped model: prompt priors fitted on every calibration problem, and the calibrator
    chosen by grouped cross-validation and fitted on rows whose priors are out of fold."""
    configs = confidence_configs(split.train + split.test)
    features = features_of(split.train)
    priors = fit_priors(split.train, features)
    rows = rows_of(split.train, configs, priors=prior_oof(split.train, features, fold_of, FOLDS))
    if not rows:
        raise SystemExit("no calibration pools to fit on")
    cv = cross_validate(rows)
    kind = choose(cv)
    provenance = {
        "fitted_on": "calibration problems"
        + (" (train part of a disjoint split)" if split.evaluation != DEVELOPMENT else ""),
        "problems": len(split.train),
        "problem_ids_sha256": hashlib.sha256("\n".join(sorted(p.id for p in split.train)).encode()).hexdigest(),
        "chunks": split.chunks,
        "configs": [c.name for c in configs],
        "selection": "grouped 5-fold log loss",
        "priors": {
            "kinds": sorted(priors),
            "alpha": PRIOR_ALPHA,
            "features": FEATURE_SET,
            "rows": "out-of-fold priors (ridges fitted on the other folds)",
        },
        "cross_validation": cv,
        "git_describe": git_describe(),
        "pools": str(POOLS),
    }
    model = fit(as_rows(rows), kind, provenance=provenance, priors=priors, prior_features=FEATURE_SET)
    return model, cv, rows
