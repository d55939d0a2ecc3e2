from math import comb

import pytest

from evaluation.stats.ledger import ProblemLedger, Sample, majority, pass_at_k, summarize


@pytest.mark.parametrize(("n", "c", "k"), [(10, 3, 1), (10, 3, 5), (20, 0, 4), (20, 20, 4), (7, 2, 7)])
def test_pass_at_k_matches_the_combinatorial_definition(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))


def test_pass_at_k_is_stable_for_large_pools() -> None:
    assert 0.0 < pass_at_k(10_000, 1, 100) < 0.011


def test_pass_at_k_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 0)


def test_majority_breaks_ties_by_first_appearance_and_ignores_missing_answers() -> None:
    pool = [Sample(None, False), Sample("7", False), Sample("5", True), Sample("5", True), Sample("7", False)]
    assert majority(pool) == Sample("7", False)
    assert majority([Sample(None, False)]) is None


def test_summary_keeps_infrastructure_failures_out_of_accuracy() -> None:
    problems = [
        ProblemLedger((Sample("1", True), Sample("2", False), Sample(None, False, failed=True)), selected_correct=True),
        ProblemLedger((Sample("3", False), Sample("3", False)), selected_correct=False),
        ProblemLedger((Sample(None, False, failed=True),), selected_correct=None),
    ]
    s = summarize(problems)
    assert (s.problems, s.scored_problems, s.failures, s.k) == (3, 2, 2, 2)
    assert s.pass_at_1 == pytest.approx(0.25)
    assert s.coverage == pytest.approx(0.5)
    assert s.pass_at_k == pytest.approx(0.5)
    assert s.maj_at_k == pytest.approx(0.5)  # tie "1" vs "2" goes to "1" (first), which is right
    assert s.selected == pytest.approx(0.5)


def test_systematic_error_makes_majority_confidently_wrong() -> None:
    problem = ProblemLedger(tuple([Sample("9", False)] * 3 + [Sample("4", True)]), selected_correct=False)
    s = summarize([problem])
    assert s.maj_at_k == 0.0 and s.coverage == 1.0 and s.pass_at_1 == pytest.approx(0.25)
