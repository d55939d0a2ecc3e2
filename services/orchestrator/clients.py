"""gRPC adapters that make the policy and verifier services look like the strategy protocols.

The worker builds these over :func:`services.common.grpc_client.insecure_channel` (which
carries trace context and the request id). A gRPC failure becomes a ``ComponentError``; the
search context turns that into termination ``error`` while keeping the best answer so far.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf import json_format

from services.gen.ttc.v1 import (
    common_pb2,
    policy_pb2,
    policy_pb2_grpc,
    sandbox_pb2,
    sandbox_pb2_grpc,
    verifier_pb2,
    verifier_pb2_grpc,
)
from services.orchestrator.interfaces import (
    RAW_PROMPT_ROLE,
    Candidate,
    ComponentError,
    ExecStatus,
    FinishReason,
    Generation,
    Message,
    ProgramRun,
    Verdict,
    Verification,
    VerifyCall,
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


def prompt_input(messages: Sequence[Message], assistant_prefix: str) -> policy_pb2.PromptInput:
    """Chat messages, or raw text for a legacy completions prompt."""
    if len(messages) == 1 and messages[0].role == RAW_PROMPT_ROLE:
        return policy_pb2.PromptInput(prompt=messages[0].content, assistant_prefix=assistant_prefix)
    return policy_pb2.PromptInput(
        messages=[common_pb2.ChatMessage(role=m.role, content=m.content) for m in messages],
        assistant_prefix=assistant_prefix,
    )


class GrpcPolicy:
    """``Policy`` over the policy service. ``timeout`` bounds each call (seconds)."""

    def __init__(self, channel: grpc.aio.Channel, model: str = "", *, request_id: str = "", timeout: float = 600.0):
        self._stub = policy_pb2_grpc.PolicyStub(channel)
        self._model = model
        self._request_id = request_id
        self._timeout = timeout

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        assistant_prefix: str,
        n: int,
        seeds: Sequence[int],
        max_tokens: int,
        temperature: float,
        top_p: float,
        stop: Sequence[str],
        logprobs: bool,
    ) -> Generation:
        request = policy_pb2.GenerateRequest(
            model=self._model,
            input=prompt_input(messages, assistant_prefix),
            sampling=policy_pb2.SamplingParams(
                n=n,
                seeds=list(seeds),
                max_tokens=max_tokens,
                temperature=temperature,
                top_p=top_p,
                stop=list(stop),
                logprobs=logprobs,
            ),
            request_id=self._request_id,
        )
        try:
            response = await self._stub.Generate(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            raise ComponentError("policy", err.details() or err.code().name, err.code().name) from err
        return Generation(
            candidates=tuple(
                Candidate(
                    text=c.text,
                    finish_reason=_FINISH.get(c.finish_reason, "stop"),
                    completion_tokens=c.completion_tokens,
                    seed=c.seed,
                    logprobs=tuple(t.logprob for t in c.logprobs),
                )
                for c in response.candidates
            ),
            prompt_tokens=response.usage.prompt_tokens,
            cached_tokens=response.usage.cached_tokens,
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
        self._stub = sandbox_pb2_grpc.SandboxStub(channel)
        self._request_id = request_id
        self._timeout = timeout

    async def run(self, code: str, *, wall_seconds: float) -> ProgramRun:
        request = sandbox_pb2.ExecuteRequest(
            language="python",
            code=code,
            limits=sandbox_pb2.Limits(wall_seconds=wall_seconds, max_output_bytes=_MAX_OUTPUT_BYTES),
            request_id=self._request_id,
        )
        try:
            response = await self._stub.Execute(request, timeout=min(self._timeout, wall_seconds + 60.0))
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
