"""Responses request -> the gateway's chat request: items, tools, formats, limits, field names in errors."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.common.errors import InvalidArgument
from services.gateway.responses.convert import (
    ChatConversion,
    item_dicts,
    parse_items,
    renamed,
    responses_field,
    to_chat,
)
from services.gateway.responses.objects import (
    FunctionCallOutput,
    MessageOutput,
    OutputText,
    ReasoningOutput,
    ResponseObject,
)
from services.gateway.responses.request import ResponseCreateRequest
from services.gateway.responses.service import echo_of, output_as_input


def req(**fields: object) -> ResponseCreateRequest:
    return ResponseCreateRequest.model_validate({"model": "m", "input": "What is 2+3?", **fields})


def test_string_input_is_one_user_message_after_the_instructions() -> None:
    chat, conversion = to_chat(req(instructions="Be brief."), [])
    assert [(m.role, m.text()) for m in chat.messages] == [("system", "Be brief."), ("user", "What is 2+3?")]
    assert conversion.input_field(0) == "instructions"
    assert conversion.input_field(1) == "input[0]"


def test_items_become_chat_turns_with_tool_calls_and_tool_results() -> None:
    items = [
        {"role": "developer", "content": [{"type": "input_text", "text": "Use tools."}]},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Weather in "}, {"type": "input_text", "text": "Paris?"}],
        },
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "searched"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": '{"city":"Paris"}',
            "id": "fc_1",
            "status": "completed",
        },
        {"type": "function_call", "call_id": "call_2", "name": "weather", "arguments": '{"city":"Lyon"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
        {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "20C"}]},
    ]
    chat, conversion = to_chat(req(input=items), [])
    roles = [m.role for m in chat.messages]
    assert roles == ["developer", "user", "assistant", "tool", "tool"]  # the reasoning item is not shown
    assistant = chat.messages[2]
    assert assistant.text() == "Let me check."
    assert [(c.id, c.function.name, c.function.arguments) for c in assistant.tool_calls or []] == [
        ("call_1", "weather", '{"city":"Paris"}'),
        ("call_2", "weather", '{"city":"Lyon"}'),
    ]
    assert [(m.tool_call_id, m.text()) for m in chat.messages[3:]] == [("call_1", "18C"), ("call_2", "20C")]
    assert chat.messages[1].text() == "Weather in Paris?"
    assert conversion.input_field(3) == "input[6]"


def test_a_function_call_without_assistant_text_is_its_own_assistant_turn() -> None:
    items = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    chat, _ = to_chat(req(input=items), [])
    assert [m.role for m in chat.messages] == ["user", "assistant", "tool"]
    assert chat.messages[1].content is None and chat.messages[1].tool_calls is not None


def test_tools_formats_limits_and_effort_map_to_the_chat_fields() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
        "additionalProperties": False,
    }
    chat, _ = to_chat(
        req(
            tools=[{"type": "function", "name": "add", "description": "Add.", "parameters": schema, "strict": True}],
            tool_choice={"type": "function", "name": "add"},
            parallel_tool_calls=False,
            text={"format": {"type": "json_schema", "name": "out", "schema": schema, "strict": True}},
            max_output_tokens=64,
            reasoning={"effort": "high", "summary": "auto"},
            temperature=0.2,
            top_p=0.9,
            stream=True,
        ),
        [],
    )
    body = chat.model_dump(exclude_none=True, by_alias=True)
    assert body["tools"] == [
        {"type": "function", "function": {"name": "add", "description": "Add.", "parameters": schema, "strict": True}}
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert body["parallel_tool_calls"] is False
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "out"
    assert body["response_format"]["json_schema"]["schema"] == schema
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body
    assert body["reasoning"] == {"effort": "high"}
    assert (body["temperature"], body["top_p"], body["stream"]) == (0.2, 0.9, True)
    assert (
        to_chat(req(text={"format": {"type": "json_object"}}), [])[0].model_dump()["response_format"]["type"]
        == "json_object"
    )
    assert to_chat(req(text={"format": {"type": "text"}}), [])[0].response_format is None


def test_history_comes_first_and_error_indices_count_from_it() -> None:
    history = parse_items(
        [
            {"type": "message", "role": "user", "content": "Call f."},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        ]
    )
    chat, conversion = to_chat(req(input=[{"type": "function_call_output", "call_id": "c", "output": "1"}]), history)
    assert [m.role for m in chat.messages] == ["user", "assistant", "tool"]
    assert conversion.input_field(2) == "input[2]"


def test_chat_field_names_become_responses_field_names() -> None:
    conversion = ChatConversion("sys")
    for i, item in enumerate(
        req(
            input=[{"role": "user", "content": "a"}, {"type": "function_call_output", "call_id": "x", "output": "1"}]
        ).items()
    ):
        conversion.add(i, item)
    assert responses_field("messages[2].tool_call_id", conversion) == "input[1].call_id"
    assert responses_field("messages.1.content", conversion) == "input[0].content"
    assert responses_field("messages[0]", conversion) == "instructions"
    assert responses_field("messages", conversion) == "input"
    assert responses_field("tools[0].function.parameters", conversion) == "tools[0].parameters"
    assert responses_field("tools.1.function.name", conversion) == "tools[1].name"
    assert responses_field("tool_choice.function.name", conversion) == "tool_choice.name"
    assert responses_field("response_format.json_schema.schema", conversion) == "text.format.schema"
    assert responses_field("max_completion_tokens", conversion) == "max_output_tokens"
    assert responses_field("ttc.n", conversion) == "ttc.n"
    err = renamed(
        InvalidArgument("messages[2].tool_call_id answers no call", field="messages[2].tool_call_id"), conversion
    )
    assert err.field == "input[1].call_id" and "input[1].call_id answers no call" in err.message


def test_unknown_and_unsupported_fields_are_rejected_by_name() -> None:
    with pytest.raises(ValidationError) as err:
        req(max_tokens=5)
    assert err.value.errors()[0]["loc"] == ("max_tokens",)
    assert err.value.errors()[0]["type"] == "extra_forbidden"
    for field, value in (("conversation", "conv_1"), ("prompt", {"id": "p"})):
        with pytest.raises(ValidationError) as err:
            req(**{field: value})
        assert err.value.errors()[0]["loc"] == (field,)
    with pytest.raises(ValidationError) as err:
        req(tools=[{"type": "web_search"}])
    assert err.value.errors()[0]["loc"][:2] == ("tools", 0)
    with pytest.raises(ValidationError):
        req(input=[{"type": "input_image", "image_url": "x"}])


def test_no_effect_fields_are_accepted() -> None:
    r = req(
        metadata={"k": "v"},
        user="u",
        service_tier="auto",
        include=["reasoning.encrypted_content"],
        prompt_cache_key="k",
        prompt_cache_retention="24h",
        safety_identifier="s",
        truncation="auto",
        store=False,
        background=False,
        parallel_tool_calls=True,
        max_tool_calls=3,
        stream_options={"include_obfuscation": False},
    )
    chat, _ = to_chat(r, [])
    assert chat.metadata is None  # not forwarded: they change nothing
    echo = echo_of(r)
    assert echo["metadata"] == {"k": "v"} and echo["store"] is False and echo["tool_choice"] == "auto"


def test_an_output_continues_as_input_items() -> None:
    obj = ResponseObject(
        id="resp_ab",
        created_at=1.0,
        status="completed",
        model="m",
        output=[
            ReasoningOutput(id="rs_ab"),
            MessageOutput(id="msg_ab", content=[OutputText(text="5")]),
            FunctionCallOutput(id="fc_ab_0", call_id="call_1", name="f", arguments="{}"),
        ],
    )
    items = parse_items(output_as_input(obj))
    assert item_dicts(items) == [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "5"}]},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
    ]
