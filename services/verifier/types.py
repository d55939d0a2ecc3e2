"""Plain data the verifiers work on, and the ports through which they reach other services.

Verifier kinds see neither protobuf requests nor gRPC channels: the servicer turns a
``VerifyRequest`` into a ``VerifyJob`` and injects a ``PolicyScorer`` and a ``SandboxRunner``,
so every verifier is unit-tested with scripted ports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from services.gen.ttc.v1 import sandbox_pb2


class Aggregation(StrEnum):
    """How a PRM folds step scores into one candidate score."""

    MIN = "min"
    PRODUCT = "product"
    MEAN = "mean"
    LAST = "last"


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class CodeSpec:
    """Sandbox tests (passed through unchanged) and the HumanEval entry point."""

    tests: tuple[sandbox_pb2.TestCase, ...] = ()
    entry_point: str = ""
    limits: sandbox_pb2.Limits | None = None


@dataclass(frozen=True)
class WeightedName:
    name: str
    weight: float


@dataclass(frozen=True)
class VerifyJob:
    """One Verify call: the problem, every candidate, and what each verifier kind may need."""

    verifier: str
    candidates: tuple[str, ...]
    problem: tuple[Message, ...] = ()
    reference: str = ""
    code: CodeSpec = field(default_factory=CodeSpec)
    aggregation: Aggregation = Aggregation.MIN
    ensemble: tuple[WeightedName, ...] = ()
    format_pattern: str = ""
    model: str = ""
    request_id: str = ""


@dataclass
class Verdict:
    """The judgement of one candidate; ``error`` set means no judgement could be made."""

    score: float = 0.0
    passed: bool = False
    step_scores: list[float] = field(default_factory=list)
    extracted_answer: str = ""
    feedback: str = ""
    error: str = ""


@dataclass
class Spend:
    """Model tokens and calls a verifier spent (generative judges only), as the engine counts
    them: ``prompt_tokens`` every token it processed as input - a ``Score`` call prefills the
    judge prompt *and* the scored continuations, so all of those are prompt tokens -
    ``cached_tokens`` the part of those from its prefix cache, ``completion_tokens`` tokens it
    generated (none for a ``Score``-based judge). The orchestrator reports them as the
    request's verifier prompt / cached / generated tokens."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    policy_calls: int = 0

    def add(self, other: Spend) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.policy_calls += other.policy_calls


@dataclass
class Outcome:
    """One verdict per candidate, in candidate order, and what producing them cost."""

    verdicts: list[Verdict]
    spend: Spend = field(default_factory=Spend)


def clean_score(value: float) -> float:
    """A score safe to return: NaN becomes 0, anything else is clamped to [0, 1]."""
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, value))


# ---- ports -------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgePrompt:
    """A Score prompt: chat messages (templated by the policy) or raw text."""

    messages: tuple[Message, ...] = ()
    text: str = ""


@dataclass
class ScoreResult:
    """Total log-probability of each continuation, in request order, and the call's usage."""

    totals: list[float]
    spend: Spend


class PolicyError(Exception):
    """The policy failed one call (not an outage): the affected candidates get an error."""


class PolicyRefused(PolicyError):
    """The policy refused the call's input (say, a continuation longer than the context window):
    retrying the candidates one by one can save the others; retrying a timeout cannot."""


class SandboxError(Exception):
    """The sandbox could not run a candidate (not an outage): that candidate gets an error."""


class PolicyScorer(Protocol):
    async def score(self, prompt: JudgePrompt, continuations: Sequence[str], *, model: str) -> ScoreResult:
        """Log-probabilities of ``continuations`` after ``prompt``; raises ``PolicyError``,
        or ``services.common.errors.Unavailable`` when the policy cannot be reached."""
        ...

    async def parallelism(self) -> int:
        """How many Score calls are worth having in flight at once on this policy."""
        ...


@dataclass
class TestRun:
    name: str
    passed: bool
    status: str
    output: str
    infra_error: bool = False


@dataclass
class ExecResult:
    tests: list[TestRun]
    message: str = ""


class SandboxRunner(Protocol):
    async def run_tests(
        self, code: str, tests: Sequence[sandbox_pb2.TestCase], limits: sandbox_pb2.Limits | None
    ) -> ExecResult:
        """Run ``code`` against ``tests``; raises ``SandboxError``, or ``Unavailable`` on an outage."""
        ...
