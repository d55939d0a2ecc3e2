"""The search context: per-run state and a strategy's only door to the policy, the verifier,
the sandbox, the budget, the trace and the reasoning stream.

Because every call goes through the context, budget accounting, seeds, tracing, deadline and
error handling are written once:

- a call the budget cannot afford raises :class:`~services.search.budget.StopSearch`;
- a failing policy, verifier or sandbox raises ``ComponentFailed`` (termination ``error``);
- a policy call that ends early (the deadline, a failure mid-stream) still charges the tokens
  it had been sent (``Budget.charge_partial``);
- the best answer offered so far is kept in ``best`` for the runner to return;
- every model call streams its decoded tokens to the reasoning sink, labelled by candidate
  (``source``), unless it decodes the streamed answer itself (``answer``, an
  :class:`~.answering.AnswerStream`; docs/streaming.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from services.gen.ttc.v1 import orchestrator_pb2
from services.search.budget import Budget, Cancelled, ComponentFailed, DeadlineReached, StopSearch
from services.search.interfaces import (
    NO_SHAPE,
    Aggregation,
    CandidateTextSink,
    Executor,
    GenerateCall,
    Generation,
    Message,
    Policy,
    ProgramRun,
    ReasoningSink,
    Shape,
    TextSink,
    Verdict,
    Verifier,
    VerifyCall,
)
from services.search.strategies.answering import AnswerStream
from services.search.strategies.calls import Generated, GenRequest, shown_text
from services.search.strategies.config import Sampling
from services.search.strategies.keys import VoteKeys
from services.search.strategies.reasoning import NOUNS, ReasoningStream
from services.search.strategies.results import Choice, Course
from services.search.strategies.verifier_choice import VerifierChoice
from services.search.trace import SeedStream, Trace

logger = logging.getLogger(__name__)
T = TypeVar("T")

# Engines take at most this many candidates per call (policy.proto SamplingParams.n).
MAX_BATCH = 64
__all__ = ["MAX_BATCH", "Context", "GenRequest", "Generated"]


class Context:
    """Per-run state and the only way a strategy reaches the policy, verifier and budget."""

    def __init__(
        self,
        *,
        problem: Sequence[Message],
        policy: Policy,
        verifier: Verifier,
        budget: Budget,
        trace: Trace,
        seeds: SeedStream,
        sampling: Sampling,
        reasoning: ReasoningSink | None = None,
        is_cancelled: Callable[[], bool] = lambda: False,
        executor: Executor | None = None,
        shape: Shape = NO_SHAPE,
        answer_sink: TextSink | None = None,
        answers: int = 1,
        escalation: Policy | None = None,
    ) -> None:
        self.problem = tuple(problem)
        self.policy = policy
        self.escalation = escalation  # a larger deployment a cascade may hand the job to
        self.verifier = verifier
        self.executor = executor
        self.budget = budget
        self.trace = trace
        self.seeds = seeds
        self.sampling = sampling
        self.reasoning = ReasoningStream(reasoning)
        self._is_cancelled = is_cancelled
        self.best: Choice | None = None
        self.candidates_generated = 0
        self.early_stop_saved = 0  # candidates an early stop left undrawn (see strategies/stopping.py)
        self.course: Course | None = None  # the adaptive vote's course (strategies/adaptive.py)
        self.shape = shape
        self.keys = VoteKeys(shape.tools, shape.constraint)
        self.answers = answers  # answers wanted (SearchJob.answers)
        self.ranking: list[Choice] = []  # the answers a strategy ranked, best first (for answers > 1)
        self.answer = AnswerStream(answer_sink, logprobs=shape.logprobs, answers=answers)

    # -- answers -----------------------------------------------------------------------
    def offer(self, choice: Choice, *, force: bool = False) -> None:
        """Record ``choice`` as the answer to return if the search stops now.

        Without ``force`` it only replaces a worse-ranked choice (unscored < scored,
        failed < passed, then by score); strategies force their current decision."""
        if force or self.best is None or choice.rank() > self.best.rank():
            self.best = choice

    # -- reasoning stream ------------------------------------------------------------------
    def event(self, source: str, text: str) -> None:
        """Write a line between model calls (a vote's tally, a judge's score, an early stop)."""
        self.reasoning.emit(source, "event", text)

    def label(self, node_id: str, default: str = "candidate") -> str:
        """The reasoning label of the candidate recorded as trace node ``node_id``."""
        return self.reasoning.label(node_id, default)

    # -- calls ---------------------------------------------------------------------------
    def _check_cancelled(self) -> None:
        if self._is_cancelled():
            raise Cancelled("the job was cancelled")

    async def _bounded(self, awaitable: Awaitable[T]) -> T:
        left = self.budget.time_left()
        if left is None:
            return await awaitable
        try:
            return await asyncio.wait_for(awaitable, timeout=max(left, 0.001))
        except TimeoutError as err:
            raise DeadlineReached(f"deadline of {self.budget.limits.deadline_seconds:g}s reached") from err

    async def generate(
        self,
        n: int,
        *,
        parent_id: str,
        action: str = "generate",
        assistant_prefix: str = "",
        messages: Sequence[Message] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
        logprobs: bool = False,
        offer: bool = True,
        shaped: bool = True,
        on_text: TextSink | None = None,
        source: str = "",
        answer: bool = False,
    ) -> list[Generated]:
        """Generate ``n`` candidates of one prompt (one engine call per ``MAX_BATCH``).

        The budget may shrink the call (fewer tokens each, or fewer candidates); every
        candidate becomes a trace node under ``parent_id``. Empty results are allowed —
        strategies must handle an empty expansion."""
        request = GenRequest(
            n,
            parent_id,
            action,
            assistant_prefix=assistant_prefix,
            messages=messages,
            max_tokens=max_tokens,
            temperature=temperature,
            stop=stop,
            logprobs=logprobs,
            offer=offer,
            shaped=shaped,
            on_text=on_text,
            source=source,
            answer=answer,
        )
        return (await self.generate_many([request]))[0]

    async def generate_many(self, requests: Sequence[GenRequest]) -> list[list[Generated]]:
        """Run several generation requests concurrently (different prompts or prefixes).

        Seeds are drawn and trace nodes recorded in request order, whatever order the calls
        finish in, so a replay makes the same nodes. If any call fails or the budget stops
        one, the others still finish and are recorded before the first error is raised."""
        calls = [self._call(r) for r in requests]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        results: list[list[Generated]] = []
        first_error: BaseException | None = None
        for request, outcome in zip(requests, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                first_error = first_error or outcome
                results.append([])
                continue
            results.append(self._record(request, outcome))
        if first_error is not None:
            if isinstance(first_error, StopSearch) or not isinstance(first_error, Exception):
                raise first_error
            raise ComponentFailed.caused_by("policy", first_error) from first_error
        return results

    async def _call(self, request: GenRequest) -> list[tuple[Generation, list[int], list[str]]]:
        chunks: list[tuple[Generation, list[int], list[str]]] = []
        remaining = request.n
        sampling = self.sampling
        while remaining > 0:
            self._check_cancelled()
            want = min(remaining, MAX_BATCH)
            count, tokens = self.budget.reserve_policy_call(want, request.max_tokens or self.sampling.max_tokens)
            seeds = self.seeds.take(count)
            labels = self.reasoning.labels(request.source or NOUNS.get(request.action, request.action), count)
            try:
                generation = await self._bounded(
                    self.policy.generate(
                        GenerateCall(
                            messages=tuple(request.messages if request.messages is not None else self.problem),
                            assistant_prefix=request.assistant_prefix,
                            n=count,
                            seeds=tuple(seeds),
                            max_tokens=tokens,
                            temperature=sampling.temperature if request.temperature is None else request.temperature,
                            top_p=sampling.top_p,
                            stop=tuple(sampling.stop if request.stop is None else request.stop),
                            logprobs=request.logprobs or (request.shaped and self.shape.logprobs),
                            shape=self.shape if request.shaped else NO_SHAPE,
                            presence_penalty=sampling.presence_penalty,
                            frequency_penalty=sampling.frequency_penalty,
                        ),
                        on_text=self._text_sink(request, labels),
                        on_partial=self.budget.charge_partial,
                    )
                )
            except StopSearch:
                self.budget.release(count, tokens)
                self.budget.charge_failed_policy_call()
                raise
            except Exception as err:
                self.budget.release(count, tokens)
                self.budget.charge_failed_policy_call()
                raise ComponentFailed.caused_by("policy", err) from err
            self.budget.release(count, tokens)
            self.budget.charge_generation(generation)
            chunks.append((generation, seeds, labels))
            remaining -= want
            if count < want:  # the budget shrank this call: nothing is left for more
                break
        return chunks

    def _text_sink(self, request: GenRequest, labels: list[str]) -> CandidateTextSink | None:
        """Where the call's decoded text goes as it comes: the answer stream (a call of one
        candidate that decodes the answer), else the reasoning stream, one label a candidate.
        A call that decodes the reply but cannot stream it (logprobs asked, several answers, a
        job that takes its answer whole) streams nothing: its text comes once, as the answer,
        never twice."""
        answer = request.on_text
        if answer is not None and len(labels) == 1:

            async def to_answer(index: int, delta: str) -> None:
                del index
                await answer(delta)

            return to_answer
        return None if request.answer else self.reasoning.tokens(labels)

    def _record(self, request: GenRequest, chunks: list[tuple[Generation, list[int], list[str]]]) -> list[Generated]:
        results: list[Generated] = []
        for generation, seeds, labels in chunks:
            for i, candidate in enumerate(generation.candidates):
                seed = candidate.seed or (seeds[i] if i < len(seeds) else 0)
                node = self.trace.add(
                    request.parent_id,
                    request.action,
                    text=shown_text(candidate),
                    seed=seed,
                    tokens=candidate.completion_tokens,
                )
                results.append(Generated(node, candidate))
                if i < len(labels):
                    self.reasoning.name(node.id, labels[i])
                self.candidates_generated += 1
                # Offered as a complete answer when the strategy says so; otherwise (a partial
                # step, a thought) only as a last-resort fallback, marked as cut short.
                if (candidate.text.strip() or candidate.tool_calls) and (request.offer or self.best is None):
                    whole = request.offer and not request.assistant_prefix
                    self.offer(
                        Generated(node, candidate).choice()
                        if whole
                        else Choice(
                            text=request.assistant_prefix + candidate.text,
                            node_id=node.id,
                            finish_reason=candidate.finish_reason if request.offer else "length",
                            answer_tokens=candidate.completion_tokens,
                        )
                    )
        return results

    async def verify(
        self,
        verifier: VerifierChoice,
        texts: Sequence[str],
        node_ids: Sequence[str] = (),
        *,
        problem: Sequence[Message] | None = None,
        aggregation: Aggregation | None = None,
    ) -> list[Verdict]:
        """Score ``texts`` in one verifier call; scores are clamped into [0, 1] (NaN → 0) and
        written onto the trace nodes ``node_ids``."""
        if not texts:
            return []
        self._check_cancelled()
        self.budget.reserve_verifier_call()
        call = VerifyCall(
            verifier=verifier.name,
            problem=tuple(problem if problem is not None else self.problem),
            candidates=tuple(texts),
            reference=verifier.reference,
            aggregation=aggregation or verifier.aggregation,
            code=verifier.code,
            format_pattern=verifier.format_pattern,
            ensemble=verifier.ensemble,
        )
        try:
            verification = await self._bounded(self.verifier.verify(call))
        except StopSearch:
            self.budget.charge_verification(None)
            raise
        except Exception as err:
            self.budget.charge_verification(None)
            raise ComponentFailed.caused_by("verifier", err) from err
        self.budget.charge_verification(verification)
        if len(verification.verdicts) != len(texts):
            raise ComponentFailed(
                f"verifier returned {len(verification.verdicts)} verdicts for {len(texts)} candidates",
                component="verifier",
            )
        verdicts = [
            Verdict(
                score=Verdict.clamp(v.score),
                passed=bool(v.passed),
                step_scores=tuple(Verdict.clamp(s) for s in v.step_scores),
                feedback=v.feedback,
                extracted_answer=v.extracted_answer,
            )
            for v in verification.verdicts
        ]
        for node_id, verdict in zip(node_ids, verdicts, strict=False):
            self.trace.get(node_id).score = verdict.score
        self.reasoning.scores(verifier.name, node_ids, verdicts)
        return verdicts

    async def run_program(self, code: str, node_id: str, *, wall_seconds: float) -> ProgramRun:
        """Run a model-written program in the sandbox; its time is charged and its outcome
        (stdout, stderr, exit status, run time) written onto trace node ``node_id``.

        A program's own failure (crash, timeout, memory) is a ``ProgramRun`` status; an
        unreachable or broken sandbox raises ``ComponentFailed`` like any other outage."""
        if self.executor is None:
            raise ComponentFailed(
                "sandbox: this worker has no sandbox configured", component="sandbox", code="UNAVAILABLE"
            )
        self._check_cancelled()
        self.budget.check_deadline()
        left = self.budget.time_left()
        limit = wall_seconds if left is None else max(0.1, min(wall_seconds, left))
        try:
            run = await self._bounded(self.executor.run(code, wall_seconds=limit))
        except StopSearch:
            raise
        except Exception as err:
            raise ComponentFailed.caused_by("sandbox", err) from err
        self.budget.charge_execution(run.wall_seconds)
        self.reasoning.ran(node_id, run)
        self.trace.get(node_id).execution = orchestrator_pb2.ProgramExecution(
            status=run.status,
            stdout=run.stdout,
            stderr=run.stderr[-2000:],
            exit_code=run.exit_code,
            wall_seconds=run.wall_seconds,
        )
        return run
