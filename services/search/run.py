"""The seam between job plumbing and the pure strategies.

The gateway calls :func:`validate_job` (handed to it as a ``services.jobs.validation.JobValidator``)
before enqueueing (bad input fails fast, naming the field, before any compute); the orchestrator
worker calls :func:`run_search` with gRPC-backed (or any other) ``Policy``/``Verifier`` and a
reasoning sink, and stores the returned ``SearchTrace``. :func:`replay` re-runs a stored
trace's job with the trace's seed and reports whether the same choices were made.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf import json_format

from services.common.errors import InvalidArgument
from services.common.seeds import splitmix64
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import validation
from services.jobs.errors import JobError
from services.jobs.termination import termination_value
from services.search.budget import Budget, Limits
from services.search.interfaces import (
    Executor,
    Message,
    Policy,
    ReasoningSink,
    Shape,
    TextSink,
    Verifier,
)
from services.search.presentation import may_render, present
from services.search.shapes import problem_of, shape_of, token_logprobs_proto, tool_call_proto
from services.search.strategies import REGISTRY, build
from services.search.strategies.base import Strategy
from services.search.strategies.config import Sampling, StrategyInput
from services.search.strategies.context import Context
from services.search.strategies.results import Choice
from services.search.strategies.runner import Execution, execute
from services.search.strategies.signals import answer_confidence
from services.search.trace import ReplayComparison, SeedStream, Trace, compare_choices

DEFAULT_MAX_TOKENS = 1024


@dataclass(frozen=True)
class PreparedJob:
    strategy: Strategy
    problem: tuple[Message, ...]
    sampling: Sampling
    limits: Limits
    seed: int
    shape: Shape


def _limits(job: orchestrator_pb2.SearchJob) -> Limits:
    budget = job.budget
    return Limits(
        max_generated_tokens=budget.max_generated_tokens,
        max_policy_calls=budget.max_policy_calls,
        max_verifier_calls=budget.max_verifier_calls,
        deadline_seconds=budget.deadline_seconds,
    )


def _sampling(job: orchestrator_pb2.SearchJob, token_budget: int) -> Sampling:
    max_tokens = job.max_tokens or min(DEFAULT_MAX_TOKENS, token_budget)
    return Sampling(
        temperature=job.temperature,
        top_p=job.top_p or 1.0,
        max_tokens=max_tokens,
        stop=tuple(job.stop),
        presence_penalty=job.presence_penalty,
        frequency_penalty=job.frequency_penalty,
    )


def job_seed(job: orchestrator_pb2.SearchJob) -> int:
    """The job's seed, or one derived from its id so that every run is reproducible."""
    if job.HasField("seed"):
        return int(job.seed)
    digest = hashlib.sha256(job.job_id.encode()).digest()
    return splitmix64(int.from_bytes(digest[:8], "big")) & 0x7FFFFFFF


def prepare(job: orchestrator_pb2.SearchJob) -> PreparedJob:
    """Validate every part of ``job`` and build its strategy; raises ``InvalidArgument``."""
    validation.validate(job)  # the structural rules, shared with the gateway (services/jobs)
    name = job.strategy.name
    if name not in REGISTRY:
        raise InvalidArgument(f"unknown strategy {name!r}; known: {', '.join(sorted(REGISTRY))}", field="strategy.name")
    problem = problem_of(job)
    limits = _limits(job)
    sampling = _sampling(job, limits.max_generated_tokens)
    params = json_format.MessageToDict(job.strategy.params) if job.strategy.HasField("params") else {}
    spec = StrategyInput(
        n=job.strategy.n,
        verifier=job.strategy.verifier,
        params=params,
        reference=job.reference,
        sampling=sampling,
    )
    return PreparedJob(build(name, spec), problem, sampling, limits, job_seed(job), shape_of(job))


def validate_job(job: orchestrator_pb2.SearchJob) -> None:
    """Pure validation (no I/O): raises ``InvalidArgument`` naming the offending field."""
    prepare(job)


def _render_prompt(problem: tuple[Message, ...]) -> str:
    return "\n".join(f"{m.role}: {m.content}" for m in problem)


