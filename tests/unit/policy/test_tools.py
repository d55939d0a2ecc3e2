"""Tools and constraints in the policy: validation, template inputs, grammars, parsed output."""

from __future__ import annotations

import json

import pytest

from services.common.errors import InvalidArgument
from services.common.tool_calls import ToolCall
from services.gen.ttc.v1 import common_pb2, policy_pb2
from services.policy.engines.base import (
    Completion,
    Constraint,
    Generation,
    Message,
    Prompt,
    Sampling,
    StreamDelta,
    ToolDef,
    ToolSpec,
)
from services.policy.engines.tool_prompt import TRIGGER_PATTERN, grammar_plan, template_inputs
from services.policy.tool_output import StreamToolCalls, attach_tool_calls
from services.policy.validation import to_prompt, to_sampling

PARAMS = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
WEATHER = common_pb2.Tool(name="get_weather", description="weather", parameters_json=PARAMS)


def chat_input(**kw: object) -> policy_pb2.PromptInput:
    messages = kw.pop("messages", [common_pb2.ChatMessage(role="user", content="Weather in Paris?")])
    return policy_pb2.PromptInput(messages=messages, **kw)  # type: ignore[arg-type]


def bad_field(fn: object, *args: object) -> str:
    with pytest.raises(InvalidArgument) as err:
        fn(*args)  # type: ignore[operator]
    return err.value.field


def test_tools_convert() -> None:
    prompt = to_prompt(chat_input(tools=common_pb2.ToolSpec(tools=[WEATHER], choice="required", parallel=True)))
    assert prompt.tools == ToolSpec((ToolDef("get_weather", "weather", PARAMS),), "required", True)
    assert to_prompt(chat_input(tools=common_pb2.ToolSpec(tools=[WEATHER]))).tools.choice == "auto"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (common_pb2.ToolSpec(tools=[WEATHER], choice="get_time"), "input.tools.choice"),
        (common_pb2.ToolSpec(choice="required"), "input.tools.choice"),
        (common_pb2.ToolSpec(tools=[common_pb2.Tool(name="bad name")]), "input.tools.tools[0].name"),
        (common_pb2.ToolSpec(tools=[WEATHER, WEATHER]), "input.tools.tools[1].name"),
        (
            common_pb2.ToolSpec(tools=[common_pb2.Tool(name="f", parameters_json="{x")]),
            "input.tools.tools[0].parameters_json",
        ),
        (
            common_pb2.ToolSpec(tools=[common_pb2.Tool(name="f", parameters_json="[]")]),
            "input.tools.tools[0].parameters_json",
        ),
        (
            common_pb2.ToolSpec(tools=[common_pb2.Tool(name="f", parameters_json='{"type": "objekt"}')]),
            "input.tools.tools[0].parameters_json",
        ),
        (
            common_pb2.ToolSpec(tools=[common_pb2.Tool(name="f", parameters_json='{"not": {"type": "string"}}')]),
            "input.tools.tools[0].parameters_json",
        ),
    ],
)
def test_bad_tools_name_the_field(spec: common_pb2.ToolSpec, field: str) -> None:
    assert bad_field(to_prompt, chat_input(tools=spec)) == field


def test_tool_history_is_checked() -> None:
    call = common_pb2.ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}')
    history = [
        common_pb2.ChatMessage(role="user", content="Weather?"),
        common_pb2.ChatMessage(role="assistant", tool_calls=[call]),
        common_pb2.ChatMessage(role="tool", content="18C", tool_call_id="call_1", name="get_weather"),
    ]
    prompt = to_prompt(chat_input(messages=history))
    assert prompt.messages[1].tool_calls == (ToolCall("call_1", "get_weather", '{"city":"Paris"}'),)
    assert prompt.messages[2].tool_call_id == "call_1"
    orphan = [*history[:1], common_pb2.ChatMessage(role="tool", content="18C", tool_call_id="call_9")]
    assert bad_field(to_prompt, chat_input(messages=orphan)) == "input.messages[1].tool_call_id"
    bad_args = [
        history[0],
        common_pb2.ChatMessage(role="assistant", tool_calls=[common_pb2.ToolCall(name="f", arguments="[")]),
    ]
    assert bad_field(to_prompt, chat_input(messages=bad_args)) == "input.messages[1].tool_calls[0].arguments"
    user_calls = [common_pb2.ChatMessage(role="user", content="x", tool_calls=[call])]
    assert bad_field(to_prompt, chat_input(messages=user_calls)) == "input.messages[0].tool_calls"
    raw = policy_pb2.PromptInput(prompt="text", tools=common_pb2.ToolSpec(tools=[WEATHER]))
    assert bad_field(to_prompt, raw) == "input.tools"


def test_constraints_convert_and_bad_schemas_name_the_field() -> None:
    def sampling(c: common_pb2.OutputConstraint) -> policy_pb2.SamplingParams:
        return policy_pb2.SamplingParams(n=1, max_tokens=8, constraint=c)

    assert to_sampling(sampling(common_pb2.OutputConstraint(json_object=True)), 4).constraint == Constraint(
        "json_object"
    )
    assert to_sampling(sampling(common_pb2.OutputConstraint(json_schema=PARAMS)), 4).constraint == Constraint(
        "json_schema", PARAMS
    )
    assert to_sampling(policy_pb2.SamplingParams(n=1, max_tokens=8), 4).constraint is None
    for schema in ("{bad", '{"type": 5}', '{"type": "string", "pattern": "^(?!x)$"}'):
        c = common_pb2.OutputConstraint(json_schema=schema)
        assert bad_field(to_sampling, sampling(c), 4) == "sampling.constraint.json_schema"


