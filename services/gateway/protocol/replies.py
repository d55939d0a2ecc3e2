"""What the gateway answers: completions (with tool calls, logprobs and n choices), stream
chunks, models, background jobs, errors and health."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from services.gateway.protocol.report import TTCReport, Usage

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "function_call"]
CompletionFinishReason = Literal["stop", "length", "content_filter"]


class FunctionCallOut(BaseModel):
    name: str
    arguments: str = Field(..., description="JSON text of the arguments (validated against the tool's schema).")


class ToolCallOut(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCallOut


class TopLogprobOut(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class TokenLogprobOut(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[TopLogprobOut] = Field(default_factory=list)


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprobOut] | None = None
    refusal: list[TokenLogprobOut] | None = None


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCallOut] | None = None
    reasoning_content: str | None = None


class ChatChoice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: FinishReason | None = "stop"
    logprobs: ChoiceLogprobs | None = None


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    system_fingerprint: str | None = None
    ttc: TTCReport | None = None


class ToolCallFunctionDelta(BaseModel):
    name: str | None = None
    arguments: str | None = None


class ToolCallDelta(BaseModel):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: ToolCallFunctionDelta | None = None


class ReasoningLabel(BaseModel):
    """Which part of the search a streamed ``reasoning_content`` delta comes from (an extension
    field the openai SDK passes through: ``chunk.choices[0].delta.ttc``)."""

    source: str = Field(..., description='The part of the search: "candidate 3", "program 2", "vote", ...')
    kind: str = Field(..., description='"tokens": text the model decoded; "event": a line the search wrote.')


class ChunkDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None
    ttc: ReasoningLabel | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    finish_reason: FinishReason | None = None
    logprobs: ChoiceLogprobs | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None
    ttc: TTCReport | None = None


class CompletionLogprobs(BaseModel):
    tokens: list[str] = Field(default_factory=list)
    token_logprobs: list[float] = Field(default_factory=list)
    top_logprobs: list[dict[str, float]] | None = None
    text_offset: list[int] = Field(default_factory=list)


class CompletionChoice(BaseModel):
    index: int = 0
    text: str
    finish_reason: CompletionFinishReason | None = "stop"
    logprobs: CompletionLogprobs | None = None


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
    kind: Literal["chat.completion", "text_completion", "response"] = Field(
        ...,
        description="The endpoint that made the job; a response job's Responses object is at /v1/responses/resp_{id}.",
    )
    result: ChatCompletionResponse | CompletionResponse | None = None
    error: ErrorDetail | None = None


class Health(BaseModel):
    status: str
    checks: dict[str, Any] = Field(default_factory=dict)
