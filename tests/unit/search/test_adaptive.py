"""The adaptive vote: the first wave can disagree, more compute only while it does, and the
policy's rules (settled, next step) that the calibration replay shares."""

from __future__ import annotations

import itertools

import pytest

from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import orchestrator_pb2
from services.search.run import run_search, validate_job
from services.search.strategies.adaptive_policy import Ballot, next_step, parse_order, settled
from tests.helpers.search_fakes import ScriptedExecutor, ScriptedPolicy, ScriptedVerifier, programs_by_seed
from tests.helpers.search_jobs import make_job

T = orchestrator_pb2
NO_VERIFIER = ScriptedVerifier(lambda text: 0.0)


def adaptive_job(n: int, **params: object) -> orchestrator_pb2.SearchJob:
    return make_job("adaptive", n=n, params=dict(params), max_tokens=64, tokens=20_000)


def program(key: str) -> Ballot:
    return Ballot(key, 1.0, "program")


def test_two_agreeing_answers_settle_at_any_confidence() -> None:
    assert settled([program("42"), program("42")], 0.999, start="program") == "agreed"


def test_an_abstention_or_a_lone_answer_never_settles_the_first_wave() -> None:
    assert settled([program("42"), program("")], 0.5, start="program") == ""
    assert settled([program("42")], 0.5, start="program") == ""


def test_abstentions_count_against_the_leader() -> None:
    three = [program("7"), program("7"), program("7")]
    assert settled([*three, program("8")], 0.8, start="program") == "confident"  # P = 0.81
    assert settled([*three, program("")], 0.8, start="program") == "confident"
    assert settled([*three, program(""), program("")], 0.8, start="program") == ""


def test_open_prose_settles_once_chains_of_thought_state_nothing_either() -> None:
    prose = [Ballot("", 0.5, "thought"), Ballot("", 0.5, "thought")]
    assert settled(prose, 0.9, start="thought") == "open"
    assert settled([program(""), program("")], 0.9, start="program") == ""  # abstaining programs: try thoughts
    assert settled([program(""), program(""), *prose], 0.9, start="program") == "open"


def test_a_higher_confidence_never_settles_where_a_lower_one_does_not() -> None:
    # The ladder's monotonicity: for every ballot sequence, settled at c_hi implies settled at c_lo.
    for keys in itertools.product(["a", "b", ""], repeat=5):
        for size in range(1, 6):
            ballots = [program(k) for k in keys[:size]]
            for low, high in [(0.8, 0.9), (0.9, 0.95), (0.85, 0.99)]:
                if settled(ballots, high, start="program"):
                    assert settled(ballots, low, start="program")


def test_steps_double_the_spend_and_stop_at_the_cap() -> None:
    first = next_step(0, 2, 8, ("other", "more"), "program", can_escalate=False)
    assert first is not None and (first.step, first.modality, first.size) == ("other", "thought", 2)
    second = next_step(1, 4, 8, ("other", "more"), "program", can_escalate=False)
    assert second is not None and (second.step, second.modality, second.size) == ("more", "program", 4)
    assert next_step(2, 8, 8, ("other", "more"), "program", can_escalate=False) is None
    last = next_step(5, 6, 8, ("other", "more"), "program", can_escalate=False)
    assert last is not None and (last.step, last.size) == ("more", 2)  # the order's last step repeats, capped


def test_escalation_is_skipped_without_a_larger_deployment() -> None:
    step = next_step(0, 2, 8, ("escalate", "more"), "program", can_escalate=False)
    assert step is not None and step.step == "more"
    step = next_step(0, 2, 8, ("escalate", "more"), "program", can_escalate=True)
    assert step is not None and step.escalate


def test_an_unknown_step_is_named() -> None:
    with pytest.raises(ValueError, match="sideways"):
        parse_order("more,sideways")


async def test_a_first_wave_that_agrees_stops_there() -> None:
    policy = ScriptedPolicy(programs_by_seed(["42"]))
    executor = ScriptedExecutor()
    result, trace = await run_search(adaptive_job(16), policy, NO_VERIFIER, executor=executor)
    assert result.termination == T.TERMINATION_COMPLETED, result.error
    assert len(executor.runs) == 2 and result.candidates_saved == 14
    assert "The answer is 42." in result.answer
    node = next(n for n in trace.nodes if n.action == "adaptive")
    assert "stopped: agreed after 2" in node.text
    course = result.adaptive
    assert (course.first_wave, course.first_wave_settled, list(course.steps), course.stopped) == (2, True, [], "agreed")


async def test_disagreeing_programs_bring_chains_of_thought_then_more_programs() -> None:
    policy = ScriptedPolicy(programs_by_seed(["10", "12", "10", "12", "10", "10", "10", "10"], in_order=True))
    executor = ScriptedExecutor()
    result, trace = await run_search(adaptive_job(8, confidence=0.9), policy, NO_VERIFIER, executor=executor)
    node = next(n for n in trace.nodes if n.action == "adaptive")
    assert "other: 2 thought(s)" in node.text and "more: 4 program(s)" in node.text, node.text
    assert len(executor.runs) == 6  # 2 programs, 2 thoughts (no sandbox), 4 programs
    assert not result.adaptive.first_wave_settled
    assert list(result.adaptive.steps) == ["other: 2 thought(s)", "more: 4 program(s)"]
    assert "The answer is 10." in result.answer


async def test_a_higher_cap_never_stops_earlier_on_the_same_candidates() -> None:
    values = ["3", "4", "3", "5", "3", "3", "3", "3", "3", "3", "3", "3", "3", "3", "3", "3"]
    spent: list[int] = []
    for n, confidence in [(4, 0.85), (8, 0.9), (16, 0.95)]:
        policy = ScriptedPolicy(programs_by_seed(values, in_order=True))
        result, _ = await run_search(adaptive_job(n, confidence=confidence), policy, NO_VERIFIER,
                                     executor=ScriptedExecutor())  # fmt: skip
        assert result.termination == T.TERMINATION_COMPLETED, result.error
        spent.append(sum(c.n for c in policy.calls))
    assert spent == sorted(spent) and spent[0] < spent[-1]


async def test_open_prose_answers_with_the_greedy_chain_of_thought() -> None:
    policy = ScriptedPolicy(lambda call, index, seed: "A hash table maps keys to slots by hashing them.")
    result, _ = await run_search(adaptive_job(8, start="thought"), policy, NO_VERIFIER, executor=ScriptedExecutor())
    assert result.termination == T.TERMINATION_COMPLETED, result.error
    assert "hash table" in result.answer
    assert sum(c.n for c in policy.calls) == 2  # the first wave; prose cannot be voted on


@pytest.mark.parametrize(
    ("n", "params", "field"),
    [
        (8, {"steps": "more,up"}, "strategy.params.steps"),
        (2, {"first_wave": 3}, "strategy.params.first_wave"),
        (8, {"start": "guess"}, "strategy.params.start"),
        (8, {"confidence": 0.2}, "strategy.params.confidence"),
        (8, {"unknown": 1}, "strategy.params.unknown"),
    ],
)
async def test_invalid_parameters_name_the_field(n: int, params: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validate_job(adaptive_job(n, **params))
    assert caught.value.field == field
