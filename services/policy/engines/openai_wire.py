"""Pure translations of OpenAI-compatible wire formats for the remote engine (no I/O).

Kept apart from ``openai_remote`` so logprob shapes and Prometheus exports of each server
family are unit-tested on recorded text.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from services.common.errors import FailedPrecondition
from services.common.tool_calls import ToolCall, canonical_arguments, new_call_id
from services.policy.engines.base import Constraint, EngineStats, Prompt, Spent, TokenLogprob, ToolSpec
from services.policy.engines.tool_prompt import tool_schema

#: token id used when a server reports token text only (OpenAI logprobs carry no ids)
UNKNOWN_TOKEN_ID = -1

#: per server family: metric names for KV-cache fraction, running, waiting, prefix queries, hits
_FAMILIES: tuple[dict[str, str], ...] = (
    {
        "kv": "vllm:kv_cache_usage_perc",
        "running": "vllm:num_requests_running",
        "waiting": "vllm:num_requests_waiting",
        "queries": "vllm:prefix_cache_queries",
        "hits": "vllm:prefix_cache_hits",
    },
    {"kv": "sglang:token_usage", "running": "sglang:num_running_reqs", "waiting": "sglang:num_queue_reqs"},
    {
        "kv": "llamacpp:kv_cache_usage_ratio",
        "running": "llamacpp:requests_processing",
        "waiting": "llamacpp:requests_deferred",
    },
)


def server_root(base_url: str) -> str:
    """``http://h:8000/v1`` → ``http://h:8000``: tokenize and metrics live beside /v1."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _token_id(token: str) -> tuple[str, int]:
    """vLLM's ``return_tokens_as_token_ids`` writes ``token_id:123``; otherwise the id is unknown."""
    if token.startswith("token_id:") and token[9:].isdigit():
        return token, int(token[9:])
    return token, UNKNOWN_TOKEN_ID


def chat_logprobs(logprobs: dict[str, Any] | None) -> list[TokenLogprob]:
    """``choices[i].logprobs`` of a chat completion → per-token logprobs."""
    result: list[TokenLogprob] = []
    for item in (logprobs or {}).get("content") or []:
        token, token_id = _token_id(str(item.get("token", "")))
        top = []
        for alt in item.get("top_logprobs") or []:
            alt_token, alt_id = _token_id(str(alt.get("token", "")))
            top.append((alt_token, alt_id, float(alt.get("logprob", 0.0))))
        result.append(TokenLogprob(token=token, token_id=token_id, logprob=float(item.get("logprob", 0.0)), top=top))
    return result


def completion_logprobs(logprobs: dict[str, Any] | None) -> list[TokenLogprob]:
    """``choices[i].logprobs`` of a legacy completion (tokens / token_logprobs / top_logprobs).
    The first echoed prompt token has no logprob (null); it is reported as 0.0."""
    if not logprobs:
        return []
    tokens = logprobs.get("tokens") or []
    values = logprobs.get("token_logprobs") or []
    tops = logprobs.get("top_logprobs") or []
    result: list[TokenLogprob] = []
    for i, raw in enumerate(tokens):
        token, token_id = _token_id(str(raw))
        value = values[i] if i < len(values) and values[i] is not None else 0.0
        alternatives = tops[i] if i < len(tops) and tops[i] else {}
        top = sorted(((t, _token_id(t)[1], float(v)) for t, v in alternatives.items()), key=lambda a: -a[2])
        result.append(TokenLogprob(token=token, token_id=token_id, logprob=float(value), top=top))
    return result


#: fractions (one per engine), never added up: two engines at 50% are not one cache at 100%
_FRACTIONS = frozenset(names["kv"] for names in _FAMILIES)


def parse_engine_stats(metrics_text: str) -> EngineStats | None:
    """Engine statistics from a server's Prometheus export over all its label sets (engines,
    models): counts (running, waiting, prefix tokens) are summed, the KV-cache fraction is the
    fullest engine's (the maximum: admission sheds when any engine is full, and a sum of
    fractions is not a fraction); ``None`` when the text holds none of the known server families."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            # Counters appear as ``name_total`` samples of family ``name`` (or of an untyped
            # family ``name_total`` when the export has no TYPE lines); skip ``_created`` etc.
            if sample.name in (family.name, family.name + "_total"):
                key = sample.name.removesuffix("_total")
                if key in _FRACTIONS:
                    values[key] = max(values.get(key, 0.0), float(sample.value))
                else:
                    values[key] = values.get(key, 0.0) + float(sample.value)
    for names in _FAMILIES:
        if names["kv"] in values or names["running"] in values:
            return EngineStats(
                kv_cache_utilization=min(1.0, max(0.0, values.get(names["kv"], 0.0))),
                running_requests=int(values.get(names["running"], 0.0)),
                waiting_requests=int(values.get(names["waiting"], 0.0)),
                prefix_cache_queries=int(values.get(names.get("queries", ""), 0.0)),
                prefix_cache_hits=int(values.get(names.get("hits", ""), 0.0)),
            )
    return None


# -- tools and structured outputs -----------------------------------------------------------


def _wire_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def wire_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """Chat messages in OpenAI's shape, earlier tool calls and tool results included."""
    out: list[dict[str, Any]] = []
    for m in prompt.messages:
        message: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            message["tool_calls"] = [_wire_call(c) for c in m.tool_calls]
        if m.tool_call_id:
            message["tool_call_id"] = m.tool_call_id
        if m.name and m.role == "tool":
            message["name"] = m.name
        out.append(message)
    return out


