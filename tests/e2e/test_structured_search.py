"""Structured searches end to end (the orchestrator's side): a real Redis, a real
Celery worker and the policy service on Qwen2.5-Coder-0.5B (llama.cpp, its GGUF chat template
rendering the tools, grammars constraining calls and JSON).

- Self-consistency at n=3 over a required tool call: the candidates' calls are parsed by the
  engine, normalized (name + canonical JSON arguments) and voted on; the result carries the
  winning call with finish_reason "tool_calls". Only what holds for any sample is asserted.
- A json_schema job: every candidate is valid JSON by construction and the vote compares
  canonical JSON.
- Token streaming through the queue: a ``single`` job with stream_answer publishes answer
  deltas on the job's event stream as the engine generates them, before the result.

Jobs go in through the worker's own gRPC RunSearch (the gateway is tested elsewhere) and, for
streaming, through the Celery queue exactly as the gateway enqueues them. Run under
``flock /tmp/ttc-model.lock`` (the model is the machine's one heavy workload).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator

import grpc
import jsonschema
import pytest
import redis.asyncio as aioredis

from services.common.json_constraint import canonical
from services.common.tool_calls import parse_tool_calls
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc
from services.jobs import events as ev
from services.jobs.celery_app import make_celery
from tests.e2e.gateway_stack import GatewayStack
from tests.helpers.processes import RedisServer

pytestmark = pytest.mark.e2e
QWEN = "qwen2.5-coder-0.5b"
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 24},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
    "additionalProperties": False,
}
ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer) -> Iterator[GatewayStack]:
    s = GatewayStack(redis_server)
    try:
        s.start_policy({"TTC_POLICY_MODEL": QWEN})
        s.start_worker(concurrency=2)
        yield s
    finally:
        s.stop()


def job(name: str, n: int, question: str, **fields: object) -> orchestrator_pb2.SearchJob:
    j = orchestrator_pb2.SearchJob(
        job_id=uuid.uuid4().hex,
        model=QWEN,
        messages=[common_pb2.ChatMessage(role="user", content=question)],
        strategy=orchestrator_pb2.StrategySpec(name=name, n=n),
        budget=orchestrator_pb2.Budget(max_generated_tokens=2000, deadline_seconds=240),
        temperature=0.4,
        max_tokens=96,
        seed=7,
        **fields,  # type: ignore[arg-type]
    )
    return j


def run_search(stack: GatewayStack, j: orchestrator_pb2.SearchJob) -> orchestrator_pb2.SearchResult:
    with grpc.insecure_channel(f"127.0.0.1:{stack.worker_grpc_ports[0]}") as channel:
        events = list(orchestrator_pb2_grpc.OrchestratorStub(channel).RunSearch(j, timeout=300))
    results = [e.result for e in events if e.HasField("result")]
    assert len(results) == 1
    return results[0]


def trace_nodes(stack: GatewayStack, trace_id: str) -> list[orchestrator_pb2.TraceNode]:
    with grpc.insecure_channel(f"127.0.0.1:{stack.worker_grpc_ports[0]}") as channel:
        trace = orchestrator_pb2_grpc.OrchestratorStub(channel).GetTrace(
            orchestrator_pb2.GetTraceRequest(trace_id=trace_id), timeout=30
        )
    return list(trace.nodes)


def call_vote_key(text: str) -> str:
    """The vote key of a candidate's calls, computed here from its text as the vote must."""
    _, calls = parse_tool_calls(text)
    return "tool_calls:" + canonical(sorted(([c.name, json.loads(c.arguments)] for c in calls), key=canonical))


