"""gRPC adapters that make the policy and verifier services look like the strategy protocols.

The worker builds these over :func:`services.common.grpc_client.insecure_channel` (which
carries trace context and the request id). A gRPC failure becomes a ``ComponentError``; the
search context turns that into termination ``error`` while keeping the best answer so far.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import json_format

from services.common.grpc_client import call_context
from services.common.sandbox_client import SandboxClient
from services.gen.ttc.v1 import (
    common_pb2,
    policy_pb2,
    policy_pb2_grpc,
    sandbox_pb2,
    verifier_pb2,
    verifier_pb2_grpc,
)
from services.orchestrator.retry import Attempts, Backoff, stream
from services.search.interfaces import (
    NO_SHAPE,
    RAW_PROMPT_ROLE,
    Candidate,
    CandidateTextSink,
    ComponentError,
    ExecStatus,
    FinishReason,
    GenerateCall,
    Generation,
    Message,
    PartialSink,
    ProgramRun,
    Shape,
    Verdict,
    Verification,
    VerifyCall,
)
from services.search.shapes import (
    constraint_proto,
    message_proto,
    token_logprob_of,
    tool_call_of,
    tools_proto,
)

_FINISH: dict[int, FinishReason] = {
    policy_pb2.FINISH_REASON_STOP: "stop",
    policy_pb2.FINISH_REASON_LENGTH: "length",
    policy_pb2.FINISH_REASON_ABORT: "abort",
}
_AGGREGATION = {
    "min": verifier_pb2.STEP_AGGREGATION_MIN,
    "product": verifier_pb2.STEP_AGGREGATION_PRODUCT,
    "mean": verifier_pb2.STEP_AGGREGATION_MEAN,
    "last": verifier_pb2.STEP_AGGREGATION_LAST,
}


def prompt_input(messages: Sequence[Message], assistant_prefix: str, shape: Shape = NO_SHAPE) -> policy_pb2.PromptInput:
    """Chat messages (with their tool calls, and the tools to render), or raw text for a
    legacy completions prompt."""
    if len(messages) == 1 and messages[0].role == RAW_PROMPT_ROLE:
        return policy_pb2.PromptInput(prompt=messages[0].content, assistant_prefix=assistant_prefix)
    prompt = policy_pb2.PromptInput(messages=[message_proto(m) for m in messages], assistant_prefix=assistant_prefix)
    if shape.tools is not None:
        prompt.tools.CopyFrom(tools_proto(shape.tools))
    return prompt


def sampling_params(call: GenerateCall) -> policy_pb2.SamplingParams:
    sampling = policy_pb2.SamplingParams(
        n=call.n,
        seeds=list(call.seeds),
        max_tokens=call.max_tokens,
        temperature=call.temperature,
        top_p=call.top_p,
        presence_penalty=call.presence_penalty,
        frequency_penalty=call.frequency_penalty,
        stop=list(call.stop),
        logprobs=call.logprobs,
        top_logprobs=call.shape.top_logprobs if call.logprobs else 0,
    )
    if call.shape.constraint is not None:
        sampling.constraint.CopyFrom(constraint_proto(call.shape.constraint))
    return sampling


def candidate_of(c: policy_pb2.Candidate) -> Candidate:
    return Candidate(
        text=c.text,
        finish_reason=_FINISH.get(c.finish_reason, "stop"),
        completion_tokens=c.completion_tokens,
        seed=c.seed,
        logprobs=tuple(t.logprob for t in c.logprobs),
        tool_calls=tuple(tool_call_of(t) for t in c.tool_calls),
        tokens=tuple(token_logprob_of(t) for t in c.logprobs),
    )


@dataclass
class _Streamed:
    """A candidate assembled from GenerateStream chunks."""

    text: list[str] = field(default_factory=list)
    finish: policy_pb2.FinishReason = policy_pb2.FINISH_REASON_UNSPECIFIED
    tool_calls: list[common_pb2.ToolCall] = field(default_factory=list)
    tokens: int = 0  # the latest chunk's count (GenerateChunk.completion_tokens)
    logprobs: list[common_pb2.TokenLogprob] = field(default_factory=list)


#: The chunk interval of a call streamed only to learn what it cost (``GrpcPolicy``).
USAGE_CHUNK_INTERVAL_MS = 500


class GrpcPolicy:
    """``Policy`` over the policy service. ``timeout`` bounds each call (seconds). Given several
    channels (the job's replica first, services/common/replicas.py), a call that finds one
    UNAVAILABLE (a stream: before its first chunk) moves on to the next, and the job's later
    calls stay there. When every replica is UNAVAILABLE (a restart), the call waits with backoff
    and tries the job's replica again, for up to ``retry_for`` seconds from construction (the
    worker gives the job's deadline or less; 0: no retry) and never past ``timeout``
    (``retry.py``); ``on_retry`` counts each retry.

    ``stream_always`` (the worker's setting) sends every call through GenerateStream, whether or
    not it hands text on: a unary call cut off by a cancel or a deadline returns nothing, so the
    tokens the engine decoded for it would reach the policy's counters but never the job's
    usage, where a stream's chunks say how many it had sent (``on_partial``). Calls that want
    per-token logprobs stream too: the chunks carry them. A call streamed only for that count
    (no ``on_text``) asks for one chunk per ``USAGE_CHUNK_INTERVAL_MS``
    (``GenerateRequest.chunk_interval_ms``): per-token chunks cost the engine 10-15% of its
    decode rate on 2 cores, and a cut-off call's count then lags by at most that interval."""

    def __init__(
        self,
        channel: grpc.aio.Channel | Sequence[grpc.aio.Channel],
        model: str = "",
        *,
        request_id: str = "",
        timeout: float = 600.0,
        retry_for: float = 0.0,
        on_retry: Callable[[str], None] | None = None,
        backoff: Backoff | None = None,
        stream_always: bool = False,
    ):
        channels = [channel] if isinstance(channel, grpc.aio.Channel) else list(channel)
        self._stubs = [policy_pb2_grpc.PolicyStub(c) for c in channels]
        self._stub = self._stubs[0]
        self._model = model
        self._request_id = request_id
        self._timeout = timeout
        self._retry_until = time.monotonic() + retry_for
        self._on_retry = on_retry
        self._backoff = backoff or Backoff()
        self._stream_always = stream_always

    async def generate(
        self,
        call: GenerateCall,
        *,
        on_text: CandidateTextSink | None = None,
        on_partial: PartialSink | None = None,
    ) -> Generation:
        """One policy call. With ``on_text`` (or ``stream_always``) it streams (GenerateStream),
        handing every candidate's deltas (and, when the call asks for them, their tokens'
        logprobs) on as they arrive; else it is one unary Generate."""
        request = policy_pb2.GenerateRequest(
            model=self._model,
            input=prompt_input(call.messages, call.assistant_prefix, call.shape),
            sampling=sampling_params(call),
            request_id=self._request_id,
        )
        until = min(self._retry_until, time.monotonic() + self._timeout)
        attempts = _ReplicaAttempts(self, until, self._backoff, self._on_retry)
        if on_text is not None or self._stream_always:
            if on_text is None:
                request.chunk_interval_ms = USAGE_CHUNK_INTERVAL_MS
            return await self._stream(request, call.seeds, on_text, attempts, on_partial)
        while True:
            try:
                response = await self._stub.Generate(request, timeout=self._timeout)
                break
            except grpc.aio.AioRpcError as err:
                if await attempts.again(err):
                    continue
                raise ComponentError("policy", err.details() or err.code().name, err.code().name) from err
        return Generation(
            candidates=tuple(candidate_of(c) for c in response.candidates),
            prompt_tokens=response.usage.prompt_tokens,
            cached_tokens=response.usage.cached_tokens,
        )

    def _fail_over(self, err: grpc.aio.AioRpcError) -> bool:
        """Move to the next replica when this one is down; False when none is left."""
        at = self._stubs.index(self._stub)
        if err.code() != grpc.StatusCode.UNAVAILABLE or at + 1 >= len(self._stubs):
            return False
        self._stub = self._stubs[at + 1]
        return True

    async def _stream(
        self,
        request: policy_pb2.GenerateRequest,
        seeds: Sequence[int],
        on_text: CandidateTextSink | None,
        attempts: Attempts,
        on_partial: PartialSink | None = None,
    ) -> Generation:
        """Generate through GenerateStream, handing each candidate's text deltas to ``on_text``
        (with the candidate's index) as they arrive, when given. A candidate's per-token
        logprobs (when asked for) are its chunks' in order, as the unary reply would give them.
        Every chunk carries its candidate's token count, and the first the prompt's (with its
        cached tokens), so a stream that ends early (cancelled,
        cut by the deadline, failed) hands what it had received to ``on_partial``: those tokens
        were spent. The prompt is counted once either way: the final chunk's usage replaces the
        first chunk's count. A failure becomes a ``ComponentError`` like a unary call's."""
        parts: dict[int, _Streamed] = {}
        usage = common_pb2.Usage()
        # The trace context of this call, read here: grpc.aio runs a unary-stream call's client
        # interceptor outside the caller's context, so the interceptor alone sent no parent and
        # the policy's span started a trace of its own (tests/e2e/test_observability.py).
        context = tuple(call_context().items())
        try:
            # Reopened on UNAVAILABLE (on the next replica first) only before its first chunk (retry.stream).
            open_call = lambda: self._stub.GenerateStream(request, timeout=self._timeout, metadata=context)  # noqa: E731
            chunks = stream(open_call, attempts)
            async with contextlib.aclosing(chunks):  # closed at once on a cancel: it cancels the call
                async for chunk in chunks:
                    if chunk.HasField("usage"):
                        usage = chunk.usage  # the final chunk: it replaces the first chunk's count
                    elif chunk.prompt_tokens:
                        usage = common_pb2.Usage(prompt_tokens=chunk.prompt_tokens, cached_tokens=chunk.cached_tokens)
                    part = parts.setdefault(chunk.index, _Streamed())
                    part.tokens = max(part.tokens, chunk.completion_tokens)
                    if chunk.text_delta:
                        part.text.append(chunk.text_delta)
                        if on_text is not None:
                            await on_text(chunk.index, chunk.text_delta)
                    if chunk.finish_reason:
                        part.finish = chunk.finish_reason
                    part.tool_calls.extend(chunk.tool_calls)
                    part.logprobs.extend(chunk.logprobs)
        except (asyncio.CancelledError, grpc.aio.AioRpcError) as err:
            if on_partial is not None and parts:
                on_partial(_assembled(parts, usage, seeds))
            if isinstance(err, grpc.aio.AioRpcError):
                raise ComponentError("policy", err.details() or err.code().name, err.code().name) from err
            raise
        return _assembled(parts, usage, seeds)


class _ReplicaAttempts(Attempts):
    """One call's next attempt: an UNAVAILABLE replica hands the call to the job's next one at
    once; when none is left, the call waits a backoff step (``Attempts``) and starts over at
    the job's own replica."""

    def __init__(self, policy: GrpcPolicy, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._policy = policy

    async def again(self, err: grpc.aio.AioRpcError) -> bool:
        if self._policy._fail_over(err):
            return True
        if await super().again(err):
            self._policy._stub = self._policy._stubs[0]
            return True
        return False


def _assembled(parts: dict[int, _Streamed], usage: common_pb2.Usage, seeds: Sequence[int]) -> Generation:
    """The candidates a stream's chunks make up, with the prompt side of ``usage``: the final
    chunk's, once it came, else the first chunk's count (the prompt was evaluated)."""
    streamed = [(i, parts[i]) for i in sorted(parts) if parts[i].text or parts[i].finish or parts[i].tool_calls]
    return Generation(
        candidates=tuple(
            # the unary reply's candidate, so both paths read it the same way (``candidate_of``)
            candidate_of(
                policy_pb2.Candidate(
                    index=i,
                    text="".join(p.text),
                    finish_reason=p.finish,
                    # A policy that predates per-chunk counts reports the whole call's only.
                    completion_tokens=p.tokens or (usage.completion_tokens if len(streamed) == 1 else 0),
                    seed=seeds[i] if i < len(seeds) else 0,  # the candidate's own seed, by its index
                    logprobs=p.logprobs,
                    tool_calls=p.tool_calls,
                )
            )
            for i, p in streamed
        ),
        prompt_tokens=usage.prompt_tokens,
        cached_tokens=usage.cached_tokens,
    )


class GrpcVerifier:
    """``Verifier`` over the verifier service."""

    def __init__(self, channel: grpc.aio.Channel, model: str = "", *, request_id: str = "", timeout: float = 600.0):
        self._stub = verifier_pb2_grpc.VerifierStub(channel)
        self._model = model
        self._request_id = request_id
        self._timeout = timeout

    def request(self, call: VerifyCall) -> verifier_pb2.VerifyRequest:
        code = verifier_pb2.CodeSpec()
        if call.code:
            json_format.ParseDict(dict(call.code), code)
        return verifier_pb2.VerifyRequest(
            verifier=call.verifier,
            problem=[common_pb2.ChatMessage(role=m.role, content=m.content) for m in call.problem],
            candidates=list(call.candidates),
            reference=call.reference,
            code=code,
            aggregation=_AGGREGATION[call.aggregation],
            ensemble=[verifier_pb2.WeightedVerifier(name=n, weight=w) for n, w in call.ensemble],
            format_pattern=call.format_pattern,
            model=self._model,
            request_id=self._request_id,
        )

    async def verify(self, call: VerifyCall) -> Verification:
        try:
            response = await self._stub.Verify(self.request(call), timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            raise ComponentError("verifier", err.details() or err.code().name, err.code().name) from err
        return Verification(
            verdicts=tuple(
                Verdict(
                    score=v.score,
                    passed=v.passed,
                    step_scores=tuple(v.step_scores),
                    feedback=v.feedback,
                    extracted_answer=v.extracted_answer,
                )
                for v in response.verdicts
            ),
            prompt_tokens=response.usage.prompt_tokens,
            completion_tokens=response.usage.completion_tokens,
            cached_tokens=response.usage.cached_tokens,
        )


_EXEC_STATUS: dict[int, ExecStatus] = {
    sandbox_pb2.EXEC_STATUS_OK: "ok",
    sandbox_pb2.EXEC_STATUS_RUNTIME_ERROR: "runtime_error",
    sandbox_pb2.EXEC_STATUS_TIMEOUT: "timeout",
    sandbox_pb2.EXEC_STATUS_MEMORY_LIMIT: "memory_limit",
    sandbox_pb2.EXEC_STATUS_OUTPUT_LIMIT: "output_limit",
    sandbox_pb2.EXEC_STATUS_SANDBOX_ERROR: "sandbox_error",
}
# Program-of-thought programs print one answer; a little more room keeps tracebacks readable.
_MAX_OUTPUT_BYTES = 16_384


class GrpcExecutor:
    """``Executor`` over the sandbox service: model-written programs are untrusted code, so they
    only ever run there (no network, limits, a private tmp), never in the worker."""

    def __init__(self, channel: grpc.aio.Channel, *, request_id: str = "", timeout: float = 120.0):
        self._sandbox = SandboxClient("sandbox", channel=channel)  # the worker's channel: it stays open
        self._request_id = request_id
        self._timeout = timeout

    async def run(self, code: str, *, wall_seconds: float) -> ProgramRun:
        try:
            response = await self._sandbox.execute(
                code,
                limits=sandbox_pb2.Limits(wall_seconds=wall_seconds, max_output_bytes=_MAX_OUTPUT_BYTES),
                request_id=self._request_id,
                timeout=min(self._timeout, wall_seconds + 60.0),
            )
        except grpc.aio.AioRpcError as err:
            raise ComponentError("sandbox", err.details() or err.code().name, err.code().name) from err
        outcome = response.outcome
        status = _EXEC_STATUS.get(outcome.status, "sandbox_error")
        if status == "sandbox_error":  # the sandbox failed, not the program: an outage, never a vote
            raise ComponentError("sandbox", response.message or "sandbox error", "INTERNAL")
        return ProgramRun(
            status=status,
            stdout=outcome.stdout.decode("utf-8", "replace"),
            stderr=outcome.stderr.decode("utf-8", "replace"),
            exit_code=outcome.exit_code,
            wall_seconds=outcome.wall_seconds,
            cpu_seconds=outcome.cpu_seconds,
        )
