"""Scripted policies and verifiers: deterministic functions of (prompt, prefix, seed).

They implement the same protocols as the gRPC adapters, so strategies are exercised exactly
as in production, minus the network. Token counts are whitespace-separated words.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from services.search.interfaces import (
    NO_SHAPE,
    Candidate,
    CandidateTextSink,
    ComponentError,
    GenerateCall,
    Generation,
    Message,
    PartialSink,
    ProgramRun,
    Shape,
    TokenLogprob,
    ToolCall,
    Verdict,
    Verification,
    VerifyCall,
)


@dataclass(frozen=True)
class PolicyCall:
    messages: tuple[Message, ...]
    assistant_prefix: str
    n: int
    seeds: tuple[int, ...]
    max_tokens: int
    temperature: float
    stop: tuple[str, ...]
    logprobs: bool
    shape: Shape = NO_SHAPE
    streamed: bool = False
    penalties: tuple[float, float] = (0.0, 0.0)  # (presence, frequency)


Respond = Callable[[PolicyCall, int, int], str]  # (call, index, seed) -> text
# A reply may call tools: text of the form CALLS_MARK + json list of [name, arguments-json] pairs.
CALLS_MARK = "CALLS:"


def words(text: str) -> int:
    return len(text.split())


def truncate(text: str, max_tokens: int) -> tuple[str, str]:
    """Cut ``text`` to ``max_tokens`` words (an engine stopping at max_tokens)."""
    if words(text) <= max_tokens:
        return text, "stop"
    return " ".join(text.split()[:max_tokens]), "length"


@dataclass
class ScriptedPolicy:
    respond: Respond
    fail_on_call: int | None = None  # 1-based index of the call that raises
    empty_on_call: int | None = None  # 1-based index of the call that returns no candidates
    logprob: Callable[[str], float] = lambda text: -0.1 * (len(text) % 7)
    calls: list[PolicyCall] = field(default_factory=list)

    async def generate(
        self,
        request: GenerateCall,
        *,
        on_text: CandidateTextSink | None = None,
        on_partial: PartialSink | None = None,
    ) -> Generation:
        del on_partial  # a scripted call is never cut short
        shape, max_tokens, logprobs = request.shape, request.max_tokens, request.logprobs
        call = PolicyCall(
            request.messages,
            request.assistant_prefix,
            request.n,
            request.seeds,
            max_tokens,
            request.temperature,
            request.stop,
            logprobs,
            shape,
            on_text is not None,
            (request.presence_penalty, request.frequency_penalty),
        )
        self.calls.append(call)
        if self.fail_on_call == len(self.calls):
            raise RuntimeError("engine crashed")
        if self.empty_on_call == len(self.calls):
            return Generation(candidates=(), prompt_tokens=10)
        candidates = []
        for i, seed in enumerate(request.seeds):
            text, finish = truncate(self.respond(call, i, seed), max_tokens)
            calls: tuple[ToolCall, ...] = ()
            if text.startswith(CALLS_MARK) and shape.tools is not None:  # the engine parses calls
                pairs = json.loads(text[len(CALLS_MARK) :])
                calls = tuple(ToolCall(f"call_{seed}_{k}", name, args) for k, (name, args) in enumerate(pairs))
                text, finish = "", "stop"
            lps = tuple([self.logprob(text)] * max(1, words(text))) if logprobs else ()
            tokens = tuple(TokenLogprob(w, lp) for w, lp in zip(text.split(), lps, strict=False)) if logprobs else ()
            if on_text is not None:  # stream word by word, as an engine streams tokens
                for k, word in enumerate(text.split(" ")):
                    await on_text(i, word if k == 0 else " " + word)
            candidates.append(Candidate(text, finish, words(text), seed, lps, calls, tokens))  # type: ignore[arg-type]
        return Generation(tuple(candidates), prompt_tokens=10 + words(request.assistant_prefix))


def answers_by_seed(answers: Sequence[str]) -> Respond:
    """Each candidate answers ``answers[seed % len(answers)]`` after one reasoning line."""

    def respond(call: PolicyCall, index: int, seed: int) -> str:
        del call, index
        return f"Let me think step by step.\n\nThe answer is {answers[seed % len(answers)]}."

    return respond


def stepwise(answers: Sequence[str], steps: int = 3) -> Respond:
    """A solution of ``steps`` reasoning steps then a final answer; honours a "\\n\\n" stop by
    returning one step at a time (step-level search), otherwise the rest of the solution."""

    def respond(call: PolicyCall, index: int, seed: int) -> str:
        del index
        done = call.assistant_prefix.count("\n\n")
        lines = [f"Step {k + 1}: work on part {k + 1} (variant {seed % 3})." for k in range(steps)]
        lines.append(f"The answer is {answers[seed % len(answers)]}.")
        remaining = lines[done:] if done < len(lines) else []
        if not remaining:
            return ""
        if "\n\n" in call.stop:
            return remaining[0]
        return "\n\n".join(remaining)

    return respond


ScoreFn = Callable[[str], float]


@dataclass
class ScriptedVerifier:
    score: ScoreFn
    passed: Callable[[str], bool] | None = None
    fail_on_call: int | None = None
    tokens_per_candidate: int = 0
    calls: list[VerifyCall] = field(default_factory=list)

    async def verify(self, call: VerifyCall) -> Verification:
        self.calls.append(call)
        if self.fail_on_call == len(self.calls):
            raise RuntimeError("verifier crashed")
        verdicts = []
        for text in call.candidates:
            s = self.score(text)
            ok = self.passed(text) if self.passed is not None else (math.isfinite(s) and s >= 0.5)
            steps = tuple(s for _ in text.split("\n\n"))
            verdicts.append(Verdict(score=s, passed=ok, step_scores=steps, feedback=f"score {s}"))
        return Verification(tuple(verdicts), prompt_tokens=self.tokens_per_candidate * len(call.candidates))


def contains(answer: str, hit: float = 1.0, miss: float = 0.1) -> ScoreFn:
    return lambda text: hit if f"answer is {answer}" in text else miss


@dataclass
class ScriptedExecutor:
    """Runs nothing: a program ``print(<text>)`` (or ``print("<text>".strip())``) "prints"
    ``<text>``; ``raise`` crashes; ``while True`` times out; anything else prints nothing.
    ``fail`` makes the sandbox down."""

    fail: bool = False
    runs: list[str] = field(default_factory=list)

    async def run(self, code: str, *, wall_seconds: float) -> ProgramRun:
        self.runs.append(code)
        if self.fail:
            raise ComponentError("sandbox", "connection refused", "UNAVAILABLE")
        if "raise" in code:
            return ProgramRun("runtime_error", stderr="Traceback: boom", exit_code=1, wall_seconds=0.01)
        if "while True" in code:
            return ProgramRun("timeout", exit_code=137, wall_seconds=wall_seconds)
        lines = [line.strip() for line in code.splitlines() if line.strip().startswith("print(")]
        printed = [line[len("print(") : -1].removesuffix(".strip()") for line in lines]
        out = "".join(f"{text.strip(chr(34))}\n" for text in printed)
        return ProgramRun("ok", stdout=out, wall_seconds=0.02)


def programs_by_seed(values: Sequence[str], *, in_order: bool = False) -> Respond:
    """Program requests (our system prompt) answer a fenced ``print("value".strip())`` program
    (it computes, so it votes) chosen by seed, or in order of generation with ``in_order``
    (``value`` may be ``raise`` or ``while True``); other requests state the value."""
    drawn = iter(range(1 << 30))

    def respond(call: PolicyCall, index: int, seed: int) -> str:
        del index
        value = values[(next(drawn) if in_order else seed) % len(values)]
        if call.messages and "Python 3 program" in call.messages[0].content:
            if value == "raise":
                return "```python\nraise ValueError\n```"
            if value == "while True":
                return "```python\nwhile True:\n    pass\n```"
            return f'```python\nx = 1\nprint("{value}".strip())\n```'  # computes (a call), unlike print("42")
        return f"Thinking.\n\nThe answer is {value}."

    return respond
