"""The confidence model's prompt priors: fitted per kind of candidate, and out of fold for the
rows the calibrator learns from (synthetic features: no encoder)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from evaluation.confidence.prior import fit_priors, out_of_fold, predict, right_share
from tests.unit.evaluation.pool_fixtures import draw, pool


def problems(n: int = 12) -> tuple[list, dict[str, np.ndarray]]:
    """Half the prompts sit at feature +1 with programs always right, half at -1 with programs
    always wrong; chains of thought are right half the time everywhere."""
    pools, features = [], {}
    for i in range(n):
        good = i % 2 == 0
        p = pool(
            f"p{i}",
            program=draw("program", ("1", good), [("1", good)] * 3),
            cot=draw("cot", ("1", True), [("1", False), ("1", True), ("1", False)]),
        )
        pools.append(replace(p, problem=p.problem | {"id": f"p{i}"}))
        features[f"p{i}"] = np.array([1.0 if good else -1.0, float(i % 3)])
    return pools, features


def test_a_prior_predicts_each_kind_s_share_of_right_candidates() -> None:
    pools, features = problems()
    assert right_share(pools[0], "program") == 1.0 and right_share(pools[1], "program") == 0.0
    assert right_share(pools[0], "cot") == 0.5 and right_share(pools[0], "code") is None
    models = fit_priors(pools, features, alpha=0.01)
    assert set(models) == {"program", "cot"}  # no code candidates: no code prior
    priors = predict(models, pools, features)
    assert priors["p0"]["program"] == pytest.approx(1.0, abs=0.01)
    assert priors["p1"]["program"] == pytest.approx(0.0, abs=0.01)
    assert priors["p0"]["cot"] == pytest.approx(0.5, abs=0.01)


def test_out_of_fold_priors_never_see_their_own_problem() -> None:
    """A problem whose programs contradict its neighbours' gets the neighbours' prior out of fold."""
    pools, features = problems()
    odd = replace(pools[0], draws=pools[0].draws | {"program": draw("program", ("1", False), [("1", False)] * 3)})
    pools[0] = odd  # feature +1, but its programs are wrong
    fold = {p.id: i % 4 for i, p in enumerate(pools)}
    oof = out_of_fold(pools, features, lambda pid: fold[pid], 4, alpha=0.01)
    in_sample = predict(fit_priors(pools, features, alpha=0.01), pools, features)
    assert set(oof) == {p.id for p in pools}
    assert oof["p0"]["program"] > 0.9  # its neighbours say right
    assert oof["p0"]["program"] > in_sample["p0"]["program"]  # the in-sample fit leans toward its own label
