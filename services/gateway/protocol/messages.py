"""Chat messages, tools, tool choice and response formats as OpenAI's Chat Completions API takes them.

Shapes only: checks that need the whole request (a ``tool`` message answering a call made
earlier, a tool's parameters schema, a schema the grammar compiler accepts) live in
``services/gateway/job_inputs.py`` and answer 400 naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from services.gateway.protocol.common import Strict

TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"


class CacheBreakpoint(Strict):
    mode: Literal["explicit"]
    ttl: Literal["30m", "12h"] | None = None


class TextPart(Strict):
    type: Literal["text"]
    text: str
    prompt_cache_breakpoint: CacheBreakpoint | None = Field(None, description="Accepted; caching here is automatic.")


class RefusalPart(Strict):
    type: Literal["refusal"]
    refusal: str


ContentPart = Annotated[TextPart | RefusalPart, Field(discriminator="type")]


class FunctionCallBody(Strict):
    name: str = Field(..., min_length=1)
    arguments: str = Field(..., description="The call's arguments as JSON text.")


class MessageToolCall(Strict):
    """A call an earlier assistant turn made (echoed back by the client in the history)."""

    id: str = Field(..., min_length=1)
    type: Literal["function"] = "function"
    function: FunctionCallBody


class AudioRef(Strict):
    id: str


class ChatMessage(Strict):
    """One turn: system/developer/user text, an assistant turn (text and/or tool calls) or a
    ``tool`` turn answering one call by ``tool_call_id``."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[MessageToolCall] | None = Field(None, description="Assistant turns: the calls it made.")
    tool_call_id: str | None = Field(None, description="Tool turns: the id of the call this message answers.")
    refusal: str | None = Field(None, description="Assistant turns: a refusal (shown to the model as text).")
    audio: AudioRef | None = Field(None, description="Accepted for compatibility; must be null (no audio here).")

    @model_validator(mode="after")
    def _role_fields(self) -> ChatMessage:
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError("tool_calls is only allowed on assistant messages")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id of the call it answers")
        if self.tool_call_id is not None and self.role != "tool":
            raise ValueError("tool_call_id is only allowed on tool messages")
        if self.audio is not None:
            raise ValueError("audio is not supported: this server generates text only")
        return self

    def text(self) -> str:
        """The message's text, with content parts joined (a refusal reads as its text)."""
        parts: list[str] = []
        if isinstance(self.content, str):
            parts.append(self.content)
        elif self.content is not None:
            parts.extend(p.text if isinstance(p, TextPart) else p.refusal for p in self.content)
        if self.refusal:
            parts.append(self.refusal)
        return "".join(parts)


class FunctionDefinition(Strict):
    name: str = Field(..., pattern=TOOL_NAME_PATTERN)
    description: str | None = None
    parameters: dict[str, Any] | None = Field(None, description="JSON schema of the arguments object.")
    strict: bool | None = None


class FunctionTool(Strict):
    type: Literal["function"]
    function: FunctionDefinition


class NamedFunction(Strict):
    name: str = Field(..., min_length=1)


class NamedToolChoice(Strict):
    type: Literal["function"]
    function: NamedFunction


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


def tool_choice_name(choice: ToolChoice | None, has_tools: bool) -> str:
    """The ``ToolSpec.choice`` string: auto, none, required or the one tool's name."""
    if choice is None:
        return "auto" if has_tools else "none"
    if isinstance(choice, NamedToolChoice):
        return choice.function.name
    return choice


class TextFormat(Strict):
    type: Literal["text"]


class JsonObjectFormat(Strict):
    type: Literal["json_object"]


class JsonSchemaSpec(Strict):
    name: str = Field(..., pattern=TOOL_NAME_PATTERN)
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema", description="The JSON schema answers follow.")
    strict: bool | None = None

    model_config = Strict.model_config | {"populate_by_name": True}


class JsonSchemaFormat(Strict):
    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


ResponseFormat = Annotated[TextFormat | JsonObjectFormat | JsonSchemaFormat, Field(discriminator="type")]