def test_self_consistency_votes_over_normalized_tool_calls(stack: GatewayStack) -> None:
    """tool_choice "required": the grammar forces every candidate to one valid call (the
    bounded schema and max_tokens let every sample end), and the vote counts the candidates
    whose normalized calls are the winner's. Which call the samples make is not asserted."""
    j = job("self_consistency", 3, "What is the weather like in Paris right now? Use the tool.")
    j.max_tokens = 320  # the longest call the grammar accepts is under 260 bytes
    j.tools.CopyFrom(
        common_pb2.ToolSpec(
            tools=[
                common_pb2.Tool(
                    name="get_weather", description="Current weather in a city", parameters_json=json.dumps(WEATHER)
                )
            ],
            choice="required",
            parallel=False,
        )
    )
    result = run_search(stack, j)
    assert result.termination == orchestrator_pb2.TERMINATION_COMPLETED, result.error
    assert result.finish_reason == "tool_calls", result.answer
    assert [c.name for c in result.tool_calls] == ["get_weather"]
    arguments = json.loads(result.tool_calls[0].arguments)
    jsonschema.validate(arguments, WEATHER)
    nodes = trace_nodes(stack, result.trace_id)
    keys = [call_vote_key(n.text) for n in nodes if n.action == "generate"]
    assert len(keys) == 3 and all(k != "tool_calls:[]" for k in keys), keys
    vote = next(n for n in nodes if n.action == "vote")
    winner = call_vote_key(f"<tool_call>\n{json.dumps({'name': 'get_weather', 'arguments': arguments})}\n</tool_call>")
    assert vote.text == winner and vote.visits == keys.count(winner) == max(map(keys.count, keys)), (vote, keys)


def test_a_json_schema_job_votes_on_canonical_json(stack: GatewayStack) -> None:
    j = job("self_consistency", 3, "What is 6 times 7? Reply with a JSON object holding the answer.")
    j.response_format.json_schema = json.dumps(ANSWER)
    result = run_search(stack, j)
    assert result.termination == orchestrator_pb2.TERMINATION_COMPLETED, result.error
    assert result.finish_reason == "stop" and not result.tool_calls
    value = json.loads(result.answer)
    jsonschema.validate(value, ANSWER)
    nodes = trace_nodes(stack, result.trace_id)
    candidates = [n.text for n in nodes if n.action == "generate"]
    assert len(candidates) == 3
    for text in candidates:  # valid by construction, every one
        jsonschema.validate(json.loads(text), ANSWER)
    vote = next(n for n in nodes if n.action == "vote")
    assert vote.text == "json:" + json.dumps(value, sort_keys=True, separators=(",", ":"))


def test_single_streams_answer_deltas_through_the_queue(stack: GatewayStack) -> None:
    j = job("single", 1, "Name three primary colors, in one sentence.", stream_answer=True)
    j.max_tokens = 40
    celery = make_celery(stack.redis.url, stack.queue, 8, 1)
    celery.send_task(ev.SEARCH_TASK, args=[ev.encode_job(j)], task_id=j.job_id, queue=stack.queue)

    async def follow() -> list[tuple[str, orchestrator_pb2.JobEvent]]:
        client = aioredis.Redis.from_url(stack.redis.url)
        try:
            events = ev.JobEvents(client, 600)
            return [(i, e) async for i, e in events.follow(j.job_id, until=time.monotonic() + 300)]
        finally:
            await client.aclose()

    stamped = asyncio.run(follow())
    events = [e for _, e in stamped]
    deltas = [e.answer_delta for e in events if e.WhichOneof("event") == "answer_delta"]
    result = events[-1].result
    assert events[-1].HasField("result") and result.answer
    assert len(deltas) > 3, deltas  # token by token, not the whole answer at the end
    assert "".join(deltas) == result.answer
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds.index("answer_delta") < kinds.index("result")
    # Redis stamps each entry (ms): the first answer token was out well before the answer was done.
    ms = [int(i.split("-")[0]) for i, _ in stamped]
    first, last = ms[kinds.index("answer_delta")], ms[len(kinds) - 1 - kinds[::-1].index("answer_delta")]
    print(f"{len(deltas)} deltas; the first {last - first} ms before the last, result {ms[-1] - last} ms after")
    assert last - first > 0
