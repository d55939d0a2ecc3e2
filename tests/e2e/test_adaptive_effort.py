"""Effort that reads the request, end to end: from ``medium`` up the shipped table routes to the
adaptive vote, which draws a first wave of two programs, stops there when they agree, and says so
in ``ttc`` (real gateway, worker, policy on Qwen2.5-Coder-0.5B, sandbox; official openai SDK)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.e2e.gateway_stack import GatewayStack
from tests.e2e.qwen_stack import QWEN


def _ask(stack: GatewayStack, prompt: str, effort: str) -> tuple[str, dict[str, Any]]:
    from openai import OpenAI

    client = OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0, timeout=600)
    reply = client.chat.completions.create(
        model=QWEN,
        messages=[{"role": "user", "content": prompt}],
        reasoning_effort=effort,  # type: ignore[arg-type]
    )
    return reply.choices[0].message.content or "", reply.model_extra["ttc"]  # type: ignore[index]


def test_an_agreeing_first_wave_stops_at_two_at_high_and_low_keeps_one_program(qwen_stack: GatewayStack) -> None:
    content, ttc = _ask(qwen_stack, "What is 37 * 43?", "high")
    assert ttc["strategy"] == "adaptive" and ttc["task_type"] == "arithmetic", ttc
    assert ttc["first_wave"] == {"size": 2, "agreed": True}, ttc
    assert ttc["adaptive"] == {"steps": [], "stopped": "agreed"}, ttc
    assert ttc["candidates_generated"] == 2 and "1591" in content
    assert ttc["early_stop"]["candidates_saved"] == 6  # the cap at high is 8
    nodes = httpx.get(f"{qwen_stack.url}/v1/traces/{ttc['trace_id']}", timeout=30).json()["nodes"]
    assert any(n["action"] == "adaptive" and "stopped: agreed after 2" in n["text"] for n in nodes)
    low_content, low = _ask(qwen_stack, "What is 37 * 43?", "low")
    assert low["strategy"] == "program_of_thought" and "first_wave" not in {k for k, v in low.items() if v}
    assert "1591" in low_content
