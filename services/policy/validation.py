"""Request validation and seed derivation for the policy service (pure: no engine, no gRPC I/O).

Every rule raises ``InvalidArgument`` naming the offending field as the proto spells it
(``sampling.n``, ``input``, ``model``), so the gateway can point the client at it. An unknown
model is ``InvalidArgument`` on ``model`` too: the gateway decides whether that is a 404.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterable, Sequence

from services.common.errors import InvalidArgument, require
from services.common.seeds import UINT64, splitmix64
from services.gen.ttc.v1 import policy_pb2
from services.policy.engines.base import Message, Prompt, Sampling
from services.policy.tool_validation import check_tool_turns, to_constraint, to_tool_calls, to_tool_spec

ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})
MAX_TOP_LOGPROBS = 20
MAX_STOP_SEQUENCES = 16
MAX_CONTINUATIONS = 256


def derive_seeds(n: int, base_seed: int | None) -> tuple[int, ...]:
    """``n`` distinct-looking per-candidate seeds from ``base_seed`` (random when absent).

    Deterministic for a given base seed, so a search that records its base seed is replayable;
    candidate ``i`` never shares random state with candidate ``j``.
    """
    base = secrets.randbits(64) if base_seed is None else base_seed & UINT64
    return tuple(splitmix64(base ^ splitmix64(i)) for i in range(n))


def resolve_model(requested: str, served: Iterable[str]) -> str:
    """The served model id for a request's ``model`` (empty means the default, the first)."""
    names = list(served)
    if not requested:
        return names[0]
    require(requested in names, "model", f"model {requested!r} is not served here; available: {', '.join(names)}")
    return requested


def to_prompt(msg: policy_pb2.PromptInput, field: str = "input") -> Prompt:
    """Check and convert a ``PromptInput``: messages or raw text, not both, not empty; tools
    only with messages, tool turns answering earlier calls."""
    has_messages = len(msg.messages) > 0
    require(not (has_messages and msg.prompt), field, "give either messages or prompt, not both")
    require(has_messages or bool(msg.prompt), field, "the prompt is empty: give messages or prompt text")
    messages = []
    for i, m in enumerate(msg.messages):
        require(m.role in ROLES, f"{field}.messages[{i}].role", f"unknown role {m.role!r}; use one of {sorted(ROLES)}")
        calls = to_tool_calls(list(m.tool_calls), m.role, f"{field}.messages[{i}].tool_calls")
        messages.append(Message(m.role, m.content, calls, m.tool_call_id, m.name))
    if has_messages:
        require(any(m.content.strip() or m.tool_calls for m in messages), field, "every message is empty")
        check_tool_turns(list(msg.messages), field)
    elif not msg.prompt.strip():
        raise InvalidArgument("the prompt text is blank", field=field)
    tools = to_tool_spec(msg.tools, f"{field}.tools") if msg.HasField("tools") else None
    require(tools is None or has_messages, f"{field}.tools", "tools need a chat prompt (messages), not raw text")
    return Prompt(messages=tuple(messages), text=msg.prompt, assistant_prefix=msg.assistant_prefix, tools=tools)


def to_sampling(msg: policy_pb2.SamplingParams, max_n: int, max_tokens_limit: int = 0) -> Sampling:
    """Check and convert ``SamplingParams`` (context-window limits are checked later, once the
    prompt is tokenized, by ``check_context``)."""
    require(1 <= msg.n <= max_n, "sampling.n", f"n must be between 1 and {max_n}, got {msg.n}")
    require(
        math.isfinite(msg.temperature) and 0.0 <= msg.temperature <= 2.0,
        "sampling.temperature",
        f"temperature must be between 0 and 2, got {msg.temperature}",
    )
    top_p = msg.top_p or 1.0  # proto3: 0 (unset) means 1
    require(math.isfinite(top_p) and 0.0 < top_p <= 1.0, "sampling.top_p", f"top_p must be in (0, 1], got {top_p}")
    require(msg.max_tokens >= 1, "sampling.max_tokens", "max_tokens must be at least 1")
    if max_tokens_limit:
        require(
            msg.max_tokens <= max_tokens_limit,
            "sampling.max_tokens",
            f"max_tokens must be at most {max_tokens_limit}, got {msg.max_tokens}",
        )
    require(
        msg.top_logprobs <= MAX_TOP_LOGPROBS,
        "sampling.top_logprobs",
        f"top_logprobs must be at most {MAX_TOP_LOGPROBS}, got {msg.top_logprobs}",
    )
    for name in ("presence_penalty", "frequency_penalty"):
        value = getattr(msg, name)
        require(
            math.isfinite(value) and -2.0 <= value <= 2.0,
            f"sampling.{name}",
            f"{name} must be between -2 and 2, got {value}",
        )
    require(len(msg.stop) <= MAX_STOP_SEQUENCES, "sampling.stop", f"at most {MAX_STOP_SEQUENCES} stop sequences")
    require(all(msg.stop), "sampling.stop", "stop sequences must not be empty strings")
    require(len(msg.seeds) in (0, msg.n), "sampling.seeds", f"give no seeds or exactly n={msg.n}, got {len(msg.seeds)}")
    seeds = tuple(msg.seeds) or derive_seeds(msg.n, msg.base_seed if msg.HasField("base_seed") else None)
    return Sampling(
        n=msg.n,
        seeds=seeds,
        max_tokens=msg.max_tokens,
        temperature=float(msg.temperature),
        top_p=float(top_p),
        presence_penalty=float(msg.presence_penalty),
        frequency_penalty=float(msg.frequency_penalty),
        stop=tuple(msg.stop),
        logprobs=msg.logprobs or msg.top_logprobs > 0,
        top_logprobs=msg.top_logprobs,
        constraint=to_constraint(msg.constraint) if msg.HasField("constraint") else None,
    )


def check_context(prompt_tokens: int, max_tokens: int, max_context: int) -> None:
    """The prompt plus ``max_tokens`` must fit the model's context window."""
    require(
        prompt_tokens < max_context,
        "input",
        f"the prompt has {prompt_tokens} tokens; the context window is {max_context}",
    )
    require(
        prompt_tokens + max_tokens <= max_context,
        "sampling.max_tokens",
        f"prompt ({prompt_tokens} tokens) + max_tokens ({max_tokens}) exceeds the context window of {max_context}; "
        f"at most {max_context - prompt_tokens} fit",
    )


def check_score(continuations: Sequence[str], top_logprobs: int) -> None:
    """A score request needs at least one non-empty continuation."""
    require(len(continuations) > 0, "continuations", "give at least one continuation")
    require(len(continuations) <= MAX_CONTINUATIONS, "continuations", f"at most {MAX_CONTINUATIONS} continuations")
    for i, c in enumerate(continuations):
        require(bool(c), f"continuations[{i}]", "continuations must not be empty")
    require(top_logprobs <= MAX_TOP_LOGPROBS, "top_logprobs", f"top_logprobs must be at most {MAX_TOP_LOGPROBS}")
