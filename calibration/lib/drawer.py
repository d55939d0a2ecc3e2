"""Draw one problem's pool through the real policy and sandbox services.

Per math-like problem: a greedy chain of thought and ``k`` sampled ones (the problem's own
messages, as a request through the gateway sends them), and a greedy program and ``k``
sampled ones, written from the program-of-thought strategy's own prompt
(:func:`~services.search.strategies.program.program_messages`), extracted with its
:func:`~services.search.strategies.program.program_source`, run in the sandbox with its
time limit, and keyed with its answer rules (``program_answer``, then
:func:`~services.search.strategies.program_checks.program_vote`: a program that computed
nothing abstains with key "", as it does when served; ``python -m calibration rescore`` re-applies
the rule to stored programs when it changes). Per code problem: a greedy completion and ``k`` sampled ones,
each scored by the hidden tests in the sandbox, then the model's own test inputs written and every
candidate run on them as ``code_execution`` runs it (:mod:`~calibration.lib.code_runs`), so code
chosen by execution is priced from the pool.

With ``overlap`` (what :class:`~calibration.lib.pool_run.PoolRun` asks for) a problem's calls run
at once: greedy and sampled, chains of thought and programs (and the run overlaps the problems
of a chunk), so the engine's
continuous batch stays full instead of decoding a greedy sample or a long straggler alone.
The candidates are the same draws (seeded); only the calls' wall seconds stop being their own,
so each call says it overlapped and the latency model is fitted on the sitting's latency probe
(:mod:`~calibration.lib.latency_probe`) instead. Without it, calls run one after another as a
strategy draws them and each call's wall time is its own.

``program_version`` fingerprints everything of the strategy a program pool depends on; a
chunk drawn under another fingerprint is stale.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
from collections.abc import Coroutine, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from calibration.lib.code_runs import tests_seed, with_behaviour
from evaluation.pools.store import Call, Draw, DrawKind, PoolCandidate, ProblemPool, prompt_fingerprint
from evaluation.problems.checkers import check_code, program_for
from evaluation.problems.datasets import Problem
from evaluation.problems.problemset import answer_correct, family_of
from services.common.answers import extract_answer, normalize_for_vote, program_answer, requested_decimals, vote_key
from services.common.difficulty_features import estimation_text
from services.common.task_type import classify_task
from services.gen.ttc.v1 import sandbox_pb2, sandbox_pb2_grpc
from services.search.interfaces import ComponentError, Executor, GenerateCall, Generation, Message, Policy
from services.search.strategies import program as pot
from services.search.strategies.program_checks import program_vote

_STDOUT_KEPT = 2_000
_T = TypeVar("_T")
_U = TypeVar("_U")


async def all_at_once(coroutines: Sequence[Coroutine[Any, Any, Any]]) -> list[Any]:
    """Every result, the coroutines run at once; the first failure cancels the rest and is
    raised itself, not as an exception group (callers retry on ``ComponentError``)."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(c) for c in coroutines]
    except ExceptionGroup as failed:
        raise failed.exceptions[0] from None
    return [t.result() for t in tasks]


