"""Chat Completions and legacy Completions requests, with the gateway's ``ttc`` extension.

Every field OpenAI's current create params define is accepted. Those that change nothing on
this server (caching hints, service tier, safety and prediction hints, ...) are listed in
``NO_EFFECT`` and documented in docs/gateway.md; anything else unknown is a 400 naming it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from services.gateway.protocol.common import (
    MAX_CHOICES,
    MAX_COMPLETION_LOGPROBS,
    MAX_TOP_LOGPROBS,
    Effort,
    StrategyName,
    Strict,
    VerifierName,
)
from services.gateway.protocol.messages import ChatMessage, FunctionTool, ResponseFormat, ToolChoice

# Accepted as OpenAI accepts them, and without effect here (docs/gateway.md says why for each).
NO_EFFECT = (
    "store",
    "metadata",
    "user",
    "service_tier",
    "prompt_cache_key",
    "prompt_cache_options",
    "prompt_cache_retention",
    "safety_identifier",
    "prediction",
    "web_search_options",
    "verbosity",
    "moderation",
    "stream_options.include_obfuscation",
)


class StreamOptions(Strict):
    include_usage: bool = False
    include_obfuscation: bool | None = None


class Reasoning(Strict):
    effort: Effort | None = None


class TTCOptions(Strict):
    """Extension object (``"ttc"`` in the body): pin the strategy and its budget (experts, load tests)."""

    strategy: StrategyName | None = Field(None, description="Strategy to run instead of the routed one.")
    n: int | None = Field(None, ge=1, le=64, description="Candidates (samples, beams, simulations) of the strategy.")
    token_budget: int | None = Field(
        None, ge=1, le=1_000_000, description="Cap on all generated tokens (hidden reasoning included)."
    )
    verifier: VerifierName | None = Field(None, description="Verifier scoring candidates.")
    params: dict[str, float | int | str | bool | dict[str, Any] | list[Any]] | None = Field(
        None,
        description="Strategy-specific parameters (beam width, c_puct, ...), validated by the strategy; objects "
        'where a parameter is one (the code_tests verifier\'s `"code": {"tests": [...], "entry_point": ...}`).',
    )
    reference: str | None = Field(None, max_length=10_000, description="Reference answer for rule verifiers.")
    stream_reasoning: bool | None = Field(
        None,
        description="A streamed reply carries the search's reasoning as it runs (default); false: the answer alone.",
    )


class _Sampling(Strict):
    model: str = Field(..., min_length=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    n: int | None = Field(
        1, ge=1, le=MAX_CHOICES, description="Answers wanted: the search's distinct top answers, best first."
    )
    stop: str | list[str] | None = Field(None, description="Up to 4 stop sequences.")
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    seed: int | None = Field(None, ge=0, le=2**63 - 1)
    presence_penalty: float | None = Field(
        None, ge=-2, le=2, description="Applied to every candidate the search generates (0: none)."
    )
    frequency_penalty: float | None = Field(
        None, ge=-2, le=2, description="Applied to every candidate the search generates (0: none)."
    )
    logit_bias: dict[str, int] | None = Field(
        None, description="Null or empty only: the search's many candidates are not biased token by token."
    )
    user: str | None = None
    reasoning_effort: Effort | None = None
    background: bool = Field(False, description="Run as a background job: reply at once with a job id.")
    ttc: TTCOptions | None = None

    @field_validator("logit_bias")
    @classmethod
    def _no_logit_bias(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        # Accepting a bias and not applying it would change the answer's meaning silently.
        if value:
            raise ValueError("logit_bias is not supported by this server (send null or {})")
        return value

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    def choices(self) -> int:
        return self.n or 1

    def wants_reasoning(self) -> bool:
        """A streamed reply carries the search's reasoning unless the client said ``ttc.stream_reasoning: false``."""
        return self.ttc is None or self.ttc.stream_reasoning is not False


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(..., min_length=1)
    max_tokens: int | None = Field(None, ge=1, description="Cap on each visible answer's tokens.")
    max_completion_tokens: int | None = Field(
        None, ge=1, description="Cap on all tokens the request generates, hidden reasoning included."
    )
    reasoning: Reasoning | None = None
    tools: list[FunctionTool] | None = Field(None, max_length=128)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    modalities: list[Literal["text"]] | None = Field(None, description="Only text output is generated here.")
    audio: dict[str, Any] | None = Field(None, description="Must be null: no audio output here.")
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority", "fast"] | None = None
    prompt_cache_key: str | None = None
    prompt_cache_options: dict[str, Any] | None = None
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    safety_identifier: str | None = None
    prediction: dict[str, Any] | None = None
    web_search_options: dict[str, Any] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    moderation: dict[str, Any] | None = None

    @field_validator("audio")
    @classmethod
    def _no_audio(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            raise ValueError("audio output is not supported (set modalities to ['text'] and drop audio)")
        return value

    @field_validator("top_logprobs")
    @classmethod
    def _top_needs_logprobs(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value and not info.data.get("logprobs"):
            raise ValueError("top_logprobs needs logprobs: true")
        return value

    def wants_logprobs(self) -> bool:
        return bool(self.logprobs)


class CompletionRequest(_Sampling):
    prompt: str | list[str] = Field(..., description="One prompt (a list must hold exactly one).")
    max_tokens: int | None = Field(16, ge=1, description="Cap on each visible answer's tokens.")
    logprobs: int | None = Field(
        None, ge=0, le=MAX_COMPLETION_LOGPROBS, description="Token logprobs with this many alternatives."
    )
    best_of: int | None = Field(
        None, ge=1, le=64, description="Accepted (at least n); reasoning effort decides the candidates here."
    )
    echo: bool | None = False
    suffix: str | None = None

    @field_validator("best_of")
    @classmethod
    def _at_least_n(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value < (info.data.get("n") or 1):
            raise ValueError("best_of must be at least n")
        return value

    def wants_logprobs(self) -> bool:
        return self.logprobs is not None


def top_logprobs_of(req: ChatCompletionRequest | CompletionRequest) -> int:
    if isinstance(req, ChatCompletionRequest):
        return req.top_logprobs or 0
    return req.logprobs or 0
