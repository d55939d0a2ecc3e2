"""Tool-call parsing, canonical arguments, argument validation and the stream filter."""

from __future__ import annotations

import json
import re

import pytest

from services.common.tool_calls import (
    ToolCall,
    ToolStreamFilter,
    canonical_arguments,
    parse_tool_calls,
    valid_call,
    validate_arguments,
)
from services.gen.ttc.v1 import common_pb2

WEATHER = common_pb2.Tool(
    name="get_weather",
    parameters_json=json.dumps(
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"],
            "additionalProperties": False,
        }
    ),
)


def test_hermes_block_is_parsed_and_removed_from_content() -> None:
    text = (
        'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"days": 2, "city": "Paris"}}\n</tool_call>'
    )
    content, calls = parse_tool_calls(text)
    assert content == "Let me check."
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", '{"city":"Paris","days":2}')]
    assert re.fullmatch(r"call_[0-9a-f]{24}", calls[0].id)


def test_several_blocks_keep_order_and_distinct_ids() -> None:
    text = (
        '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "b", "arguments": {"x": [1, 2]}}</tool_call>'
    )
    content, calls = parse_tool_calls(text)
    assert content == ""
    assert [c.name for c in calls] == ["a", "b"]
    assert calls[1].arguments == '{"x":[1,2]}'
    assert calls[0].id != calls[1].id


def test_unclosed_last_block_counts_and_arguments_as_string_are_decoded() -> None:
    content, calls = parse_tool_calls('<tool_call>\n{"name": "f", "arguments": "{\\"q\\": \\"x\\"}"}')
    assert content == "" and calls[0].arguments == '{"q":"x"}'


def test_block_that_does_not_parse_stays_text() -> None:
    text = "<tool_call>\nnot json\n</tool_call>"
    assert parse_tool_calls(text) == (text, [])
    broken = '<tool_call>{"name": "f", "arguments": [1]}</tool_call>'
    assert parse_tool_calls(broken) == (broken, [])


def test_bare_json_fallback_needs_known_names() -> None:
    text = '```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```'
    content, calls = parse_tool_calls(text, ["get_weather"])
    assert content == "" and calls[0].arguments == '{"city":"Oslo"}'
    assert parse_tool_calls(text, ["other"]) == (text, [])
    # a JSON answer that is not a call shape stays content (structured output)
    answer = '{"name": "Alice", "age": 30}'
    assert parse_tool_calls(answer, ["Alice"]) == (answer, [])
    assert parse_tool_calls("plain words", None) == ("plain words", [])


def test_canonical_arguments() -> None:
    assert canonical_arguments('{ "b": 1, "a": {"d": "é", "c": null} }') == '{"a":{"c":null,"d":"é"},"b":1}'
    with pytest.raises(ValueError):
        canonical_arguments("[1, 2]")
    with pytest.raises(ValueError):
        canonical_arguments("{bad")
    assert canonical_arguments('{"x": 1, "y": 2}') == canonical_arguments('{"y":2,"x":1}')


def test_validate_arguments_against_the_tool_schema() -> None:
    assert validate_arguments(WEATHER, '{"city": "Paris", "days": 3}') is None
    assert "city" in (validate_arguments(WEATHER, '{"days": 3}') or "")
    assert "days" in (validate_arguments(WEATHER, '{"city": "P", "days": 0}') or "")
    assert validate_arguments(WEATHER, '{"city": "P", "extra": 1}') is not None
    assert validate_arguments(WEATHER, "[1]") is not None
    assert validate_arguments(WEATHER, "nope") is not None
    assert validate_arguments(common_pb2.Tool(name="any"), '{"whatever": true}') is None
    assert valid_call(ToolCall("c", "get_weather", '{"city":"P"}'), [WEATHER])
    assert not valid_call(ToolCall("c", "unknown", '{"city":"P"}'), [WEATHER])


def stream(pieces: list[str], names: list[str] | None = None) -> tuple[str, list[ToolCall]]:
    f = ToolStreamFilter(names)
    out = "".join(f.feed(p) for p in pieces)
    rest, calls = f.finish()
    return out + rest, calls


def test_stream_filter_holds_back_call_syntax() -> None:
    text = 'Sure.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    pieces = [text[i : i + 3] for i in range(0, len(text), 3)]
    f = ToolStreamFilter(["f"])
    streamed = "".join(f.feed(p) for p in pieces)
    assert "<" not in streamed and streamed.startswith("Sure.")
    rest, calls = f.finish()
    assert (streamed + rest).strip() == "Sure." and calls[0].arguments == '{"a":1}'


def test_stream_filter_passes_plain_text_and_releases_non_calls() -> None:
    assert stream(["Hello ", "<tool", " world"]) == ("Hello <tool world", [])
    assert stream(["a <tool_call> not json"]) == ("a <tool_call> not json", [])
    assert stream(['{"name": "f", ', '"arguments": {}}'], ["f"])[1][0].name == "f"
    assert stream(['{"x": ', "1}"], ["f"]) == ('{"x": 1}', [])


def test_a_string_holding_the_close_tag_does_not_end_the_block() -> None:
    text = '<tool_call>\n{"name": "f", "arguments": {"s": "a </tool_call> b"}}\n</tool_call> after'
    content, calls = parse_tool_calls(text)
    assert content == "after" and calls[0].arguments == '{"s":"a </tool_call> b"}'
    rows = '<tool_call>\n{"name": "f", "arguments": {}}\n{"name": "g", "arguments": {}}\n</tool_call>'
    assert [c.name for c in parse_tool_calls(rows)[1]] == ["f", "g"]
    trailing = '<tool_call>{"name": "f", "arguments": {}} junk</tool_call>'
    assert parse_tool_calls(trailing) == (trailing, [])