def _job_error(execution: Execution) -> str:
    """The typed error (serialized ``JobError``) of a search that stopped on one, else ""."""
    if not execution.error:
        return ""
    return JobError(execution.code or "INTERNAL", execution.error, component=execution.component).to_json()


def finish_reason(choice: Choice | None) -> str:
    """As OpenAI reports it: "tool_calls" when the answer calls tools, "length" when it was cut."""
    if choice is not None and choice.tool_calls:
        return "tool_calls"
    finish = choice.finish_reason if choice is not None else "stop"
    return "length" if finish in ("length", "abort") else "stop"


def _answer(job: orchestrator_pb2.SearchJob, choice: Choice, ctx: Context) -> tuple[orchestrator_pb2.Answer, int]:
    """The choice as the reply shows it (rendered, its evidence apart) and its answer tokens."""
    shown = present(choice, ctx.problem, ctx.shape, streamed=ctx.answer.streamed)
    answer = orchestrator_pb2.Answer(
        text=shown.content,
        tool_calls=[tool_call_proto(c) for c in choice.tool_calls],
        finish_reason=finish_reason(choice),
        logprobs=token_logprobs_proto(choice.tokens, job.top_logprobs) if job.logprobs and choice.sampled else [],
        votes=choice.votes,
        score=choice.score if choice.scored else 0.0,
        reasoning=shown.reasoning,
    )
    return answer, shown.answer_tokens


def alternatives(job: orchestrator_pb2.SearchJob, choice: Choice | None, ranking: list[Choice]) -> list[Choice]:
    """The answers after the chosen one, up to ``job.answers - 1``: the ranking's other
    distinct answers best first, then, when there are fewer distinct answers than asked for,
    further candidates of the best answers (the ranking's duplicates), so the caller gets n
    choices as OpenAI's n promises, each with its ``votes``."""
    wanted = max(job.answers, 1) - 1
    if not wanted or choice is None:
        return []
    rest = [c for c in ranking if c.node_id != choice.node_id]
    seen = {(choice.text, choice.tool_calls)}
    distinct: list[Choice] = []
    repeats: list[Choice] = []
    for c in rest:
        key = (c.text, c.tool_calls)
        (repeats if key in seen else distinct).append(c)
        seen.add(key)
    return (distinct + repeats)[:wanted]


def _result(job: orchestrator_pb2.SearchJob, execution: Execution, ctx: Context) -> orchestrator_pb2.SearchResult:
    choice = execution.choice
    answer, answer_tokens = _answer(job, choice, ctx) if choice is not None else (orchestrator_pb2.Answer(), 0)
    result = orchestrator_pb2.SearchResult(
        job_id=job.job_id,
        answer=answer.text,
        reasoning=answer.reasoning,
        finish_reason=finish_reason(choice),
        tool_calls=answer.tool_calls,
        logprobs=answer.logprobs,
        alternatives=[_answer(job, c, ctx)[0] for c in alternatives(job, choice, ctx.ranking)],
        strategy=job.strategy.name,
        termination=termination_value(execution.termination),
        budget_used=ctx.budget.usage(),
        candidates_generated=ctx.candidates_generated,
        verifier_score=choice.score if choice is not None and choice.scored else 0.0,
        verifier_passed=bool(choice is not None and choice.passed),
        trace_id=job.job_id,
        error=_job_error(execution),
        answer_tokens=answer_tokens,
        candidates_saved=ctx.early_stop_saved,
        tokens_saved=_tokens_saved(ctx),
    )
    if ctx.course is not None:
        result.adaptive.CopyFrom(orchestrator_pb2.AdaptiveCourse(
            first_wave=ctx.course.first_wave, first_wave_settled=ctx.course.first_wave_settled,
            steps=ctx.course.steps, stopped=ctx.course.stopped,
        ))  # fmt: skip
    confidence = answer_confidence(choice.signals, ctx.problem) if choice is not None else None
    if confidence is not None:  # absent, not 0, where the strategy had no signal
        result.confidence = confidence
    return result


