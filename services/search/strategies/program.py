"""Program-of-thought: the policy writes a program, the sandbox runs it, outputs vote.

A small model that cannot do the arithmetic can write the program that does (PoT, Chen et
al. 2022; PAL, Gao et al. 2022): computation leaves the weights. Each candidate is a program;
the sandbox service runs it (no network, CPU/memory/process limits, private tmp - model-written
code is untrusted) and the last line it prints is its answer. With n > 1 the programs' answers
vote under tolerant keys (:func:`services.common.answers.vote_key`); programs that crash,
time out, print nothing, or print a value they did not compute (``print(32)``: see
:mod:`~services.search.strategies.program_checks`) abstain. When every program drawn
abstains, up to ``params.retries`` more are sampled while the budget allows.

The question's instructions about the answer's form ("reply with the number", "End with
'Answer: …'") never reach the program's prompt (:func:`services.common.answer_form.strip_form`):
a program copies them into what it prints. The chosen answer is the winning program's
printed value (``Choice.answer``), rendered in the asked form when the reply is made
(:mod:`services.search.presentation`); the program, its output and the vote are the
evidence (``Choice.text``), which the reply returns as reasoning. Programs vote under keys,
but the winning group's program shown is the one whose printed spelling the reply should
show (:func:`services.common.answer_numbers.shown_spelling`: ``137/260`` where a fraction is
asked for, else the group's most common spelling), so the reply is a value a program printed.

Modes (``params.mode``):

- ``program``: programs only; when no program produces an answer, fall back to one
  chain-of-thought sample of the original problem (so the request is still answered).
- ``hybrid``: ``params.cot`` chain-of-thought samples vote alongside the programs with weight
  ``params.cot_weight`` each (programs weigh 1): when programs disagree, reasoning breaks ties.

Sampling draws in waves (greedy first, then sampled at the job's temperature) and stops early
when the vote is settled (:mod:`services.search.strategies.stopping`); the votes not
drawn are reported as saved in the final progress event and on the vote trace node.

The chosen answer carries the vote's confidence signals (:mod:`~.signals`), family ``pot``, or
``hybrid`` when chains of thought vote too (with whether the programs' and the thoughts' leaders
agree): every ballot drawn, resampled programs and abstentions included. When the fallback chain
of thought answers alone, its share is its own (1.0) and the programs count as abstentions.
"""

from __future__ import annotations

import ast
import asyncio
import re
from dataclasses import dataclass
from typing import ClassVar, Literal

from services.common.answer_form import parse_form, strip_form
from services.common.answer_numbers import shown_spelling
from services.common.answers import extract_code, normalize_for_vote, program_answer, requested_decimals
from services.common.confidence import ConfidenceSignals
from services.common.errors import InvalidArgument
from services.search.interfaces import Message
from services.search.params import Params
from services.search.strategies.base import Strategy
from services.search.strategies.config import StrategyInput, read_n
from services.search.strategies.context import Context, Generated, GenRequest
from services.search.strategies.program_checks import program_vote
from services.search.strategies.results import Choice, Outcome
from services.search.strategies.signals import HYBRID, POT, agreement, fallback_signals, vote_signals
from services.search.strategies.stopping import should_stop, wave_sizes
from services.search.strategies.text import question_text

Mode = Literal["program", "hybrid"]
MODES: tuple[str, ...] = ("program", "hybrid")

PROGRAM_SYSTEM = (
    "You solve problems by writing a short Python 3 program. The program must compute the answer "
    "and print only the final answer (a number, or the requested value). Use exact arithmetic "
    "(integers, fractions.Fraction) where it helps, and round only if the question asks. Do not "
    "read input. Write no comments and no explanation: reply with one ```python code block only. "
    "Ignore any other requested answer format: the program's printed output is the answer."
)
PROGRAM_INSTRUCTION = (
    "Do not solve this by hand: reply with only a short ```python code block, without comments, "
    "whose program computes and prints the answer."
)
# A program worth running is short; a longer completion is the model explaining instead of coding.
PROGRAM_MAX_TOKENS = 512
# Resampled programs (after every drawn one abstained) are drawn at least this hot: a greedy
# redraw would write the same program again.
RESAMPLE_TEMPERATURE = 0.7


# Worked examples before the question (PAL's few-shot prompting): without them the packaged
# 0.5B model often answers a bare guess ("12") instead of code (tests/unit/data/program_outputs.json).
PROGRAM_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("A box holds 12 eggs. How many eggs are in 7 boxes?", "eggs_per_box = 12\nboxes = 7\nprint(eggs_per_box * boxes)"),
    ("How many times does the letter 's' appear in 'mississippi'?", "word = 'mississippi'\nprint(word.count('s'))"),
)


