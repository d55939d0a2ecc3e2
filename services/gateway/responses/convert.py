"""A Responses request (plus the stored conversation it continues) as the gateway's chat request.

The chat request is built in OpenAI's Chat Completions shape and validated by the chat
endpoint's own model, so tools, structured output, token limits and effort mean exactly what
they mean on ``/v1/chat/completions``. A failure names the Responses field (``input[2]``,
``tools[0].parameters``, ``text.format.schema``, ``max_output_tokens``), never a chat one.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from services.common.errors import InvalidArgument
from services.gateway.protocol import ChatCompletionRequest
from services.gateway.responses.request import (
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionChoice,
    MessageItem,
    ReasoningItem,
    ResponseCreateRequest,
    TextFormatJsonObject,
    TextFormatJsonSchema,
)

Item = MessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem
LOGPROBS_INCLUDE = "message.output_text.logprobs"


def item_dicts(items: list[Item]) -> list[dict[str, Any]]:
    """Items as stored for a follow-up (reasoning items are not part of the conversation)."""
    return [
        i.model_dump(mode="json", exclude_none=True, by_alias=True) for i in items if not isinstance(i, ReasoningItem)
    ]


def parse_items(raw: list[dict[str, Any]]) -> list[Item]:
    """Stored items back as models (the request's own union, so stored and sent items agree)."""
    return ResponseCreateRequest.model_validate({"model": "-", "input": raw}).items()


class ChatConversion:
    """Builds the chat messages and remembers which input item each came from (for errors)."""

    def __init__(self, instructions: str | None) -> None:
        self.messages: list[dict[str, Any]] = []
        self.origin: list[int | None] = []  # input index per chat message (None: instructions)
        if instructions:
            self._add({"role": "system", "content": instructions}, None)

    def _add(self, message: dict[str, Any], origin: int | None) -> None:
        self.messages.append(message)
        self.origin.append(origin)

    def add(self, index: int, item: Item) -> None:
        if isinstance(item, MessageItem):
            self._add({"role": item.role, "content": item.text()}, index)
        elif isinstance(item, FunctionCallItem):
            call = {
                "id": item.call_id,
                "type": "function",
                "function": {"name": item.name, "arguments": item.arguments},
            }
            last = self.messages[-1] if self.messages else None
            if last is not None and last["role"] == "assistant" and self.origin[-1] is not None:
                last.setdefault("tool_calls", []).append(call)  # one assistant turn: its text and calls
                if not last.get("content"):
                    last["content"] = None
            else:
                self._add({"role": "assistant", "content": None, "tool_calls": [call]}, index)
        elif isinstance(item, FunctionCallOutputItem):
            self._add({"role": "tool", "tool_call_id": item.call_id, "content": item.text()}, index)

    def input_field(self, message_index: int) -> str:
        origin = self.origin[message_index] if 0 <= message_index < len(self.origin) else None
        return "instructions" if origin is None else f"input[{origin}]"


def _tools(req: ResponseCreateRequest) -> list[dict[str, Any]] | None:
    if req.tools is None:
        return None
    tools = []
    for tool in req.tools:
        function = {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            "strict": tool.strict,
        }
        tools.append({"type": "function", "function": {k: v for k, v in function.items() if v is not None}})
    return tools


def _response_format(req: ResponseCreateRequest) -> dict[str, Any] | None:
    fmt = req.text.format if req.text is not None else None
    if isinstance(fmt, TextFormatJsonObject):
        return {"type": "json_object"}
    if isinstance(fmt, TextFormatJsonSchema):
        spec = {"name": fmt.name, "schema": fmt.schema_, "description": fmt.description, "strict": fmt.strict}
        return {"type": "json_schema", "json_schema": {k: v for k, v in spec.items() if v is not None}}
    return None


def chat_body(req: ResponseCreateRequest, conversion: ChatConversion) -> dict[str, Any]:
    """The Chat Completions body the request stands for (OpenAI's public shape)."""
    body: dict[str, Any] = {"model": req.model, "messages": conversion.messages, "stream": bool(req.stream)}
    choice = req.tool_choice
    optional: dict[str, Any] = {
        "tools": _tools(req),
        "tool_choice": {"type": "function", "function": {"name": choice.name}}
        if isinstance(choice, FunctionChoice)
        else choice,
        "parallel_tool_calls": req.parallel_tool_calls,
        "response_format": _response_format(req),
        "max_completion_tokens": req.max_output_tokens,
        "reasoning": {"effort": req.reasoning.effort} if req.reasoning and req.reasoning.effort else None,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "ttc": req.ttc.model_dump(exclude_none=True) if req.ttc is not None else None,
    }
    if req.top_logprobs or LOGPROBS_INCLUDE in (req.include or []):
        optional["logprobs"] = True
        optional["top_logprobs"] = req.top_logprobs
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


def to_chat(req: ResponseCreateRequest, history: list[Item]) -> tuple[ChatCompletionRequest, ChatConversion]:
    """The chat request for ``history`` (a previous response's input and output) plus this input.

    Items of the history are numbered before this request's input, so ``input[k]`` in an error
    counts from the start of the conversation."""
    conversion = ChatConversion(req.instructions)
    for index, item in enumerate([*history, *req.items()]):
        conversion.add(index, item)
    if not conversion.messages:
        raise InvalidArgument("the input has no message", field="input")
    try:
        return ChatCompletionRequest.model_validate(chat_body(req, conversion)), conversion
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        message = f"invalid value for {{field}}: {first['msg']}"
        field = responses_field(loc, conversion)
        raise InvalidArgument(message.format(field=field), field=field) from None


_RENAMES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^tools[\[.](\d+)\]?\.function\.(.+)$"), r"tools[\1].\2"),
    (re.compile(r"^tools[\[.](\d+)\]?(.*)$"), r"tools[\1]\2"),
    (re.compile(r"^tool_choice\.function\.(.+)$"), r"tool_choice.\1"),
    (re.compile(r"^response_format\.json_schema\.(.+)$"), r"text.format.\1"),
    (re.compile(r"^response_format(.*)$"), r"text.format\1"),
    (re.compile(r"^max_(completion_)?tokens$"), "max_output_tokens"),
    (re.compile(r"^(logprobs|top_logprobs)$"), "top_logprobs"),
    (re.compile(r"^reasoning_effort$"), "reasoning.effort"),
]
_MESSAGE = re.compile(r"^messages(?:[\[.](\d+)\]?)?(.*)$")


def responses_field(field: str, conversion: ChatConversion) -> str:
    """A chat request's field name (``messages[3].tool_call_id``) as the Responses field."""
    match = _MESSAGE.match(field)
    if match:
        if match.group(1) is None:
            return "input"
        rest = match.group(2)
        if "tool_call" in rest:
            rest = ".call_id"
        elif rest.startswith(".content"):
            rest = ".content"
        return conversion.input_field(int(match.group(1))) + rest
    for pattern, replacement in _RENAMES:
        if pattern.match(field):
            return pattern.sub(replacement, field)
    return field


def renamed(err: InvalidArgument, conversion: ChatConversion) -> InvalidArgument:
    """A planning error on the chat request, naming the Responses field instead."""
    if not err.field:
        return err
    field = responses_field(err.field, conversion)
    return InvalidArgument(err.message.replace(err.field, field), field=field)
