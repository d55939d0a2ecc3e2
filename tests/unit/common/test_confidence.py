"""The calibrated confidence: fitted probabilities match frequencies, ECE by hand, the JSON
round trip, the fallback for configurations never fitted, and the prompt priors."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from evaluation.confidence.fit import Row, fit, fit_isotonic
from evaluation.stats.calibration_metrics import brier, expected_calibration_error, log_loss
from services.common import confidence_prompt
from services.common.confidence import (
    CLIP,
    SCHEMA,
    Calibrator,
    ConfidenceSignals,
    LinearPrior,
    confidence,
    prior_kind,
    shipped,
    shrunk_share,
)
from services.common.difficulty_features import FEATURE_DIM, FEATURE_SET

SHARES = (0.25, 0.5, 0.75, 1.0)


def synthetic(truth: dict[float, float], per_share: int = 800, family: str = "sc", votes: int = 4) -> list[Row]:
    """Rows whose answers are right with probability ``truth[share]``, exactly in frequency."""
    rows: list[Row] = []
    for share, p in truth.items():
        right = round(p * per_share)
        distinct = max(1, round(1 / share))
        s = ConfidenceSignals(family, share, votes=votes, distinct=min(votes, distinct))
        rows += [(s, True, 1.0)] * right + [(s, False, 1.0)] * (per_share - right)
    return rows


def frequencies(rows: list[Row]) -> dict[ConfidenceSignals, float]:
    seen: dict[ConfidenceSignals, list[bool]] = {}
    for s, r, _ in rows:
        seen.setdefault(s, []).append(r)
    return {s: sum(v) / len(v) for s, v in seen.items()}


@pytest.mark.parametrize("kind", ["isotonic", "logistic"])
def test_fitted_probabilities_match_the_frequencies(kind: str) -> None:
    rows = synthetic({0.25: 0.1, 0.5: 0.4, 0.75: 0.7, 1.0: 0.95})
    model = fit(rows, kind)  # type: ignore[arg-type]
    # Isotonic reproduces monotone frequencies exactly; the logistic model (with one intercept for
    # the family and a slope per feature, all features functions of the share here) within 0.03.
    tolerance = 1e-9 if kind == "isotonic" else 0.03
    for s, freq in frequencies(rows).items():
        assert model.probability(s) == pytest.approx(freq, abs=tolerance)


def test_platt_recovers_a_logistic_truth() -> None:
    a, b = 1.5, -0.5
    truth = {}
    for share in SHARES:
        z = a * math.log(min(0.98, share) / (1 - min(0.98, share))) + b
        truth[share] = 1 / (1 + math.exp(-z))
    model = fit(synthetic(truth, per_share=4000), "platt")
    fitted_a, fitted_b = model.coefficients["sc"]
    assert fitted_a == pytest.approx(a, abs=0.05) and fitted_b == pytest.approx(b, abs=0.05)


def test_calibration_beats_the_raw_share_when_the_share_is_overconfident() -> None:
    rows = synthetic({0.25: 0.05, 0.5: 0.2, 0.75: 0.3, 1.0: 0.6})
    raw = [s.vote_share for s, _, _ in rows]
    fitted = fit(rows, "logistic")
    calibrated = [fitted.probability(s) for s, _, _ in rows]
    right = [r for _, r, _ in rows]
    assert expected_calibration_error(calibrated, right) < 0.02 < 0.2 < expected_calibration_error(raw, right)
    assert log_loss(calibrated, right) < log_loss(raw, right)


def test_isotonic_pools_violators() -> None:
    step = fit_isotonic([0.1, 0.2, 0.3, 0.4], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0])
    assert step.values == (0.0, 0.5, 1.0) and step.edges == (0.1, 0.2, 0.4)
    assert step(0.05) == 0.0 and step(0.35) == 0.5 and step(0.9) == 1.0


def test_ece_on_a_hand_example() -> None:
    probs = [0.15, 0.15, 0.85, 0.85, 0.85]
    right = [False, True, True, True, False]
    # bin [0.1, 0.2): confidence 0.15, accuracy 1/2, weight 2/5; bin [0.8, 0.9): 0.85 vs 2/3, 3/5.
    expected = 2 / 5 * abs(0.15 - 0.5) + 3 / 5 * abs(0.85 - 2 / 3)
    assert expected_calibration_error(probs, right) == pytest.approx(expected)
    assert expected_calibration_error([1.0, 0.0], [True, False]) == 0.0  # 1.0 falls in the last bin
    # Weights count like repeated rows.
    assert expected_calibration_error([0.15, 0.85, 0.85], [True, True, False], [1.0, 2.0, 1.0]) == pytest.approx(
        expected_calibration_error([0.15, 0.85, 0.85, 0.85], [True, True, True, False])
    )
    assert brier([1.0, 0.0, 0.5], [True, True, False]) == pytest.approx((0 + 1 + 0.25) / 3)


@pytest.mark.parametrize("kind", ["shrunk", "platt", "isotonic", "logistic"])
def test_json_round_trip_keeps_every_probability(kind: str, tmp_path: Path) -> None:
    rows = synthetic({0.25: 0.1, 0.5: 0.4, 0.75: 0.7, 1.0: 0.95}) + synthetic({0.5: 0.6, 1.0: 0.9}, family="pot")
    model = fit(rows, kind, provenance={"problems": 3})  # type: ignore[arg-type]
    path = tmp_path / "confidence.v1.json"
    model.save(path)
    loaded = Calibrator.load(path)
    assert loaded == model
    probes = [
        ConfidenceSignals(f, s, votes=v) for f in ("sc", "pot", "hybrid") for s in (0.3, 0.6, 1.0) for v in (1, 8)
    ]
    assert [loaded.probability(s) for s in probes] == [model.probability(s) for s in probes]
    assert json.loads(path.read_text())["schema"] == SCHEMA


def test_json_refuses_other_schemas_and_features(tmp_path: Path) -> None:
    data = fit(synthetic({0.5: 0.5, 1.0: 0.9}), "logistic").to_dict()
    with pytest.raises(ValueError, match="schema"):
        Calibrator.from_dict({**data, "schema": "ttc-confidence/v0"})
    with pytest.raises(ValueError, match="features"):
        Calibrator.from_dict({**data, "features": ["logit_share"]})


def test_a_configuration_never_fitted_falls_back_to_the_shrunk_share() -> None:
    model = fit(synthetic({0.5: 0.2, 1.0: 0.3}), "logistic")
    assert model.families == ("sc",)
    unseen = ConfidenceSignals("beam_search", 1.0, votes=2)
    assert not model.fitted(unseen)
    expected = (1.0 * 2 + model.base_rate * model.prior_votes) / (2 + model.prior_votes)
    assert model.probability(unseen) == pytest.approx(expected)
    assert shrunk_share(ConfidenceSignals("x", 1.0, votes=2), 0.4, 2.0) == pytest.approx(0.7)
    # More agreeing votes, more confidence; never certainty.
    assert shrunk_share(ConfidenceSignals("x", 1.0, votes=8), 0.4, 2.0) > 0.7
    assert shrunk_share(ConfidenceSignals("x", 1.0, votes=10**6), 0.4, 2.0) == 1 - CLIP


def test_strategy_names_map_to_their_fitted_family() -> None:
    model = fit(synthetic({0.5: 0.2, 1.0: 0.3}), "isotonic")
    assert model.probability(ConfidenceSignals("self_consistency", 1.0, votes=4)) == pytest.approx(0.3)


def test_nothing_answered_is_the_floor_and_a_missing_file_is_the_fallback(tmp_path: Path) -> None:
    model = Calibrator.load(tmp_path / "absent.json")
    assert model.kind == "shrunk" and model.base_rate == 0.5
    assert model.probability(ConfidenceSignals("sc", 0.0, votes=4, distinct=0, abstained=4)) == CLIP
    assert model.probability(ConfidenceSignals("sc", 1.0, votes=1)) == pytest.approx((1 + 1) / 3)


def test_the_shipped_model_loads() -> None:
    model = Calibrator.load()
    s = ConfidenceSignals("sc", 0.75, votes=4, distinct=2)
    p = model.probability(s)
    assert CLIP <= p <= 1 - CLIP
    assert confidence(s) == p and shipped() is shipped()
    # More agreement, no less confidence, whichever kind ships.
    assert confidence(ConfidenceSignals("sc", 1.0, votes=4)) >= confidence(
        ConfidenceSignals("sc", 0.5, votes=4, distinct=2)
    )


def test_logistic_uses_agreement_between_programs_and_thoughts() -> None:
    rng = random.Random(0)
    rows: list[Row] = []
    for _ in range(3000):
        agree = rng.random() < 0.5
        s = ConfidenceSignals("hybrid", 0.75, votes=6, distinct=2, programs_agree=agree)
        rows.append((s, rng.random() < (0.9 if agree else 0.3), 1.0))
    model = fit(rows, "logistic")
    yes = model.probability(ConfidenceSignals("hybrid", 0.75, votes=6, distinct=2, programs_agree=True))
    no = model.probability(ConfidenceSignals("hybrid", 0.75, votes=6, distinct=2, programs_agree=False))
    assert yes == pytest.approx(0.9, abs=0.04) and no == pytest.approx(0.3, abs=0.04)


# ------------------------------------------------------------------------------ prompt priors
def prior_rows(rate: dict[float, float]) -> list[Row]:
    """One agreeing program on prompts whose prior is each key, right at that key's rate."""
    rows: list[Row] = []
    for prior, right in rate.items():
        s = ConfidenceSignals("pot", 1.0, votes=1, prior=prior, task_type="computable")
        rows += [(s, True, 100 * right), (s, False, 100 * (1.0 - right))]  # 100 prompts each
    return rows


