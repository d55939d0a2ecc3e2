"""The seam: job validation, result/trace conversion and replay."""

from __future__ import annotations

import pytest
from google.protobuf import struct_pb2

from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2
from services.search.interfaces import ReasoningDelta
from services.search.run import replay, run_search, validate_job
from tests.helpers.search_fakes import ScriptedPolicy, ScriptedVerifier, answers_by_seed, contains


def make_job(
    name: str = "self_consistency", *, n: int = 5, tokens: int = 1000, **params: object
) -> orchestrator_pb2.SearchJob:
    struct = struct_pb2.Struct()
    struct.update(params)  # type: ignore[arg-type]
    return orchestrator_pb2.SearchJob(
        job_id="job-1",
        messages=[common_pb2.ChatMessage(role="user", content="What is 6*7?")],
        strategy=orchestrator_pb2.StrategySpec(name=name, n=n, params=struct),
        budget=orchestrator_pb2.Budget(max_generated_tokens=tokens),
        temperature=0.7,
        max_tokens=64,
        seed=1234,
    )


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda j: setattr(j.strategy, "name", "nope"), "strategy.name"),
        (lambda j: setattr(j.strategy, "name", ""), "strategy.name"),
        (lambda j: setattr(j.budget, "max_generated_tokens", 0), "budget.max_generated_tokens"),
        (lambda j: setattr(j.budget, "deadline_seconds", -1), "budget.deadline_seconds"),
        (lambda j: setattr(j, "temperature", 3.0), "temperature"),
        (lambda j: setattr(j, "top_p", 1.5), "top_p"),
        (lambda j: setattr(j.strategy, "n", 100000), "strategy.n"),
        (lambda j: j.strategy.params.update({"bogus": 1}), "strategy.params.bogus"),
        (lambda j: j.ClearField("messages"), "messages"),
        (lambda j: setattr(j.messages[0], "role", "robot"), "messages[0].role"),
    ],
)
def test_validate_job_names_the_field(mutate, field: str) -> None:
    job = make_job()
    mutate(job)
    with pytest.raises(InvalidArgument) as err:
        validate_job(job)
    assert err.value.field == field


def test_verifier_that_needs_a_reference_is_rejected_before_compute() -> None:
    job = make_job("weighted_vote")
    job.strategy.verifier = "math_equivalence"
    with pytest.raises(InvalidArgument) as err:
        validate_job(job)
    assert err.value.field == "reference"
    job.reference = "42"
    validate_job(job)


async def test_invalid_job_spends_nothing() -> None:
    policy = ScriptedPolicy(answers_by_seed(["42"]))
    job = make_job(tokens=0)
    with pytest.raises(InvalidArgument):
        await run_search(job, policy, ScriptedVerifier(contains("42")))
    assert policy.calls == []


async def test_run_search_result_and_trace() -> None:
    events: list[ReasoningDelta] = []
    policy = ScriptedPolicy(answers_by_seed(["42", "42", "41"]))
    result, trace = await run_search(make_job(), policy, ScriptedVerifier(contains("42")), on_reasoning=events.append)
    assert result.termination == orchestrator_pb2.TERMINATION_COMPLETED
    assert "42" in result.answer
    assert result.candidates_generated == 5
    assert result.budget_used.policy_calls == 1  # one batched call for all five
    assert result.budget_used.generated_tokens == sum(n.tokens for n in trace.nodes)
    assert result.trace_id == trace.trace_id == "job-1"
    assert trace.job.seed == 1234 and trace.nodes[0].action == "prompt"
    assert any(n.chosen and n.action == "generate" for n in trace.nodes)
    # Five candidates streamed under five labels, then the vote's tally.
    assert {e.source for e in events if e.kind == "tokens"} == {f"candidate {i}" for i in range(1, 6)}
    kinds = [(e.kind, e.source) for e in events]
    tally = kinds.index(("event", "vote"))
    assert all(kind == "tokens" for kind, _ in kinds[:tally]) and events[tally].text == "tally of 5: '42': 5"


async def test_job_without_seed_is_still_reproducible() -> None:
    job = make_job()
    job.ClearField("seed")
    policy = ScriptedPolicy(answers_by_seed(["1", "2", "3", "4"]))
    _, first = await run_search(job, policy, ScriptedVerifier(contains("1")))
    _, second = await run_search(job, policy, ScriptedVerifier(contains("1")))
    assert [n.seed for n in first.nodes] == [n.seed for n in second.nodes]
    assert first.job.HasField("seed")


async def test_replay_matches_and_detects_divergence() -> None:
    policy = ScriptedPolicy(answers_by_seed(["7", "8", "7"]))
    verifier = ScriptedVerifier(contains("7"))
    _, trace = await run_search(make_job(), policy, verifier)
    comparison, _, _ = await replay(trace, policy, verifier)
    assert comparison.matches and comparison.texts_match
    # A different engine (answers do not depend on the seed the same way) diverges.
    other = ScriptedPolicy(answers_by_seed(["8", "7"]))
    comparison, _, _ = await replay(trace, other, verifier)
    assert not comparison.matches
    assert comparison.first_divergence is not None


async def test_a_failing_reasoning_sink_does_not_kill_the_search() -> None:
    def broken(delta: ReasoningDelta) -> None:
        raise RuntimeError("redis down")

    result, _ = await run_search(
        make_job("self_consistency", n=3),
        ScriptedPolicy(answers_by_seed(["3"])),
        ScriptedVerifier(contains("3")),
        on_reasoning=broken,
    )
    assert result.termination == orchestrator_pb2.TERMINATION_COMPLETED


async def test_trace_round_trips_through_proto() -> None:
    from services.search.trace import Trace

    _, trace = await run_search(
        make_job(), ScriptedPolicy(answers_by_seed(["4", "5"])), ScriptedVerifier(contains("4"))
    )
    rebuilt = Trace.from_proto(trace)
    assert [n.to_proto() for n in rebuilt.nodes] == list(trace.nodes)
    assert rebuilt.root.action == "prompt" and rebuilt.get(trace.nodes[-1].id).text == trace.nodes[-1].text


async def test_a_judges_scores_and_an_early_stop_are_events_naming_the_candidates() -> None:
    deltas: list[ReasoningDelta] = []
    policy = ScriptedPolicy(answers_by_seed(["42", "41"]))
    await run_search(make_job("best_of_n", n=3), policy, ScriptedVerifier(contains("42")), on_reasoning=deltas.append)
    judged = [d for d in deltas if d.source == "judge"]
    assert len(judged) == 1 and judged[0].kind == "event"
    assert judged[0].text.startswith("orm: candidate 1 ") and "candidate 3" in judged[0].text
    events = [d.source for d in deltas if d.kind == "event"]
    assert events.index("judge") < events.index("select")  # then the rendered reply's evidence

    deltas.clear()
    job = make_job("self_consistency", n=12, early_stop=True, first_wave=3)
    await run_search(
        job, ScriptedPolicy(answers_by_seed(["7"])), ScriptedVerifier(contains("7")), on_reasoning=deltas.append
    )
    stops = [d.text for d in deltas if d.source == "vote" and d.text.startswith("stopped early")]
    assert len(stops) == 1 and "not drawn" in stops[0]
    assert {d.source for d in deltas if d.kind == "tokens"} == {"candidate 1", "candidate 2", "candidate 3"}
