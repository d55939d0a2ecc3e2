"""The adaptive fit: one shape for every adaptive effort, confidences that never fall, caps that double."""

from __future__ import annotations

from evaluation.pricing.table import adaptive_configs
from evaluation.routing.adaptive_fit import CAPS, fit_adaptive, is_adaptive
from evaluation.routing.types import ConfigStats, ProblemStats


def stats(accuracy_of) -> list[ProblemStats]:  # type: ignore[no-untyped-def]
    configs = adaptive_configs()
    out = []
    for i in range(6):
        cost = {c.name: 100.0 * c.n * c.confidence for c in configs}
        priced = {c.name: ConfigStats(accuracy_of(c, i), cost[c.name], 1, 50.0, cost[c.name]) for c in configs}
        out.append(ProblemStats(f"p{i}", "q", 1, priced))
    return out


def test_one_shape_confidences_never_fall_and_caps_double() -> None:
    # accuracy rises with the cap and, at the cap of 8, peaks at a low confidence: the fit may
    # not take a lower confidence at 16 than at 8
    def accuracy(c, i):  # type: ignore[no-untyped-def]
        base = {4: 0.5, 8: 0.6, 16: 0.7}[c.n] + (0.1 if c.start == "program" and c.steps == "other,more" else 0.0)
        bump = 0.05 if (c.n == 8 and c.confidence == 0.9) or (c.n == 16 and c.confidence == 0.8) else 0.0
        return base + bump

    choice = fit_adaptive(stats(accuracy), adaptive_configs())
    assert choice is not None and choice.shape[:2] == ("program", "other,more")
    assert [c.n for c in choice.efforts.values()] == list(CAPS.values()) == [4, 8, 16]
    confidences = [c.confidence for c in choice.efforts.values()]
    assert confidences == sorted(confidences) and confidences[1] == 0.9
    assert len({(c.start, c.steps, c.cot_weight) for c in choice.efforts.values()}) == 1


def test_equal_accuracy_takes_the_cheapest_confidence() -> None:
    choice = fit_adaptive(stats(lambda c, i: 0.5), adaptive_configs())
    assert choice is not None
    assert {c.confidence for c in choice.efforts.values()} == {0.8}


def test_unpriced_problems_leave_no_adaptive_route() -> None:
    members = [ProblemStats("code", "q", 1, {"greedy": ConfigStats(1.0, 10.0, 1)})]
    assert fit_adaptive(members, adaptive_configs()) is None
    assert is_adaptive("adaptive@8:program:more:w0.5:c0.9") and not is_adaptive("pot@8")
