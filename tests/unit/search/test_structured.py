"""Tools, response formats, logprobs, n answers and answer streaming through the strategies,
with scripted policies: the orchestrator's side of the OpenAI tools and structured-output surface."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import common_pb2
from services.gen.ttc.v1 import orchestrator_pb2 as T
from services.search.interfaces import Candidate, Constraint, Tool, ToolCall, Tools
from services.search.run import run_search, validate_job
from services.search.strategies.keys import VoteKeys, calls_key, json_key
from tests.helpers.search_fakes import CALLS_MARK, PolicyCall, ScriptedPolicy, ScriptedVerifier, contains
from tests.helpers.search_jobs import make_job

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
    "additionalProperties": False,
}
TOOLS = Tools((Tool("get_weather", "Weather in a city", json.dumps(WEATHER)), Tool("get_time", "", "")))
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}


def with_tools(job: T.SearchJob, choice: str = "auto") -> T.SearchJob:
    job.tools.CopyFrom(
        common_pb2.ToolSpec(
            tools=[
                common_pb2.Tool(
                    name="get_weather", description="Weather in a city", parameters_json=json.dumps(WEATHER)
                ),
                common_pb2.Tool(name="get_time"),
            ],
            choice=choice,
            parallel=True,
        )
    )
    return job


def calls(*pairs: tuple[str, Any]) -> str:
    """A scripted reply that calls tools: (name, arguments) pairs; arguments as given (dict or raw text)."""
    return CALLS_MARK + json.dumps([[n, a if isinstance(a, str) else json.dumps(a)] for n, a in pairs])


def by_index(replies: list[str]):  # type: ignore[no-untyped-def]
    def respond(call: PolicyCall, index: int, seed: int) -> str:
        del call, seed
        return replies[index % len(replies)]

    return respond


# -- vote keys -----------------------------------------------------------------------------
def test_calls_key_is_name_and_canonical_arguments_order_insensitive() -> None:
    a = (ToolCall("1", "get_weather", '{"city": "Paris", "unit": "c"}'), ToolCall("2", "get_time", "{}"))
    b = (ToolCall("9", "get_time", "{ }"), ToolCall("8", "get_weather", '{"unit":"c","city":"Paris"}'))
    assert calls_key(a, TOOLS) == calls_key(b, TOOLS) != ""
    assert calls_key(a[:1], TOOLS) != calls_key(a, TOOLS)


@pytest.mark.parametrize(
    "call",
    [
        ToolCall("1", "get_weather", '{"unit": "c"}'),  # required city missing
        ToolCall("1", "get_weather", '{"city": "Paris", "wind": 3}'),  # additionalProperties
        ToolCall("1", "get_weather", '{"city": "Paris", "unit": "kelvin"}'),  # not in the enum
        ToolCall("1", "get_weather", "{city: Paris}"),  # not JSON
        ToolCall("1", "get_weather", '["Paris"]'),  # not an object
        ToolCall("1", "launch_rockets", "{}"),  # no such tool
    ],
)
def test_a_call_that_does_not_validate_abstains(call: ToolCall) -> None:
    assert calls_key((call,), TOOLS) == ""
    assert calls_key((ToolCall("2", "get_time", "{}"), call), TOOLS) == ""  # one bad call spoils the turn


def test_several_calls_abstain_when_parallel_calls_are_not_allowed() -> None:
    two = (ToolCall("1", "get_time", "{}"), ToolCall("2", "get_weather", '{"city": "Rome"}'))
    assert calls_key(two, Tools(TOOLS.tools, "auto", parallel=False)) == ""
    assert calls_key(two[:1], Tools(TOOLS.tools, "auto", parallel=False)) != ""


def test_json_key_is_canonical_and_checks_the_constraint() -> None:
    schema = Constraint(json_schema=json.dumps(ANSWER_SCHEMA))
    assert json_key('{"answer": 42, "why": "x"}', schema) == json_key('{ "why":"x","answer":42 }', schema) != ""
    assert json_key('{"answer": "42"}', schema) == ""  # fails the schema
    assert json_key("The answer is 42", schema) == ""
    assert json_key("[1, 2]", Constraint(json_object=True)) == ""  # json_object needs an object
    assert json_key('{"a": 1}', Constraint(json_object=True)).startswith("json:")


def test_text_keys_are_unchanged_and_never_collide_with_calls() -> None:
    keys = VoteKeys(TOOLS)
    text = Candidate("The answer is 1,000.")
    assert keys.key(text) == VoteKeys().key(text) == "1000"
    assert VoteKeys(Tools(TOOLS.tools, "required")).key(text) == ""  # a call was required
    call = Candidate("", tool_calls=(ToolCall("1", "get_time", "{}"),))
    assert keys.key(call).startswith("tool_calls:")


# -- plumbing ------------------------------------------------------------------------------
async def test_tools_format_logprobs_and_history_reach_every_policy_call() -> None:
    job = with_tools(make_job("self_consistency", n=3))
    job.messages.append(
        common_pb2.ChatMessage(
            role="assistant", tool_calls=[common_pb2.ToolCall(id="c1", name="get_time", arguments="{}")]
        )
    )
    job.messages.append(common_pb2.ChatMessage(role="tool", content="12:00", tool_call_id="c1", name="get_time"))
    job.logprobs, job.top_logprobs = True, 3
    policy = ScriptedPolicy(by_index([calls(("get_time", {}))]))
    await run_search(job, policy, ScriptedVerifier(contains("x")))
    assert policy.calls
    for call in policy.calls:
        assert call.shape.tools is not None and [t.name for t in call.shape.tools.tools] == ["get_weather", "get_time"]
        assert call.shape.logprobs and call.shape.top_logprobs == 3 and call.logprobs
        assistant, tool = call.messages[-2], call.messages[-1]
        assert assistant.tool_calls == (ToolCall("c1", "get_time", "{}"),)
        assert (tool.role, tool.tool_call_id, tool.name, tool.content) == ("tool", "c1", "get_time", "12:00")


async def test_response_format_constrains_every_answer_call() -> None:
    job = make_job("best_of_n", n=3, verifier="orm")
    job.response_format.json_schema = json.dumps(ANSWER_SCHEMA)
    policy = ScriptedPolicy(by_index(['{"answer": 42}']))
    await run_search(job, policy, ScriptedVerifier(lambda t: 0.5))
    assert all(c.shape.constraint == Constraint(json_schema=json.dumps(ANSWER_SCHEMA)) for c in policy.calls)
    assert all(c.shape.tools is None for c in policy.calls)


# -- voting over structured answers --------------------------------------------------------
async def test_self_consistency_votes_over_normalized_tool_calls() -> None:
    replies = [
        calls(("get_weather", {"city": "Rome"})),  # valid, alone
        calls(("get_weather", {"city": "Paris", "unit": "c"})),
        calls(("get_weather", '{"unit":"c",  "city":"Paris"}')),  # same call, other spelling
        calls(("get_weather", {"city": "Oslo", "unit": "kelvin"})),  # invalid: abstains
        calls(("get_weather", {"city": "Oslo", "unit": "kelvin"})),
        calls(("get_weather", {"city": "Oslo", "unit": "kelvin"})),
    ]
    job = with_tools(make_job("self_consistency", n=6))
    result, trace = await run_search(job, ScriptedPolicy(by_index(replies)), ScriptedVerifier(contains("x")))
    assert result.finish_reason == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("get_weather", {"city": "Paris", "unit": "c"})
    ]
    vote_node = next(n for n in trace.nodes if n.action == "vote")
    assert vote_node.visits == 2 and "Paris" in vote_node.text  # the invalid majority did not vote
    chosen = next(n for n in trace.nodes if n.chosen and n.action == "generate")
    assert "<tool_call>" in chosen.text  # the trace shows the call


async def test_parallel_calls_vote_as_a_set() -> None:
    weather = ("get_weather", {"city": "Paris"})
    time = ("get_time", {})
    replies = [calls(time), calls(weather, time), calls(time, weather)]
    result, _ = await run_search(
        with_tools(make_job("self_consistency", n=3)), ScriptedPolicy(by_index(replies)), ScriptedVerifier(contains(""))
    )
    assert sorted(c.name for c in result.tool_calls) == ["get_time", "get_weather"]


async def test_json_votes_compare_canonical_json() -> None:
    job = make_job("self_consistency", n=5)
    job.response_format.json_schema = json.dumps(ANSWER_SCHEMA)
    replies = ['{"answer": 41}', '{"answer":42}', '{ "answer": 42 }', "not json", "not json"]
    result, _ = await run_search(job, ScriptedPolicy(by_index(replies)), ScriptedVerifier(contains("x")))
    assert json.loads(result.answer) == {"answer": 42}
    assert result.finish_reason == "stop" and not result.tool_calls


async def test_best_of_n_scores_only_valid_calls_and_shows_them_to_the_verifier() -> None:
    replies = [calls(("get_weather", {"town": "Paris"})), calls(("get_weather", {"city": "Paris"}))]
    verifier = ScriptedVerifier(lambda text: 0.9 if "town" in text else 0.2)
    result, _ = await run_search(
        with_tools(make_job("best_of_n", n=2, verifier="orm")), ScriptedPolicy(by_index(replies)), verifier
    )
    assert json.loads(result.tool_calls[0].arguments) == {"city": "Paris"}  # the invalid call was not scored
    assert verifier.calls[0].candidates == (
        '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    )


async def test_weighted_vote_weighs_tool_calls_by_the_verifier() -> None:
    replies = [calls(("get_time", {})), calls(("get_time", {})), calls(("get_weather", {"city": "Paris"}))]
    verifier = ScriptedVerifier(lambda text: 0.95 if "Paris" in text else 0.1)
    result, _ = await run_search(
        with_tools(make_job("weighted_vote", n=3, verifier="orm")), ScriptedPolicy(by_index(replies)), verifier
    )
    assert result.tool_calls[0].name == "get_weather" and result.finish_reason == "tool_calls"


# -- n answers -----------------------------------------------------------------------------
async def test_answers_are_the_distinct_top_answers_best_first() -> None:
    job = make_job("self_consistency", n=6)
    job.answers = 3
    replies = [f"The answer is {a}." for a in ("5", "7", "5", "9", "7", "5")]
    result, _ = await run_search(job, ScriptedPolicy(by_index(replies)), ScriptedVerifier(contains("x")))
    assert "is 5" in result.answer
    assert [(a.text, a.votes) for a in result.alternatives] == [("The answer is 7.", 2), ("The answer is 9.", 1)]


async def test_fewer_distinct_answers_than_asked_are_filled_with_further_candidates() -> None:
    job = make_job("self_consistency", n=4)
    job.answers = 3
    replies = ["The answer is 5.", "So the answer is 5.", "The answer is 5.", "The answer is 6."]
    result, _ = await run_search(job, ScriptedPolicy(by_index(replies)), ScriptedVerifier(contains("x")))
    assert [(a.text, a.votes) for a in result.alternatives] == [("The answer is 6.", 1), ("The answer is 5.", 3)]
    assert result.alternatives[1].reasoning.startswith("So the answer is 5.")  # the further candidate, as evidence
    job.answers = 9  # more than were drawn: all the others, no more
    result, _ = await run_search(job, ScriptedPolicy(by_index(replies)), ScriptedVerifier(contains("x")))
    assert len(result.alternatives) == 3


async def test_single_draws_n_samples_in_one_call() -> None:
    job = make_job("single")
    job.answers = 3
    policy = ScriptedPolicy(lambda call, i, seed: f"Sample {seed}. The answer is {i}.")
    result, _ = await run_search(job, policy, ScriptedVerifier(contains("x")))
    assert [c.n for c in policy.calls] == [3]
    assert len(result.alternatives) == 2 and len({result.answer, *(a.text for a in result.alternatives)}) == 3
    greedy = make_job("single", params={"greedy": True})
    greedy.answers = 3
    policy = ScriptedPolicy(lambda call, i, seed: f"Sample {seed}.")
    await run_search(greedy, policy, ScriptedVerifier(contains("x")))
    assert sorted((c.n, round(c.temperature, 3)) for c in policy.calls) == [(1, 0.0), (2, 0.7)]


async def test_best_of_n_alternatives_carry_scores() -> None:
    job = make_job("best_of_n", n=3, verifier="orm")
    job.answers = 2
    replies = ["The answer is 1.", "The answer is 2.", "The answer is 3."]
    verifier = ScriptedVerifier(lambda t: {"1": 0.2, "2": 0.9, "3": 0.5}[t[-2]])
    result, _ = await run_search(job, ScriptedPolicy(by_index(replies)), verifier)
    assert "is 2" in result.answer
    assert [(a.text, round(a.score, 2)) for a in result.alternatives] == [("The answer is 3.", 0.5)]


# -- logprobs ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["single", "self_consistency", "best_of_n", "weighted_vote", "revision"])
async def test_logprobs_of_the_returned_candidate(name: str) -> None:
    job = make_job(name, verifier="orm" if name in ("best_of_n", "weighted_vote", "revision") else "")
    job.logprobs, job.top_logprobs = True, 2
    policy = ScriptedPolicy(by_index(["The answer is 42."]))
    result, _ = await run_search(job, policy, ScriptedVerifier(contains("42")))
    assert [t.token for t in result.logprobs] == result.answer.split()
    assert all(t.logprob <= 0 for t in result.logprobs)


async def test_no_logprobs_unless_asked() -> None:
    result, _ = await run_search(
        make_job("self_consistency", n=2),
        ScriptedPolicy(by_index(["The answer is 1."])),
        ScriptedVerifier(contains("")),
    )
    assert not result.logprobs


# -- answer streaming ----------------------------------------------------------------------
def open_job(name: str, **kwargs: Any) -> T.SearchJob:
    """A job whose reply is its text (no value to render), so its answer streams token by token."""
    job = make_job(name, **kwargs)
    job.messages[0].content = "Write one sentence about the sea."
    return job


async def stream(job: T.SearchJob, policy: ScriptedPolicy) -> tuple[T.SearchResult, list[str]]:
    deltas: list[str] = []

    async def sink(delta: str) -> None:
        deltas.append(delta)

    result, _ = await run_search(job, policy, ScriptedVerifier(contains("42")), on_answer=sink)
    return result, deltas


async def test_single_streams_the_answer_as_generated() -> None:
    policy = ScriptedPolicy(by_index(["Six times seven is forty-two, so the answer is 42."]))
    result, deltas = await stream(open_job("single"), policy)
    assert len(deltas) > 3 and "".join(deltas) == result.answer
    assert policy.calls[0].streamed


async def test_budget_forcing_streams_its_final_answer() -> None:
    job = open_job("budget_forcing", params={"max_thinking_tokens": 20})

    def respond(call: PolicyCall, index: int, seed: int) -> str:
        return "hmm let me think" if not call.assistant_prefix.endswith("Final Answer:") else "  42 because six sevens"

    policy = ScriptedPolicy(respond)
    result, deltas = await stream(job, policy)
    assert deltas[0].startswith("Final Answer: ") and len(deltas) > 2
    assert "".join(deltas) == result.answer == "Final Answer: 42 because six sevens"
    assert [c.streamed for c in policy.calls] == [False] * (len(policy.calls) - 1) + [True]


@pytest.mark.parametrize("name", ["self_consistency", "best_of_n", "revision", "beam_search"])
async def test_other_strategies_send_the_chosen_answer_once(name: str) -> None:
    from tests.helpers.search_fakes import stepwise
    from tests.helpers.search_jobs import case_job

    policy = ScriptedPolicy(stepwise(["42", "41"]))
    result, deltas = await stream(case_job(name), policy)
    assert deltas == [result.answer] and result.answer
    assert not any(c.streamed for c in policy.calls)


async def test_logprobs_turn_token_streaming_into_one_delta() -> None:
    job = make_job("single")
    job.logprobs = True
    result, deltas = await stream(job, ScriptedPolicy(by_index(["The answer is 42."])))
    assert deltas == [result.answer] and result.logprobs


# -- token limits --------------------------------------------------------------------------
async def test_max_tokens_caps_each_answer_and_the_budget_caps_the_search() -> None:
    job = with_tools(make_job("self_consistency", n=8, tokens=20, max_tokens=6))
    policy = ScriptedPolicy(by_index(["one two three four five six seven eight nine ten"]))
    result, _ = await run_search(job, policy, ScriptedVerifier(contains("x")))
    assert all(c.max_tokens <= 6 for c in policy.calls)
    assert result.budget_used.generated_tokens <= 20


def test_budget_forcing_answer_tokens_may_not_exceed_max_tokens() -> None:
    with pytest.raises(InvalidArgument) as err:
        validate_job(make_job("budget_forcing", params={"answer_max_tokens": 500}, max_tokens=64))
    assert err.value.field == "strategy.params.answer_max_tokens"


async def test_revision_alternatives_are_its_other_attempts_best_first() -> None:
    job = make_job("revision", n=1, params={"rounds": 2}, verifier="orm")
    job.answers = 3

    def respond(call: PolicyCall, index: int, seed: int) -> str:
        k = 1 if len(call.messages) == 1 else int(call.messages[-2].content.rstrip(".")[-1]) + 1
        return f"Attempt {k}. The answer is {k}."

    verifier = ScriptedVerifier(lambda text: 0.1 * (1 + int(text.rstrip(".")[-1])), passed=lambda t: False)
    result, _ = await run_search(job, ScriptedPolicy(respond), verifier)
    assert (result.answer, result.reasoning) == ("The answer is 3.", "Attempt 3. The answer is 3.")  # the best
    assert [(a.text, a.reasoning, round(a.score, 1)) for a in result.alternatives] == [
        ("The answer is 2.", "Attempt 2. The answer is 2.", 0.3),
        ("The answer is 1.", "Attempt 1. The answer is 1.", 0.2),
    ]
