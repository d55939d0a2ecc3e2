"""Budget admission, shrinking, reservations and the parameter reader."""

from __future__ import annotations

import pytest

from services.common.errors import InvalidArgument
from services.search.budget import Budget, BudgetExhausted, DeadlineReached, Limits
from services.search.interfaces import Candidate, Generation, Verdict, Verification
from services.search.params import Params
from services.search.trace import SeedStream


def test_reserve_shrinks_to_fit_and_then_refuses() -> None:
    budget = Budget(Limits(max_generated_tokens=100))
    assert budget.reserve_policy_call(4, 10) == (4, 10)
    budget.release(4, 10)
    budget.charge_generation(Generation((Candidate("x", completion_tokens=90),)))
    assert budget.reserve_policy_call(4, 10) == (4, 2)  # 10 tokens left, shared by 4
    budget.release(4, 2)
    budget.charge_generation(Generation((Candidate("x", completion_tokens=8),)))
    assert budget.reserve_policy_call(4, 10) == (2, 1)  # fewer tokens than candidates
    budget.release(2, 1)
    budget.charge_generation(Generation((Candidate("x", completion_tokens=2),)))
    with pytest.raises(BudgetExhausted):
        budget.reserve_policy_call(1, 1)


def test_concurrent_reservations_cannot_overshoot() -> None:
    budget = Budget(Limits(max_generated_tokens=30))
    assert budget.reserve_policy_call(1, 20) == (1, 20)
    assert budget.reserve_policy_call(1, 20) == (1, 10)  # only 10 left unreserved
    with pytest.raises(BudgetExhausted):
        budget.reserve_policy_call(1, 20)


def test_call_limits_and_deadline() -> None:
    now = [0.0]
    budget = Budget(Limits(1000, max_policy_calls=1, max_verifier_calls=1, deadline_seconds=5), clock=lambda: now[0])
    budget.reserve_policy_call(1, 1)
    with pytest.raises(BudgetExhausted):
        budget.reserve_policy_call(1, 1)
    budget.reserve_verifier_call()
    budget.charge_verification(Verification((Verdict(0.5),), prompt_tokens=7, completion_tokens=3, cached_tokens=2))
    with pytest.raises(BudgetExhausted):
        budget.reserve_verifier_call()
    used = budget.usage()
    assert (used.verifier_prompt_tokens, used.verifier_cached_tokens, used.verifier_generated_tokens) == (7, 2, 3)
    assert used.generated_tokens == 0  # judge tokens never count as the policy's
    now[0] = 6.0
    with pytest.raises(DeadlineReached):
        budget.check_deadline()


def test_zero_limits_mean_unlimited_calls() -> None:
    budget = Budget(Limits(10_000))
    for _ in range(50):
        budget.release(*budget.reserve_policy_call(1, 1))
        budget.charge_failed_policy_call()
        budget.reserve_verifier_call()
        budget.charge_verification(None)
    assert budget.usage().policy_calls == 50 and budget.time_left() is None


@pytest.mark.parametrize(
    ("value", "clamped"), [(float("nan"), 0.0), (-1.0, 0.0), (2.0, 1.0), (float("inf"), 1.0), (0.3, 0.3)]
)
def test_verdict_clamp(value: float, clamped: float) -> None:
    assert Verdict.clamp(value) == clamped


def test_seed_stream_is_deterministic_and_32_bit() -> None:
    a, b = SeedStream(7), SeedStream(7)
    seeds = a.take(100)
    assert seeds == b.take(100)
    assert len(set(seeds)) == 100 and all(0 <= s < 2**31 for s in seeds)
    assert SeedStream(8).take(3) != seeds[:3]


def test_params_reader() -> None:
    params = Params({"a": 3.0, "b": 0.5, "c": "x", "d": True})
    assert params.integer("a", 1) == 3
    assert params.number("b", 1.0, minimum=0, maximum=1) == 0.5
    assert params.string("c", "", choices=["x", "y"]) == "x"
    assert params.boolean("d", False) is True
    params.finish()
    with pytest.raises(InvalidArgument) as err:
        Params({"zz": 1}).finish()
    assert err.value.field == "strategy.params.zz"
    with pytest.raises(InvalidArgument):
        Params({"a": 2.5}).integer("a", 1)
    with pytest.raises(InvalidArgument):
        Params({"d": 1}).boolean("d", False)
