"""From a request's conversation, tools and response format to the ``SearchJob``'s inputs.

Each check here needs the whole request and answers 400 naming the field, OpenAI-style:
``tools[i].function.parameters`` for a schema that is not a JSON Schema (or, for a strict
tool, one the grammar compiler cannot handle: ``services/common/json_constraint.py``, the
check the engines rely on), ``messages[i].tool_call_id`` for a tool turn that answers no earlier call,
``tool_choice`` for a choice that names no offered tool, ``response_format.json_schema.schema``
for an unusable answer schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from services.common.errors import InvalidArgument
from services.common.json_constraint import SchemaError, check_metaschema, check_schema
from services.gateway.protocol import (
    AnyMessage,
    AssistantMessageParam,
    ChatCompletionRequest,
    CompletionRequest,
    JsonObjectFormat,
    JsonSchemaFormat,
    NamedToolChoice,
    ToolMessage,
    tool_choice_name,
)
from services.gen.ttc.v1 import common_pb2

Request = ChatCompletionRequest | CompletionRequest


@dataclass
class JobInputs:
    """What the request contributes to the job besides sampling: its turns (as the estimator and
    task classifier read them and as protos), tools and output constraint."""

    texts: list[tuple[str, str]] = field(default_factory=list)
    messages: list[common_pb2.ChatMessage] = field(default_factory=list)
    prompt: str = ""
    prompt_field: str = "messages"
    tools: common_pb2.ToolSpec | None = None
    response_format: common_pb2.OutputConstraint | None = None

    @property
    def structured(self) -> bool:
        """Tools are offered (and may be called) or the answer is constrained JSON."""
        offered = self.tools is not None and self.tools.choice != "none"
        return offered or self.response_format is not None


def job_inputs(req: Request) -> JobInputs:
    if isinstance(req, CompletionRequest):
        return JobInputs(prompt=_prompt(req), prompt_field="prompt")
    inputs = JobInputs(messages=_messages(req.messages))
    inputs.texts = [(m.role, m.content) for m in inputs.messages]
    if not any(m.content.strip() or m.tool_calls for m in inputs.messages):
        raise InvalidArgument("the prompt is empty: every message has empty content", field="messages")
    inputs.tools = _tools(req)
    inputs.response_format = _response_format(req)
    return inputs


def _prompt(req: CompletionRequest) -> str:
    prompts = [req.prompt] if isinstance(req.prompt, str) else req.prompt
    if len(prompts) != 1:
        raise InvalidArgument("exactly one prompt per request is supported", field="prompt")
    if not prompts[0].strip():
        raise InvalidArgument("the prompt is empty", field="prompt")
    if req.echo:
        raise InvalidArgument("echo is not supported", field="echo")
    if req.suffix:
        raise InvalidArgument("suffix is not supported", field="suffix")
    return prompts[0]


def _messages(messages: list[AnyMessage]) -> list[common_pb2.ChatMessage]:
    """The turns as protos; a tool turn must answer a call an earlier assistant turn made."""
    calls: dict[str, str] = {}  # call id -> function name
    out = []
    for i, m in enumerate(messages):
        turn = common_pb2.ChatMessage(role="system" if m.role == "developer" else m.role, content=m.text())
        if m.name:
            turn.name = m.name
        for j, call in enumerate((m.tool_calls or []) if isinstance(m, AssistantMessageParam) else []):
            if call.id in calls:
                raise InvalidArgument(
                    f"tool call id {call.id!r} is used twice", field=f"messages[{i}].tool_calls[{j}].id"
                )
            calls[call.id] = call.function.name
            turn.tool_calls.append(
                common_pb2.ToolCall(id=call.id, name=call.function.name, arguments=call.function.arguments)
            )
        if isinstance(m, ToolMessage):
            if m.tool_call_id not in calls:
                raise InvalidArgument(
                    f"tool message answers tool_call_id {m.tool_call_id!r}, but no earlier assistant message made "
                    "a call with that id",
                    field=f"messages[{i}].tool_call_id",
                )
            turn.tool_call_id = m.tool_call_id
            turn.name = m.name or calls[m.tool_call_id]
        out.append(turn)
    return out


def _tools(req: ChatCompletionRequest) -> common_pb2.ToolSpec | None:
    choice = req.tool_choice
    if not req.tools:
        if choice is not None and choice != "none":
            raise InvalidArgument("tool_choice needs tools: the request offers none", field="tool_choice")
        return None
    spec = common_pb2.ToolSpec(
        choice=tool_choice_name(choice, has_tools=True),
        parallel=req.parallel_tool_calls if req.parallel_tool_calls is not None else True,
    )
    names: set[str] = set()
    for i, tool in enumerate(req.tools):
        fn = tool.function
        if fn.name in names:
            raise InvalidArgument(f"two tools are named {fn.name!r}", field=f"tools[{i}].function.name")
        names.add(fn.name)
        parameters = ""
        if fn.parameters is not None:
            parameters = json.dumps(fn.parameters)
            try:  # a strict tool's calls are constrained by a grammar compiled from its schema
                check_schema(parameters) if fn.strict else check_metaschema(fn.parameters)
            except SchemaError as exc:
                raise InvalidArgument(str(exc), field=f"tools[{i}].function.parameters") from None
        spec.tools.append(
            common_pb2.Tool(
                name=fn.name, description=fn.description or "", parameters_json=parameters, strict=bool(fn.strict)
            )
        )
    if isinstance(choice, NamedToolChoice) and choice.function.name not in names:
        raise InvalidArgument(
            f"tool_choice names {choice.function.name!r}, which is not one of the tools ({', '.join(sorted(names))})",
            field="tool_choice.function.name",
        )
    return spec


def _response_format(req: ChatCompletionRequest) -> common_pb2.OutputConstraint | None:
    fmt = req.response_format
    if isinstance(fmt, JsonObjectFormat):
        return common_pb2.OutputConstraint(json_object=True)
    if isinstance(fmt, JsonSchemaFormat):
        schema = fmt.json_schema.schema_
        if schema is None:  # a named format without a schema: any JSON object
            return common_pb2.OutputConstraint(json_object=True)
        text = json.dumps(schema)
        try:
            check_schema(text)
        except SchemaError as exc:
            raise InvalidArgument(str(exc), field="response_format.json_schema.schema") from None
        return common_pb2.OutputConstraint(json_schema=text)
    return None
