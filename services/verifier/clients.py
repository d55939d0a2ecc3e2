"""gRPC adapters behind the verifier's ports: the policy's Score and the sandbox's Execute
(through the one sandbox client, ``services/common/sandbox_client.py``).

This is the one place gRPC statuses from downstream services are sorted: an outage
(UNAVAILABLE) fails the whole Verify call with UNAVAILABLE and a message naming the service;
a refusal that is the request's fault (an unknown model, bad limits) becomes INVALID_ARGUMENT;
anything else is a per-candidate infrastructure error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from services.common.errors import InvalidArgument, Unavailable, error_field
from services.common.grpc_client import insecure_channel
from services.common.sandbox_client import SandboxClient
from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc, sandbox_pb2
from services.verifier.types import (
    ExecResult,
    JudgePrompt,
    PolicyError,
    PolicyRefused,
    SandboxError,
    ScoreResult,
    Spend,
    TestRun,
)

OUTPUT_CHARS = 1500
AUTO_CONCURRENCY = 16
QUEUE_FULL_BACKOFF_S = (0.2, 0.5, 1.0, 2.0)
_REFUSALS = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.FAILED_PRECONDITION)


def _details(err: grpc.aio.AioRpcError) -> str:
    return str(err.details() or err.code().name)


class GrpcPolicyScorer:
    """``PolicyScorer`` over the policy service's ``Score`` RPC."""

    def __init__(
        self,
        target: str,
        timeout_s: float,
        default_model: str = "",
        concurrency: int = 0,
        targets: dict[str, str] | None = None,
    ) -> None:
        self.target = target
        self.timeout_s = timeout_s
        self.default_model = default_model
        self.concurrency = concurrency
        self.channel = insecure_channel(target)
        self.stub = policy_pb2_grpc.PolicyStub(self.channel)
        # A judge model with its own deployment (a stronger judge than the policy) is scored there.
        self.targets = dict(targets or {})
        self._channels = {t: insecure_channel(t) for t in sorted(set(self.targets.values()))}
        self._stubs = {t: policy_pb2_grpc.PolicyStub(c) for t, c in self._channels.items()}

    def _route(self, model: str) -> tuple[str, Any]:
        """The target and stub that serve ``model``."""
        target = self.targets.get(model)
        return (target, self._stubs[target]) if target is not None else (self.target, self.stub)

    async def parallelism(self) -> int:
        """The configured concurrency, or (0 = auto) 1 for a llama.cpp policy and 16 for others,
        asked of the policy once. On the former serialized llama.cpp engine concurrent judge calls
        were 1.3-5x slower; with continuous batching (benchmarks/verifier_bench.py) 16 PRM
        calls at once were 1.08x faster and 8 ORM calls 1.16x slower than one at a time: no clear
        gain, so llama.cpp keeps one at a time."""
        if self.concurrency > 0:
            return self.concurrency
        try:
            reply = await self.stub.ListModels(policy_pb2.ListModelsRequest(), timeout=min(self.timeout_s, 10.0))
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.UNAVAILABLE:
                raise Unavailable(f"policy service at {self.target} is unavailable: {_details(err)}") from err
            return AUTO_CONCURRENCY
        serial = any(m.engine == "llamacpp" for m in reply.models)
        self.concurrency = 1 if serial else AUTO_CONCURRENCY
        return self.concurrency

    async def score(self, prompt: JudgePrompt, continuations: Sequence[str], *, model: str) -> ScoreResult:
        request = policy_pb2.ScoreRequest(
            model=model or self.default_model,
            input=policy_pb2.PromptInput(
                messages=[common_pb2.ChatMessage(role=m.role, content=m.content) for m in prompt.messages],
                prompt=prompt.text,
            ),
            continuations=list(continuations),
        )
        target, stub = self._route(request.model)
        try:
            reply = await stub.Score(request, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as err:
            code = err.code()
            if code == grpc.StatusCode.UNAVAILABLE:
                raise Unavailable(f"policy service at {target} is unavailable: {_details(err)}") from err
            if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT) and error_field(err) == "model":
                raise InvalidArgument(f"policy rejected the model: {_details(err)}", field="model") from err
            if code in _REFUSALS:
                raise PolicyRefused(f"policy refused the input ({code.name}): {_details(err)}") from err
            raise PolicyError(f"policy Score failed ({code.name}): {_details(err)}") from err
        if len(reply.scores) != len(continuations):
            raise PolicyError(f"policy returned {len(reply.scores)} scores for {len(continuations)} continuations")
        usage = reply.usage
        spend = Spend(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_tokens=usage.cached_tokens,
            policy_calls=1,
        )
        return ScoreResult([s.total_logprob for s in reply.scores], spend)

    async def close(self) -> None:
        for channel in (self.channel, *self._channels.values()):
            await channel.close()


def _output(outcome: sandbox_pb2.RunOutcome) -> str:
    text = (outcome.stderr or outcome.stdout).decode(errors="replace").strip()
    return text[-OUTPUT_CHARS:]


class GrpcSandboxRunner:
    """``SandboxRunner`` over the sandbox service's ``Execute`` RPC."""

    def __init__(self, target: str, timeout_s: float) -> None:
        self.target = target
        self.timeout_s = timeout_s
        # A full queue is waited out with backoff: a busy sandbox is not a failed candidate.
        self.client = SandboxClient(target, queue_full_backoff_s=QUEUE_FULL_BACKOFF_S)

    async def run_tests(
        self, code: str, tests: Sequence[sandbox_pb2.TestCase], limits: sandbox_pb2.Limits | None
    ) -> ExecResult:
        try:
            reply = await self.client.execute(code, tests=tests, limits=limits, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as err:
            code_ = err.code()
            if code_ == grpc.StatusCode.UNAVAILABLE:
                raise Unavailable(f"sandbox service at {self.target} is unavailable: {_details(err)}") from err
            if code_ == grpc.StatusCode.INVALID_ARGUMENT:
                field = error_field(err)
                raise InvalidArgument(
                    f"sandbox rejected the code spec: {_details(err)}", field=f"code.{field}" if field else "code"
                ) from err
            raise SandboxError(f"sandbox Execute failed ({code_.name}): {_details(err)}") from err
        runs = [
            TestRun(
                name=t.name,
                passed=t.passed,
                status=sandbox_pb2.ExecStatus.Name(t.outcome.status),
                output=_output(t.outcome),
                infra_error=t.outcome.status == sandbox_pb2.EXEC_STATUS_SANDBOX_ERROR,
            )
            for t in reply.tests
        ]
        if not runs and reply.outcome.status == sandbox_pb2.EXEC_STATUS_SANDBOX_ERROR:
            raise SandboxError(reply.message or _output(reply.outcome) or "sandbox error")
        return ExecResult(runs, reply.message)

    async def close(self) -> None:
        await self.client.close()
