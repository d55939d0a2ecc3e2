"""The Responses API's reply objects: the ``response`` object, its output items and usage.

Field for field the shapes of the openai SDK's ``openai.types.responses`` models (a unit test
parses ours with them), plus the gateway's ``ttc`` report.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from services.gateway.protocol import TTCReport

ResponseStatus = Literal["completed", "failed", "in_progress", "cancelled", "queued", "incomplete"]
ItemStatus = Literal["in_progress", "completed", "incomplete"]


class SummaryText(BaseModel):
    type: Literal["summary_text"] = "summary_text"
    text: str


class ReasoningText(BaseModel):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str


class ReasoningOutput(BaseModel):
    """What the search did (strategy, candidates, votes, verifier) as a reasoning summary, and,
    for a streamed response, what it streamed while it ran (the model's tokens and the search's
    event lines, labelled) as reasoning text."""

    id: str
    type: Literal["reasoning"] = "reasoning"
    summary: list[SummaryText] = Field(default_factory=list)
    content: list[ReasoningText] | None = None
    status: ItemStatus | None = "completed"


class OutputText(BaseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[dict[str, Any]] = Field(default_factory=list)
    logprobs: list[dict[str, Any]] | None = None


class MessageOutput(BaseModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    status: ItemStatus = "completed"
    content: list[OutputText] = Field(default_factory=list)


class FunctionCallOutput(BaseModel):
    id: str
    type: Literal["function_call"] = "function_call"
    call_id: str
    name: str
    arguments: str
    status: ItemStatus = "completed"


OutputItem = ReasoningOutput | MessageOutput | FunctionCallOutput


class InputTokensDetails(BaseModel):
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = Field(0, description="Generated tokens not in the visible output (the search's).")


class ResponseUsage(BaseModel):
    """Summed over every engine call the response caused, as ``/v1/chat/completions``'s usage."""

    input_tokens: int
    input_tokens_details: InputTokensDetails = Field(default_factory=InputTokensDetails)
    output_tokens: int
    output_tokens_details: OutputTokensDetails = Field(default_factory=OutputTokensDetails)
    total_tokens: int


class ResponseError(BaseModel):
    code: str
    message: str
    param: str | None = None
    type: str | None = None


class IncompleteDetails(BaseModel):
    reason: Literal["max_output_tokens", "content_filter"] | None = None


class ResponseObject(BaseModel):
    id: str
    object: Literal["response"] = "response"
    created_at: float
    status: ResponseStatus
    model: str
    output: list[OutputItem] = Field(default_factory=list)
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: str | None = None
    metadata: dict[str, str] | None = None
    parallel_tool_calls: bool = True
    temperature: float | None = None
    top_p: float | None = None
    tool_choice: str | dict[str, Any] = "auto"
    tools: list[dict[str, Any]] = Field(default_factory=list)
    text: dict[str, Any] | None = None
    reasoning: dict[str, Any] | None = None
    max_output_tokens: int | None = None
    previous_response_id: str | None = None
    background: bool | None = None
    store: bool | None = None
    truncation: str | None = None
    service_tier: str | None = None
    user: str | None = None
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None
    completed_at: float | None = None
    usage: ResponseUsage | None = None
    ttc: TTCReport | None = None

    @property
    def output_text(self) -> str:
        return "".join(c.text for item in self.output if isinstance(item, MessageOutput) for c in item.content)


class DeletedResponse(BaseModel):
    id: str
    object: Literal["response.deleted"] = "response.deleted"
    deleted: bool = True
