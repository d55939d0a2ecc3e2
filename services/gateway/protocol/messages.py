"""Chat messages, tools, tool choice and response formats as OpenAI's Chat Completions API takes them.

Shapes only: checks that need the whole request (a ``tool`` message answering a call made
earlier, a tool's parameters schema, a schema the grammar compiler accepts) live in
``services/gateway/job_inputs.py`` and answer 400 naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

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


class _Turn(Strict):
    content: str | list[ContentPart] | None = None
    name: str | None = None

    def text(self) -> str:
        """The message's text, with content parts joined (a refusal reads as its text)."""
        parts: list[str] = []
        if isinstance(self.content, str):
            parts.append(self.content)
        elif self.content is not None:
            parts.extend(p.text if isinstance(p, TextPart) else p.refusal for p in self.content)
        refusal = getattr(self, "refusal", None)
        if refusal:
            parts.append(refusal)
        return "".join(parts)


class SystemMessage(_Turn):
    role: Literal["system"]


class DeveloperMessage(_Turn):
    role: Literal["developer"]


class UserMessage(_Turn):
    role: Literal["user"]


class AssistantMessageParam(_Turn):
    """An earlier assistant turn: its text and/or the tool calls it made."""

    role: Literal["assistant"]
    tool_calls: list[MessageToolCall] | None = Field(None, description="The calls it made.")
    refusal: str | None = Field(None, description="A refusal (shown to the model as text).")
    audio: None = Field(None, description="Accepted for compatibility; must be null (no audio here).")


class ToolMessage(_Turn):
    """A tool's result, answering the call ``tool_call_id`` an earlier assistant turn made."""

    role: Literal["tool"]
    tool_call_id: str = Field(..., min_length=1)


def _role_of(value: Any) -> str | None:
    role = value.get("role") if isinstance(value, dict) else getattr(value, "role", None)
    return f"message[{role}]" if isinstance(role, str) else None


# One turn, by role (the schema OpenAI publishes): the tag names ``message[<role>]`` so error
# paths read ``messages.3.tool_call_id`` (errors.py drops such union tags).
ChatMessage = Annotated[
    Annotated[SystemMessage, Tag("message[system]")]
    | Annotated[DeveloperMessage, Tag("message[developer]")]
    | Annotated[UserMessage, Tag("message[user]")]
    | Annotated[AssistantMessageParam, Tag("message[assistant]")]
    | Annotated[ToolMessage, Tag("message[tool]")],
    Discriminator(
        _role_of,
        custom_error_type="invalid_role",
        custom_error_message="role must be one of system, developer, user, assistant, tool",
    ),
]
AnyMessage = SystemMessage | DeveloperMessage | UserMessage | AssistantMessageParam | ToolMessage


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
