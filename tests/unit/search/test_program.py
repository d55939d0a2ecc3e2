"""Program-of-thought: programs run in a (scripted) sandbox, outputs vote, crashes abstain."""

from __future__ import annotations

import pytest

from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import orchestrator_pb2
from services.search.run import run_search
from services.search.strategies.program import program_source
from tests.helpers.search_fakes import ScriptedExecutor, ScriptedPolicy, ScriptedVerifier, programs_by_seed
from tests.helpers.search_jobs import make_job

T = orchestrator_pb2
NO_VERIFIER = ScriptedVerifier(lambda text: 0.0)


def pot_job(n: int, **params: object) -> orchestrator_pb2.SearchJob:
    return make_job("program_of_thought", n=n, params=dict(params), max_tokens=64)


def test_program_source_prints_a_last_bare_expression() -> None:
    assert program_source("```python\nx = 6\nx * 7\n```") == "x = 6\nprint(x * 7)"
    assert program_source("```python\nprint(42)\n```") == "print(42)"
    assert program_source("x = (1 +\n  2)\nx") == "x = (1 +\n  2)\nprint(x)"


def test_program_source_rejects_what_cannot_run() -> None:
    assert program_source("The answer is 42.") is None
    assert program_source("") is None
    assert program_source("Final answer: 1") is None


def test_a_stated_computation_runs_its_expression_not_its_guess() -> None:
    # Real replies of the packaged model (tests/unit/data/program_outputs.json): the expression is right.
    assert program_source("1001 - 999 = 1") == "print(1001 - 999)"
    assert program_source("2**10 = 1024") == "print(2**10)"
    assert program_source("12 = 12") is None  # nothing to compute


async def test_float_noise_votes_with_the_clean_value() -> None:
    # Real program outputs: one answer in three spellings outvotes a cleaner-looking pair.
    printed = ["-1.5860000000000012", "2", "-1.586", "2", "-1.5859999999999999", "7"]
    policy = ScriptedPolicy(programs_by_seed(printed, in_order=True))
    executor = ScriptedExecutor()
    result, trace = await run_search(pot_job(6, early_stop=False), policy, NO_VERIFIER, executor=executor)
    assert result.termination == T.TERMINATION_COMPLETED, result.error
    assert result.answer == "The answer is -1.586.", result.answer
    assert result.reasoning.rstrip().endswith("The answer is -1.5860000000000012.")  # what the winner printed
    keyed = [n.execution.answer for n in trace.nodes if n.HasField("execution")]
    assert keyed == ["-1.586", "2", "-1.586", "2", "-1.586", "7"]
    vote = next(n for n in trace.nodes if n.action == "vote")
    assert (vote.text, vote.visits) == ("-1.586", 3)
    assert result.budget_used.sandbox_runs == len(executor.runs) == 6


async def test_crashed_and_silent_programs_abstain() -> None:
    policy = ScriptedPolicy(programs_by_seed(["raise", "while True", "raise", "17"], in_order=True))
    result, trace = await run_search(pot_job(8, early_stop=False), policy, NO_VERIFIER, executor=ScriptedExecutor())
    executions = [n.execution for n in trace.nodes if n.HasField("execution")]
    assert {e.status for e in executions} >= {"runtime_error", "timeout", "ok"}
    assert all(e.answer == "" for e in executions if e.status != "ok")
    assert "The answer is 17." in result.answer


async def test_no_program_answers_falls_back_to_chain_of_thought() -> None:
    policy = ScriptedPolicy(programs_by_seed(["raise"]))
    result, _ = await run_search(pot_job(3, early_stop=False), policy, NO_VERIFIER, executor=ScriptedExecutor())
    assert result.termination == T.TERMINATION_COMPLETED
    assert result.reasoning == "Thinking.\n\nThe answer is raise."  # the chain-of-thought sample, as evidence
    assert result.answer == "The answer is raise."
    assert policy.calls[-1].temperature == 0.0  # greedy fallback


async def test_early_stop_saves_candidates_when_the_vote_is_settled() -> None:
    policy = ScriptedPolicy(programs_by_seed(["42"]))
    executor = ScriptedExecutor()
    result, _ = await run_search(pot_job(8), policy, NO_VERIFIER, executor=executor)
    assert len(executor.runs) == 3  # first wave 3, unanimous: P(leader) = 0.94 >= 0.9
    assert result.candidates_saved == 5
    assert result.tokens_saved > 0
    assert "The answer is 42." in result.answer


async def test_no_early_stop_when_the_vote_is_split() -> None:
    policy = ScriptedPolicy(programs_by_seed(["1", "2", "3"]))
    executor = ScriptedExecutor()
    result, _ = await run_search(pot_job(8), policy, NO_VERIFIER, executor=executor)
    assert len(executor.runs) == 8
    assert result.candidates_saved == 0


async def test_first_program_is_greedy() -> None:
    policy = ScriptedPolicy(programs_by_seed(["5"]))
    await run_search(pot_job(4, early_stop=False), policy, NO_VERIFIER, executor=ScriptedExecutor())
    assert policy.calls[0].n == 1 and policy.calls[0].temperature == 0.0
    assert policy.calls[1].n == 3 and policy.calls[1].temperature == pytest.approx(0.7)
    assert "Python 3 program" in policy.calls[0].messages[0].content


