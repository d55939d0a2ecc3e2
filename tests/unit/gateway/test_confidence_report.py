"""``ttc.confidence`` in every reply shape: chat completions, legacy completions, a streamed
chat's usage chunk and the Responses object, as the OpenAI SDK parses them; null (never 0)
where the worker left it unset."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from services.gateway.formatting import report_of, response_of
from services.gateway.protocol import TTCReport
from services.gateway.responses import render
from services.gateway.streaming import Chunks
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.record import JobRecord

JOB = "0123456789abcdef0123456789abcdef"


def _result(**extra: Any) -> orchestrator_pb2.SearchResult:
    return orchestrator_pb2.SearchResult(
        job_id=JOB,
        answer="42",
        strategy="self_consistency",
        termination=orchestrator_pb2.TERMINATION_COMPLETED,
        budget_used=orchestrator_pb2.BudgetUse(generated_tokens=30, prompt_tokens=40),
        answer_tokens=1,
        **extra,
    )


def _record(**extra: Any) -> JobRecord:
    return JobRecord(model="m", created_at=1.0, strategy="self_consistency", n=4, **extra)


def test_chat_and_completions_report_the_confidence() -> None:
    chat = response_of(_result(confidence=0.83), _record()).model_dump(exclude_none=True)
    assert ChatCompletion.model_validate(chat).choices[0].message.content == "42"
    assert chat["ttc"]["confidence"] == pytest.approx(0.83)
    text = response_of(_result(confidence=0.25), _record(kind="text_completion")).model_dump(exclude_none=True)
    assert Completion.model_validate(text).choices[0].text == "42"
    assert text["ttc"]["confidence"] == pytest.approx(0.25)


def test_an_unset_confidence_is_null_not_zero() -> None:
    body = response_of(_result(), _record()).model_dump()
    assert body["ttc"]["confidence"] is None
    # A confidence of exactly 0 set by a worker is a value, kept apart from unset.
    assert report_of(_result(confidence=0.0), _record()).confidence == 0.0


def test_the_streamed_usage_chunk_carries_the_confidence() -> None:
    raw = Chunks("chat", JOB, "m", 1).ending(_result(confidence=0.61), _record(include_usage=True), streamed="")
    events = [json.loads(c[6:]) for c in raw]
    reports = [e["ttc"] for e in events if e.get("ttc")]
    assert reports and reports[-1]["confidence"] == pytest.approx(0.61)


def test_the_responses_object_reports_the_confidence_and_summarises_it() -> None:
    record = JobRecord(kind="response", model="m", created_at=100.0, caller="alice", strategy="self_consistency",
                       response={"store": True})  # fmt: skip
    obj = render.finished(JOB, _result(confidence=0.9, candidates_generated=4), record)
    sdk = Response.model_validate(obj.model_dump(mode="json"))
    assert sdk.output_text == "42"
    assert obj.ttc is not None and obj.ttc.confidence == pytest.approx(0.9)
    assert obj.model_dump(mode="json")["ttc"]["confidence"] == pytest.approx(0.9)
    assert "Confidence 0.90." in sdk.output[0].summary[0].text  # type: ignore[union-attr]


def test_the_report_refuses_a_confidence_outside_0_1() -> None:
    base = report_of(_result(confidence=0.5), _record()).model_dump()
    with pytest.raises(ValueError, match="confidence"):
        TTCReport.model_validate(base | {"confidence": 1.5})