def program_messages(problem: tuple[Message, ...]) -> tuple[Message, ...]:
    """The problem's conversation with the program-writing instructions placed last, where a
    small model follows them: the caller's system text first (as context, without its answer
    format instructions), then ours; the last user turn gets the question without its form
    instructions (a unit the answer is wanted in stays: it changes the number), then ours."""
    context = [strip_form(m.content) for m in problem if m.role == "system"]
    turns = [m for m in problem if m.role != "system"]
    system = ("Context from the caller:\n" + "\n\n".join(context) + "\n\n" if context else "") + PROGRAM_SYSTEM
    if turns and turns[-1].role in ("user", "raw"):
        question = turns[-1].content
        turns[-1] = Message("user", f"{strip_form(question, parse_form(question))}\n\n{PROGRAM_INSTRUCTION}")
    examples = [
        m
        for q, code in PROGRAM_EXAMPLES
        for m in (Message("user", f"{q}\n\n{PROGRAM_INSTRUCTION}"), Message("assistant", f"```python\n{code}\n```"))
    ]
    return (Message("system", system), *examples, *turns)


def program_source(text: str) -> str | None:
    """The program in a completion: the last fenced block, else the whole text if it parses.

    A last bare expression is printed, as a REPL would (``x * 3`` → ``print(x * 3)``), since
    small models often end with the value instead of printing it."""
    code = extract_code(text)
    if code is None:
        code = text.strip()
    if not code:
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        stated = _STATED_RESULT.match(code)
        if stated is None or not _is_expression(stated.group(1)):
            return None  # it cannot run: abstain without spending a sandbox run
        return f"print({stated.group(1).strip()})"  # "13 * 17 = 221": the expression computes, the guess is dropped
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1].value
        is_print = isinstance(last, ast.Call) and isinstance(last.func, ast.Name) and last.func.id == "print"
        if not is_print:
            lines = code.splitlines()
            start, end = tree.body[-1].lineno - 1, (tree.body[-1].end_lineno or tree.body[-1].lineno)
            expression = "\n".join(lines[start:end])
            code = "\n".join([*lines[:start], f"print({expression})", *lines[end:]])
    return code


# A one-line reply "EXPRESSION = VALUE" ("2 ** 10 = 1024"): the model wrote the computation and
# a guess at its value; the expression is the program.
_STATED_RESULT = re.compile(r"^\s*([^=\n]*\d[^=\n]*?)\s*=\s*[-+]?[\d,]*\.?\d+\s*$")


def _is_expression(text: str) -> bool:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return False
    return any(isinstance(n, (ast.BinOp, ast.Call)) for n in ast.walk(tree))


@dataclass
class Ballot:
    """One candidate's vote: a program's run or a chain-of-thought answer."""

    generated: Generated
    key: str  # "" abstains
    weight: float
    program: str = ""
    output: str = ""
    answer: str = ""  # the value it printed (program_answer)
    abstained: str = ""  # why a program that ran does not vote
    thought: bool = False  # a chain-of-thought ballot (the hybrid's, or the fallback)


def evidence_text(chosen: Ballot, ballots: list[Ballot], votes: dict[str, float], winner: str) -> str:
    """The evidence behind the answer: the chosen program, what it printed, and the vote
    (with the programs that abstained and why), ending with the answer stated (so answer
    extraction reads the value, not an assignment in the code). A chain-of-thought winner
    is its own evidence."""
    if not chosen.program:
        return chosen.generated.text
    total = sum(b.weight for b in ballots) or 1.0
    lines = [f"```python\n{chosen.program}\n```", f"Output: {chosen.output.strip()}"]
    tally = ", ".join(f"{key!r}: {weight:g}" for key, weight in sorted(votes.items(), key=lambda kv: -kv[1]))
    lines.append(f"Vote: {votes[winner]:g} of {total:g} vote weight on {winner!r} ({tally}).")
    abstained = [b.abstained for b in ballots if b.abstained]
    if abstained:
        lines.append(f"Abstained: {len(abstained)} program(s) ({'; '.join(sorted(set(abstained)))}).")
    lines.append(f"The answer is {chosen.answer}.")
    return "\n\n".join(lines)


