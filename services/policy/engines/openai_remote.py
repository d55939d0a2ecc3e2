"""A remote OpenAI-compatible server (vLLM serve, SGLang, llama.cpp server) as a policy engine.

Requests go over HTTP with ``httpx``: chat messages to ``/v1/chat/completions``; raw text, or
chat messages continued by a partial assistant turn, to ``/v1/completions``. A cancelled RPC
cancels the coroutine, which closes the HTTP request; servers such as vLLM abort the
generation when the connection drops.

Candidates: the OpenAI API has one ``seed`` per request. vLLM seeds the ``n`` choices of one
request with ``seed + i``, so consecutive seeds go out as one request with ``n`` (the prompt is
evaluated once); other seed lists, greedy decoding, and choices a server did not return (the
llama.cpp servers ignore ``n``) go out as one request per candidate with its own seed.

Capabilities differ by server and are probed once: vLLM's ``/tokenize`` renders a chat
template server-side (needed for an assistant prefix, for scoring chat prompts and for exact
token counts); llama-cpp-python's ``/extras/tokenize`` and llama.cpp's ``/tokenize`` count raw
text; ``/metrics`` gives engine statistics when the server exports vLLM, SGLang or llama.cpp
metrics. See docs/policy-engines.md for what each server supports.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx

from services.common.aio import merge
from services.common.errors import FailedPrecondition, InvalidArgument, ServiceError, Unavailable
from services.policy.engines.base import (
    Completion,
    ContinuationScore,
    Engine,
    EngineStats,
    FinishReason,
    Generation,
    Prompt,
    Sampling,
    Scoring,
    Spent,
    StreamDelta,
)
from services.policy.engines.openai_wire import (
    StreamedLogprobs,
    StreamedToolCalls,
    chat_logprobs,
    completion_logprobs,
    parse_engine_stats,
    read_tool_calls,
    server_root,
    took_prompt,
    wire_messages,
    wire_response_format,
    wire_tools,
)

if TYPE_CHECKING:
    from services.policy.settings import PolicySettings

log = logging.getLogger(__name__)


def _finish(reason: str | None) -> FinishReason:
    return "length" if reason == "length" else "abort" if reason == "abort" else "stop"


class OpenAIRemoteEngine(Engine):
    """Generation, scoring and tokenization delegated to a remote OpenAI-compatible server."""

    kind = "openai"

    def __init__(self, client: httpx.AsyncClient, base_url: str, remote_model: str, max_context: int) -> None:
        self._client = client
        self._base = base_url.rstrip("/")
        self._root = server_root(self._base)
        self._remote_model = remote_model
        self.model_id = remote_model
        self.max_context = max_context
        self._tokenize_kind: str | None = None  # "vllm", "llamacpp-python", "llamacpp", "none"
        self._warned_metrics = False

    # -- HTTP ------------------------------------------------------------------------------
    async def _post(self, path: str, body: dict[str, Any], root: bool = False) -> dict[str, Any]:
        url = (self._root if root else self._base) + path
        try:
            reply = await self._client.post(url, json=body)
        except httpx.HTTPError as exc:
            raise Unavailable(f"remote OpenAI server {url} unreachable: {exc}") from exc
        if reply.status_code >= 400:
            raise _refusal(
                reply.status_code, f"remote OpenAI server {url} answered {reply.status_code}: {reply.text[:500]}"
            )
        data: dict[str, Any] = reply.json()
        return data

    # -- prompts and tokens ----------------------------------------------------------------
    async def _probe_tokenize(self) -> str:
        """Which tokenize endpoint the server has (asked once)."""
        if self._tokenize_kind is not None:
            return self._tokenize_kind
        probes = (
            ("vllm", "/tokenize", {"model": self._remote_model, "prompt": "a"}),
            ("llamacpp-python", "/extras/tokenize", {"model": self._remote_model, "input": "a"}),
            ("llamacpp", "/tokenize", {"content": "a"}),
        )
        kind = "none"
        for name, path, body in probes:
            try:
                reply = await self._client.post(self._root + path, json=body)
            except httpx.HTTPError:
                continue
            if reply.status_code == 200 and isinstance(reply.json().get("tokens"), list):
                kind = name
                break
        self._tokenize_kind = kind
        return kind

    async def _ids(
        self, text: str = "", messages: list[dict[str, Any]] | None = None, special: bool = True, tools: Any = None
    ) -> list[int]:
        """Token ids from the server's tokenizer; chat messages need vLLM's template rendering."""
        kind = await self._probe_tokenize()
        if messages is not None:
            if kind != "vllm":
                raise FailedPrecondition(
                    "this remote server cannot render the chat template server-side (no vLLM /tokenize)", field="input"
                )
            body: dict[str, Any] = {"model": self._remote_model, "messages": messages, "add_generation_prompt": True}
            if tools:
                body["tools"] = tools
            return [int(t) for t in (await self._post("/tokenize", body, root=True))["tokens"]]
        if kind == "vllm":
            body = {"model": self._remote_model, "prompt": text, "add_special_tokens": special}
            return [int(t) for t in (await self._post("/tokenize", body, root=True))["tokens"]]
        if kind == "llamacpp-python":
            reply = await self._post("/extras/tokenize", {"model": self._remote_model, "input": text}, root=True)
            return [int(t) for t in reply["tokens"]]
        if kind == "llamacpp":
            reply = await self._post("/tokenize", {"content": text, "add_special": special}, root=True)
            return [int(t) for t in reply["tokens"]]
        # No tokenizer endpoint: about four characters per token, ids unknown (0).
        return [0] * max(1, (len(text) + 3) // 4) if text else []

    async def _completion_prompt(self, prompt: Prompt) -> str | list[int]:
        """The /v1/completions prompt: raw text, or the server-rendered chat template's token
        ids followed by the assistant prefix's."""
        if not prompt.messages:
            return prompt.text + prompt.assistant_prefix
        ids = await self._ids(messages=wire_messages(prompt), tools=wire_tools(prompt.tools).get("tools"))
        if prompt.assistant_prefix:
            ids += await self._ids(prompt.assistant_prefix, special=False)
        return ids

    async def tokenize(self, prompt: Prompt) -> list[int]:
        """Exact where the server renders its chat template (vLLM /tokenize) or for raw text;
        for chat messages on other servers, an approximation: the role and content lines
        tokenized as raw text (the template's special tokens are not counted)."""
        if prompt.messages and await self._probe_tokenize() != "vllm":
            lines = "".join(f"{m.role}\n{m.content}\n" for m in prompt.messages)
            return await self._ids(lines + "assistant\n" + prompt.assistant_prefix)
        rendered = await self._completion_prompt(prompt)
        return rendered if isinstance(rendered, list) else await self._ids(rendered)

    # -- generation ------------------------------------------------------------------------
    def _body(self, sampling: Sampling, n: int, seed: int, chat: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._remote_model,
            "n": n,
            "seed": seed,
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
        }
        # OpenAI's penalties pass through as given (servers default them to 0 when absent).
        if sampling.presence_penalty:
            body["presence_penalty"] = sampling.presence_penalty
        if sampling.frequency_penalty:
            body["frequency_penalty"] = sampling.frequency_penalty
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        # Logprobs also count each choice's tokens when one request carries several choices.
        if sampling.logprobs or n > 1:
            if chat:
                body["logprobs"] = True
                body["top_logprobs"] = sampling.top_logprobs
            else:
                body["logprobs"] = sampling.top_logprobs
        return body

    def _chat_body(self, prompt: Prompt, sampling: Sampling, n: int, seed: int) -> dict[str, Any]:
        """A chat request with the tools and the response format passed through: the remote
        server renders the tools, constrains the output and parses its calls."""
        body = self._body(sampling, n, seed, chat=True) | {"messages": wire_messages(prompt)}
        return body | wire_tools(prompt.tools) | wire_response_format(sampling.constraint)

    async def _request(self, prompt: Prompt, sampling: Sampling, n: int, seed: int) -> dict[str, Any]:
        if prompt.messages and not prompt.assistant_prefix:
            return await self._post("/chat/completions", self._chat_body(prompt, sampling, n, seed))
        _no_passthrough(prompt, sampling)
        body = self._body(sampling, n, seed, chat=False) | {"prompt": await self._completion_prompt(prompt)}
        return await self._post("/completions", body)

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> Generation:
        seeds = sampling.seeds
        consecutive = all(seeds[i] == seeds[0] + i for i in range(len(seeds)))
        chat = bool(prompt.messages and not prompt.assistant_prefix)
        found: dict[int, Completion] = {}
        prompt_tokens, cached = 0, 0

        async def collect(reply: dict[str, Any], first: int) -> None:
            nonlocal prompt_tokens, cached
            usage = reply.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens") or 0)
            cached = max(cached, int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0))
            choices = reply.get("choices") or []
            for choice in choices:
                index = first + int(choice.get("index", 0))
                if index >= sampling.n or index in found:
                    continue
                text = (choice["message"].get("content") if chat else choice["text"]) or ""
                tokens = chat_logprobs(choice.get("logprobs")) if chat else completion_logprobs(choice.get("logprobs"))
                count = len(tokens) if tokens else len(choices) == 1 and int(usage.get("completion_tokens") or 0)
                if not count and text:
                    count = len(await self._ids(text, special=False))
                found[index] = Completion(
                    index=index,
                    text=text or "",
                    finish_reason=_finish(choice.get("finish_reason")),
                    completion_tokens=int(count),
                    seed=seeds[index],
                    logprobs=tokens if sampling.logprobs else [],
                    tool_calls=read_tool_calls(choice.get("message")) if chat else [],
                )

        if consecutive and sampling.temperature > 0 and sampling.n > 1:
            await collect(await self._request(prompt, sampling, sampling.n, seeds[0]), 0)
        missing = [i for i in range(sampling.n) if i not in found]
        replies = await asyncio.gather(*(self._request(prompt, sampling, 1, seeds[i]) for i in missing))
        for i, reply in zip(missing, replies, strict=True):
            await collect(reply, i)
        return Generation(
            completions=[found[i] for i in range(sampling.n)], prompt_tokens=prompt_tokens, cached_tokens=cached
        )

    async def generate_stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> AsyncIterator[StreamDelta]:
        """One streamed request per candidate, merged as deltas arrive."""
        chat = bool(prompt.messages and not prompt.assistant_prefix)
        spent = Spent() if spent is None else spent
        async for delta in merge([self._stream_one(prompt, sampling, i, chat, spent) for i in range(sampling.n)]):
            yield delta

    async def _stream_one(
        self, prompt: Prompt, sampling: Sampling, index: int, chat: bool, spent: Spent
    ) -> AsyncIterator[StreamDelta]:
        if chat:
            path, body = "/chat/completions", self._chat_body(prompt, sampling, 1, sampling.seeds[index])
        else:
            _no_passthrough(prompt, sampling)
            body = self._body(sampling, 1, sampling.seeds[index], chat)
            path, body = "/completions", body | {"prompt": await self._completion_prompt(prompt)}
        body["stream"] = True
        count = 0
        calls, lps = StreamedToolCalls(), StreamedLogprobs(chat) if sampling.logprobs else None
        async with self._client.stream("POST", self._base + path, json=body) as reply:
            if reply.status_code >= 400:
                detail = (await reply.aread())[:500].decode("utf-8", errors="replace")
                raise _refusal(reply.status_code, f"remote OpenAI server answered {reply.status_code}: {detail}")
            async for line in reply.aiter_lines():
                if not line.startswith("data:") or line.strip() == "data: [DONE]":
                    continue
                event = json.loads(line[5:])
                took_prompt(spent, event.get("usage"))
                for choice in event.get("choices") or []:
                    delta = choice.get("delta") or {}
                    calls.feed(delta)
                    text = delta.get("content") or "" if chat else choice.get("text") or ""
                    reason = choice.get("finish_reason")
                    # exact with logprobs (one per token), else about one token per event
                    event_tokens = (lps.feed(choice, text) if lps else 0) or int(bool(text or delta.get("tool_calls")))
                    count += event_tokens
                    spent.completion_tokens += event_tokens
                    if text or reason:
                        finish, found = (_finish(reason), calls.calls()) if reason else (None, [])
                        held = lps.take() if lps else []
                        yield StreamDelta(index, text, finish, completion_tokens=count, tool_calls=found, logprobs=held)

    # -- scoring ---------------------------------------------------------------------------
    async def score(
        self, prompt: Prompt, continuations: list[str], top_logprobs: int, request_id: str, spent: Spent | None = None
    ) -> Scoring:
        """Echoed prompt logprobs of prompt + continuation (``echo`` on /v1/completions). With
        token ids (vLLM) the continuation starts at a known position; with text (llama.cpp
        servers) it starts at the first token whose text offset reaches the continuation."""
        rendered = await self._completion_prompt(prompt)

        async def one(continuation: str) -> ContinuationScore:
            body: dict[str, Any] = {
                "model": self._remote_model,
                "max_tokens": 1,
                "temperature": 0.0,
                "echo": True,
                "logprobs": max(top_logprobs, 1),
            }
            if isinstance(rendered, list):
                cont_ids = await self._ids(continuation, special=False)
                body["prompt"] = rendered + cont_ids
                tokens = completion_logprobs((await self._post("/completions", body))["choices"][0]["logprobs"])
                scored = tokens[len(rendered) : len(rendered) + len(cont_ids)]
            else:
                body["prompt"] = rendered + continuation
                raw = (await self._post("/completions", body))["choices"][0]["logprobs"]
                offsets = raw.get("text_offset") or []
                tokens = completion_logprobs(raw)
                end = len(rendered + continuation)
                scored = [t for t, o in zip(tokens, offsets, strict=False) if len(rendered) <= o < end]
            for token in scored:
                token.top = token.top[:top_logprobs]
            return ContinuationScore(tokens=scored)

        scores = await asyncio.gather(*(one(c) for c in continuations))
        prompt_tokens = len(rendered) if isinstance(rendered, list) else len(await self._ids(rendered))
        return Scoring(scores=list(scores), prompt_tokens=prompt_tokens)

    # -- stats and lifecycle ---------------------------------------------------------------
    async def stats(self) -> EngineStats:
        """Parsed from the server's Prometheus /metrics; zeros when it exports none we know."""
        try:
            reply = await self._client.get(self._root + "/metrics")
            text = reply.text if reply.status_code == 200 else ""
        except httpx.HTTPError:
            text = ""
        parsed = parse_engine_stats(text)
        if parsed is None:
            if not self._warned_metrics:
                log.warning("remote server %s exports no vLLM/SGLang/llama.cpp metrics; stats are zeros", self._root)
                self._warned_metrics = True
            return EngineStats(kv_cache_utilization=0.0, running_requests=0, waiting_requests=0)
        return parsed

    async def close(self) -> None:
        await self._client.aclose()


