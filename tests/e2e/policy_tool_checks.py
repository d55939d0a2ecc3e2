"""Tool and structured-output checks run against a live policy service (any engine).

Each check sends real requests to an engine that decodes under the project's own grammar
(llama.cpp, vLLM) and asserts only what holds for any sample under it: every candidate of a
json_schema request parses and validates; tool_choice "required" or a named tool yields a
parsed call whose arguments validate against the tool's schema; a tool round trip (assistant
tool_calls, then a tool message) renders and generates; logprobs come back under a
constraint; bad schemas and tool choices are INVALID_ARGUMENT naming the field.

The grammar (tests/unit/policy/test_tool_grammar.py) is what makes a sample valid, and it
bounds the output: strings to their maxLength, arrays to maxItems, integers to 16 digits,
whitespace to one optional space. A token is at least one byte and a string character at most
six (a ``\\uXXXX`` escape), so the ``max_tokens`` below hold the longest output the grammar
accepts: every sample ends with the grammar, at temperature 1 on any host. An unbounded
constraint (json_object) cannot promise that, so its check allows a candidate cut at the limit.
"""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest

from services.common.errors import FIELD_METADATA_KEY
from services.common.json_constraint import validation_errors
from services.common.tool_calls import ToolCall, valid_call
from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 24},
        "age": {"type": "integer"},
        "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 16}, "maxItems": 2},
    },
    "required": ["name", "age", "hobbies"],
    "additionalProperties": False,
}
WEATHER = common_pb2.Tool(
    name="get_weather",
    description="Current weather in a city",
    parameters_json=json.dumps(
        {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 24}, "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        }
    ),
)
TIME = common_pb2.Tool(
    name="get_time",
    description="Current local time in a time zone",
    parameters_json=json.dumps(
        {
            "type": "object",
            "properties": {"timezone": {"type": "string", "maxLength": 24}},
            "required": ["timezone"],
            "additionalProperties": False,
        }
    ),
)
QUESTION = "What is the weather in Paris right now?"
OK_FINISH = (policy_pb2.FINISH_REASON_STOP, policy_pb2.FINISH_REASON_LENGTH)
#: bytes of the longest call the grammar accepts for WEATHER or TIME: the <tool_call> block and
#: the call's JSON (under 100 bytes) plus 24 string characters of at most 6 bytes
CALL_TOKENS = 256
#: the same for PERSON: the JSON around the values (under 60 bytes), 24 + 2 x 16 string
#: characters of at most 6 bytes, 17 for the integer
PERSON_TOKENS = 448


def user(text: str) -> common_pb2.ChatMessage:
    return common_pb2.ChatMessage(role="user", content=text)


def tools(choice: str = "auto", parallel: bool = False) -> common_pb2.ToolSpec:
    return common_pb2.ToolSpec(tools=[WEATHER, TIME], choice=choice, parallel=parallel)


def generate(
    stub: policy_pb2_grpc.PolicyStub, inp: policy_pb2.PromptInput, **sampling: Any
) -> policy_pb2.GenerateResponse:
    reply: policy_pb2.GenerateResponse = stub.Generate(
        policy_pb2.GenerateRequest(input=inp, sampling=policy_pb2.SamplingParams(**sampling)), timeout=900
    )
    return reply


def check_json_schema(stub: policy_pb2_grpc.PolicyStub, logprobs: bool = True) -> None:
    """n=3 at temperature 1: every candidate is JSON that validates; logprobs come back."""
    inp = policy_pb2.PromptInput(messages=[user("Invent a person. Reply in JSON with name, age and hobbies.")])
    constraint = common_pb2.OutputConstraint(json_schema=json.dumps(PERSON))
    extra: dict[str, Any] = {"logprobs": True, "top_logprobs": 2} if logprobs else {}
    reply = generate(
        stub, inp, n=3, temperature=1.0, max_tokens=PERSON_TOKENS, base_seed=5, constraint=constraint, **extra
    )
    assert len(reply.candidates) == 3
    for c in reply.candidates:
        assert c.finish_reason == policy_pb2.FINISH_REASON_STOP, c.text
        value = json.loads(c.text)
        assert validation_errors(PERSON, value) == [], c.text
        if logprobs:
            assert len(c.logprobs) == c.completion_tokens
            assert all(t.logprob <= 0.0 and len(t.top_logprobs) == 2 for t in c.logprobs)


def check_json_object(stub: policy_pb2_grpc.PolicyStub) -> None:
    """Any JSON object: a candidate that ends is one; one cut at ``max_tokens`` began as one."""
    inp = policy_pb2.PromptInput(
        messages=[user('What is the capital of France? Answer only with a JSON object like {"capital": "..."}.')]
    )
    constraint = common_pb2.OutputConstraint(json_object=True)
    reply = generate(stub, inp, n=2, temperature=0.7, max_tokens=128, base_seed=2, constraint=constraint)
    for c in reply.candidates:
        if c.finish_reason == policy_pb2.FINISH_REASON_LENGTH:
            assert c.completion_tokens == 128 and c.text.startswith("{"), c.text
        else:
            assert c.finish_reason == policy_pb2.FINISH_REASON_STOP, c.text
            assert isinstance(json.loads(c.text), dict)


def _calls(c: policy_pb2.Candidate) -> list[ToolCall]:
    return [ToolCall(t.id, t.name, t.arguments) for t in c.tool_calls]


