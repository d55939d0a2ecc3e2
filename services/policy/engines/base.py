"""The one interface every policy engine implements (llama.cpp, vLLM, remote OpenAI).

Engines speak plain dataclasses, not protobuf: the servicer translates, validates and
counts; an engine only generates. Every method is a coroutine and must stop its engine-side
work when cancelled (``asyncio.CancelledError``), so a cancelled or timed-out RPC leaves no
orphaned generation behind, and must have written what it spent until then into the call's
``Spent`` by the time the cancellation reaches the caller.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal

# The chat value types live once in services/common/chat.py; the engines know the tool types
# by their engine-side names.
from services.common.chat import Message as Message
from services.common.chat import Tool, Tools
from services.common.chat import ToolCall as ToolCall

ToolDef = Tool
ToolSpec = Tools

FinishReason = Literal["stop", "length", "abort"]


@dataclass(frozen=True)
class Prompt:
    """Chat messages (templated by the engine's tokenizer) or raw text, plus an optional
    partial assistant turn appended verbatim after the generation prompt."""

    messages: tuple[Message, ...] = ()
    text: str = ""
    assistant_prefix: str = ""
    tools: ToolSpec | None = None


@dataclass(frozen=True)
class Constraint:
    """Constrained decoding: "json_object" (any JSON object) or "json_schema" (``schema``)."""

    kind: Literal["json_object", "json_schema"]
    schema: str = ""


@dataclass(frozen=True)
class Sampling:
    """Validated sampling parameters; ``seeds`` has exactly ``n`` entries."""

    n: int
    seeds: tuple[int, ...]
    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    #: OpenAI's penalties (-2..2): subtracted from a token's logit once it appeared (presence),
    #: and per time it appeared (frequency), in the candidate's generated tokens
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    top_logprobs: int = 0
    constraint: Constraint | None = None


@dataclass
class Spent:
    """What one engine request has spent so far, kept current by the engine as it works.

    A request stopped before it finishes (cancelled, past its deadline, its client gone)
    returns no ``Generation``, yet the engine decoded tokens for it: the servicer counts
    these (``ttc_tokens_total``, and the abort's own counter) so no decoded token goes
    uncounted. ``prompt_tokens`` are the prompt tokens the engine has taken in (``cached_tokens``
    of them from its prefix cache), ``completion_tokens`` every candidate's tokens together."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class TokenLogprob:
    token: str
    token_id: int
    logprob: float
    top: list[tuple[str, int, float]] = field(default_factory=list)


@dataclass
class Completion:
    index: int
    text: str
    finish_reason: FinishReason
    completion_tokens: int
    seed: int
    logprobs: list[TokenLogprob] = field(default_factory=list)
    #: calls parsed from the text (``text`` then holds only the content outside them)
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass
class Generation:
    completions: list[Completion]
    prompt_tokens: int
    cached_tokens: int = 0


@dataclass
class StreamDelta:
    """A piece of candidate ``index``; the final delta of a candidate has ``finish_reason``
    (and, when tools were given, the calls parsed from the candidate's text).

    With ``sampling.logprobs``, ``logprobs`` are those of the tokens whose text is in ``text``
    (a token whose text an engine holds back comes with the delta that carries it), and a
    candidate's final delta carries every token left: concatenated over its deltas they are
    what ``generate`` returns as the candidate's ``Completion.logprobs``. An engine that cannot
    give them while streaming refuses such a request rather than stream without them."""

    index: int
    text: str
    finish_reason: FinishReason | None = None
    completion_tokens: int = 0
    tool_calls: list[ToolCall] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)


@dataclass
class ContinuationScore:
    tokens: list[TokenLogprob]

    @property
    def total_logprob(self) -> float:
        return sum(t.logprob for t in self.tokens)


@dataclass
class Scoring:
    scores: list[ContinuationScore]
    prompt_tokens: int


@dataclass
class EngineStats:
    kv_cache_utilization: float
    running_requests: int
    waiting_requests: int
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    peak_batch_requests: int = 0  # the most requests one decode step advanced together so far


class Engine(ABC):
    """A loaded model that can generate, score and tokenize."""

    #: engine kind: "llamacpp", "vllm" or "openai"
    kind: str
    #: the model id clients name in requests
    model_id: str
    #: context window in tokens
    max_context: int

    @abstractmethod
    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> Generation:
        """Generate ``sampling.n`` candidates sharing one evaluation of the prompt, keeping
        ``spent`` current as it goes (read when the call is cancelled)."""

    @abstractmethod
    def generate_stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> AsyncIterator[StreamDelta]:
        """Like ``generate`` but yields text deltas as they are decoded."""

    @abstractmethod
    async def score(
        self, prompt: Prompt, continuations: list[str], top_logprobs: int, request_id: str, spent: Spent | None = None
    ) -> Scoring:
        """Log-probability of each continuation's tokens after the prompt (the tokens it has
        evaluated so far are ``spent.prompt_tokens``)."""

    @abstractmethod
    async def tokenize(self, prompt: Prompt) -> list[int]:
        """Token ids of the fully rendered prompt (chat template applied)."""

    @abstractmethod
    async def stats(self) -> EngineStats:
        """Live statistics read from the engine itself."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model and any engine processes."""
