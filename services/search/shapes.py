"""Conversions between the job's protobuf shapes (messages with tool calls, ``ToolSpec``,
``OutputConstraint``, token logprobs) and the plain values strategies see (``interfaces.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from services.gen.ttc.v1 import common_pb2, orchestrator_pb2
from services.search.interfaces import (
    RAW_PROMPT_ROLE,
    Constraint,
    Message,
    Shape,
    TokenLogprob,
    Tool,
    ToolCall,
    Tools,
)


def tool_call_of(call: common_pb2.ToolCall) -> ToolCall:
    return ToolCall(call.id, call.name, call.arguments)


def tool_call_proto(call: ToolCall) -> common_pb2.ToolCall:
    return common_pb2.ToolCall(id=call.id, name=call.name, arguments=call.arguments)


def message_of(message: common_pb2.ChatMessage) -> Message:
    return Message(
        message.role,
        message.content,
        tuple(tool_call_of(c) for c in message.tool_calls),
        message.tool_call_id,
        message.name,
    )


def message_proto(message: Message) -> common_pb2.ChatMessage:
    return common_pb2.ChatMessage(
        role=message.role,
        content=message.content,
        tool_calls=[tool_call_proto(c) for c in message.tool_calls],
        tool_call_id=message.tool_call_id,
        name=message.name,
    )


def problem_of(job: orchestrator_pb2.SearchJob) -> tuple[Message, ...]:
    """The job's conversation (tool calls and tool turns included), or its raw prompt."""
    if job.messages:
        return tuple(message_of(m) for m in job.messages)
    return (Message(RAW_PROMPT_ROLE, job.prompt),)


def tools_of(spec: common_pb2.ToolSpec) -> Tools | None:
    """The job's tools, ``None`` when it has none (or ``tool_choice`` is ``none``: the
    model must answer in text, so the tools are not offered)."""
    if not spec.tools or spec.choice == "none":
        return None
    tools = tuple(Tool(t.name, t.description, t.parameters_json, t.strict) for t in spec.tools)
    return Tools(tools, spec.choice or "auto", spec.parallel)


def tools_proto(tools: Tools) -> common_pb2.ToolSpec:
    return common_pb2.ToolSpec(
        tools=[
            common_pb2.Tool(name=t.name, description=t.description, parameters_json=t.parameters_json, strict=t.strict)
            for t in tools.tools
        ],
        choice=tools.choice,
        parallel=tools.parallel,
    )


def constraint_of(constraint: common_pb2.OutputConstraint) -> Constraint | None:
    kind = constraint.WhichOneof("kind")
    if kind == "json_object" and constraint.json_object:
        return Constraint(json_object=True)
    if kind == "json_schema":
        return Constraint(json_schema=constraint.json_schema)
    return None


def constraint_proto(constraint: Constraint) -> common_pb2.OutputConstraint:
    if constraint.json_schema:
        return common_pb2.OutputConstraint(json_schema=constraint.json_schema)
    return common_pb2.OutputConstraint(json_object=constraint.json_object)


def shape_of(job: orchestrator_pb2.SearchJob) -> Shape:
    return Shape(
        tools=tools_of(job.tools),
        constraint=constraint_of(job.response_format),
        logprobs=job.logprobs,
        top_logprobs=job.top_logprobs if job.logprobs else 0,
    )


def token_logprob_of(token: common_pb2.TokenLogprob) -> TokenLogprob:
    return TokenLogprob(
        token.token, token.logprob, token.token_id, tuple((t.token, t.logprob) for t in token.top_logprobs)
    )


def token_logprobs_proto(tokens: Sequence[TokenLogprob], top: int) -> list[common_pb2.TokenLogprob]:
    """Token logprobs for a result, with at most ``top`` alternatives per token."""
    return [
        common_pb2.TokenLogprob(
            token=t.token,
            token_id=t.token_id,
            logprob=t.logprob,
            top_logprobs=[common_pb2.TopLogprob(token=tok, logprob=lp) for tok, lp in t.top[:top]],
        )
        for t in tokens
    ]
