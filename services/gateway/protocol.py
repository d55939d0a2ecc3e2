"""Every OpenAI request/response model the gateway speaks, and its own extension objects.

One module so the OpenAPI schema (and schemathesis) sees exactly what clients send and get.
Requests forbid unknown fields, as OpenAI's API does ("Unrecognized request argument"), so a
typo is a 400 naming the field rather than a silently ignored knob.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
StrategyName = Literal[
    "single",
    "self_consistency",
    "weighted_vote",
    "best_of_n",
    "beam_search",
    "dvts",
    "mcts",
    "ab_mcts_a",
    "ab_mcts_m",
    "budget_forcing",
    "revision",
    "program_of_thought",
]
VerifierName = Literal["math_equivalence", "format", "code_tests", "orm", "prm", "ensemble"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- requests


class TextPart(_Strict):
    type: Literal["text"]
    text: str


class ChatMessage(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None

    def text(self) -> str:
        """The message's text, with content parts joined."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class StreamOptions(_Strict):
    include_usage: bool = False


class Reasoning(_Strict):
    effort: Effort | None = None


class TTCOptions(_Strict):
    """Extension object (``"ttc"`` in the body): pin the strategy and its budget (experts, load tests)."""

    strategy: StrategyName | None = Field(None, description="Strategy to run instead of the routed one.")
    n: int | None = Field(None, ge=1, le=64, description="Candidates (samples, beams, simulations) of the strategy.")
    token_budget: int | None = Field(
        None, ge=1, le=1_000_000, description="Cap on all generated tokens (hidden reasoning included)."
    )
    verifier: VerifierName | None = Field(None, description="Verifier scoring candidates.")
    params: dict[str, float | int | str | bool] | None = Field(
        None, description="Strategy-specific parameters (beam width, c_puct, ...), validated by the strategy."
    )
    reference: str | None = Field(None, max_length=10_000, description="Reference answer for rule verifiers.")