def check_required_tool(stub: policy_pb2_grpc.PolicyStub) -> None:
    """tool_choice "required": every candidate is exactly one call with valid arguments."""
    inp = policy_pb2.PromptInput(messages=[user(QUESTION)], tools=tools("required"))
    reply = generate(stub, inp, n=3, temperature=1.0, max_tokens=CALL_TOKENS, base_seed=9, logprobs=True)
    for c in reply.candidates:
        assert c.finish_reason == policy_pb2.FINISH_REASON_STOP, c.text
        assert c.text == "" and len(c.tool_calls) == 1, c
        call = c.tool_calls[0]
        assert call.id.startswith("call_") and call.name in ("get_weather", "get_time")
        assert valid_call(_calls(c)[0], [WEATHER, TIME]), call.arguments
        assert json.loads(call.arguments)  # a non-empty object
        assert len(c.logprobs) == c.completion_tokens


def check_named_tool(stub: policy_pb2_grpc.PolicyStub) -> None:
    """A named tool_choice forces that tool even when the question asks for another."""
    inp = policy_pb2.PromptInput(messages=[user(QUESTION)], tools=tools("get_time"))
    reply = generate(stub, inp, n=2, temperature=1.0, max_tokens=CALL_TOKENS, base_seed=4)
    for c in reply.candidates:
        assert c.finish_reason == policy_pb2.FINISH_REASON_STOP, c.text
        assert [t.name for t in c.tool_calls] == ["get_time"], c
        assert valid_call(_calls(c)[0], [TIME])


def round_trip_input(with_tools: bool = True) -> policy_pb2.PromptInput:
    call = common_pb2.ToolCall(id="call_0", name="get_weather", arguments='{"city": "Paris", "unit": "c"}')
    messages = [
        user(QUESTION),
        common_pb2.ChatMessage(role="assistant", tool_calls=[call]),
        common_pb2.ChatMessage(
            role="tool", content='{"temperature": 18, "sky": "sunny"}', tool_call_id="call_0", name="get_weather"
        ),
    ]
    return policy_pb2.PromptInput(messages=messages, tools=tools("auto") if with_tools else None)


def check_round_trip(stub: policy_pb2_grpc.PolicyStub, counts_tokens: bool = True) -> None:
    """The history renders (tools and the earlier call add tokens) and the model generates."""
    inp = round_trip_input()
    if counts_tokens:
        full = stub.Tokenize(policy_pb2.TokenizeRequest(input=inp), timeout=60).count
        question_only = stub.Tokenize(
            policy_pb2.TokenizeRequest(input=policy_pb2.PromptInput(messages=[user(QUESTION)]))
        )
        assert full > question_only.count + 20
    reply = generate(stub, inp, n=1, temperature=0.0, max_tokens=40)
    c = reply.candidates[0]
    assert c.finish_reason in OK_FINISH and 0 < c.completion_tokens <= 40


def check_stream_holds_back_calls(stub: policy_pb2_grpc.PolicyStub) -> None:
    inp = policy_pb2.PromptInput(messages=[user(QUESTION)], tools=tools("required"))
    request = policy_pb2.GenerateRequest(
        input=inp, sampling=policy_pb2.SamplingParams(n=2, temperature=1.0, max_tokens=CALL_TOKENS, base_seed=9)
    )
    text = ["", ""]
    calls: dict[int, list[common_pb2.ToolCall]] = {}
    for chunk in stub.GenerateStream(request, timeout=900):
        if chunk.HasField("usage"):
            continue
        text[chunk.index] += chunk.text_delta
        if chunk.finish_reason:
            calls[chunk.index] = list(chunk.tool_calls)
    assert "<tool_call>" not in "".join(text)
    assert sorted(calls) == [0, 1]
    for found in calls.values():
        assert len(found) == 1 and valid_call(ToolCall(found[0].id, found[0].name, found[0].arguments), [WEATHER, TIME])


BAD_SCHEMAS = [
    ("{not json", "sampling.constraint.json_schema"),
    ('{"type": "objekt"}', "sampling.constraint.json_schema"),
    ('{"type": "string", "pattern": "^(?!x).*$"}', "sampling.constraint.json_schema"),
]


def expect_invalid(stub: policy_pb2_grpc.PolicyStub, request: policy_pb2.GenerateRequest, field: str) -> None:
    with pytest.raises(grpc.RpcError) as err:
        stub.Generate(request, timeout=120)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert (FIELD_METADATA_KEY, field) in (err.value.trailing_metadata() or ())


def check_bad_input(stub: policy_pb2_grpc.PolicyStub) -> None:
    chat = policy_pb2.PromptInput(messages=[user(QUESTION)])
    for schema, field in BAD_SCHEMAS:
        sampling = policy_pb2.SamplingParams(
            n=1, max_tokens=8, constraint=common_pb2.OutputConstraint(json_schema=schema)
        )
        expect_invalid(stub, policy_pb2.GenerateRequest(input=chat, sampling=sampling), field)
    sampling = policy_pb2.SamplingParams(n=1, max_tokens=8)
    bad_params = common_pb2.ToolSpec(tools=[common_pb2.Tool(name="f", parameters_json='{"type": 3}')])
    for spec, field in (
        (common_pb2.ToolSpec(tools=[WEATHER], choice="get_stock_price"), "input.tools.choice"),
        (bad_params, "input.tools.tools[0].parameters_json"),
    ):
        inp = policy_pb2.PromptInput(messages=[user(QUESTION)], tools=spec)
        expect_invalid(stub, policy_pb2.GenerateRequest(input=inp, sampling=sampling), field)
    orphan = policy_pb2.PromptInput(
        messages=[user(QUESTION), common_pb2.ChatMessage(role="tool", content="18", tool_call_id="call_none")]
    )
    expect_invalid(stub, policy_pb2.GenerateRequest(input=orphan, sampling=sampling), "input.messages[1].tool_call_id")
