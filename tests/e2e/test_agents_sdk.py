"""The OpenAI Agents SDK end to end: an ``Agent`` with a function tool, run by ``Runner`` on its
default model (the Responses API) through the real gateway, worker, Redis and policy service on
Qwen2.5-Coder-0.5B. The agent must call the tool with the right arguments and its result is the
answer; the openai SDK test before it makes the round trip the SDK makes on ``run_llm_again``
(the call, then its ``function_call_output`` in a follow-up answered from it)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.e2e.gateway_stack import GatewayStack
from tests.helpers.processes import RedisServer

pytestmark = pytest.mark.e2e
QWEN = "qwen2.5-coder-0.5b"


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer) -> Iterator[GatewayStack]:
    s = GatewayStack(redis_server, gateway_env={"TTC_GATEWAY_API_KEYS": "agent:sk-agent"})
    try:
        s.start_policy({"TTC_POLICY_MODEL": QWEN})
        s.start_worker()
        s.start_gateway()
        yield s
    finally:
        s.stop()


ADD_TOOL = {
    "type": "function",
    "name": "add",
    "description": "Add two integers and return their sum.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    "strict": True,
}


def test_a_function_tool_round_trip_with_the_openai_sdk(stack: GatewayStack) -> None:
    """The round trip the Agents SDK makes, spelled out: a call, then its output in a follow-up."""
    import json

    from openai import OpenAI

    client = OpenAI(base_url=f"{stack.url}/v1", api_key="sk-agent", max_retries=0, timeout=180)
    first = client.responses.create(
        model=QWEN,
        instructions="You are a calculator. Use the add tool to add numbers.",
        input="What is 1234 + 4321?",
        tools=[ADD_TOOL],  # type: ignore[list-item]
        tool_choice="required",
        max_output_tokens=200,
        reasoning={"effort": "none"},
        temperature=0,
    )
    calls = [item for item in first.output if item.type == "function_call"]
    assert calls, first.model_dump_json()
    call = calls[0]
    assert call.name == "add" and json.loads(call.arguments) == {"a": 1234, "b": 4321}, call
    second = client.responses.create(
        model=QWEN,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "5555"}],
        tools=[ADD_TOOL],  # type: ignore[list-item]
        tool_choice="none",  # answer from the tool's output (the 0.5B model otherwise repeats the call)
        max_output_tokens=64,
        reasoning={"effort": "none"},
        temperature=0,
    )
    assert "5555" in second.output_text.replace(",", ""), second.model_dump_json()
    assert second.usage is not None and second.usage.output_tokens > 0


def test_an_agent_calls_its_function_tool_and_answers_with_the_result(stack: GatewayStack) -> None:
    from agents import (
        Agent,
        ModelSettings,
        Runner,
        function_tool,
        set_default_openai_api,
        set_default_openai_client,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI
    from openai.types.responses import ResponseFunctionToolCall
    from openai.types.shared import Reasoning

    calls: list[tuple[int, int]] = []

    @function_tool
    def add(a: int, b: int) -> int:
        """Add two integers and return their sum."""
        calls.append((a, b))
        return a + b

    async def run() -> object:
        client = AsyncOpenAI(base_url=f"{stack.url}/v1", api_key="sk-agent", max_retries=0, timeout=180)
        set_default_openai_client(client, use_for_tracing=False)
        set_default_openai_api("responses")  # the SDK's default, said out loud
        set_tracing_disabled(True)
        agent = Agent(
            name="calculator",
            instructions="You are a calculator. To add numbers, call the add tool. Then reply with only the result.",
            tools=[add],
            model=QWEN,
            # The model must call a tool, and the tool's result is the agent's answer: after a tool
            # result Qwen2.5-Coder-0.5B tends to repeat the call instead of answering (the openai
            # SDK round trip above answers from it with tool_choice "none").
            model_settings=ModelSettings(
                max_tokens=200, temperature=0, tool_choice="required", reasoning=Reasoning(effort="none")
            ),
            tool_use_behavior="stop_on_first_tool",
        )
        try:
            return await Runner.run(agent, "What is 1234 + 4321?", max_turns=4)
        finally:
            await client.close()

    result = asyncio.run(run())
    assert calls == [(1234, 4321)]
    assert "5555" in str(result.final_output).replace(",", "")  # type: ignore[attr-defined]
    responses = result.raw_responses  # type: ignore[attr-defined]
    assert len(responses) == 1  # one model turn: the tool call, whose result answers
    assert any(isinstance(item, ResponseFunctionToolCall) and item.name == "add" for item in responses[0].output)
    assert all(r.usage.output_tokens > 0 and r.usage.input_tokens > 0 for r in responses)
