"""What the gateway reports about a request: OpenAI ``usage`` and the ``ttc`` extension object."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from services.gateway.protocol.common import Effort


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
    """``ttc.v1.BudgetUse`` field for field (its comments define each count), filled from it by
    the descriptor; a unit test holds the names and number types equal to the proto's, so the
    public schema keeps its own documented model. Unprefixed token fields are the policy's."""

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


class FirstWaveReport(BaseModel):
    """The adaptive vote's first wave: how many candidates it drew and whether they alone settled it."""

    size: int
    agreed: bool = Field(..., description="The first wave alone settled the vote (no further step was taken).")


class AdaptiveReport(BaseModel):
    """How the adaptive vote spent its compute after the first wave, and why it stopped."""

    steps: list[str] = Field(default_factory=list, description="Each later step, e.g. 'other: 2 thought(s)'.")
    stopped: str = Field("", description="agreed, confident, open (prose: nothing to vote on) or cap.")


class StrategyFallback(BaseModel):
    """The routed strategy could not serve the request's features; ``applied`` ran instead."""

    requested: str = Field(..., description="The strategy the routing table chose.")
    applied: str = Field(..., description="The strategy that ran.")
    reason: str = Field(..., description="Why the requested one could not run (the feature it lacks).")


class ModalityReport(BaseModel):
    """How the modality classifier routed a prompt the task-type rules called ``open``."""

    task_type_by_rule: str = Field(..., description="What the rules said: open.")
    program_probability: float = Field(..., ge=0.0, le=1.0, description="P(a program answers it better).")
    threshold: float = Field(..., description="The probability at or above which it is routed to a program.")
    modality: Literal["program", "thought"] = Field(
        ..., description="program: routed as computable (program of thought); thought: routed as open."
    )


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
    task_type: str | None = Field(
        None, description="arithmetic, math_word, code, computable or open: what the router saw."
    )
    modality: ModalityReport | None = Field(
        None, description="Set where the modality classifier decided an open prompt's route (efforts minimal, low)."
    )
    candidates_generated: int = 0
    early_stop: EarlyStopReport | None = Field(
        None, description="Set when adaptive early stopping left candidates undrawn because the vote was settled."
    )
    first_wave: FirstWaveReport | None = Field(
        None, description="Set by the adaptive vote (effort medium and up): its first wave and whether it settled it."
    )
    adaptive: AdaptiveReport | None = Field(None, description="Set by the adaptive vote: its later steps and its stop.")
    verifier_verdict: VerifierVerdict | None = None
    confidence: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="The calibrated probability that the answer is right (docs/confidence.md), from the "
        "strategy's vote: escalate, retry at a higher effort or flag the answer below your threshold. "
        "null where the strategy has no signal to compute it from (one sample, a tree search).",
    )
    termination: str = ""
    budget: BudgetReport = Field(default_factory=BudgetReport)
    budget_used: BudgetUsed = Field(default_factory=BudgetUsed)
    spend: SpendByRole = Field(default_factory=SpendByRole)
    queue_wait_seconds: float = 0.0
    error: JobErrorReport | None = Field(
        None, description="The typed error a search stopped on (termination 'error' with the best answer so far)."
    )
    strategy_fallback: StrategyFallback | None = Field(
        None,
        description="Set when the routed strategy could not run with the request's tools, response_format, "
        "logprobs or n, and another one ran instead.",
    )


class JobErrorReport(BaseModel):
    """A job's typed error (``services.jobs.errors.JobError``) as the ``ttc`` report shows it."""

    code: str = Field(..., description="gRPC status code name, e.g. UNAVAILABLE.")
    message: str
    field: str = ""
    component: str = Field("", description="The failing component: policy, verifier or sandbox.")