def _tokens_saved(ctx: Context) -> int:
    """What the undrawn candidates would have cost, at the drawn candidates' mean length."""
    if not ctx.early_stop_saved or not ctx.candidates_generated:
        return 0
    return round(ctx.early_stop_saved * ctx.budget.generated_tokens / ctx.candidates_generated)


async def run_search(
    job: orchestrator_pb2.SearchJob,
    policy: Policy,
    verifier: Verifier,
    *,
    on_reasoning: ReasoningSink | None = None,
    is_cancelled: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] | None = None,
    executor: Executor | None = None,
    on_answer: TextSink | None = None,
    escalation: Policy | None = None,
) -> tuple[orchestrator_pb2.SearchResult, orchestrator_pb2.SearchTrace]:
    """Run ``job``'s strategy under its budget. Never raises for policy/verifier failures or
    budget exhaustion: the result's ``termination`` says why it stopped and ``answer`` holds
    the best answer so far. Raises ``InvalidArgument`` for an invalid job.

    ``on_answer`` receives the answer text: token by token where the strategy generates its
    answer last (``single``, a vote or judge of one sample, ``budget_forcing``) and the reply
    is that text (``AnswerStream.sink``), otherwise once,
    as soon as it is chosen; where the reply is a rendered value
    (:mod:`services.search.presentation`), its evidence goes to ``on_reasoning`` first (an
    ``evidence`` event). The deltas add up to ``result.answer``.

    ``on_reasoning`` receives what the search does while it runs: every model call's tokens,
    labelled by candidate, and the events between (docs/streaming.md). A quiet job gets none."""
    prepared = prepare(job)

    budget = Budget(prepared.limits) if clock is None else Budget(prepared.limits, clock=clock)
    trace = Trace(_render_prompt(prepared.problem), prepared.seed)
    ctx = Context(
        problem=prepared.problem,
        policy=policy,
        verifier=verifier,
        budget=budget,
        trace=trace,
        seeds=SeedStream(prepared.seed),
        sampling=prepared.sampling,
        reasoning=None if job.quiet else on_reasoning,
        is_cancelled=is_cancelled,
        executor=executor,
        shape=prepared.shape,
        # A reply that may be a rendered value streams no chain of thought as its answer.
        answer_sink=None if may_render(job.strategy.name, prepared.problem, prepared.shape) else on_answer,
        answers=max(1, job.answers),
        escalation=escalation,
    )
    execution = await execute(prepared.strategy, ctx)
    result = _result(job, execution, ctx)
    if execution.choice is not None:
        trace.mark_chosen(execution.choice.node_id)
        if result.reasoning:
            ctx.event("evidence", result.reasoning)
        if on_answer is not None and not ctx.answer.streamed and result.answer:
            await on_answer(result.answer)
    stored_job = orchestrator_pb2.SearchJob()
    stored_job.CopyFrom(job)
    if not stored_job.HasField("seed"):
        stored_job.seed = prepared.seed
    search_trace = orchestrator_pb2.SearchTrace(
        trace_id=result.trace_id, job=stored_job, nodes=trace.to_proto_nodes(), result=result
    )
    return result, search_trace


async def replay(
    trace: orchestrator_pb2.SearchTrace,
    policy: Policy,
    verifier: Verifier,
    executor: Executor | None = None,
    escalation: Policy | None = None,
) -> tuple[ReplayComparison, orchestrator_pb2.SearchResult, orchestrator_pb2.SearchTrace]:
    """Re-run a stored trace's job with its recorded seed and compare the decisions made.

    On a deterministic engine the comparison ``matches``; a run cut by its deadline may
    legitimately diverge (wall-clock is not replayable)."""
    job = orchestrator_pb2.SearchJob()
    job.CopyFrom(trace.job)
    if not job.HasField("seed") and trace.nodes:
        job.seed = trace.nodes[0].seed
    result, replayed = await run_search(job, policy, verifier, executor=executor, escalation=escalation)
    return compare_choices(list(trace.nodes), list(replayed.nodes)), result, replayed
