"""``POST /v1/responses`` request body: OpenAI's ``ResponseCreateParams`` as this server takes it.

Input items: messages (``input_text``/``output_text``/``refusal`` parts), ``function_call`` and
``function_call_output``; ``reasoning`` items (what an earlier response returned, echoed back by
clients such as the Agents SDK) are accepted and not shown to the model. Fields that change
nothing here are accepted as OpenAI accepts them (``NO_EFFECT``); any other unknown field is a
400 naming it, and fields whose meaning this server cannot honour (``conversation``, ``prompt``)
are a 400 saying so.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from services.gateway.protocol import Effort, TTCOptions

# Accepted and without effect on this server (docs/gateway.md, "Responses API").
NO_EFFECT = (
    "metadata",
    "user",
    "service_tier",
    "include",
    "prompt_cache_key",
    "prompt_cache_options",
    "prompt_cache_retention",
    "safety_identifier",
    "truncation",
    "max_tool_calls",
    "stream_options",
    "background_options",
    "context_management",
    "moderation",
    "access_programs",
    "image",
    "reasoning.summary",
    "reasoning.generate_summary",
    "text.verbosity",
)
ItemStatus = Literal["in_progress", "completed", "incomplete"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Loose(BaseModel):
    """Echoed items (an earlier response's output) may carry fields newer than this server."""

    model_config = ConfigDict(extra="ignore")


class InputText(Strict):
    type: Literal["input_text"]
    text: str
    prompt_cache_breakpoint: dict[str, Any] | None = None


class OutputTextPart(Loose):
    type: Literal["output_text"]
    text: str


class RefusalPart(Loose):
    type: Literal["refusal"]
    refusal: str


ContentPart = Annotated[InputText | OutputTextPart | RefusalPart, Field(discriminator="type")]


class MessageItem(Strict):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[ContentPart]
    id: str | None = None
    status: ItemStatus | None = None
    phase: Literal["commentary", "final_answer"] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(p.refusal if isinstance(p, RefusalPart) else p.text for p in self.content)


class FunctionCallItem(Loose):
    type: Literal["function_call"]
    call_id: str = Field(..., min_length=1)
    name: str = Field(..., min_length=1)
    arguments: str
    id: str | None = None
    status: ItemStatus | None = None


class FunctionCallOutputItem(Strict):
    type: Literal["function_call_output"]
    call_id: str = Field(..., min_length=1)
    output: str | list[InputText]
    id: str | None = None
    name: str | None = None
    status: ItemStatus | None = None

    def text(self) -> str:
        if isinstance(self.output, str):
            return self.output
        return "".join(p.text for p in self.output)


class ReasoningItem(Loose):
    """An earlier response's search summary, echoed back: accepted, not shown to the model."""

    type: Literal["reasoning"]
    id: str | None = None
    summary: list[dict[str, Any]] = Field(default_factory=list)


def _item_type(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("type", "message"))
    return str(getattr(value, "type", "message"))


InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")],
    Discriminator(_item_type),
]


class FunctionToolDef(Strict):
    """A function tool in the Responses API's flat shape."""

    type: Literal["function"]
    name: str = Field(..., pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    defer_loading: bool | None = None


class FunctionChoice(Strict):
    type: Literal["function"]
    name: str = Field(..., min_length=1)


ToolChoice = Literal["none", "auto", "required"] | FunctionChoice


class TextFormatText(Strict):
    type: Literal["text"]


class TextFormatJsonObject(Strict):
    type: Literal["json_object"]


class TextFormatJsonSchema(Strict):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: Literal["json_schema"]
    name: str = Field(..., pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    schema_: dict[str, Any] = Field(..., alias="schema")
    description: str | None = None
    strict: bool | None = None


TextFormat = Annotated[TextFormatText | TextFormatJsonObject | TextFormatJsonSchema, Field(discriminator="type")]


class TextConfig(Strict):
    format: TextFormat | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


class ReasoningConfig(Strict):
    effort: Effort | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None


class ResponseCreateRequest(Strict):
    model: str = Field(..., min_length=1)
    input: str | list[InputItem] = Field(..., description="A user message, or a list of input items.")
    instructions: str | None = Field(None, description="A system message put first (not carried to follow-ups).")
    reasoning: ReasoningConfig | None = None
    max_output_tokens: int | None = Field(
        None, ge=1, description="Cap on all tokens the response generates, hidden reasoning included."
    )
    tools: list[FunctionToolDef] | None = Field(None, max_length=128)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    previous_response_id: str | None = Field(None, description="Continue from a stored response of this key.")
    store: bool | None = Field(True, description="Keep the response (input and output) for retrieval and follow-ups.")
    background: bool | None = Field(False, description="Reply at once (status queued); poll GET /v1/responses/{id}.")
    stream: bool | None = False
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_logprobs: int | None = Field(None, ge=0, le=20)
    conversation: str | dict[str, Any] | None = Field(None, description="Not supported: use previous_response_id.")
    prompt: dict[str, Any] | None = Field(None, description="Not supported: prompt templates are not stored here.")
    ttc: TTCOptions | None = None
    # Accepted as OpenAI accepts them; no effect here (NO_EFFECT).
    metadata: dict[str, str] | None = None
    user: str | None = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority", "fast"] | None = None
    include: list[str] | None = None
    prompt_cache_key: str | None = None
    prompt_cache_options: dict[str, Any] | None = None
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    safety_identifier: str | None = None
    truncation: Literal["auto", "disabled"] | None = None
    max_tool_calls: int | None = Field(None, ge=1)
    stream_options: dict[str, Any] | None = None
    background_options: dict[str, Any] | None = None
    context_management: list[dict[str, Any]] | None = None
    moderation: dict[str, Any] | None = None
    access_programs: dict[str, Any] | None = None
    image: dict[str, Any] | None = None

    @field_validator("conversation", "prompt")
    @classmethod
    def _unsupported(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("not supported by this server (use previous_response_id and instructions)")
        return value

    def items(self) -> list[MessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem]:
        """The input as items (a string is one user message)."""
        if isinstance(self.input, str):
            return [MessageItem(role="user", content=self.input)]
        return list(self.input)
