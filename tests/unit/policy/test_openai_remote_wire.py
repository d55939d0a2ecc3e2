"""Wire-format translations of the remote OpenAI engine, on text shaped like real servers' output."""

from __future__ import annotations

import math

from services.policy.engines.openai_wire import (
    UNKNOWN_TOKEN_ID,
    chat_logprobs,
    completion_logprobs,
    parse_engine_stats,
    server_root,
)

# The shape vLLM 0.32's PrometheusStatLogger exports (one engine, one model).
VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="smollm2-135m"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="smollm2-135m"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="smollm2-135m"} 0.25
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="smollm2-135m"} 1200.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="smollm2-135m"} 512.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="smollm2-135m"} 4096.0
"""

SGLANG_METRICS = """\
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.5
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 4.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 1.0
"""


def test_vllm_metrics_map_to_engine_stats() -> None:
    stats = parse_engine_stats(VLLM_METRICS)
    assert stats is not None
    assert (stats.kv_cache_utilization, stats.running_requests, stats.waiting_requests) == (0.25, 3, 2)
    assert (stats.prefix_cache_queries, stats.prefix_cache_hits) == (1200, 512)


def test_two_engines_counts_are_summed_and_kv_utilization_is_the_fullest_engine() -> None:
    doubled = VLLM_METRICS + VLLM_METRICS.replace('engine="0"', 'engine="1"').replace("0.25", "0.9")
    doubled = "\n".join(line for line in doubled.splitlines() if not line.startswith("#")) + "\n"
    stats = parse_engine_stats(doubled)
    assert stats is not None
    assert stats.running_requests == 6 and stats.prefix_cache_hits == 1024
    assert stats.kv_cache_utilization == 0.9  # the fuller engine, not 0.25 + 0.9


def test_two_half_full_engines_read_half_full_not_full() -> None:
    """Two engines at 50% are 50% (the sum read 100% and made admission shed every request)."""
    halves = VLLM_METRICS.replace("0.25", "0.5") + VLLM_METRICS.replace('engine="0"', 'engine="1"').replace(
        "0.25", "0.5"
    )
    halves = "\n".join(line for line in halves.splitlines() if not line.startswith("#")) + "\n"
    stats = parse_engine_stats(halves)
    assert stats is not None and stats.kv_cache_utilization == 0.5


def test_utilization_is_clamped_to_one() -> None:
    stats = parse_engine_stats(VLLM_METRICS.replace("} 0.25", "} 1.7"))
    assert stats is not None and stats.kv_cache_utilization == 1.0


def test_sglang_metrics_and_unknown_exports() -> None:
    stats = parse_engine_stats(SGLANG_METRICS)
    assert stats is not None and (stats.kv_cache_utilization, stats.running_requests, stats.waiting_requests) == (
        0.5,
        4,
        1,
    )
    assert parse_engine_stats("") is None
    assert parse_engine_stats("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 3.0\n") is None


def test_chat_logprobs_keep_order_and_alternatives() -> None:
    tokens = chat_logprobs(
        {
            "content": [
                {
                    "token": "Hello",
                    "logprob": -0.5,
                    "top_logprobs": [{"token": "Hello", "logprob": -0.5}, {"token": "Hi", "logprob": -2.4}],
                },
                {"token": "token_id:11", "logprob": -1.5, "top_logprobs": []},
            ]
        }
    )
    assert [(t.token, t.token_id, t.logprob) for t in tokens] == [
        ("Hello", UNKNOWN_TOKEN_ID, -0.5),
        ("token_id:11", 11, -1.5),
    ]
    assert tokens[0].top == [("Hello", UNKNOWN_TOKEN_ID, -0.5), ("Hi", UNKNOWN_TOKEN_ID, -2.4)]
    assert chat_logprobs(None) == [] and chat_logprobs({"content": None}) == []


def test_completion_logprobs_with_echoed_first_token() -> None:
    # llama-cpp-python's echo answer for "The sky is blue" (logprobs=2)
    tokens = completion_logprobs(
        {
            "text_offset": [0, 3, 7, 10],
            "token_logprobs": [None, -8.34, -11.6, -9.2],
            "tokens": ["The", " sky", " is", " blue"],
            "top_logprobs": [None, {" was": -1.65, " sky": -8.34}, {" a": -1.05, " is": -11.6}, {",": -0.9}],
        }
    )
    assert [t.token for t in tokens] == ["The", " sky", " is", " blue"]
    assert tokens[0].logprob == 0.0 and tokens[0].top == []
    assert [a[0] for a in tokens[1].top] == [" was", " sky"]
    assert math.isclose(sum(t.logprob for t in tokens), -29.14)


def test_server_root_strips_the_api_version() -> None:
    assert server_root("http://h:8000/v1") == "http://h:8000"
    assert server_root("http://h:8000/v1/") == "http://h:8000"
    assert server_root("http://h:8000") == "http://h:8000"


# -- tools and structured outputs -----------------------------------------------------------


def test_tools_and_formats_go_out_in_openais_shape() -> None:
    from services.policy.engines.base import Constraint, Message, Prompt, ToolCall, ToolDef, ToolSpec
    from services.policy.engines.openai_wire import wire_messages, wire_response_format, wire_tools

    params = '{"type": "object", "properties": {"city": {"type": "string"}}}'
    spec = ToolSpec((ToolDef("get_weather", "weather", params, strict=True),), "get_weather", False)
    body = wire_tools(spec)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is False
    assert body["tools"][0]["function"]["parameters"]["properties"] == {"city": {"type": "string"}}
    assert body["tools"][0]["function"]["strict"] is True
    assert wire_tools(ToolSpec(spec.tools, "required", True))["tool_choice"] == "required"
    assert "parallel_tool_calls" not in wire_tools(ToolSpec(spec.tools, "none", True))
    assert wire_tools(None) == {}

    assert wire_response_format(None) == {}
    assert wire_response_format(Constraint("json_object")) == {"response_format": {"type": "json_object"}}
    fmt = wire_response_format(Constraint("json_schema", params))["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["type"] == "object"

    call = ToolCall("call_1", "get_weather", '{"city":"Paris"}')
    prompt = Prompt(
        messages=(
            Message("user", "Weather?"),
            Message("assistant", "", (call,)),
            Message("tool", "18C", tool_call_id="call_1", name="get_weather"),
        )
    )
    wire = wire_messages(prompt)
    assert wire[1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
        ],
    }
    assert wire[2] == {"role": "tool", "content": "18C", "tool_call_id": "call_1", "name": "get_weather"}


def test_tool_calls_come_back_from_replies_and_streams() -> None:
    from services.policy.engines.openai_wire import StreamedToolCalls, read_tool_calls

    message = {
        "content": None,
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": '{"b": 2, "a": 1}'}},
            {"id": "call_b", "type": "function", "function": {"name": "g", "arguments": "not json"}},
            {"id": "call_c", "type": "function", "function": {"arguments": "{}"}},
        ],
    }
    calls = read_tool_calls(message)
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_a", "f", '{"a":1,"b":2}'),
        ("call_b", "g", "not json"),
    ]
    assert read_tool_calls({"content": "hi"}) == [] and read_tool_calls(None) == []

    stream = StreamedToolCalls()
    for delta in (
        {"tool_calls": [{"index": 0, "id": "call_x", "function": {"name": "f", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"q": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"x"}'}}]},
        {"tool_calls": [{"index": 1, "id": "call_y", "function": {"name": "g", "arguments": "{}"}}]},
        {"content": "ignored"},
    ):
        stream.feed(delta)
    assert [(c.id, c.name, c.arguments) for c in stream.calls()] == [
        ("call_x", "f", '{"q":"x"}'),
        ("call_y", "g", "{}"),
    ]


def test_remote_refusals_are_failed_precondition_and_outages_unavailable() -> None:
    from services.common.errors import FailedPrecondition, Unavailable
    from services.policy.engines.openai_remote import _refusal

    assert isinstance(_refusal(400, "tool_choice required needs a parser"), FailedPrecondition)
    assert isinstance(_refusal(422, "json_schema unknown"), FailedPrecondition)
    for status in (408, 429, 500, 503):
        assert isinstance(_refusal(status, "busy"), Unavailable)
