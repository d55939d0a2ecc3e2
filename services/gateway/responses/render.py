"""A response job's record and ``SearchResult`` as the Responses API's ``response`` object.

Output items: a ``reasoning`` item whose summary says what the search did (and then the
answer's evidence, ``SearchResult.reasoning``: the program, its output and the votes, or the
chosen chain of thought, when the answer is a value rendered in the asked form) and whose
content, for a streamed response, is the reasoning text the stream carried; the answer as a
``message`` with one ``output_text`` part (absent when the answer is only tool calls), then
one ``function_call`` item per tool call. Usage is the chat endpoints' (every engine call the
response caused): ``input_tokens`` their prompt tokens, ``output_tokens`` every generated token,
``output_tokens_details.reasoning_tokens`` the generated tokens not in the visible output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.gateway.errors import to_error
from services.gateway.formatting import raise_for_failure, report_of
from services.gateway.protocol import TTCReport
from services.gateway.responses.objects import (
    FunctionCallOutput,
    IncompleteDetails,
    InputTokensDetails,
    MessageOutput,
    OutputItem,
    OutputText,
    OutputTokensDetails,
    ReasoningOutput,
    ReasoningText,
    ResponseError,
    ResponseObject,
    ResponseStatus,
    ResponseUsage,
    SummaryText,
)
from services.gateway.usage import usage_of
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2
from services.jobs.record import JobRecord

RESPONSE_PREFIX = "resp_"


def response_id(job_id: str) -> str:
    return f"{RESPONSE_PREFIX}{job_id}"


def job_id_of(response_id: str) -> str | None:
    """The job behind a response id, or None for an id this server never made."""
    if not response_id.startswith(RESPONSE_PREFIX):
        return None
    job_id = response_id[len(RESPONSE_PREFIX) :]
    return job_id if job_id and all(c in "0123456789abcdef" for c in job_id) else None


def search_summary(report: TTCReport) -> str:
    """One paragraph on what the search did: strategy, effort, candidates, tokens, how it ended."""
    used = report.budget_used
    text = (
        f"Searched with {report.strategy} at effort {report.effort_applied}"
        f" (requested {report.effort_requested}): {report.candidates_generated} candidate(s),"
        f" {used.generated_tokens} tokens generated in {used.policy_calls} policy call(s);"
        f" ended: {report.termination or 'unspecified'}."
    )
    if report.verifier_verdict is not None and report.verifier_verdict.verifier:
        verdict = report.verifier_verdict
        text += f" Verifier {verdict.verifier}: {'passed' if verdict.passed else 'not passed'} ({verdict.score:.2f})."
    if report.confidence is not None:
        text += f" Confidence {report.confidence:.2f}."
    if report.degraded_by:
        text += f" Effort lowered by {', '.join(report.degraded_by)}."
    return text


def output_logprobs(tokens: Sequence[common_pb2.TokenLogprob]) -> list[dict[str, Any]]:
    return [
        {
            "token": t.token,
            "logprob": t.logprob,
            "bytes": list(t.token.encode()),
            "top_logprobs": [
                {"token": a.token, "logprob": a.logprob, "bytes": list(a.token.encode())} for a in t.top_logprobs
            ],
        }
        for t in tokens
    ]


def output_items(
    job_id: str, result: orchestrator_pb2.SearchResult, record: JobRecord, summary: str, reasoning: str = ""
) -> list[OutputItem]:
    summaries = [SummaryText(text=summary)]
    if result.reasoning:
        summaries.append(SummaryText(text=result.reasoning))
    content = [ReasoningText(text=reasoning)] if reasoning else None
    items: list[OutputItem] = [ReasoningOutput(id=f"rs_{job_id}", summary=summaries, content=content)]
    incomplete = result.finish_reason == "length"
    if result.answer or not result.tool_calls:
        logprobs = output_logprobs(result.logprobs) if record.logprobs else None
        items.append(
            MessageOutput(
                id=f"msg_{job_id}",
                status="incomplete" if incomplete else "completed",
                content=[OutputText(text=result.answer, logprobs=logprobs)],
            )
        )
    for i, call in enumerate(result.tool_calls):
        items.append(
            FunctionCallOutput(
                id=f"fc_{job_id}_{i}",
                call_id=call.id or f"call_{job_id[:12]}_{i}",
                name=call.name,
                arguments=call.arguments,
            )
        )
    return items


def usage(result: orchestrator_pb2.SearchResult, record: JobRecord) -> ResponseUsage:
    chat = usage_of(result, record)
    return ResponseUsage(
        input_tokens=chat.prompt_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=chat.prompt_tokens_details.cached_tokens),
        output_tokens=chat.completion_tokens,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=chat.completion_tokens_details.reasoning_tokens),
        total_tokens=chat.total_tokens,
    )


def pending(job_id: str, record: JobRecord) -> ResponseObject:
    """A response whose job has not finished: status queued or in_progress, no output yet."""
    status: ResponseStatus = "queued" if record.status == "queued" else "in_progress"
    return _shell(job_id, record, status)


def finished(
    job_id: str, result: orchestrator_pb2.SearchResult, record: JobRecord, reasoning: str = ""
) -> ResponseObject:
    """The final response object: completed, incomplete (the token cap), failed or cancelled.

    ``reasoning``: the reasoning text a stream carried (the reasoning item's content)."""
    report = report_of(result, record)
    obj = _shell(job_id, record, "completed")
    obj.ttc = report
    obj.completed_at = record.finished_at or None
    if result.termination == orchestrator_pb2.TERMINATION_CANCELLED:
        obj.status = "cancelled"
        return obj
    try:
        raise_for_failure(result)
    except Exception as exc:
        status, detail, _ = to_error(exc)
        obj.status = "failed"
        # OpenAI's response error codes are a closed list; the gateway's own code goes in ``type``.
        code = "rate_limit_exceeded" if status == 429 else "invalid_prompt" if status == 400 else "server_error"
        obj.error = ResponseError(
            code=code, message=detail.message, param=detail.param, type=detail.code or detail.type
        )
        obj.usage = usage(result, record)
        return obj
    obj.output = output_items(job_id, result, record, search_summary(report), reasoning)
    obj.usage = usage(result, record)
    if result.finish_reason == "length":
        obj.status = "incomplete"
        obj.incomplete_details = IncompleteDetails(reason="max_output_tokens")
    return obj


def _shell(job_id: str, record: JobRecord, status: ResponseStatus) -> ResponseObject:
    echo = dict(record.response or {})
    return ResponseObject(
        id=response_id(job_id), created_at=record.created_at, status=status, model=record.model, **echo
    )
