"""Scripted policy and sandbox ports: deterministic, recording every call they receive."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from services.common.errors import Unavailable
from services.gen.ttc.v1 import sandbox_pb2
from services.verifier.types import ExecResult, JudgePrompt, PolicyError, ScoreResult, Spend, TestRun


@dataclass
class ScriptedPolicy:
    """Scores a continuation with ``logprob(prompt, continuation)``; each call spends fixed tokens.

    Spend is reported as the policy service's ``Score`` reports it: the engine prefills the
    judge prompt and every scored continuation, so all of it is prompt tokens (nothing is
    generated)."""

    logprob: Callable[[JudgePrompt, str], float]
    prompt_tokens_per_call: int = 10
    tokens_per_continuation: int = 3
    fail_when: Callable[[JudgePrompt, Sequence[str]], Exception | None] = lambda p, c: None
    calls: list[tuple[JudgePrompt, list[str]]] = field(default_factory=list)
    concurrency: int = 16

    async def parallelism(self) -> int:
        return self.concurrency

    async def score(self, prompt: JudgePrompt, continuations: Sequence[str], *, model: str) -> ScoreResult:
        self.calls.append((prompt, list(continuations)))
        await asyncio.sleep(0)
        failure = self.fail_when(prompt, continuations)
        if failure is not None:
            raise failure
        spend = Spend(
            prompt_tokens=self.prompt_tokens_per_call + self.tokens_per_continuation * len(continuations),
            policy_calls=1,
        )
        return ScoreResult([self.logprob(prompt, c) for c in continuations], spend)


def label_policy(yes: float, no: float, yes_label: str = "Yes", no_label: str = "No") -> ScriptedPolicy:
    """A judge whose log-probabilities depend only on the label a continuation ends with."""

    def logprob(prompt: JudgePrompt, continuation: str) -> float:
        if continuation.endswith(yes_label):
            return yes
        if continuation.endswith(no_label):
            return no
        raise AssertionError(f"unexpected continuation {continuation!r}")

    return ScriptedPolicy(logprob)


def down_policy() -> ScriptedPolicy:
    return ScriptedPolicy(lambda p, c: 0.0, fail_when=lambda p, c: Unavailable("policy service is unavailable"))


def erring_policy(message: str = "context window exceeded") -> ScriptedPolicy:
    return ScriptedPolicy(lambda p, c: 0.0, fail_when=lambda p, c: PolicyError(message))


@dataclass
class ScriptedSandbox:
    """Runs nothing: ``behaviour(code, test)`` decides each test's (passed, status, output)."""

    behaviour: Callable[[str, sandbox_pb2.TestCase], tuple[bool, str, str]]
    raise_for: Callable[[str], Exception | None] = lambda code: None
    calls: list[tuple[str, list[sandbox_pb2.TestCase]]] = field(default_factory=list)

    async def run_tests(
        self, code: str, tests: Sequence[sandbox_pb2.TestCase], limits: sandbox_pb2.Limits | None
    ) -> ExecResult:
        self.calls.append((code, list(tests)))
        await asyncio.sleep(0)
        failure = self.raise_for(code)
        if failure is not None:
            raise failure
        runs = []
        for test in tests:
            passed, status, output = self.behaviour(code, test)
            runs.append(TestRun(test.name, passed, status, output, infra_error=status == "EXEC_STATUS_SANDBOX_ERROR"))
        return ExecResult(runs)
