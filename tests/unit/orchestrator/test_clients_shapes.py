"""The policy adapter carries tools, constraints, logprobs and tool-call history to the policy
service and reads tool calls and token logprobs back; with a text sink it generates through
GenerateStream. Real gRPC on 127.0.0.1 against an in-process fake policy service."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from services.common.grpc_client import insecure_channel
from services.common.targets import parse_targets
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2, policy_pb2, policy_pb2_grpc
from services.orchestrator.clients import GrpcPolicy
from services.orchestrator.settings import OrchestratorSettings
from services.search.interfaces import Constraint, GenerateCall, Message, Shape, Tool, ToolCall, Tools
from services.search.run import run_search
from tests.helpers.search_fakes import ScriptedVerifier, contains
from tests.helpers.search_jobs import make_job
from tests.unit.orchestrator.policy_server import serving

CALL = common_pb2.ToolCall(id="call_1", name="get_time", arguments="{}")


class ToolPolicy(policy_pb2_grpc.PolicyServicer):
    """Answers every candidate with a get_time call; streams 'The time is noon.' word by word."""

    def __init__(self) -> None:
        self.requests: list[policy_pb2.GenerateRequest] = []
        self.streams: list[policy_pb2.GenerateRequest] = []

    async def Generate(self, request, context):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        return policy_pb2.GenerateResponse(
            candidates=[
                policy_pb2.Candidate(
                    index=i,
                    text="",
                    finish_reason=policy_pb2.FINISH_REASON_STOP,
                    completion_tokens=9,
                    seed=request.sampling.seeds[i],
                    tool_calls=[CALL],
                    logprobs=[
                        common_pb2.TokenLogprob(
                            token="<tool_call>",
                            logprob=-0.5,
                            top_logprobs=[common_pb2.TopLogprob(token="<tool_call>", logprob=-0.5)] * 4,
                        )
                    ],
                )
                for i in range(request.sampling.n)
            ],
            usage=common_pb2.Usage(prompt_tokens=30, completion_tokens=9 * request.sampling.n),
        )

    async def GenerateStream(self, request, context):  # type: ignore[no-untyped-def]
        self.streams.append(request)
        for word in ("The", " time", " is", " noon."):
            yield policy_pb2.GenerateChunk(index=0, text_delta=word)
        yield policy_pb2.GenerateChunk(index=0, finish_reason=policy_pb2.FINISH_REASON_STOP)
        yield policy_pb2.GenerateChunk(usage=common_pb2.Usage(prompt_tokens=12, completion_tokens=4))


@pytest.fixture
async def served() -> AsyncIterator[tuple[ToolPolicy, str]]:
    fake = ToolPolicy()
    async with serving(fake) as target:
        yield fake, target


async def test_shape_and_history_go_out_and_calls_come_back(served: tuple[ToolPolicy, str]) -> None:
    fake, target = served
    shape = Shape(
        tools=Tools((Tool("get_time", "Now", '{"type": "object"}', True),), "required", False),
        constraint=None,
        logprobs=True,
        top_logprobs=2,
    )
    history = [
        Message("user", "Time?"),
        Message("assistant", "", (ToolCall("c0", "get_time", "{}"),)),
        Message("tool", "11:00", tool_call_id="c0", name="get_time"),
    ]
    async with insecure_channel(target) as channel:
        generation = await GrpcPolicy(channel, "qwen").generate(
            GenerateCall(tuple(history), n=2, seeds=(1, 2), max_tokens=32, temperature=0.5, logprobs=True, shape=shape)
        )
    request = fake.requests[0]
    assert [t.name for t in request.input.tools.tools] == ["get_time"] and request.input.tools.choice == "required"
    assert request.input.tools.tools[0].strict and not request.input.tools.parallel
    assert request.sampling.logprobs and request.sampling.top_logprobs == 2
    assert not request.sampling.HasField("constraint")
    assert request.input.messages[1].tool_calls[0].id == "c0"
    assert (request.input.messages[2].tool_call_id, request.input.messages[2].name) == ("c0", "get_time")
    assert [c.tool_calls for c in generation.candidates] == [(ToolCall("call_1", "get_time", "{}"),)] * 2
    assert (
        generation.candidates[0].tokens[0].token == "<tool_call>" and len(generation.candidates[0].tokens[0].top) == 4
    )


async def test_constraint_goes_into_sampling(served: tuple[ToolPolicy, str]) -> None:
    fake, target = served
    schema = json.dumps({"type": "object"})
    async with insecure_channel(target) as channel:
        for constraint in (Constraint(json_schema=schema), Constraint(json_object=True)):
            await GrpcPolicy(channel).generate(
                GenerateCall((Message("user", "x"),), n=1, seeds=(1,), max_tokens=8, shape=Shape(constraint=constraint))
            )
    assert fake.requests[0].sampling.constraint.json_schema == schema
    assert fake.requests[1].sampling.constraint.json_object


async def test_a_text_sink_generates_through_the_stream(served: tuple[ToolPolicy, str]) -> None:
    fake, target = served
    deltas: list[str] = []

    async def sink(delta: str) -> None:
        deltas.append(delta)

    async with insecure_channel(target) as channel:
        job = make_job("single")
        job.messages[0].content = "Say something."  # an open prompt: its reply is the streamed text
        job.stream_answer = True
        result, _ = await run_search(job, GrpcPolicy(channel), ScriptedVerifier(contains("x")), on_answer=sink)
    assert len(fake.streams) == 1 and not fake.requests
    assert deltas == ["The", " time", " is", " noon."] and result.answer == "The time is noon."
    assert result.budget_used.generated_tokens == 4 and result.budget_used.prompt_tokens == 12


async def test_a_tool_call_result_end_to_end_through_grpc(served: tuple[ToolPolicy, str]) -> None:
    _, target = served
    job = make_job("self_consistency", n=3)
    job.tools.tools.add(name="get_time")
    job.logprobs, job.top_logprobs = True, 1
    async with insecure_channel(target) as channel:
        result, _ = await run_search(job, GrpcPolicy(channel), ScriptedVerifier(contains("x")))
    assert result.termination == orchestrator_pb2.TERMINATION_COMPLETED
    assert result.finish_reason == "tool_calls" and [c.name for c in result.tool_calls] == ["get_time"]
    assert [len(t.top_logprobs) for t in result.logprobs] == [1]  # top_logprobs caps the alternatives


def test_policy_targets_by_model() -> None:
    assert parse_targets(" smol = a:1 , qwen=b:2,") == {"smol": "a:1", "qwen": "b:2"}
    assert OrchestratorSettings(policy_targets="smol=a:1").policy_targets == "smol=a:1"
    for bad in ("smol", "smol=", "=a:1", "smol=a", "smol=a:1,smol=b:2"):
        with pytest.raises(ValueError):
            OrchestratorSettings(policy_targets=bad)


class Traces:
    """Stands in for the Redis trace store (the servicer only saves)."""

    def __init__(self) -> None:
        self.saved: list[orchestrator_pb2.SearchTrace] = []

    async def save(self, trace: orchestrator_pb2.SearchTrace, owner: str = "") -> None:
        self.saved.append(trace)


@pytest.mark.parametrize("stream", [True, False])
async def test_run_search_streams_answer_deltas_before_the_result(served: tuple[ToolPolicy, str], stream: bool) -> None:
    from services.orchestrator.adapters import AdapterFactory
    from services.orchestrator.servicer import OrchestratorServicer

    fake, target = served
    async with insecure_channel(target) as channel:
        other = insecure_channel("127.0.0.1:1")  # the default deployment: not this job's model
        asked: list[str] = []

        async def policy_for(model: str, job: orchestrator_pb2.SearchJob, timeout: float) -> GrpcPolicy:
            asked.append(model)  # the worker's factory: the job's model picks its deployment
            return GrpcPolicy(channel if model == "qwen" else other, model, request_id=job.job_id, timeout=timeout)

        servicer = OrchestratorServicer(AdapterFactory(policy_for, channel, channel), Traces())  # type: ignore[arg-type]
        job = make_job("single")
        job.messages[0].content = "Say something."  # an open prompt: its reply is the streamed text
        job.model, job.stream_answer = "qwen", stream
        events = [e async for e in servicer.RunSearch(job, None)]
        await other.close()
    assert asked == ["qwen"]
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[-1] == "result"
    deltas = [e.answer_delta for e in events if e.WhichOneof("event") == "answer_delta"]
    if stream:
        assert deltas == ["The", " time", " is", " noon."] and len(fake.streams) == 1
        assert events[-1].result.answer == "The time is noon."
    else:  # Generate: the fake answers with a call
        assert deltas == [] and len(fake.requests) == 1 and not fake.streams
        assert [c.name for c in events[-1].result.tool_calls] == ["get_time"]
    assert [e.sequence for e in events[:-1]] == sorted({e.sequence for e in events[:-1]})
