"""Turning a job's ``SearchResult`` and stored record into OpenAI responses and the ``ttc`` report.

It formats what ``usage.py`` counts (``usage``, ``ttc.spend``) and counts nothing itself.

Answer and evidence arrive apart (``SearchResult.answer`` in the form the question asked for,
``SearchResult.reasoning`` the program, its output and the votes, or the chosen chain of
thought): the answer is ``message.content``, the evidence ``message.reasoning_content``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from services.gateway.errors import HTTPError, JobFailed
from services.gateway.protocol import (
    AdaptiveReport,
    AssistantMessage,
    BudgetReport,
    BudgetUsed,
    ChatChoice,
    ChatCompletionResponse,
    ChoiceLogprobs,
    CompletionChoice,
    CompletionLogprobs,
    CompletionResponse,
    EarlyStopReport,
    Effort,
    FirstWaveReport,
    FunctionCallOut,
    JobErrorReport,
    ModalityReport,
    StrategyFallback,
    TokenLogprobOut,
    ToolCallOut,
    TopLogprobOut,
    TTCReport,
    VerifierVerdict,
)
from services.gateway.usage import budget_use_of, spend_of, usage_of
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2
from services.jobs.errors import JobError
from services.jobs.record import JobRecord
from services.jobs.termination import termination_name


def budget_used_of(used: orchestrator_pb2.BudgetUse) -> BudgetUsed:
    """``BudgetUse`` field for field as the response's ``ttc.budget_used``."""
    return BudgetUsed(**{f.name: getattr(used, f.name) for f in used.DESCRIPTOR.fields})


def report_of(result: orchestrator_pb2.SearchResult, record: JobRecord) -> TTCReport:
    used = budget_use_of(result, record)
    verdict = None
    if result.verifier_score or result.verifier_passed or record.verifier:
        verdict = VerifierVerdict(verifier=record.verifier, passed=result.verifier_passed, score=result.verifier_score)
    return TTCReport(
        job_id=result.job_id,
        trace_id=result.trace_id,
        strategy=result.strategy or record.strategy,
        n=record.n,
        effort_requested=cast(Effort, record.effort_requested),
        effort_applied=cast(Effort, record.effort_applied),
        degraded_by=list(record.degraded_by),
        difficulty=record.difficulty,
        difficulty_bin=record.difficulty_bin,
        task_type=record.task_type,
        modality=ModalityReport(**record.modality.model_dump()) if record.modality else None,
        candidates_generated=result.candidates_generated,
        early_stop=EarlyStopReport(candidates_saved=result.candidates_saved, tokens_saved=result.tokens_saved)
        if result.candidates_saved
        else None,
        first_wave=FirstWaveReport(size=result.adaptive.first_wave, agreed=result.adaptive.first_wave_settled)
        if result.HasField("adaptive")
        else None,
        adaptive=AdaptiveReport(steps=list(result.adaptive.steps), stopped=result.adaptive.stopped)
        if result.HasField("adaptive")
        else None,
        verifier_verdict=verdict,
        confidence=result.confidence if result.HasField("confidence") else None,
        termination=termination_name(result.termination),
        budget=BudgetReport(**(record.budget.model_dump() if record.budget else {})),
        budget_used=budget_used_of(used),
        spend=spend_of(used),
        queue_wait_seconds=record.queue_wait() or 0.0,
        error=_error_report(result),
        strategy_fallback=StrategyFallback(**record.strategy_fallback.model_dump())
        if record.strategy_fallback
        else None,
    )


def _error_report(result: orchestrator_pb2.SearchResult) -> JobErrorReport | None:
    error = JobError.of_result(result)
    return None if error is None else JobErrorReport(**error.to_dict())


def finish_reason(result: orchestrator_pb2.SearchResult | orchestrator_pb2.Answer) -> str:
    """OpenAI's finish reason: ``tool_calls`` when the answer calls tools, else stop or length."""
    if result.tool_calls:
        return "tool_calls"
    return "length" if result.finish_reason == "length" else "stop"


