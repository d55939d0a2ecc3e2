"""The remote engine's stream keeps the remote's prompt count and cache hits, when it sends them.

An ``OpenAIRemoteEngine`` over an httpx transport that answers like an OpenAI-compatible server
streaming with ``stream_options.include_usage``: content events, then one event with empty
choices and the usage. Two candidates are two requests, each reporting the same prompt: the
stream's ``Spent`` holds it once, as the unary path counts it.
"""

from __future__ import annotations

import json

import httpx

from services.policy.engines.base import Message, Prompt, Sampling, Spent
from services.policy.engines.openai_remote import OpenAIRemoteEngine

PROMPT = 12
CACHED = 8


def sse(events: list[dict[str, object]]) -> bytes:
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode() + b"data: [DONE]\n\n"


def engine(send_usage: bool) -> OpenAIRemoteEngine:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/chat/completions" and json.loads(request.content)["stream"]
        events: list[dict[str, object]] = [
            {"choices": [{"index": 0, "delta": {"content": "Hel"}}]},
            {"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]},
        ]
        if send_usage:
            details = {"cached_tokens": CACHED}
            usage = {"prompt_tokens": PROMPT, "completion_tokens": 2, "prompt_tokens_details": details}
            events.append({"choices": [], "usage": usage})
        return httpx.Response(200, content=sse(events), headers={"content-type": "text/event-stream"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return OpenAIRemoteEngine(client, "http://remote/v1", "m", 4096)


async def _streamed(remote: OpenAIRemoteEngine, spent: Spent) -> list[tuple[int, str]]:
    prompt = Prompt(messages=(Message("user", "hi"),))
    sampling = Sampling(n=2, seeds=(1, 2), max_tokens=8, temperature=0.7)
    return [(d.index, d.text) async for d in remote.generate_stream(prompt, sampling, "r", spent)]


async def test_a_streamed_usage_event_fills_the_streams_prompt_once() -> None:
    spent = Spent()
    deltas = await _streamed(engine(send_usage=True), spent)
    assert sorted(deltas) == [(0, "Hel"), (0, "lo"), (1, "Hel"), (1, "lo")]
    assert (spent.prompt_tokens, spent.cached_tokens, spent.completion_tokens) == (PROMPT, CACHED, 4)


async def test_a_stream_without_usage_leaves_the_prompt_to_the_policy() -> None:
    spent = Spent()
    await _streamed(engine(send_usage=False), spent)
    # the policy's servicer counts the prompt once the stream has decoded a token
    assert (spent.prompt_tokens, spent.cached_tokens, spent.completion_tokens) == (0, 0, 4)
