"""One benchmark request through the official ``openai`` SDK, measured.

Streaming is used so time to first token can be measured: the first chunk that carries any
delta (reasoning progress or answer text) stops the TTFT clock. Usage comes in the final chunk
(``stream_options.include_usage``) and the gateway's ``ttc`` extension object (strategy,
effort applied, difficulty, candidates, verdict, termination, budget, trace id) rides on the
final chunk or on the non-streamed response. Failures become an ``error`` outcome with a kind,
never a wrong answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai

from loadtests.grid import Cell

EXTENSION_KEY = "ttc"


@dataclass
class Reply:
    """What the gateway answered to one request (or how it failed)."""

    text: str = ""
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    ttft_s: float | None = None
    ttfa_s: float | None = None  # time to the first answer (content) token, progress excluded
    latency_s: float = 0.0
    started_at: float = 0.0
    ext: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    error_kind: str = ""


def _extension(obj: Any) -> dict[str, Any]:
    """The gateway's extension object from a response or chunk model (extra fields kept by pydantic)."""
    extra = getattr(obj, "model_extra", None) or {}
    value = extra.get(EXTENSION_KEY)
    return dict(value) if isinstance(value, dict) else {}


def _usage(reply: Reply, usage: Any) -> None:
    if usage is None:
        return
    reply.prompt_tokens = int(usage.prompt_tokens or 0)
    reply.completion_tokens = int(usage.completion_tokens or 0)
    details = getattr(usage, "completion_tokens_details", None)
    reply.reasoning_tokens = int(getattr(details, "reasoning_tokens", 0) or 0)
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    reply.cached_tokens = int(getattr(prompt_details, "cached_tokens", 0) or 0)


def error_kind(exc: BaseException) -> str:
    """A bounded label for a failure, so reports can count failures by kind."""
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    if isinstance(exc, openai.APIStatusError):
        return "http_429" if exc.status_code == 429 else f"http_{exc.status_code // 100}xx"
    return type(exc).__name__


def request_kwargs(
    model: str, messages: list[dict[str, str]], cell: Cell, *, temperature: float, max_tokens: int, seed: int | None
) -> dict[str, Any]:
    """Arguments of ``chat.completions.create`` for one grid cell."""
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "reasoning_effort": cell.effort,
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    if seed is not None:
        kwargs["seed"] = seed
    ext = cell.extension()
    if ext is not None:
        kwargs["extra_body"] = {EXTENSION_KEY: ext}
    return kwargs


async def send(client: openai.AsyncOpenAI, kwargs: dict[str, Any], *, stream: bool = True) -> Reply:
    """Send one request and measure it; exceptions are captured into the reply."""
    reply = Reply(started_at=time.time())
    start = time.perf_counter()
    try:
        if stream:
            parts: list[str] = []
            response = await client.chat.completions.create(
                **kwargs, stream=True, stream_options={"include_usage": True}
            )
            async for chunk in response:
                if chunk.choices:
                    delta = chunk.choices[0].delta
                    content = delta.content or ""
                    reasoning = (getattr(delta, "model_extra", None) or {}).get("reasoning_content") or ""
                    if reply.ttft_s is None and (content or reasoning):
                        reply.ttft_s = time.perf_counter() - start
                    if reply.ttfa_s is None and content:
                        reply.ttfa_s = time.perf_counter() - start
                    parts.append(content)
                    if chunk.choices[0].finish_reason:
                        reply.finish_reason = chunk.choices[0].finish_reason
                _usage(reply, chunk.usage)
                reply.ext.update(_extension(chunk))
            reply.text = "".join(parts)
        else:
            completion = await client.chat.completions.create(**kwargs)
            reply.text = completion.choices[0].message.content or ""
            reply.finish_reason = completion.choices[0].finish_reason or ""
            _usage(reply, completion.usage)
            reply.ext = _extension(completion)
    except (openai.OpenAIError, httpx.HTTPError) as exc:
        reply.error = f"{type(exc).__name__}: {exc}"[:500]
        reply.error_kind = error_kind(exc)
    reply.latency_s = time.perf_counter() - start
    return reply


async def fetch_trace(http: httpx.AsyncClient, base_url: str, trace_id: str) -> dict[str, Any] | None:
    """The search trace as JSON from ``GET /v1/traces/{id}``; ``None`` if it is not available."""
    try:
        response = await http.get(f"{base_url.rstrip('/')}/traces/{trace_id}")
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    data = response.json()
    return data if isinstance(data, dict) else None


def candidate_texts(trace: dict[str, Any]) -> list[str]:
    """Texts of the finished candidates of a search: text-generating nodes (not the prompt or
    bookkeeping such as verify, vote, select, probe) none of whose children generate text."""
    skip = {"prompt", "verify", "vote", "select", "probe", "score"}
    nodes = [n for n in trace.get("nodes") or [] if isinstance(n, dict)]
    generating = [n for n in nodes if n.get("action") not in skip]
    parents = {str(n.get("parent_id") or n.get("parentId") or "") for n in generating}
    return [
        _candidate_text(n) for n in generating if str(n.get("id")) not in parents and str(n.get("text") or "").strip()
    ]


def _candidate_text(node: dict[str, Any]) -> str:
    """A node's answer as a sample: a program-of-thought node's answer is what its program
    printed (its vote key), not the last number in the code; a program that crashed or printed
    nothing is a sample without an answer."""
    execution = node.get("execution")
    if isinstance(execution, dict):
        answer = str(execution.get("answer") or "")
        return f"The answer is {answer}." if answer else "The program printed no answer."
    return str(node.get("text"))