def test_the_prior_moves_a_unanimous_vote_where_the_prompt_says_so() -> None:
    """The same vote is right 10% of the time on prompts of prior 0.1 and 90% on prior 0.9: the
    fitted logistic must tell them apart, which the vote alone cannot."""
    model = fit(prior_rows({0.1: 0.1, 0.5: 0.5, 0.9: 0.9}), "logistic", l2=0.1)
    low, high = (
        model.probability(ConfidenceSignals("pot", 1.0, 1, prior=p, task_type="computable")) for p in (0.1, 0.9)
    )
    assert low == pytest.approx(0.1, abs=0.05) and high == pytest.approx(0.9, abs=0.05)


def test_priors_are_read_per_kind_of_candidate_and_round_trip(tmp_path: Path) -> None:
    priors = {"program": LinearPrior((1.0, 0.0), 0.1), "cot": LinearPrior((0.0, -1.0), 0.2)}
    model = fit(prior_rows({0.2: 0.3, 0.8: 0.7}), "logistic", priors=priors, prior_features="layout-x")
    assert prior_kind("pot") == prior_kind("hybrid") == "program" and prior_kind("code_clusters") == "code"
    assert prior_kind("sc") == prior_kind("cot_greedy") == prior_kind("wvote") == "cot"
    assert model.prior("hybrid", [0.5, 9.0]) == pytest.approx(0.6)
    assert model.prior("sc", [0.0, -0.5]) == pytest.approx(0.7)
    assert model.prior("sc", [0.0, -5.0]) == 1.0 and model.prior("pot", [-5.0, 0.0]) == 0.0  # clipped to [0, 1]
    assert model.prior("code_vote", [0.0, 0.0]) is None and model.prior("pot", None) is None
    model.save(tmp_path / "m.json")
    assert Calibrator.load(tmp_path / "m.json") == model
    with pytest.raises(ValueError, match="features"):
        model.prior("pot", [1.0])
    data = model.to_dict()
    with pytest.raises(ValueError, match="feature layout"):
        Calibrator.from_dict(data | {"priors": {"models": data["priors"]["models"], "features": ""}})