async def test_hybrid_chain_of_thought_breaks_a_program_tie() -> None:
    def respond(call, index, seed):  # type: ignore[no-untyped-def]
        if "Python 3 program" in call.messages[0].content:
            return '```python\nprint("10")\n```' if index == 0 and call.n == 1 else '```python\nprint("12")\n```'
        return "So the answer is 10."

    policy = ScriptedPolicy(respond)
    job = pot_job(2, mode="hybrid", cot=2, early_stop=False)
    result, _ = await run_search(job, policy, NO_VERIFIER, executor=ScriptedExecutor())
    assert "The answer is 10." in result.answer  # 1 program + 2 x 0.5 CoT against 1 program


async def test_sandbox_outage_is_a_component_error_not_a_wrong_answer() -> None:
    policy = ScriptedPolicy(programs_by_seed(["42"]))
    result, _ = await run_search(pot_job(2), policy, NO_VERIFIER, executor=ScriptedExecutor(fail=True))
    assert result.termination == T.TERMINATION_ERROR
    assert "sandbox" in result.error


async def test_rounding_requested_by_the_question_applies_to_vote_keys() -> None:
    policy = ScriptedPolicy(programs_by_seed(["3.14159", "3.1402", "2.5"]))
    job = pot_job(6, early_stop=False)
    job.messages[0].content = "What is pi to 2 decimal places?"
    _, trace = await run_search(job, policy, NO_VERIFIER, executor=ScriptedExecutor())
    keys = {n.execution.answer for n in trace.nodes if n.HasField("execution")}
    assert keys <= {"3.14", "2.5"}


@pytest.mark.parametrize(
    ("params", "field"),
    [({"mode": "bogus"}, "strategy.params.mode"), ({"cot": 2}, "strategy.params.cot"), ({"x": 1}, "strategy.params")],
)
async def test_invalid_parameters_name_the_field(params: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        await run_search(pot_job(2, **params), ScriptedPolicy(programs_by_seed(["1"])), NO_VERIFIER)
    assert err.value.field.startswith(field)


def literal_then(value: str, literals: int):  # type: ignore[no-untyped-def]
    """Programs that print a guessed literal ``literals`` times, then one that computes ``value``."""
    drawn = iter(range(1 << 30))

    def respond(call, index, seed):  # type: ignore[no-untyped-def]
        if "Python 3 program" not in call.messages[0].content:
            return "Thinking.\n\nThe answer is 5."
        if next(drawn) < literals:
            return "```python\nprint(32)\n```"
        return f'```python\nx = 1\nprint("{value}".strip())\n```'

    return respond


async def test_a_literal_printing_program_abstains_and_is_resampled() -> None:
    policy = ScriptedPolicy(literal_then("42", literals=1))
    executor = ScriptedExecutor()
    result, trace = await run_search(pot_job(1), policy, NO_VERIFIER, executor=executor)
    assert result.answer == "The answer is 42."
    assert [n.execution.answer for n in trace.nodes if n.HasField("execution")] == ["", "42"]
    assert policy.calls[1].temperature >= 0.7  # a greedy redraw would write print(32) again
    assert "Abstained: 1 program(s) (prints a literal)" in result.reasoning


async def test_resampling_stops_at_the_retries_then_falls_back() -> None:
    policy = ScriptedPolicy(literal_then("42", literals=10))
    result, trace = await run_search(pot_job(1, retries=2), policy, NO_VERIFIER, executor=ScriptedExecutor())
    assert sum(1 for n in trace.nodes if n.HasField("execution")) == 3  # greedy + 2 retries
    assert result.answer == "The answer is 5."  # the chain-of-thought fallback
    assert result.reasoning.startswith("Thinking.")


async def test_the_program_prompt_never_sees_the_answer_format_and_the_reply_applies_it() -> None:
    policy = ScriptedPolicy(programs_by_seed(["42"]))
    job = pot_job(1)
    job.messages[0].content = "What is 6 times 7? End your reply with 'Answer: <number>'."
    result, _ = await run_search(job, policy, NO_VERIFIER, executor=ScriptedExecutor())
    prompt = policy.calls[0].messages[-1].content
    assert "Answer:" not in prompt and "6 times 7" in prompt
    assert result.answer == "Answer: 42"
    assert "```python" in result.reasoning and "```" not in result.answer


async def test_programs_stream_as_they_are_written_and_each_run_follows_under_its_label() -> None:
    from services.search.interfaces import ReasoningDelta

    deltas: list[ReasoningDelta] = []
    policy = ScriptedPolicy(programs_by_seed(["42", "raise", "42"], in_order=True))
    result, trace = await run_search(
        pot_job(3, early_stop=False), policy, NO_VERIFIER, executor=ScriptedExecutor(), on_reasoning=deltas.append
    )
    assert "42" in result.answer
    written: dict[str, str] = {}
    for d in deltas:
        if d.kind == "tokens":
            written[d.source] = written.get(d.source, "") + d.text
    assert sorted(written) == ["program 1", "program 2", "program 3"]
    assert sorted(written.values()) == sorted(n.text for n in trace.nodes if n.action == "program")
    runs = {d.source: d.text for d in deltas if d.kind == "event" and d.source.startswith("program")}
    assert sorted(runs) == ["program 1", "program 2", "program 3"]
    assert sum(text.startswith("ran ok") and text.endswith("printed: 42") for text in runs.values()) == 2
    assert sum(text.startswith("ran: runtime_error") for text in runs.values()) == 1
    # each run after its program's tokens, and the tally after every run
    order = [(d.kind, d.source) for d in deltas]
    for source in runs:
        last_token = max(i for i, o in enumerate(order) if o == ("tokens", source))
        assert order.index(("event", source)) > last_token
    tally = next(d for d in deltas if d.source == "vote")
    assert tally.text.startswith("tally of 3: '42': 2") and deltas.index(tally) > max(
        order.index(("event", s)) for s in runs
    )