def tool_calls_of(calls: Sequence[common_pb2.ToolCall]) -> list[ToolCallOut] | None:
    if not calls:
        return None
    return [ToolCallOut(id=c.id, function=FunctionCallOut(name=c.name, arguments=c.arguments)) for c in calls]


def chat_logprobs(tokens: Sequence[common_pb2.TokenLogprob], wanted: bool) -> ChoiceLogprobs | None:
    """Chat ``logprobs.content``: each answer token, its logprob, UTF-8 bytes and alternatives."""
    if not wanted:
        return None
    return ChoiceLogprobs(
        content=[
            TokenLogprobOut(
                token=t.token,
                logprob=t.logprob,
                bytes=list(t.token.encode()),
                top_logprobs=[
                    TopLogprobOut(token=a.token, logprob=a.logprob, bytes=list(a.token.encode()))
                    for a in t.top_logprobs
                ],
            )
            for t in tokens
        ]
    )


def completion_logprobs(tokens: Sequence[common_pb2.TokenLogprob], wanted: bool) -> CompletionLogprobs | None:
    """Legacy completions ``logprobs``: parallel token, logprob, alternatives and text-offset lists."""
    if not wanted:
        return None
    offsets, at = [], 0
    for t in tokens:
        offsets.append(at)
        at += len(t.token)
    return CompletionLogprobs(
        tokens=[t.token for t in tokens],
        token_logprobs=[t.logprob for t in tokens],
        top_logprobs=[{a.token: a.logprob for a in t.top_logprobs} for t in tokens],
        text_offset=offsets,
    )


def answers_of(result: orchestrator_pb2.SearchResult) -> list[orchestrator_pb2.Answer]:
    """The chosen answer and the search's further distinct answers (``n`` > 1), best first."""
    chosen = orchestrator_pb2.Answer(
        text=result.answer,
        finish_reason=result.finish_reason,
        tool_calls=result.tool_calls,
        logprobs=result.logprobs,
        reasoning=result.reasoning,
    )
    return [chosen, *result.alternatives]


def raise_for_failure(result: orchestrator_pb2.SearchResult) -> None:
    """Raise the error a failed or cancelled job stands for (the one mapper formats it)."""
    if result.termination == orchestrator_pb2.TERMINATION_CANCELLED:
        raise HTTPError(409, "the job was cancelled before it finished", code="job_cancelled")
    if result.termination != orchestrator_pb2.TERMINATION_ERROR and not result.error:
        return
    if result.answer:  # a component failed late, but the search has an answer to return
        return
    raise JobFailed(JobError.of_result(result) or JobError("INTERNAL", "the search failed"))


def chat_response(result: orchestrator_pb2.SearchResult, record: JobRecord) -> ChatCompletionResponse:
    return ChatCompletionResponse(
        id=f"chatcmpl-{result.job_id}",
        created=int(record.created_at),
        model=record.model,
        choices=[
            ChatChoice(
                index=i,
                message=AssistantMessage(
                    content=answer.text if answer.text or not answer.tool_calls else None,
                    tool_calls=tool_calls_of(answer.tool_calls),
                    reasoning_content=answer.reasoning or None,
                ),
                finish_reason=finish_reason(answer),
                logprobs=chat_logprobs(answer.logprobs, record.logprobs),
            )
            for i, answer in enumerate(answers_of(result))
        ],
        usage=usage_of(result, record),
        ttc=report_of(result, record),
    )


def completion_response(result: orchestrator_pb2.SearchResult, record: JobRecord) -> CompletionResponse:
    return CompletionResponse(
        id=f"cmpl-{result.job_id}",
        created=int(record.created_at),
        model=record.model,
        choices=[
            CompletionChoice(
                index=i,
                text=answer.text,
                finish_reason="length" if answer.finish_reason == "length" else "stop",
                logprobs=completion_logprobs(answer.logprobs, record.logprobs),
            )
            for i, answer in enumerate(answers_of(result))
        ],
        usage=usage_of(result, record),
        ttc=report_of(result, record),
    )


def response_of(
    result: orchestrator_pb2.SearchResult, record: JobRecord
) -> ChatCompletionResponse | CompletionResponse:
    if record.kind == "text_completion":
        return completion_response(result, record)
    return chat_response(result, record)
