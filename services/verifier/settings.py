"""Verifier service settings, read once from ``TTC_VERIFIER_*`` environment variables."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.common.targets import parse_targets


class VerifierSettings(BaseSettings):
    """Where the verifier listens, which services it calls, and how its judges are worded."""

    model_config = SettingsConfigDict(env_prefix="TTC_VERIFIER_", extra="ignore")

    host: str = Field("127.0.0.1", description="Address the verifier's gRPC server binds.")
    port: int = Field(50052, description="gRPC port of the verifier service.")
    metrics_port: int = Field(9102, description="Port of the verifier's Prometheus /metrics endpoint.")
    policy_target: str = Field(
        "127.0.0.1:50051", description="host:port of the policy service (generative ORM/PRM judges)."
    )
    policy_targets: str = Field(
        "",
        description="Further policy deployments by model, 'model=host:port,...': a judge call for a listed model "
        "(a stronger judge, TTC_ORCHESTRATOR_JUDGE_MODEL) goes to its deployment, any other to policy_target.",
    )
    sandbox_target: str = Field("127.0.0.1:50053", description="host:port of the sandbox service (code_tests).")
    policy_timeout_s: float = Field(
        300.0,
        description="Deadline of one policy Score call in seconds, queueing in the engine included (a PRM batch "
        "of many long candidates is one call).",
    )
    sandbox_timeout_s: float = Field(120.0, description="Deadline of one sandbox Execute call, in seconds.")
    max_candidates: int = Field(256, description="Most candidates one Verify call may carry.")
    max_candidate_chars: int = Field(100_000, description="Longest candidate text accepted, in characters.")
    max_pattern_chars: int = Field(500, description="Longest format_pattern regex accepted, in characters.")
    default_model: str = Field(
        "", description="Policy model the generative verifiers use when a request names none; empty = policy default."
    )
    code_concurrency: int = Field(8, description="Candidates the code_tests verifier runs in the sandbox at once.")
    judge_concurrency: int = Field(
        0,
        ge=0,
        description="Policy Score calls a generative verifier has in flight at once; 0 = auto: 1 when the policy's "
        "engine is llama.cpp (concurrent judge calls were 1.3-5x slower on its former serialized engine; with "
        "continuous batching PRM calls were 1.08x faster and ORM calls 1.16x slower, so one at a time stays), "
        "16 otherwise.",
    )
    orm_system_prompt: str = Field(
        "You are a strict grader. You check whether a proposed solution to a problem is correct.",
        description="System message of the ORM judging prompt.",
    )
    orm_question: str = Field(
        "Is the proposed solution correct? Answer with Yes or No only.",
        description="Question closing the ORM judging prompt; the judge's first word is scored.",
    )
    orm_yes: str = Field("Yes", description="ORM continuation meaning 'correct' (first word of the judge's turn).")
    orm_no: str = Field("No", description="ORM continuation meaning 'incorrect'.")
    prm_question: str = Field(
        "Is the last step correct? Answer:",
        description="Question written after each solution prefix in the PRM judging text.",
    )
    prm_yes: str = Field(" Yes", description="PRM continuation meaning 'this step is correct'.")
    prm_no: str = Field(" No", description="PRM continuation meaning 'this step is wrong'.")
    prm_max_steps: int = Field(
        32, description="Most steps the PRM scores per candidate; later steps are merged into the last."
    )
    prm_mode: Literal["prefix_prompts", "shared_prompt"] = Field(
        "prefix_prompts",
        description="PRM call shape: prefix_prompts = one Score per prefix (prefix in the prompt, one-token labels; "
        "cheapest on llama.cpp, whose continuation tokens cost more than prompt tokens), shared_prompt = every "
        "prefix of every candidate as continuations of one shared prompt (fewest calls).",
    )
    prm_max_continuations_per_call: int = Field(
        128, description="Most continuations one PRM Score call carries; larger batches are split into calls."
    )

    @field_validator("policy_targets")
    @classmethod
    def _targets(cls, value: str) -> str:
        parse_targets(value)  # a malformed entry fails at start-up, naming it
        return value