class _Sampling(_Strict):
    model: str = Field(..., min_length=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    n: int = Field(1, ge=1, le=1, description="Only 1: test-time compute spends its candidates inside the search.")
    stop: str | list[str] | None = Field(None, description="Up to 4 stop sequences.")
    stream: bool = False
    stream_options: StreamOptions | None = None
    seed: int | None = Field(None, ge=0, le=2**63 - 1)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    user: str | None = None
    reasoning_effort: Effort | None = None
    background: bool = Field(False, description="Run as a background job: reply at once with a job id.")
    ttc: TTCOptions | None = None

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(..., min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    reasoning: Reasoning | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    parallel_tool_calls: bool | None = None
    logprobs: bool | None = None

    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


class CompletionRequest(_Sampling):
    prompt: str | list[str] = Field(..., description="One prompt (a list must hold exactly one).")
    max_tokens: int | None = Field(16, ge=1)
    echo: bool = False
    suffix: str | None = None

    def requested_max_tokens(self) -> int | None:
        return self.max_tokens


# ---------------------------------------------------------------- responses


class PromptTokensDetails(BaseModel):
    cached_tokens: int = Field(0, description="Prompt tokens an engine served from its prefix cache.")


class CompletionTokensDetails(BaseModel):
    reasoning_tokens: int = Field(0, description="Generated tokens that are not in the visible answer.")


class Usage(BaseModel):
    """OpenAI usage, summed over every engine call the request caused (``ttc.spend``'s roles):
    ``prompt_tokens`` every token an engine processed as input (policy prompts, verifier judge
    prompts, the probe's), ``completion_tokens`` every token an engine generated, of which
    ``reasoning_tokens`` are the ones not in the visible answer."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails = Field(default_factory=PromptTokensDetails)
    completion_tokens_details: CompletionTokensDetails = Field(default_factory=CompletionTokensDetails)


class VerifierVerdict(BaseModel):
    verifier: str
    passed: bool
    score: float


class BudgetReport(BaseModel):
    max_generated_tokens: int = 0
    max_policy_calls: int = 0
    max_verifier_calls: int = 0
    deadline_seconds: float = 0.0


class BudgetUsed(BaseModel):
    """``ttc.v1.BudgetUse`` field for field (its comments define each count; a unit test holds
    the two equal). Unprefixed token fields are the policy's."""

    generated_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    policy_calls: int = 0
    verifier_calls: int = 0
    verifier_prompt_tokens: int = 0
    verifier_cached_tokens: int = 0
    verifier_generated_tokens: int = 0
    probe_prompt_tokens: int = 0
    probe_cached_tokens: int = 0
    probe_generated_tokens: int = 0
    sandbox_runs: int = 0
    sandbox_seconds: float = 0.0
    wall_seconds: float = 0.0


class RoleTokens(BaseModel):
    """Tokens one role made an engine process: ``prompt_tokens`` as input (prefill, of which
    ``cached_tokens`` came from the prefix cache) and ``generated_tokens`` decoded."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0


class SandboxSpend(BaseModel):
    runs: int = Field(0, description="Model-written programs run in the sandbox.")
    seconds: float = Field(0.0, description="Their summed wall-clock time in the sandbox.")


class SpendByRole(BaseModel):
    """The request's spend by role; ``usage`` is the sum of the three token roles."""

    policy: RoleTokens = Field(default_factory=RoleTokens, description="The search's candidates and steps.")
    verifier: RoleTokens = Field(default_factory=RoleTokens, description="Generative judges (ORM, PRM).")
    probe: RoleTokens = Field(default_factory=RoleTokens, description="The gateway's difficulty probe.")
    sandbox: SandboxSpend = Field(default_factory=SandboxSpend)


class EarlyStopReport(BaseModel):
    """What adaptive early stopping saved: the candidates the budget allowed but a settled vote
    made unnecessary, and the generated tokens they would have cost (drawn candidates' mean)."""

    candidates_saved: int
    tokens_saved: int


class TTCReport(BaseModel):
    """Extension object (``"ttc"`` in the response): what the system did with the request."""

    job_id: str
    trace_id: str = ""
    strategy: str
    n: int = 1
    effort_requested: Effort
    effort_applied: Effort
    degraded_by: list[str] = Field(default_factory=list, description="Admission signals that lowered the effort.")
    difficulty: float | None = None
    difficulty_bin: str | None = None
    task_type: str | None = Field(None, description="arithmetic, math_word, code or open: what the router saw.")
    candidates_generated: int = 0
    early_stop: EarlyStopReport | None = Field(
        None, description="Set when adaptive early stopping left candidates undrawn because the vote was settled."
    )
    verifier_verdict: VerifierVerdict | None = None
    termination: str = ""
    budget: BudgetReport = Field(default_factory=BudgetReport)
    budget_used: BudgetUsed = Field(default_factory=BudgetUsed)
    spend: SpendByRole = Field(default_factory=SpendByRole)
    queue_wait_seconds: float = 0.0
    error: JobErrorReport | None = Field(
        None, description="The typed error a search stopped on (termination 'error' with the best answer so far)."
    )


class JobErrorReport(BaseModel):
    """A job's typed error (``services.jobs.errors.JobError``) as the ``ttc`` report shows it."""

    code: str = Field(..., description="gRPC status code name, e.g. UNAVAILABLE.")
    message: str
    field: str = ""
    component: str = Field("", description="The failing component: policy, verifier or sandbox.")


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    reasoning_content: str | None = None


class ChatChoice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop", "length", "content_filter"] | None = "stop"
    logprobs: None = None


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def now() -> int:
    return int(time.time())


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    system_fingerprint: str | None = None
    ttc: TTCReport | None = None


class ChunkDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    finish_reason: Literal["stop", "length", "content_filter"] | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None
    ttc: TTCReport | None = None


class CompletionChoice(BaseModel):
    index: int = 0
    text: str
    finish_reason: Literal["stop", "length", "content_filter"] | None = "stop"
    logprobs: None = None


class CompletionResponse(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None
    system_fingerprint: str | None = None
    ttc: TTCReport | None = None


class Model(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str
    max_context: int | None = None


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Model]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class Job(BaseModel):
    """A background job: created by ``"background": true``, polled at ``/v1/jobs/{id}``."""

    id: str
    object: Literal["ttc.job"] = "ttc.job"
    status: JobStatus
    created_at: float
    model: str
    kind: Literal["chat.completion", "text_completion"]
    result: ChatCompletionResponse | CompletionResponse | None = None
    error: ErrorDetail | None = None


class Health(BaseModel):
    status: str
    checks: dict[str, Any] = Field(default_factory=dict)
