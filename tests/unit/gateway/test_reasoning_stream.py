"""What a search streams while it runs, as the client sees it: the worker's ``ReasoningDeltas``
job events written to a real Redis, read by a session and rendered as Chat Completions chunks
(``reasoning_content`` with a header per source and the ``ttc`` label, parsed by the openai
SDK's own chunk model) and as Responses events (accepted by the SDK's stream accumulator); a
client that opts out gets the answer alone, still token by token; time to first token counts
the first model token, never an event line."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from openai.types.chat import ChatCompletionChunk as SDKChunk

from services.common.metrics import ServiceMetrics
from services.gateway.labels import Labels
from services.gateway.metrics import GatewayMetrics
from services.gateway.protocol import ChatCompletionRequest
from services.gateway.responses.convert import to_chat
from services.gateway.responses.request import ResponseCreateRequest
from services.gateway.responses.service import ResponsesService
from services.gateway.responses.store import ResponseStore
from services.gateway.serving import Serving
from services.gateway.session import AnswerDelta, Reasoning, Session, Sessions
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.events import JobEvents
from services.jobs.queue import JobQueue
from tests.unit.gateway.test_responses_render import accumulate, parse_sse
from tests.unit.gateway.test_session import FakeLimiter, FakePlanner, frames

JOB = "j1"
EVIDENCE = "```python\nprint(17 + 25)\n```\nOutput: 42"


def deltas(*parts: tuple[str, str, str]) -> orchestrator_pb2.JobEvent:
    out = [orchestrator_pb2.ReasoningDelta(source=s, kind=k, text=t) for s, k, t in parts]
    return orchestrator_pb2.JobEvent(job_id=JOB, reasoning=orchestrator_pb2.ReasoningDeltas(deltas=out))


def search_events() -> list[orchestrator_pb2.JobEvent]:
    """A program-of-thought search as its worker streams it: two programs' tokens (one window
    splits a program's text in two deltas), their outputs, the vote, then the answer."""
    return [
        deltas(("program 1", "tokens", "print(17"), ("program 1", "tokens", " + 25)")),
        deltas(("program 2", "tokens", "print(42)"), ("program 1", "event", "output: 42")),
        deltas(("program 2", "event", "output: 42"), ("vote", "event", "2 of 2 on 42")),
        orchestrator_pb2.JobEvent(job_id=JOB, answer_delta="4"),
        orchestrator_pb2.JobEvent(job_id=JOB, answer_delta="2"),
    ]


def final() -> orchestrator_pb2.SearchResult:
    return orchestrator_pb2.SearchResult(
        job_id=JOB,
        strategy="program_of_thought",
        termination=orchestrator_pb2.TERMINATION_COMPLETED,
        budget_used=orchestrator_pb2.BudgetUse(generated_tokens=30, prompt_tokens=40),
        answer="42",
        reasoning=EVIDENCE,
        answer_tokens=1,
        finish_reason="stop",
        started_at=5.0,
    )


@pytest.fixture
def client(redis_url: str) -> Iterator[aioredis.Redis]:
    yield aioredis.Redis.from_url(redis_url)


async def _written(client: aioredis.Redis) -> None:
    """The worker's side: the events on the job's stream, then the result (one job per test)."""
    await client.flushdb()
    events = JobEvents(client, 600)
    for event in search_events():
        await events.publish(JOB, event)
    await events.record_result(final(), "succeeded")


async def _session(client: aioredis.Redis, name: str, reasoning: bool = True, kind: str = "chat.completion") -> Any:
    metrics = GatewayMetrics(ServiceMetrics(f"gateway-reasoning-{name}"))
    sessions = Sessions(FakePlanner(), JobQueue(client, None, "q", 600), FakeLimiter(), metrics, 10.0)  # type: ignore[arg-type]
    plan = await FakePlanner().plan(None, 0)
    record = plan.record(kind, "k", True, False, {} if kind == "response" else None)  # type: ignore[arg-type]
    return Session(
        sessions, plan, record, None, time.perf_counter(), stream=True, background=False, reasoning=reasoning
    )


def _ttft(session: Session) -> float:
    registry = session.sessions.metrics.base.registry
    return registry.get_sample_value("ttc_gateway_time_to_first_token_seconds_count", {"stream": "true"}) or 0.0


async def _chat(session: Session) -> list[dict[str, Any]]:
    raw = [f for piece in [p async for p in Serving(session.sessions)._stream(session, "chat")] for f in frames(piece)]
    assert raw[-1] == b"data: [DONE]"
    return [json.loads(r[6:]) for r in raw[:-1]]


# ---------------------------------------------------------------- labels


def test_a_new_source_opens_a_header_line_and_an_event_is_a_line_of_its_own() -> None:
    labels = Labels()
    shown = [
        labels.text("candidate 1", "tokens", "Two"),
        labels.text("candidate 1", "tokens", " plus"),
        labels.text("candidate 2", "tokens", "2+3"),
        labels.text("candidate 2", "event", "score 0.9"),
        labels.text("vote", "event", "5 wins"),
    ]
    assert shown == ["[candidate 1] Two", " plus", "\n[candidate 2] 2+3", "\nscore 0.9\n", "\n[vote] 5 wins\n"]


# ---------------------------------------------------------------- chat completions