@dataclass(frozen=True)
class ProgramOfThought(Strategy):
    name: ClassVar[str] = "program_of_thought"
    n: int = 1
    mode: Mode = "program"
    cot: int = 2
    cot_weight: float = 0.5
    early_stop: bool = True
    confidence: float = 0.9
    first_wave: int = 3
    timeout_s: float = 5.0
    fallback: bool = True
    retries: int = 2

    @classmethod
    def from_input(cls, spec: StrategyInput) -> ProgramOfThought:
        n = read_n(spec, 1, minimum=1, maximum=64)
        if spec.verifier:
            raise InvalidArgument(
                "program_of_thought votes on executed outputs; it takes no verifier", "strategy.verifier"
            )
        params = Params(spec.params)
        mode = params.string("mode", "program", choices=MODES)
        cot = params.integer("cot", 2 if mode == "hybrid" else 0, minimum=0, maximum=64)
        if mode == "program" and cot:
            raise InvalidArgument("chain-of-thought votes need mode 'hybrid'", field="strategy.params.cot")
        strategy = cls(
            n=n,
            mode=mode,  # type: ignore[arg-type]
            cot=cot,
            cot_weight=params.number("cot_weight", 0.5, minimum=0.0, maximum=10.0),
            early_stop=params.boolean("early_stop", True),
            confidence=params.number("confidence", 0.9, minimum=0.5, maximum=1.0),
            first_wave=params.integer("first_wave", 3, minimum=1, maximum=64),
            timeout_s=params.number("timeout_s", 5.0, minimum=0.5, maximum=60.0),
            fallback=params.boolean("fallback", True),
            retries=params.integer("retries", 2, minimum=0, maximum=16),
        )
        params.finish()
        return strategy

    async def run(self, ctx: Context) -> Outcome:
        decimals = requested_decimals(question_text(ctx.problem))
        messages = program_messages(ctx.problem)
        ballots: list[Ballot] = []
        waves = wave_sizes(self.n, self.first_wave if self.early_stop else self.n)
        drawn = 0
        for index, size in enumerate(waves):
            # Chain-of-thought samples (hybrid) all come with the first wave: one concurrent round.
            cot = self.cot if index == 0 else 0
            ballots.extend(await self.draw_wave(ctx, messages, size, cot, first=index == 0, decimals=decimals))
            drawn += size
            if self.early_stop and drawn < self.n:
                decision = should_stop(self.tally(ballots), float(self.n - drawn), self.confidence)
                if decision.stop:
                    ctx.event(
                        "vote",
                        f"stopped early ({decision.reason}): {self.n - drawn} program(s) not drawn; "
                        f"{decision.leader!r} leads with P={decision.probability:.2f}",
                    )
                    break
        saved = self.n - drawn
        ballots.extend(await self._resample(ctx, messages, ballots, decimals))
        fell_back = False
        if not any(b.key for b in ballots) and self.fallback and self.cot == 0:
            ctx.event("vote", "no program printed an answer; answering by chain of thought")
            generated = await ctx.generate(1, parent_id=ctx.trace.root.id, temperature=0.0)
            ballots.extend(self.thought_ballot(g, decimals) for g in generated)
            fell_back = True
        return await self.decide(ctx, ballots, saved, fell_back=fell_back)

    async def _resample(
        self, ctx: Context, messages: tuple[Message, ...], ballots: list[Ballot], decimals: int | None
    ) -> list[Ballot]:
        """Sampled programs, one at a time, while every program so far abstained, retries are
        left, and the budget holds twice the mean program's tokens (the rest is for the
        chain-of-thought fallback)."""
        drawn: list[Ballot] = []
        for _ in range(self.retries):
            if any(b.key for b in [*ballots, *drawn]):
                break
            programs = [b for b in [*ballots, *drawn] if b.generated.node.action == "program"]
            mean = sum(b.generated.candidate.completion_tokens for b in programs) / max(1, len(programs))
            if ctx.budget.tokens_left() < 2 * max(mean, 32.0):
                break
            temperature = max(ctx.sampling.temperature, RESAMPLE_TEMPERATURE)
            written = await ctx.generate(1, parent_id=ctx.trace.root.id, action="program", messages=messages,
                                         temperature=temperature, max_tokens=self._max_tokens(ctx), offer=False,
                                         shaped=False)  # fmt: skip
            drawn.extend([await self.execute(ctx, g, decimals) for g in written])
        return drawn

    @staticmethod
    def tally(ballots: list[Ballot]) -> dict[str, float]:
        votes: dict[str, float] = {}
        for ballot in ballots:
            if ballot.key:
                votes[ballot.key] = votes.get(ballot.key, 0.0) + ballot.weight
        return votes

    async def draw_wave(
        self, ctx: Context, messages: tuple[Message, ...], programs: int, cot: int, *, first: bool,
        decimals: int | None,
    ) -> list[Ballot]:  # fmt: skip
        """Draw ``programs`` programs and ``cot`` chain-of-thought samples, then run every
        program in the sandbox concurrently. The very first program is greedy and drawn alone,
        so a policy that fails at once fails before anything else is spent."""
        root = ctx.trace.root.id
        max_tokens = self._max_tokens(ctx)
        written: list[Generated] = []
        if first and programs:
            written += await ctx.generate(1, parent_id=root, action="program", messages=messages,
                                          temperature=0.0, max_tokens=max_tokens, offer=False,
                                          shaped=False)  # fmt: skip
            programs -= 1
        requests = [
            GenRequest(programs, root, "program", messages=messages, max_tokens=max_tokens, offer=False, shaped=False)
        ]
        requests.append(GenRequest(cot, root, "generate"))
        wanted = [r for r in requests if r.n > 0]
        drawn = dict(zip((r.action for r in wanted), await ctx.generate_many(wanted), strict=True)) if wanted else {}
        written += drawn.get("program", [])
        thoughts = drawn.get("generate", [])
        ballots = list(await asyncio.gather(*(self.execute(ctx, g, decimals) for g in written)))
        ballots.extend(self.thought_ballot(g, decimals) for g in thoughts)
        return ballots

    def _max_tokens(self, ctx: Context) -> int:
        return min(ctx.sampling.max_tokens, PROGRAM_MAX_TOKENS)

    def thought_ballot(self, generated: Generated, decimals: int | None) -> Ballot:
        return Ballot(generated, normalize_for_vote(generated.text, decimals=decimals), self.cot_weight, thought=True)

    async def execute(self, ctx: Context, generated: Generated, decimals: int | None) -> Ballot:
        program = program_source(generated.text)
        if program is None:
            return Ballot(generated, "", 1.0)
        run = await ctx.run_program(program, generated.node.id, wall_seconds=self.timeout_s)
        answer = program_answer(run.stdout) if run.status == "ok" else None
        key, guess = program_vote(program, answer, question_text(ctx.problem), decimals)
        execution = ctx.trace.get(generated.node.id).execution
        if execution is not None:
            execution.answer = key
        if guess is not None:
            ctx.event(ctx.label(generated.node.id, "program"), f"abstains: it {guess} ({answer!r})")
        return Ballot(
            generated, key, 1.0, program=program, output=run.stdout if key else "", answer=answer or "",
            abstained=guess or "",
        )  # fmt: skip

    def signals(self, ballots: list[Ballot], winner: str, *, fell_back: bool = False) -> ConfidenceSignals | None:
        """The vote's confidence signals, as the calibration replay computes them (``Pricer.pot_run``)."""
        family = HYBRID if self.cot > 0 else POT
        if fell_back:
            return fallback_signals(family, sum(1 for b in ballots if not b.thought), winner)
        programs = [b for b in ballots if not b.thought]
        thoughts = [b for b in ballots if b.thought]
        agree = agreement(
            [b.key for b in programs], [b.weight for b in programs], [b.key for b in thoughts],
            [b.weight for b in thoughts],
        )  # fmt: skip
        return vote_signals(family, [b.key for b in ballots], [b.weight for b in ballots], winner,
                            programs_agree=agree)  # fmt: skip

    async def decide(self, ctx: Context, ballots: list[Ballot], saved: int, *, fell_back: bool = False) -> Outcome:
        votes = self.tally(ballots)
        total = sum(b.weight for b in ballots) or 1.0
        if not votes:
            ctx.trace.add(ctx.trace.root.id, "vote", text="", score=0.0, visits=0)
            ctx.event("vote", f"no candidate produced an answer ({saved} not drawn)")
            return Outcome(None)
        # Ties: the earliest ballot's answer wins (the greedy program comes first).
        order = {b.key: i for i, b in reversed(list(enumerate(ballots))) if b.key}
        winner = max(votes, key=lambda k: (round(votes[k], 12), -order[k]))
        members = [b for b in ballots if b.key == winner]
        programs = [b for b in members if b.program]
        fraction = parse_form(question_text(ctx.problem)).fraction
        chosen = programs[shown_spelling([b.answer for b in programs], fraction=fraction)] if programs else members[0]
        ctx.trace.add(ctx.trace.root.id, "vote", text=winner, score=votes[winner] / total, visits=len(members))
        ctx.early_stop_saved += saved
        ranked = sorted(votes.items(), key=lambda kv: (-round(kv[1], 12), order[kv[0]]))
        tally = ", ".join(f"{key[:80]!r}: {weight:g}" for key, weight in ranked[:5])
        answered = sum(1 for b in ballots if b.program and b.key)
        ctx.event(
            "vote",
            f"tally of {total:g}: {tally}{f', {len(ranked) - 5} more' if len(ranked) > 5 else ''} "
            f"({answered} program(s) answered; {saved} not drawn)",
        )
        choice = Choice(
            text=evidence_text(chosen, ballots, votes, winner),
            node_id=chosen.generated.node.id,
            finish_reason=chosen.generated.candidate.finish_reason if not chosen.program else "stop",
            answer_tokens=chosen.generated.candidate.completion_tokens,
            score=votes[winner] / total,
            votes=len(members),
            answer=chosen.answer if chosen.program else "",
            signals=self.signals(ballots, winner, fell_back=fell_back),
        )
        ctx.offer(choice, force=True)
        return Outcome(choice)