def test_the_shipped_model_carries_priors_for_the_features_served() -> None:
    model = shipped()
    assert set(model.priors) == {"program", "cot"}  # no code prior (evaluation/confidence/prior.py)
    assert model.prior_features == FEATURE_SET
    assert all(len(p.weights) == FEATURE_DIM for p in model.priors.values())


def test_no_encoder_or_another_layout_means_no_prior(monkeypatch: pytest.MonkeyPatch) -> None:
    model = Calibrator(priors={"program": LinearPrior((0.0,) * FEATURE_DIM, 0.7)}, prior_features=FEATURE_SET)
    assert confidence_prompt.prior_of(model, "pot", "What is 6*7?") == pytest.approx(0.7)
    assert confidence_prompt.prior_of(model, "sc", "What is 6*7?") is None  # no chain-of-thought prior
    other = Calibrator(priors=model.priors, prior_features="another-layout")
    assert confidence_prompt.prior_of(other, "pot", "What is 6*7?") is None
    monkeypatch.setattr(confidence_prompt, "prompt_features", lambda text: None)
    assert confidence_prompt.prior_of(model, "pot", "What is 6*7?") is None
    signals = confidence_prompt.with_prompt(ConfidenceSignals("pot", 1.0), "What is 6*7?", model)
    assert signals.prior is None and signals.task_type == "arithmetic"