def _refusal(status: int, message: str) -> ServiceError:
    """An error status from the remote server: a request it refuses (4xx: a tool_choice or
    response format it does not implement, say) is FAILED_PRECONDITION, not worth a retry;
    overload and server errors (408, 429, 5xx) are UNAVAILABLE."""
    if 400 <= status < 500 and status not in (408, 429):
        return FailedPrecondition(message)
    return Unavailable(message)


def _no_passthrough(prompt: Prompt, sampling: Sampling) -> None:
    """Tools and response formats pass through the chat endpoint only; a partial assistant
    turn or a raw prompt goes to /v1/completions, which has neither."""
    if prompt.tools is not None and prompt.tools.tools:
        raise InvalidArgument("the remote engine passes tools through chat messages only", field="input.tools")
    if sampling.constraint is not None:
        raise InvalidArgument(
            "the remote engine passes a response format through chat messages only (no assistant prefix)",
            field="sampling.constraint",
        )


async def create_engine(settings: PolicySettings) -> Engine:
    """Connect to ``settings.openai_base_url`` and pick the remote model (``openai_model`` or
    the server's first)."""
    if not settings.openai_base_url:
        raise ValueError("TTC_POLICY_OPENAI_BASE_URL is required for the openai engine")
    headers = {"Authorization": f"Bearer {settings.openai_api_key}"} if settings.openai_api_key else {}
    timeout = httpx.Timeout(connect=10.0, read=None, write=30.0, pool=None)
    client = httpx.AsyncClient(headers=headers, timeout=timeout, limits=httpx.Limits(max_connections=256))
    base = settings.openai_base_url.rstrip("/")
    try:
        reply = await client.get(base + "/models")
        reply.raise_for_status()
        models = reply.json().get("data") or []
    except (httpx.HTTPError, ValueError) as exc:
        await client.aclose()
        raise RuntimeError(f"cannot list models at {base}/models: {exc}") from exc
    names = [m.get("id") for m in models]
    remote = settings.openai_model or (names[0] if names else "")
    if not remote:
        await client.aclose()
        raise RuntimeError(f"{base}/models lists no model; set TTC_POLICY_OPENAI_MODEL")
    if names and remote not in names:
        log.warning("model %s not listed by %s (lists %s); using it anyway", remote, base, names)
    info: dict[str, Any] = next((m for m in models if m.get("id") == remote), {})
    max_context = int(info.get("max_model_len") or settings.n_ctx)
    return OpenAIRemoteEngine(client, base, remote, max_context)
