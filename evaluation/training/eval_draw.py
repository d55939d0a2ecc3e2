"""One model's answers to the evaluation's problems, drawn as pools: the greedy chain of thought
and the greedy program (the greedy completion for a code problem), and ``samples`` sampled ones
of each where a vote is to be priced.

Drawn and judged as the calibration pools are, so the base's pools and these compare answer for
answer: the problem's own messages for a chain of thought, the program-of-thought strategy's
prompt (:func:`~services.search.strategies.program.program_messages`) for a program, extracted
with its :func:`~services.search.strategies.program.program_source`, run in the sandbox with its
time limit and keyed by :func:`~services.search.strategies.program_checks.program_vote` (a
program that prints a literal abstains). The checker is the problem's own
(:mod:`~evaluation.training.eval_sets`). The policy, the program executor and the hidden-test
runner are injected; nothing here starts a service.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import asdict, dataclass
from typing import Any

from evaluation.pools.store import Call, Draw, DrawKind, PoolCandidate, ProblemPool, prompt_fingerprint
from evaluation.problems.checkers import CodeRunner, check_code, program_for
from evaluation.training.eval_sets import EvalProblem
from services.common.answers import extract_answer, normalize_for_vote, program_answer, requested_decimals
from services.common.difficulty_features import estimation_text
from services.common.task_type import classify_task
from services.search.interfaces import Candidate, ComponentError, Executor, GenerateCall, Message, Policy
from services.search.strategies import program as pot
from services.search.strategies.program_checks import program_vote

STDOUT_KEPT = 2_000


@dataclass(frozen=True)
class EvalDrawSettings:
    """How the answers are drawn (recorded per chunk); the caller passes the calibration pools'
    token caps and program time limit, so both sides are cut where the base's pools were."""

    cot_max_tokens: int
    program_max_tokens: int
    code_max_tokens: int
    program_timeout_s: float
    samples: int = 0
    temperature: float = 0.7
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def seeds(problem_id: str, kind: str, seed: int, count: int) -> list[int]:
    digest = hashlib.sha256(f"{seed}:{problem_id}:{kind}".encode()).digest()
    return [int.from_bytes(digest[:4], "big") + i for i in range(count)]


class EvalDrawer:
    """Draws :class:`~evaluation.pools.store.ProblemPool` records of one model."""

    def __init__(self, policy: Policy, executor: Executor, runner: CodeRunner | None,
                 settings: EvalDrawSettings) -> None:  # fmt: skip
        self._policy = policy
        self._executor = executor
        self._runner = runner
        self.settings = settings

    async def draw(self, item: EvalProblem, split: str) -> ProblemPool:
        """One problem's answers: a code completion for a code problem, else a chain of thought
        and a program, the calls at once."""
        problem = item.problem
        messages = tuple(Message(m["role"], m["content"]) for m in problem.messages())
        s = self.settings
        if problem.check == "code":
            draws = {"code": await self._draw(item, "code", messages, s.code_max_tokens)}
        else:
            cot, program = await asyncio.gather(
                self._draw(item, "cot", messages, s.cot_max_tokens),
                self._draw(item, "program", pot.program_messages(messages), s.program_max_tokens),
            )
            draws = {"cot": cot, "program": program}
        task_type = classify_task(estimation_text([("user", problem.question)], ""))
        return ProblemPool(problem.to_dict(), item.family, item.kind, split, task_type, draws)

    async def _call(self, messages: tuple[Message, ...], call_seeds: list[int], temperature: float,
                    max_tokens: int, logprobs: bool = False) -> tuple[tuple[Candidate, ...], Call]:  # fmt: skip
        if not call_seeds:
            return (), Call(0, temperature, max_tokens, 0, 0, 0, 0.0)
        loop = asyncio.get_running_loop()
        started = loop.time()
        generation = await self._policy.generate(GenerateCall(messages, n=len(call_seeds), seeds=tuple(call_seeds),
                                                              max_tokens=max_tokens, temperature=temperature,
                                                              logprobs=logprobs))  # fmt: skip
        call = Call(len(call_seeds), temperature, max_tokens, generation.prompt_tokens, generation.cached_tokens,
                    sum(c.completion_tokens for c in generation.candidates), round(loop.time() - started, 4),
                    overlapped=True)  # fmt: skip
        return generation.candidates, call

    async def _draw(self, item: EvalProblem, kind: DrawKind, messages: tuple[Message, ...], max_tokens: int) -> Draw:
        """The greedy answer and ``samples`` sampled ones (the sampled chains of thought with
        logprobs: self-consistency breaks ties with them), each judged."""
        s = self.settings
        drawn_seeds = seeds(item.problem.id, kind, s.seed, s.samples + 1)
        (greedy, greedy_call), (sampled, sampled_call) = await asyncio.gather(
            self._call(messages, drawn_seeds[:1], 0.0, max_tokens),
            self._call(messages, drawn_seeds[1:], s.temperature, max_tokens, kind == "cot"),
        )
        drawn = [(c, 0, True) for c in greedy] + [(c, 1, False) for c in sampled]
        candidates = await asyncio.gather(*(self._judge(item, kind, i, c, call, g)
                                            for i, (c, call, g) in enumerate(drawn)))  # fmt: skip
        fingerprint = prompt_fingerprint((m.role, m.content) for m in messages)
        return Draw(kind, tuple(candidates), (greedy_call, sampled_call), prompt=fingerprint)

    async def _judge(self, item: EvalProblem, kind: DrawKind, index: int, candidate: Candidate, call: int,
                     greedy: bool) -> PoolCandidate:  # fmt: skip
        problem, text = item.problem, candidate.text
        base: dict[str, Any] = {"index": index, "greedy": greedy, "seed": candidate.seed, "call": call, "text": text,
                                "completion_tokens": candidate.completion_tokens,
                                "cut": candidate.finish_reason == "length"}  # fmt: skip
        decimals = requested_decimals(problem.question)
        if kind == "cot":
            answer = extract_answer(text)
            return PoolCandidate(**base, key=normalize_for_vote(text, decimals=decimals),
                                 correct=item.check(problem, answer), answer=answer or "",
                                 mean_logprob=candidate.mean_logprob)  # fmt: skip
        if kind == "code":
            verdict = await check_code(problem, text, self._runner)
            return PoolCandidate(**base, key=verdict.answer or "", correct=verdict.correct,
                                 program=program_for(problem, text), error=verdict.error)  # fmt: skip
        source = pot.program_source(text)
        if source is None:
            return PoolCandidate(**base, key="", correct=False)
        try:
            run = await self._executor.run(source, wall_seconds=self.settings.program_timeout_s)
        except ComponentError as err:
            return PoolCandidate(**base, key="", correct=None, program=source, error=f"sandbox: {err}")
        answer = program_answer(run.stdout) if run.status == "ok" else None
        key, _ = program_vote(source, answer, problem.question, decimals)
        return PoolCandidate(**base, key=key, correct=item.check(problem, answer), answer=answer or "",
                             program=source, status=run.status, stdout=run.stdout[-STDOUT_KEPT:],
                             sandbox_s=round(run.wall_seconds, 4))  # fmt: skip
