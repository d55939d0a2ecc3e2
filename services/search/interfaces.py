"""The typed protocols strategies are written against, and the values that cross them.

Strategies never see gRPC, Redis or Celery: they get a ``Policy`` and a ``Verifier`` that
satisfy these protocols (gRPC adapters in :mod:`services.orchestrator.clients`, scripted
fakes in the unit tests). Keeping the values plain frozen dataclasses is what lets one
contract test run every strategy against scripted components.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

# The chat value types (services/common/chat.py), re-exported: strategies import them from here.
from services.common.chat import Message as Message
from services.common.chat import Tool as Tool
from services.common.chat import ToolCall as ToolCall
from services.common.chat import Tools as Tools

FinishReason = Literal["stop", "length", "abort"]
Aggregation = Literal["min", "product", "mean", "last"]
AGGREGATIONS: tuple[str, ...] = ("min", "product", "mean", "last")
# A legacy completions prompt travels as one message with this role; the policy adapter sends
# it as raw text instead of applying the chat template.
RAW_PROMPT_ROLE = "raw"


@dataclass(frozen=True)
class Constraint:
    """Constrained decoding (ttc.v1.OutputConstraint): any JSON object, or JSON valid against a schema."""

    json_object: bool = False
    json_schema: str = ""


@dataclass(frozen=True)
class Shape:
    """What shapes a generation beyond sampling: the tools rendered into the prompt, the output
    constraint, and how many alternatives to return per token logprob. Strategies pass the job's
    shape to calls that write a visible answer, never to hidden reasoning (thinking, programs)."""

    tools: Tools | None = None
    constraint: Constraint | None = None
    logprobs: bool = False
    top_logprobs: int = 0


NO_SHAPE = Shape()


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token's log-probability and its ``top`` alternatives (token, logprob)."""

    token: str
    logprob: float
    token_id: int = 0
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Candidate:
    """One generated continuation. ``logprobs`` are per-token (empty unless requested);
    ``tokens`` the same with token text and alternatives when the engine returned them."""

    text: str
    finish_reason: FinishReason = "stop"
    completion_tokens: int = 0
    seed: int = 0
    logprobs: tuple[float, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tokens: tuple[TokenLogprob, ...] = ()

    @property
    def mean_logprob(self) -> float | None:
        """Mean token log-probability, ``None`` when the engine returned none."""
        finite = [lp for lp in self.logprobs if math.isfinite(lp)]
        return sum(finite) / len(finite) if finite else None


@dataclass(frozen=True)
class Generation:
    """The answer to one batched policy call: every candidate plus prompt-side usage."""

    candidates: tuple[Candidate, ...]
    prompt_tokens: int = 0
    cached_tokens: int = 0


TextSink = Callable[[str], Awaitable[None]]
ReasoningKind = Literal["tokens", "event"]


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of what the search is doing (ttc.v1.ReasoningDelta): ``kind`` "tokens" is text
    the model decoded, "event" a line the search wrote between model calls. ``source`` names
    the part of the search that wrote it ("candidate 3", "program 2", "beam 1.2", "vote"),
    stable within a job (docs/streaming.md)."""

    source: str
    kind: ReasoningKind
    text: str


#: takes reasoning deltas as they happen; called synchronously (per token), so it must only
#: buffer (the worker batches them into few job events)
ReasoningSink = Callable[[ReasoningDelta], None]
#: receives a policy call's text as the engine decodes it: (candidate index in the call, delta)
CandidateTextSink = Callable[[int, str], Awaitable[None]]
#: receives what a policy call had been sent when it ended without a result (cancelled, timed
#: out, failed mid-stream): the candidates as far as they came, with their tokens counted
PartialSink = Callable[[Generation], None]


@dataclass(frozen=True)
class GenerateCall:
    """One batched policy call: ``n`` candidates of one prompt, one seed each.

    ``shape`` carries tools, an output constraint and ``top_logprobs``; ``presence_penalty``
    and ``frequency_penalty`` are OpenAI's (-2..2, 0: none)."""

    messages: tuple[Message, ...]
    n: int
    seeds: tuple[int, ...]
    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    assistant_prefix: str = ""
    shape: Shape = NO_SHAPE
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0


class Policy(Protocol):
    """Text generation. ``call.n`` candidates of one prompt come from one engine call.

    ``on_text`` receives each candidate's text as the engine decodes it, tagged with the
    candidate's index in the call (the policy's GenerateStream); ``on_partial`` what such a
    call had been sent if it ends early, so its tokens are charged (a unary call that ends
    early has sent nothing)."""

    async def generate(
        self,
        call: GenerateCall,
        *,
        on_text: CandidateTextSink | None = None,
        on_partial: PartialSink | None = None,
    ) -> Generation: ...


@dataclass(frozen=True)
class VerifyCall:
    """One batched verification: many candidates of one problem, one verifier."""

    verifier: str
    problem: tuple[Message, ...]
    candidates: tuple[str, ...]
    reference: str = ""
    aggregation: Aggregation = "min"
    code: Mapping[str, Any] | None = None  # CodeSpec as a JSON-like mapping (tests, entry_point)
    format_pattern: str = ""
    ensemble: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Verdict:
    """A verifier's judgement of one candidate. ``score`` is always a finite value in [0, 1]."""

    score: float
    passed: bool = False
    step_scores: tuple[float, ...] = ()
    feedback: str = ""
    extracted_answer: str = ""

    @staticmethod
    def clamp(value: float) -> float:
        """Degenerate verifier output (NaN, ±inf, out of range) becomes a usable score."""
        if not math.isfinite(value):
            return 0.0 if math.isnan(value) or value < 0 else 1.0
        return min(1.0, max(0.0, value))


@dataclass(frozen=True)
class Verification:
    """Verdicts and what the judge's engine calls cost: ``prompt_tokens`` it prefilled (judge
    prompts and scored continuations), ``cached_tokens`` of those from its prefix cache,
    ``completion_tokens`` it generated."""

    verdicts: tuple[Verdict, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0


class Verifier(Protocol):
    async def verify(self, call: VerifyCall) -> Verification: ...


ExecStatus = Literal["ok", "runtime_error", "timeout", "memory_limit", "output_limit", "sandbox_error"]


@dataclass(frozen=True)
class ProgramRun:
    """One sandboxed run of a model-written program. ``status`` is the program's own outcome;
    an unreachable sandbox is a ``ComponentError``, never a status."""

    status: ExecStatus
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0


class Executor(Protocol):
    """Runs untrusted programs (the sandbox service in production, a fake in unit tests)."""

    async def run(self, code: str, *, wall_seconds: float) -> ProgramRun: ...


class ComponentError(Exception):
    """The policy, verifier or sandbox failed (unreachable, crashed, rejected the call).

    ``code`` is the gRPC status code name (``"UNAVAILABLE"``, ...): it travels as an attribute
    to the job's typed error, never inside ``message``."""

    def __init__(self, component: str, message: str, code: str = "INTERNAL") -> None:
        super().__init__(f"{component}: {code}: {message}")
        self.component = component
        self.message = message
        self.code = code