def wire_tools(spec: ToolSpec | None) -> dict[str, Any]:
    """``tools``, ``tool_choice`` and ``parallel_tool_calls`` for a chat request ({} without tools)."""
    if spec is None or not spec.tools:
        return {}
    tools = [tool_schema(t) for t in spec.tools]
    for wire, tool in zip(tools, spec.tools, strict=True):
        if tool.strict:
            wire["function"]["strict"] = True
    choice: Any = spec.choice
    if choice not in ("auto", "none", "required"):
        choice = {"type": "function", "function": {"name": spec.choice}}
    body: dict[str, Any] = {"tools": tools, "tool_choice": choice}
    if spec.choice != "none":
        body["parallel_tool_calls"] = spec.parallel
    return body


def wire_response_format(constraint: Constraint | None) -> dict[str, Any]:
    """``response_format`` for a chat request ({} when unconstrained)."""
    if constraint is None:
        return {}
    if constraint.kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    schema = json.loads(constraint.schema)
    return {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": schema, "strict": True},
        }
    }


def _read_call(raw: dict[str, Any]) -> ToolCall | None:
    function = raw.get("function") or {}
    name = function.get("name")
    if not name:
        return None
    arguments = function.get("arguments") or "{}"
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    with contextlib.suppress(ValueError):
        arguments = canonical_arguments(arguments)
    return ToolCall(id=raw.get("id") or new_call_id(), name=str(name), arguments=arguments)


def read_tool_calls(message: dict[str, Any] | None) -> list[ToolCall]:
    """``choices[i].message.tool_calls`` → calls (arguments canonical where they parse)."""
    calls = [_read_call(raw) for raw in (message or {}).get("tool_calls") or []]
    return [c for c in calls if c is not None]


class StreamedToolCalls:
    """Assembles the ``delta.tool_calls`` fragments of one streamed choice (id and name come
    first, the arguments in pieces, all keyed by the call's ``index``)."""

    def __init__(self) -> None:
        self.parts: dict[int, dict[str, Any]] = {}

    def feed(self, delta: dict[str, Any]) -> None:
        for frag in delta.get("tool_calls") or []:
            part = self.parts.setdefault(
                int(frag.get("index", 0)), {"id": "", "function": {"name": "", "arguments": ""}}
            )
            part["id"] = frag.get("id") or part["id"]
            function = frag.get("function") or {}
            part["function"]["name"] += function.get("name") or ""
            part["function"]["arguments"] += function.get("arguments") or ""

    def calls(self) -> list[ToolCall]:
        found = [_read_call(self.parts[i]) for i in sorted(self.parts)]
        return [c for c in found if c is not None]


class StreamedLogprobs:
    """The per-token logprobs of one streamed choice (``choices[].logprobs``: ``content`` for
    chat, tokens / token_logprobs / top_logprobs for completions), each event's handed to the
    next delta that carries text, so tokens whose text the server held back come with it.

    A server that streams text without any logprobs (it implements them unary only) makes the
    request fail with FAILED_PRECONDITION, rather than stream a candidate without them."""

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.held: list[TokenLogprob] = []
        self.seen = False

    def feed(self, choice: dict[str, Any], text: str) -> int:
        """Take an event's choice (``text``: its text); returns how many tokens it carried."""
        raw = choice.get("logprobs")
        tokens = chat_logprobs(raw) if self.chat else completion_logprobs(raw)
        self.seen = self.seen or bool(tokens)
        if text and not self.seen:
            raise FailedPrecondition(
                "the remote OpenAI server streams no per-token logprobs (choices[].logprobs); "
                "ask for logprobs without streaming, or use a server that streams them",
                field="sampling.logprobs",
            )
        self.held.extend(tokens)
        return len(tokens)

    def take(self) -> list[TokenLogprob]:
        out, self.held = self.held, []
        return out


def took_prompt(spent: Spent, usage: dict[str, Any] | None) -> None:
    """A streamed event's usage, for a server that sends one (OpenAI's
    ``stream_options.include_usage``, some servers unasked): its prompt tokens and prefix-cache
    hits are the stream's, kept in ``spent`` for the policy's usage (one prompt, however many
    candidates' requests report it, as the unary path counts it)."""
    if not usage:
        return
    spent.prompt_tokens = max(spent.prompt_tokens, int(usage.get("prompt_tokens") or 0))
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    spent.cached_tokens = max(spent.cached_tokens, cached)