CALL = ToolCall("call_1", "get_weather", '{"city":"Paris"}')
HISTORY = (
    Message("user", "Weather?"),
    Message("assistant", "", (CALL,)),
    Message("tool", "18C", tool_call_id="call_1", name="get_weather"),
)
SPEC = ToolSpec((ToolDef("get_weather", "weather", PARAMS),), "auto", True)


def test_native_template_inputs() -> None:
    messages, tools = template_inputs(Prompt(messages=HISTORY, tools=SPEC), native=True)
    assert tools == [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "weather", "parameters": json.loads(PARAMS)},
        }
    ]
    assert messages[1]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": {"city": "Paris"}}
    assert messages[2] == {"role": "tool", "content": "18C", "tool_call_id": "call_1", "name": "get_weather"}
    assert template_inputs(Prompt(messages=HISTORY, tools=ToolSpec(SPEC.tools, "none")), native=True)[1] is None


def test_folded_template_inputs_for_templates_without_tools() -> None:
    messages, tools = template_inputs(Prompt(messages=HISTORY, tools=SPEC), native=False)
    assert tools is None
    assert (
        messages[0]["role"] == "system"
        and "<tools>" in messages[0]["content"]
        and "get_weather" in messages[0]["content"]
    )
    assert messages[2] == {
        "role": "assistant",
        "content": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    }
    assert messages[3] == {"role": "user", "content": "<tool_response>\n18C\n</tool_response>"}


def test_grammar_plans() -> None:
    plain = Prompt(messages=HISTORY[:1])
    assert grammar_plan(plain, None) is None
    schema = grammar_plan(plain, Constraint("json_schema", PARAMS))
    assert schema is not None and schema.gbnf.startswith("root ::= answer") and not schema.trigger
    forced = grammar_plan(Prompt(messages=HISTORY[:1], tools=ToolSpec(SPEC.tools, "get_weather", False)), None)
    assert forced is not None and forced.gbnf.startswith('root ::= "<tool_call>\\n" tool-call "\\n</tool_call>"\n')
    assert '"\\"get_weather\\""' in forced.gbnf
    auto = grammar_plan(Prompt(messages=HISTORY[:1], tools=SPEC), None)
    assert auto is not None and auto.trigger == TRIGGER_PATTERN and '("\\n" ' in auto.gbnf
    either = grammar_plan(Prompt(messages=HISTORY[:1], tools=SPEC), Constraint("json_object"))
    assert either is not None and " | answer" in either.gbnf.splitlines()[0] and not either.trigger
    assert grammar_plan(Prompt(messages=HISTORY[:1], tools=ToolSpec(SPEC.tools, "none")), None) is None


def test_parsed_output() -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    gen = Generation([Completion(0, text, "stop", 20, 1), Completion(1, "It is sunny.", "stop", 4, 2)], 10)
    attach_tool_calls(gen, Prompt(messages=HISTORY[:1], tools=SPEC))
    assert gen.completions[0].text == "" and gen.completions[0].tool_calls[0].arguments == '{"city":"Oslo"}'
    assert gen.completions[1].text == "It is sunny." and gen.completions[1].tool_calls == []
    untouched = Generation([Completion(0, text, "stop", 20, 1)], 10)
    attach_tool_calls(untouched, Prompt(messages=HISTORY[:1], tools=ToolSpec(SPEC.tools, "none")))
    assert untouched.completions[0].text == text

    filt = StreamToolCalls(Prompt(messages=HISTORY[:1], tools=SPEC))
    out = [filt(StreamDelta(0, text[:15])), filt(StreamDelta(0, text[15:], "stop", 20))]
    assert "".join(d.text for d in out) == "" and out[-1].tool_calls[0].name == "get_weather"


def test_vllm_structured_outputs_per_request() -> None:
    pytest.importorskip("vllm")
    from services.policy.engines.vllm_engine import VllmEngine

    ask = (Message("user", "Weather?"),)
    free = Sampling(n=1, seeds=(1,), max_tokens=8)
    assert VllmEngine.structured_outputs(Prompt(messages=ask), free) is None
    schema = VllmEngine.structured_outputs(
        Prompt(messages=ask), Sampling(n=1, seeds=(1,), max_tokens=8, constraint=Constraint("json_schema", PARAMS))
    )
    assert schema.grammar.startswith("root ::= answer")
    forced = VllmEngine.structured_outputs(Prompt(messages=ask, tools=ToolSpec(SPEC.tools, "required")), free)
    assert forced.grammar.startswith('root ::= "<tool_call>')
    auto = VllmEngine.structured_outputs(Prompt(messages=ask, tools=SPEC), free)
    tag = json.loads(auto.structural_tag)
    assert tag["triggers"] == ["<tool_call>"]
    assert tag["structures"][0]["begin"] == '<tool_call>\n{"name": "get_weather", "arguments": '
    assert tag["structures"][0]["schema"] == json.loads(PARAMS)
