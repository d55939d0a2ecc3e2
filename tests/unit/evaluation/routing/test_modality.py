"""The modality classifier on synthetic problems: a fit that finds the feature deciding the better
modality, a leave-one-family-out judgement that switches it on only where that feature carries
over to families it never saw, and the labels read from pools."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.routing.modality import (
    ModalityProblem,
    base_rate,
    fit_logistic,
    fit_problems,
    fit_threshold,
    leave_one_family_out,
    lofo_report,
    modality_problems,
    rule_choice,
    served_choice,
)
from tests.unit.evaluation.pool_fixtures import draw, pool

DIM = 6


def _problem(i: int, family: str, task: str, program: float, thought: float, x: np.ndarray) -> ModalityProblem:
    return ModalityProblem(f"{family}-{i}", family, task, program, thought, x)


def _families(transfers: bool, seed: int = 0) -> list[ModalityProblem]:
    """Six families of twelve. Feature 0 says a program wins (+1) or a chain of thought does (-1);
    a third of each family's prompts are ``open`` by the rules. Where ``transfers``, feature 0
    decides every family alike; otherwise each family has its own deciding feature, so a fit
    without a family learns nothing that holds on it."""
    rng = np.random.default_rng(seed)
    out = []
    for f in range(6):
        for i in range(12):
            program_wins = i % 2 == 0
            x = rng.normal(scale=0.1, size=DIM)
            x[0 if transfers else f] += 1.0 if program_wins else -1.0
            accuracies = (0.9, 0.2) if program_wins else (0.2, 0.9)
            out.append(_problem(i, f"family{f}", "open" if i % 3 == 0 else "computable", *accuracies, x))
    return out


def test_the_fit_finds_the_deciding_feature_and_folds_the_standardization_in() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 4)) * [1.0, 5.0, 0.1, 2.0] + [0.0, 3.0, -1.0, 0.0]
    y = (x[:, 2] > -1.0).astype(float)
    model = fit_logistic(x, y, np.ones(len(y)), l2=0.1)
    p = model.probability(x)
    assert np.mean((p >= 0.5) == (y == 1)) > 0.95
    assert int(np.argmax(np.abs(model.weights * x.std(axis=0)))) == 2  # on the raw scale, feature 2 decides


def test_a_row_of_weight_zero_does_not_count_and_no_weight_says_nothing() -> None:
    x = np.array([[1.0], [-1.0], [1.0], [-1.0]])
    y = np.array([1.0, 0.0, 0.0, 1.0])
    with_ties = fit_logistic(x, y, np.array([1.0, 1.0, 0.0, 0.0]), l2=0.01)
    without = fit_logistic(x[:2], y[:2], np.array([1.0, 1.0]), l2=0.01)
    assert with_ties.probability(x) == pytest.approx(without.probability(x))
    silent = fit_logistic(x, y, np.zeros(4))
    assert silent.probability(x) == pytest.approx(np.full(4, 0.5))


def test_one_modality_winning_everything_keeps_the_bias_finite() -> None:
    x = np.random.default_rng(2).normal(size=(30, 3))
    model = fit_logistic(x, np.ones(30), np.ones(30))
    assert np.isfinite(model.bias) and (model.probability(x) > 0.9).all()


def test_choices_rule_and_served() -> None:
    assert rule_choice("open") == "thought" and rule_choice("math_word") == "program"
    assert served_choice("open", 0.8, 0.7) == "program"
    assert served_choice("open", 0.6, 0.7) == "thought"
    assert served_choice("open", 0.99, None) == "thought"  # no threshold: the rule
    assert served_choice("arithmetic", 0.0, 0.7) == "program"  # only open prompts switch


def test_the_threshold_is_the_highest_that_gains_most_or_none() -> None:
    x = np.zeros(1)
    problems = [_problem(0, "f", "open", 1.0, 0.0, x), _problem(1, "f", "open", 0.0, 1.0, x),
                _problem(2, "f", "open", 1.0, 0.0, x), _problem(3, "f", "arithmetic", 0.0, 1.0, x)]  # fmt: skip
    # switching 0 and 2 gains 2; switching 1 too gains only 1; problem 3 is not open
    assert fit_threshold(problems, [0.9, 0.6, 0.8, 0.99]) == 0.8
    assert fit_threshold(problems[1:2], [0.9]) is None


def test_lofo_switches_on_where_the_feature_carries_over_to_unseen_families() -> None:
    problems = _families(transfers=True)
    report = lofo_report(problems, l2=1.0)
    pooled = report["pooled"]
    assert report["switched_on"], report["why"]
    assert report["threshold"] is not None
    assert pooled["classifier_vs_rule"]["difference"] > 0.1
    assert pooled["classifier_vs_base_rate"]["difference"] > 0.1
    assert pooled["served_vs_rule_open"]["interval"][0] > 0
    assert set(report["per_family"]) == {f"family{f}" for f in range(6)}
    assert len(report["per_problem"]) == len(problems)


def test_lofo_stays_off_where_each_family_is_decided_by_its_own_feature() -> None:
    report = lofo_report(_families(transfers=False), l2=1.0)
    assert not report["switched_on"]
    assert "zero" in report["why"] or "base rate" in report["why"]


def test_a_classifier_that_only_restates_the_base_rate_stays_off() -> None:
    """Programs win every non-open problem and most open ones, and nothing in the features says
    which: the switch gains on the open prompts, yet it would send every open prompt anywhere to a
    program, so the base-rate test keeps it off."""
    rng = np.random.default_rng(3)
    problems = [_problem(i, f"family{i % 4}", "open" if i % 2 else "math_word", 0.8, 0.1, rng.normal(size=DIM))
                for i in range(80)]  # fmt: skip
    report = lofo_report(problems, l2=1.0)
    assert report["pooled"]["served_vs_rule_open"]["interval"][0] > 0
    assert not report["switched_on"] and "base rate" in report["why"]


def test_each_left_out_family_is_predicted_by_a_fit_without_it() -> None:
    problems = _families(transfers=True)
    probabilities, rates = leave_one_family_out(problems, l2=1.0)
    moved = [*problems[:12], *[_problem(i, p.family, p.task, p.program, p.thought, -p.embedding)
                               for i, p in enumerate(problems[12:])]]  # fmt: skip
    again, _ = leave_one_family_out(moved, l2=1.0)
    # flipping the other families' features flips family0's predictions: it was fitted on them alone
    assert np.all((probabilities[:12] >= 0.5) != (again[:12] >= 0.5))
    assert rates == [base_rate([q for q in problems if q.family != p.family]) for p in problems]
    assert fit_problems(problems, 1.0).probability(problems[0].embedding) > 0.5


def test_problems_from_pools_both_ways_with_either_measure() -> None:
    both = pool("p1", cot=draw("cot", ("1", False), [("1", True), ("2", False), ("3", None)]),  # type: ignore[list-item]
                program=draw("program", ("1", True), [("1", True), ("1", True)]))  # fmt: skip
    one = pool("p2", cot=draw("cot", ("1", True), []))
    embedded: list[list[str]] = []

    def embed(texts: list[str]) -> np.ndarray:
        embedded.append(list(texts))
        return np.ones((len(texts), 3))

    [mean] = modality_problems([both, one], embed)  # type: ignore[arg-type]
    assert embedded == [["What is 0 + 1?"]]
    assert mean.program == 1.0 and mean.thought == pytest.approx(1 / 3)  # the unjudged candidate left out
    assert mean.label == "program" and mean.task == "arithmetic"
    [greedy] = modality_problems([both], embed, "greedy")  # type: ignore[arg-type]
    assert (greedy.program, greedy.thought) == (1.0, 0.0)