@dataclass(frozen=True)
class DrawSettings:
    """How a pool is drawn; recorded in every chunk header (a change makes older chunks stale)."""

    k: int = 8
    temperature: float = 0.7
    top_p: float = 1.0
    cot_max_tokens: int = 1024
    program_max_tokens: int = pot.PROGRAM_MAX_TOKENS
    code_max_tokens: int = 768
    program_timeout_s: float = pot.ProgramOfThought.timeout_s
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def program_version() -> str:
    """A fingerprint of what a program pool depends on in the strategy: the rendered program
    prompt of a probe problem, the program token cap, and the source of the functions that
    extract, run-decide and key a program's answer."""
    probe = pot.program_messages((Message("system", "S"), Message("user", "Q")))
    parts = [repr(probe), str(pot.PROGRAM_MAX_TOKENS), str(pot.ProgramOfThought.timeout_s)]
    parts += [inspect.getsource(f) for f in (pot.program_source, program_answer, vote_key)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def problem_messages(problem: Problem) -> tuple[Message, ...]:
    """The problem's own conversation, as a request through the gateway sends it."""
    return tuple(Message(m["role"], m["content"]) for m in problem.messages())


def messages_fingerprint(messages: Sequence[Message]) -> str:
    return prompt_fingerprint((m.role, m.content) for m in messages)


def program_prompt_changed(pool: ProblemPool) -> bool:
    """Whether the strategy would now write this problem's program prompt differently from the
    one its programs were drawn from (a form instruction it has learnt to strip): that problem
    alone is drawn again. Draws from before prompts were kept count as current."""
    draw = pool.draws.get("program")
    if draw is None or not draw.prompt:
        return False
    current = messages_fingerprint(pot.program_messages(problem_messages(Problem.from_dict(pool.problem))))
    return draw.prompt != current


def _seeds(problem_id: str, kind: str, seed: int, count: int) -> list[int]:
    digest = hashlib.sha256(f"{seed}:{problem_id}:{kind}".encode()).digest()
    base = int.from_bytes(digest[:4], "big")
    return [base + i for i in range(count)]


class PoolDrawer:
    """Draws pools over the policy (``GrpcPolicy``), the program executor (``GrpcExecutor``) and
    the sandbox stub that runs hidden tests."""

    def __init__(self, policy: Policy, executor: Executor, sandbox: sandbox_pb2_grpc.SandboxStub,
                 settings: DrawSettings, *, overlap: bool = False,
                 latency_probe: tuple[Call, ...] = ()) -> None:  # fmt: skip
        self._policy = policy
        self._executor = executor
        self._sandbox = sandbox
        self.settings = settings
        self.overlap = overlap
        self.latency_probe = latency_probe  # stored with every pool drawn (the sitting's probe)

    async def draw(self, problem: Problem, split: str) -> ProblemPool:
        family = family_of(problem)
        messages = problem_messages(problem)
        draws: dict[str, Draw] = {}
        if problem.check == "code":
            code = await self._draw(problem, "code", messages, self.settings.code_max_tokens)
            seed = tests_seed(problem.id, self.settings.seed)
            draws["code"] = await with_behaviour(code, messages, self._policy, self._executor, seed=seed,
                                                 overlapped=self.overlap)  # fmt: skip
        else:
            cot = self._draw(problem, "cot", messages, self.settings.cot_max_tokens)
            program = self._draw(problem, "program", pot.program_messages(messages), self.settings.program_max_tokens)
            draws["cot"], draws["program"] = await self._both(cot, program)
        task_type = classify_task(estimation_text([("user", problem.question)], ""))
        return ProblemPool(problem.to_dict(), family.name, family.kind, split, task_type, draws,
                           latency_probe=self.latency_probe)  # fmt: skip

    async def _both(self, first: Coroutine[Any, Any, _T], second: Coroutine[Any, Any, _U]) -> tuple[_T, _U]:
        """Both results: at once with ``overlap`` (either failing cancels the other and its own
        error is raised, not a group), else one after the other."""
        if not self.overlap:
            try:
                a = await first
            except BaseException:
                second.close()
                raise
            return a, await second
        one, two = await all_at_once([first, second])
        return one, two

    async def _generate(self, messages: tuple[Message, ...], seeds: list[int], temperature: float,
                        max_tokens: int, logprobs: bool) -> tuple[Generation, Call]:  # fmt: skip
        started = time.perf_counter()
        generation = await self._policy.generate(
            GenerateCall(messages, n=len(seeds), seeds=tuple(seeds), max_tokens=max_tokens,
                         temperature=temperature, top_p=self.settings.top_p, logprobs=logprobs)
        )  # fmt: skip
        wall = time.perf_counter() - started
        call = Call(
            n=len(seeds), temperature=temperature, max_tokens=max_tokens,
            prompt_tokens=generation.prompt_tokens, cached_tokens=generation.cached_tokens,
            completion_tokens=sum(c.completion_tokens for c in generation.candidates), wall_s=round(wall, 4),
            overlapped=self.overlap,
        )  # fmt: skip
        return generation, call

    async def _draw(self, problem: Problem, kind: DrawKind, messages: tuple[Message, ...], max_tokens: int) -> Draw:
        """The greedy sample, then ``k`` sampled in one call (as the strategies draw them; at once
        with ``overlap``); the sampled chains of thought carry logprobs (self-consistency breaks
        ties with them)."""
        s = self.settings
        seeds = _seeds(problem.id, kind, s.seed, s.k + 1)
        (greedy, greedy_call), (sampled, sampled_call) = await self._both(
            self._generate(messages, seeds[:1], 0.0, max_tokens, False),
            self._generate(messages, seeds[1:], s.temperature, max_tokens, kind == "cot"),
        )
        drawn = [(c, 0, True) for c in greedy.candidates] + [(c, 1, False) for c in sampled.candidates]
        candidates = await asyncio.gather(
            *(self._judge(problem, kind, i, c, call, g) for i, (c, call, g) in enumerate(drawn))
        )
        return Draw(kind, tuple(candidates), (greedy_call, sampled_call), prompt=messages_fingerprint(messages))

    async def _judge(self, problem: Problem, kind: DrawKind, index: int, candidate: Any, call: int,
                     greedy: bool) -> PoolCandidate:  # fmt: skip
        base = {
            "index": index, "greedy": greedy, "seed": candidate.seed, "call": call, "text": candidate.text,
            "completion_tokens": candidate.completion_tokens, "cut": candidate.finish_reason == "length",
        }  # fmt: skip
        if kind == "cot":
            decimals = requested_decimals(problem.question)
            answer = extract_answer(candidate.text)
            return PoolCandidate(
                **base, key=normalize_for_vote(candidate.text, decimals=decimals),
                correct=answer_correct(problem, answer), answer=answer or "", mean_logprob=candidate.mean_logprob,
            )  # fmt: skip
        if kind == "program":
            return await self._run_program(problem, base, candidate.text)
        return await self._run_code(problem, base, candidate.text)

    async def _run_program(self, problem: Problem, base: dict[str, Any], text: str) -> PoolCandidate:
        program = pot.program_source(text)
        if program is None:  # the strategy abstains without a sandbox run
            return PoolCandidate(**base, key="", correct=False)
        try:
            run = await self._executor.run(program, wall_seconds=self.settings.program_timeout_s)
        except ComponentError as err:
            return PoolCandidate(**base, key="", correct=None, program=program, error=f"sandbox: {err}")
        answer = program_answer(run.stdout) if run.status == "ok" else None
        key, _ = program_vote(program, answer, problem.question, requested_decimals(problem.question))
        return PoolCandidate(
            **base, key=key, correct=answer_correct(problem, answer), answer=answer or "", program=program,
            status=run.status, stdout=run.stdout[-_STDOUT_KEPT:], sandbox_s=round(run.wall_seconds, 4),
        )  # fmt: skip

    async def _run_code(self, problem: Problem, base: dict[str, Any], text: str) -> PoolCandidate:
        seconds: list[float] = []

        async def runner(program: str, check: str) -> bool:
            reply = await self._sandbox.Execute(
                sandbox_pb2.ExecuteRequest(
                    language="python", code=program, tests=[sandbox_pb2.TestCase(name="hidden", check_code=check)]
                ),
                timeout=60.0,
            )
            if reply.outcome.status == sandbox_pb2.EXEC_STATUS_SANDBOX_ERROR:
                raise RuntimeError(reply.message or "sandbox error")
            seconds.append(sum(t.outcome.wall_seconds for t in reply.tests))
            return bool(reply.tests) and all(t.passed for t in reply.tests)

        verdict = await check_code(problem, text, runner)
        return PoolCandidate(
            **base, key=verdict.answer or "", correct=verdict.correct, program=program_for(problem, text),
            sandbox_s=round(sum(seconds), 4), error=verdict.error,
        )  # fmt: skip
