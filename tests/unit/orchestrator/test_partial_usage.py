"""A policy call that ends early still charges the tokens it was sent, and the job's sampling
penalties reach the policy.

``GrpcPolicy`` against an in-process policy (real gRPC on 127.0.0.1) whose stream sends a few
counted chunks, then stalls or fails: the chunks' token counts, and the prompt's that the first
chunk reports, reach ``on_partial``. A search whose call is cut off by the job's deadline
reports those tokens in its ``budget_used``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from services.common.grpc_client import insecure_channel
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2, policy_pb2, policy_pb2_grpc
from services.orchestrator.clients import GrpcPolicy
from services.search.interfaces import Candidate, ComponentError, GenerateCall, Generation, Message, PartialSink, Policy
from services.search.run import run_search
from tests.helpers.search_fakes import ScriptedPolicy, ScriptedVerifier, answers_by_seed, contains
from tests.helpers.search_jobs import make_job
from tests.unit.orchestrator.policy_server import serving

SENT = 7  # chunks the fake stream sends before it stalls or fails
PROMPT, CACHED = 6, 2  # the prompt side its first chunk reports, as the policy's does


class StallingPolicy(policy_pb2_grpc.PolicyServicer):
    """GenerateStream sends ``SENT`` counted chunks (the first with the prompt's count), then
    stalls (or fails with INTERNAL)."""

    def __init__(self) -> None:
        self.fail = False
        self.requests: list[policy_pb2.GenerateRequest] = []

    async def GenerateStream(self, request, context):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        for count in range(1, SENT + 1):
            chunk = policy_pb2.GenerateChunk(index=0, text_delta=f" w{count}", completion_tokens=count)
            if count == 1:
                chunk.prompt_tokens, chunk.cached_tokens = PROMPT, CACHED
            yield chunk
        if self.fail:
            await context.abort(grpc.StatusCode.INTERNAL, "engine failed")
        await asyncio.sleep(3600)

    async def Generate(self, request, context):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        return policy_pb2.GenerateResponse(
            candidates=[
                policy_pb2.Candidate(text="ok", finish_reason=policy_pb2.FINISH_REASON_STOP, completion_tokens=1)
            ],
            usage=common_pb2.Usage(prompt_tokens=3, completion_tokens=1),
        )


@pytest.fixture
async def served() -> AsyncIterator[tuple[StallingPolicy, str]]:
    fake = StallingPolicy()
    async with serving(fake) as target:
        yield fake, target


async def _streamed(policy: GrpcPolicy, on_partial: PartialSink, **kw: Any) -> Generation:
    async def sink(index: int, delta: str) -> None:
        del index, delta

    call = GenerateCall((Message("user", "count"),), n=1, seeds=(1,), max_tokens=100, **kw)
    return await policy.generate(call, on_text=sink, on_partial=on_partial)


async def _chunks_sent(fake: StallingPolicy) -> None:
    while not fake.requests:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # the chunks are on their way


async def test_a_cancelled_stream_hands_over_what_it_received(served: tuple[StallingPolicy, str]) -> None:
    fake, target = served
    partial: list[Generation] = []
    async with insecure_channel(target) as channel:
        call = asyncio.ensure_future(_streamed(GrpcPolicy(channel), partial.append))
        await _chunks_sent(fake)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    [got] = partial
    assert [c.completion_tokens for c in got.candidates] == [SENT]
    assert got.candidates[0].text == "".join(f" w{i}" for i in range(1, SENT + 1))
    assert (got.prompt_tokens, got.cached_tokens) == (PROMPT, CACHED)  # from the first chunk


async def test_a_stream_that_fails_midway_hands_over_what_it_received(served: tuple[StallingPolicy, str]) -> None:
    fake, target = served
    fake.fail = True
    partial: list[Generation] = []
    async with insecure_channel(target) as channel:
        with pytest.raises(ComponentError) as caught:
            await _streamed(GrpcPolicy(channel), partial.append)
    assert caught.value.code == "INTERNAL"
    assert [c.completion_tokens for c in partial[0].candidates] == [SENT]
    assert (partial[0].prompt_tokens, partial[0].cached_tokens) == (PROMPT, CACHED)


async def test_penalties_go_into_the_sampling_params(served: tuple[StallingPolicy, str]) -> None:
    fake, target = served
    async with insecure_channel(target) as channel:
        await GrpcPolicy(channel).generate(
            GenerateCall(
                (Message("user", "x"),), n=1, seeds=(1,), max_tokens=8, presence_penalty=0.5, frequency_penalty=-1.25
            )
        )
    sampling = fake.requests[0].sampling
    assert (sampling.presence_penalty, sampling.frequency_penalty) == (0.5, -1.25)


class CutOff:
    """A policy whose call had been sent ``SENT`` tokens when the deadline cut it off."""

    async def generate(self, call: GenerateCall, **kw: Any) -> Generation:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            sent = Candidate(text="partial answer", completion_tokens=SENT)
            kw["on_partial"](Generation(candidates=(sent,), prompt_tokens=4))
            raise
        raise AssertionError("unreachable")


async def test_a_call_cut_off_by_the_deadline_is_in_the_jobs_usage() -> None:
    policy: Policy = CutOff()
    result, _ = await run_search(make_job("single", deadline=0.3), policy, ScriptedVerifier(contains("x")))
    assert result.termination == orchestrator_pb2.TERMINATION_DEADLINE
    assert result.budget_used.generated_tokens == SENT and result.budget_used.prompt_tokens == 4
    assert result.budget_used.policy_calls == 1


async def test_the_jobs_penalties_reach_every_policy_call() -> None:
    job = make_job("self_consistency", n=3)
    job.presence_penalty, job.frequency_penalty = 0.5, 1.5
    policy = ScriptedPolicy(answers_by_seed(["42"]))
    await run_search(job, policy, ScriptedVerifier(contains("42")))
    assert policy.calls and {c.penalties for c in policy.calls} == {(0.5, 1.5)}
