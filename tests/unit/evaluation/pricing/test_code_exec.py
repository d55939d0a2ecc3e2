"""Code chosen by execution, priced from recorded behaviour: the served ranking replayed over
n-subsets (largest cluster, then assertions, then the shorter, then the earlier), abstentions,
the unverified fallback, the three calls' spend, and no price without recorded tests."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from evaluation.pools.store import Call, CodeTests, Draw, PoolCandidate, ProblemPool
from evaluation.pricing.pricer import Config, LatencyModel, Pricer
from evaluation.pricing.table import default_configs
from services.search.strategies.signals import CODE_CLUSTERS

FREE = Pricer(LatencyModel())
CASES = (("1, 2", "3"), ("2, 2", "4"))
TESTS_CALL = Call(1, 0.0, 400, 30, 0, 40, 1.0)
Run = tuple[list[str], list[bool | None]]  # behaviour on the two inputs, whether each assertion held
RIGHT: Run = (["3", "4"], [True, True])
WRONG: Run = (["-1", "0"], [False, False])
OTHER: Run = (["2", "2"], [False, False])
CRASH: Run = (["raise:RuntimeError", "raise:RuntimeError"], [False, False])
NONE: Run = ([], [])  # no function to run


def source(body: str) -> str:
    return f"```python\ndef add(a, b):\n    {body}\n```"


Spec = tuple[Run, bool, str]  # (behaviour, correct, text)


def code_draw(greedy: Spec, sampled: Sequence[Spec], *, tests: bool = True, seconds: float = 0.5) -> Draw:
    def cand(i: int, spec: Spec) -> PoolCandidate:
        (results, asserted), right, text = spec
        return PoolCandidate(i, i == 0, i, 0 if i == 0 else 1, text, 20 + i, False, text, right,
                             behaviour=list(results), asserted=list(asserted),
                             behaviour_s=seconds if results else 0.0)  # fmt: skip

    calls = (Call(1, 0.0, 768, 100, 0, 20, 1.0), Call(len(sampled), 0.7, 768, 100, 90, 100, 2.0))
    recorded = CodeTests("assert add(1, 2) == 3\nassert add(2, 2) == 4", "add", CASES, TESTS_CALL, "v1")
    cands = tuple(cand(i, s) for i, s in enumerate([greedy, *sampled]))
    return Draw("code", cands, calls, tests=recorded if tests else None)


def code_pool(draw: Draw) -> ProblemPool:
    problem = {"id": "h0", "dataset": "humaneval", "level": 1, "question": "def add(a, b):\n", "reference": "",
               "check": "code", "extra": {}}  # fmt: skip
    return ProblemPool(problem, "humaneval", "code", "calibration", "code", {"code": draw})


def accuracy(draw: Draw, n: int) -> float:
    estimate = FREE.estimate(code_pool(draw), Config(f"code_exec@{n}", "code_exec", n))
    assert estimate is not None
    return estimate.accuracy


def test_the_largest_behaviour_cluster_answers_over_every_subset_of_the_sampled() -> None:
    draw = code_draw((WRONG, False, source("return a - b")),
                     [(RIGHT, True, source("return a + b")), (RIGHT, True, source("return b + a")),
                      (OTHER, False, source("return 2")), (CRASH, False, source("raise RuntimeError"))])  # fmt: skip
    assert accuracy(draw, 1) == 0.0  # the greedy candidate alone
    # n=2: one sampled beside the wrong greedy, clusters of one each: a right one passes more
    # assertions and answers; OTHER ties greedy on assertions and is shorter, so it answers; the
    # crash abstains and greedy answers
    assert accuracy(draw, 2) == pytest.approx(2 / 4)
    # n=3: any pair with a right one wins on assertions (5 of the 6 pairs); {OTHER, CRASH} does not
    assert accuracy(draw, 3) == pytest.approx(5 / 6)
    assert accuracy(draw, 5) == 1.0  # the two right ones form the largest cluster


def test_ties_go_to_the_shorter_then_the_earlier_candidate() -> None:
    unasserted: Run = (["3", "4"], [None, None])
    other: Run = (["0", "0"], [None, None])
    long_right = (unasserted, True, source("total = a + b\n    return total"))
    short_wrong = (other, False, source("return 0"))
    assert accuracy(code_draw(long_right, [short_wrong]), 2) == 0.0  # one each, no assertion: shorter
    same = (other, False, source("return a - a + 0"))
    assert accuracy(code_draw((unasserted, True, source("return a + b + 0")), [same]), 2) == 1.0  # equal: earlier


def test_nothing_ran_answers_with_the_first_candidate_with_text_and_no_signals() -> None:
    draw = code_draw((NONE, True, "I would add them."), [(CRASH, False, source("raise RuntimeError"))])
    run = next(FREE.outcomes(code_pool(draw), Config("code_exec@2", "code_exec", 2), random.Random(0)))
    assert run.correct and run.agreement == 0.0 and run.signals is None
    blank = code_draw((NONE, True, "  "), [(NONE, False, "no code")])
    assert accuracy(blank, 2) == 0.0  # the first with text is the sampled one


def test_the_spend_is_the_three_calls_and_the_slowest_run() -> None:
    draw = code_draw((RIGHT, True, source("return a + b")), [(RIGHT, True, source("return b + a"))] * 3)
    pricer = Pricer(LatencyModel(prefill_s=0.001, step_s=0.01, step_s_per_seq=0.001))
    run = next(pricer.outcomes(code_pool(draw), Config("code_exec@3", "code_exec", 3), random.Random(0)))
    assert run.generated == 20 + 21 + 22 + 40  # greedy, two sampled, the tests
    assert run.prompt == 100 + 100 + 30
    greedy_s = 0.001 * 100 + 20 * 0.01
    together_s = 0.001 * (10 + 30) + 40 * (0.01 + 0.001 * 2)  # sampled and tests at once; the tests are longest
    assert run.latency_s == pytest.approx(greedy_s + together_s + 0.5)
    assert run.signals is not None and run.signals.config == CODE_CLUSTERS and run.signals.vote_share == 1.0
    assert run.agreement == 1.0


def test_no_price_without_recorded_tests_and_the_configurations_reach_k_plus_one() -> None:
    draw = code_draw((RIGHT, True, source("return a + b")), [(RIGHT, True, source("return a + b"))] * 2, tests=False)
    assert FREE.estimate(code_pool(draw), Config("code_exec@2", "code_exec", 2)) is None
    names = [c.name for c in default_configs(8) if c.family == "code_exec"]
    assert names[0] == "code_exec@1" and names[-1] == "code_exec@9"


def test_recorded_tests_and_behaviour_survive_the_stored_form() -> None:
    draw = code_draw((RIGHT, True, source("return a + b")), [(NONE, False, "no code")])
    again = ProblemPool.from_dict(code_pool(draw).to_dict()).draws["code"]
    assert again == draw
    assert "behaviour" not in again.candidates[1].to_dict()  # left out while empty, as old chunks are
    assert "tests" not in Draw("code", draw.candidates, draw.calls).to_dict()
