"""Budget forcing (s1): control how long the model thinks.

The model thinks inside ``think_start`` … ``think_end``. Thinking is generated with
``think_end`` as a stop sequence. If it stops (delimiter or end-of-sequence) before
``min_thinking_tokens``, the delimiter is suppressed and ``wait_text`` ("Wait") is appended
so it keeps thinking (at most ``max_waits`` times). At ``max_thinking_tokens`` thinking is
cut: the delimiter and ``final_prefix`` ("Final Answer:") are forced and the answer is
generated after them. The returned answer is the text after the thinking; the thinking is
hidden reasoning, counted in generated tokens but not in ``answer_tokens``.

This only helps models that learned a thinking format (s1, R1-style distills). A plain
instruct model (Qwen2.5-Coder-Instruct) has no such habit: "Wait" then mostly produces
repetition, so do not expect gains from it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from services.common.errors import InvalidArgument
from services.search.interfaces import TextSink
from services.search.params import Params
from services.search.strategies.base import Strategy
from services.search.strategies.config import StrategyInput, read_n
from services.search.strategies.context import Context
from services.search.strategies.results import Choice, Outcome


@dataclass(frozen=True)
class BudgetForcing(Strategy):
    name: ClassVar[str] = "budget_forcing"
    min_thinking_tokens: int
    max_thinking_tokens: int
    max_waits: int
    answer_max_tokens: int
    think_start: str
    think_end: str
    wait_text: str
    final_prefix: str

    @classmethod
    def from_input(cls, spec: StrategyInput) -> BudgetForcing:
        read_n(spec, 1, maximum=1)
        params = Params(spec.params)
        max_thinking = params.integer("max_thinking_tokens", 1024, minimum=1, maximum=1 << 20)
        min_thinking = params.integer("min_thinking_tokens", 0, minimum=0, maximum=1 << 20)
        if min_thinking > max_thinking:
            raise InvalidArgument("must not exceed max_thinking_tokens", field="strategy.params.min_thinking_tokens")
        strategy = cls(
            min_thinking_tokens=min_thinking,
            max_thinking_tokens=max_thinking,
            max_waits=params.integer("max_waits", 2, minimum=0, maximum=32),
            # The answer is the visible text: the job's max_tokens caps it (thinking is hidden).
            answer_max_tokens=params.integer(
                "answer_max_tokens", min(256, spec.sampling.max_tokens), minimum=1, maximum=spec.sampling.max_tokens
            ),
            think_start=params.string("think_start", "<think>\n"),
            think_end=params.string("think_end", "</think>", non_empty=True),
            wait_text=params.string("wait_text", " Wait,", non_empty=True),
            final_prefix=params.string("final_prefix", "\nFinal Answer:"),
        )
        params.finish()
        return strategy

    async def run(self, ctx: Context) -> Outcome:
        prefix = self.think_start
        thinking_tokens = 0
        waits = 0
        parent = ctx.trace.root.id
        while thinking_tokens < self.max_thinking_tokens:
            # Keep room for the answer: thinking never eats the tokens the answer needs.
            left = ctx.budget.tokens_left()
            reserve = min(self.answer_max_tokens, left // 2)
            cap = min(self.max_thinking_tokens - thinking_tokens, left - reserve)
            if cap <= 0:
                break
            generated = await ctx.generate(
                1,
                parent_id=parent,
                action="think",
                assistant_prefix=prefix,
                max_tokens=cap,
                stop=(self.think_end,),
                offer=False,
                shaped=False,
            )
            if not generated:
                break
            g = generated[0]
            prefix += g.text
            thinking_tokens += g.candidate.completion_tokens
            parent = g.node.id
            if g.candidate.finish_reason == "length" or thinking_tokens >= self.max_thinking_tokens:
                ctx.event("thinking", f"thinking cut at {thinking_tokens} tokens; forcing the answer")
                break
            if thinking_tokens < self.min_thinking_tokens and waits < self.max_waits and g.text.strip():
                waits += 1
                prefix += self.wait_text
                ctx.trace.add(parent, "wait", text=self.wait_text)
                ctx.event("thinking", f"stopped at {thinking_tokens} tokens; appending {self.wait_text.strip()!r}")
                continue
            break
        prefix += f"\n{self.think_end}{self.final_prefix}"
        shown = f"{self.final_prefix.strip()} " if self.final_prefix.strip() else ""
        answer = await ctx.generate(
            1,
            parent_id=parent,
            action="answer",
            assistant_prefix=prefix,
            max_tokens=self.answer_max_tokens,
            stop=(),
            offer=False,
            on_text=_lstripped(ctx.answer.sink(shown)),
            answer=True,
        )
        if not answer:
            return Outcome(None)
        a = answer[0]
        # What streamed: the prefix, then the answer without its leading whitespace.
        text = f"{shown}{a.text.lstrip()}" if a.text.strip() else shown.strip()
        choice = Choice(text, a.node.id, a.candidate.finish_reason, a.candidate.completion_tokens)
        ctx.offer(choice, force=True)
        return Outcome(choice)


def _lstripped(sink: TextSink | None) -> TextSink | None:
    """``sink`` without the whitespace that starts the text (the answer follows "Final Answer:")."""
    if sink is None:
        return None
    started = False

    async def stream(delta: str) -> None:
        nonlocal started
        if not started:
            delta = delta.lstrip()
            started = bool(delta)
        if delta:
            await sink(delta)

    return stream