async def test_chat_streams_labelled_reasoning_then_the_answer_token_by_token(client: aioredis.Redis) -> None:
    await _written(client)
    session = await _session(client, "chat")
    chunks = await _chat(session)
    parsed = [SDKChunk.model_validate(c) for c in chunks if c["choices"]]  # the SDK's own chunk model
    extras = [p.choices[0].delta.model_extra or {} for p in parsed]  # what the SDK passed through
    reasoning = [(x["reasoning_content"], x["ttc"]) for x in extras if x.get("reasoning_content")]
    assert [label for _, label in reasoning] == [
        {"source": "program 1", "kind": "tokens"},  # the window's two deltas of program 1, joined
        {"source": "program 2", "kind": "tokens"},
        {"source": "program 1", "kind": "event"},
        {"source": "program 2", "kind": "event"},
        {"source": "vote", "kind": "event"},
        {"source": "evidence", "kind": "event"},  # the chosen answer's evidence closes the reasoning
    ]
    text = "".join(t for t, _ in reasoning)
    assert text.startswith("[program 1] print(17 + 25)\n[program 2] print(42)\n[program 1] output: 42\n")
    assert text.endswith(f"\n[evidence] {EVIDENCE}\n")
    contents = [p.choices[0].delta.content for p in parsed if p.choices[0].delta.content]
    assert contents == ["4", "2"]
    first_content = next(i for i, p in enumerate(parsed) if p.choices[0].delta.content)
    assert all(p.choices[0].delta.content in (None, "") for p in parsed[:first_content])
    assert _ttft(session) == 1


async def test_a_client_without_reasoning_gets_the_answer_alone_token_by_token(client: aioredis.Redis) -> None:
    await _written(client)
    session = await _session(client, "quiet", reasoning=False)
    chunks = await _chat(session)
    assert not any("reasoning_content" in c["choices"][0]["delta"] for c in chunks if c["choices"])
    assert [
        c["choices"][0]["delta"]["content"] for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")
    ] == ["4", "2"]
    assert _ttft(session) == 1
    assert not ChatCompletionRequest.model_validate(
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "ttc": {"stream_reasoning": False}}
    ).wants_reasoning()
    plain = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    assert ChatCompletionRequest.model_validate(plain).wants_reasoning()


# ---------------------------------------------------------------- time to first token


async def test_time_to_first_token_waits_for_a_model_token_not_an_event_line(client: aioredis.Redis) -> None:
    await client.flushdb()
    events = JobEvents(client, 600)
    await events.publish(JOB, deltas(("vote", "event", "no candidates yet")))
    await events.publish(JOB, deltas(("candidate 1", "tokens", "Two")))
    await events.record_result(final(), "succeeded")
    session = await _session(client, "ttft")
    stream = session.events()
    first = await anext(stream)
    assert isinstance(first, Reasoning) and first.kind == "event" and _ttft(session) == 0
    second = await anext(stream)
    assert isinstance(second, Reasoning) and second.kind == "tokens" and _ttft(session) == 1
    await stream.aclose()

    # Without reasoning, the model tokens the client never sees do not count: the answer does.
    await client.flushdb()
    await events.publish(JOB, deltas(("candidate 1", "tokens", "Two")))
    await events.publish(JOB, orchestrator_pb2.JobEvent(job_id=JOB, answer_delta="4"))
    await events.record_result(final(), "succeeded")
    quiet = await _session(client, "ttft-quiet", reasoning=False)
    stream = quiet.events()
    assert isinstance(await anext(stream), AnswerDelta) and _ttft(quiet) == 1
    await stream.aclose()


# ---------------------------------------------------------------- the Responses API


async def test_responses_stream_reasoning_text_events_the_sdk_accumulates(client: aioredis.Redis) -> None:
    await _written(client)
    session = await _session(client, "responses", kind="response")
    service = ResponsesService(session.sessions, ResponseStore(client, 600))
    parsed = parse_sse([f + b"\n\n" for piece in [p async for p in service._stream(session)] for f in frames(piece)])
    types = [name for name, _ in parsed]
    assert types.index("response.reasoning_text.delta") < types.index("response.output_text.delta")
    labels = [d["ttc"] for n, d in parsed if n == "response.reasoning_text.delta"]
    assert labels[0] == {"source": "program 1", "kind": "tokens"} and labels[-1] == {"source": "vote", "kind": "event"}
    done = accumulate(parsed)
    assert done is not None and done.output_text == "42"
    reasoning = done.output[0]
    assert reasoning.type == "reasoning" and reasoning.content[0].text.startswith("[program 1] print(17 + 25)")
    assert reasoning.summary[-1].text == EVIDENCE

    # Opted out (ttc.stream_reasoning false, as the Responses request carries it): the message alone.
    await _written(client)
    request = ResponseCreateRequest.model_validate({"model": "m", "input": "x", "ttc": {"stream_reasoning": False}})
    assert not to_chat(request, [])[0].wants_reasoning()
    quiet = await _session(client, "responses-quiet", reasoning=False, kind="response")
    parsed = parse_sse([f + b"\n\n" for piece in [p async for p in service._stream(quiet)] for f in frames(piece)])
    assert not any(n.startswith("response.reasoning") for n, _ in parsed)
    assert [d["delta"] for n, d in parsed if n == "response.output_text.delta"] == ["4", "2"]
    assert accumulate(parsed).output_text == "42"
    await asyncio.sleep(0)


async def test_evidence_the_search_streamed_itself_is_not_sent_again(client: aioredis.Redis) -> None:
    await client.flushdb()
    events = JobEvents(client, 600)
    await events.publish(JOB, deltas(("program 1", "tokens", "print(42)"), ("evidence", "event", EVIDENCE)))
    await events.publish(JOB, orchestrator_pb2.JobEvent(job_id=JOB, answer_delta="42"))
    await events.record_result(final(), "succeeded")
    chunks = await _chat(await _session(client, "evidence-once"))
    labels = [c["choices"][0]["delta"].get("ttc") for c in chunks if c["choices"]]
    assert labels.count({"source": "evidence", "kind": "event"}) == 1
