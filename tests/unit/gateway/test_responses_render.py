"""A response job's result as the Responses ``response`` object and as its typed SSE events,
checked with the openai SDK's own models and its stream accumulator."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai import omit
from openai._models import construct_type_unchecked
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from services.gateway.responses import render
from services.gateway.responses.stream import ResponseEvents
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2
from services.jobs.errors import JobError
from services.jobs.record import JobRecord

JOB = "0123456789abcdef0123456789abcdef"
EVENT = TypeAdapter(ResponseStreamEvent)


def record(**fields: Any) -> JobRecord:
    echo = {
        "instructions": "Be brief.",
        "metadata": {"k": "v"},
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "store": True,
    }
    return JobRecord(
        kind="response", model="m", created_at=100.0, caller="alice", strategy="single", response=echo, **fields
    )


def result(**fields: Any) -> orchestrator_pb2.SearchResult:
    res = orchestrator_pb2.SearchResult(
        job_id=JOB, termination=orchestrator_pb2.TERMINATION_COMPLETED, answer_tokens=3, **fields
    )
    res.budget_used.generated_tokens = 40
    res.budget_used.prompt_tokens = 25
    res.budget_used.cached_tokens = 5
    res.budget_used.policy_calls = 2
    return res


def test_a_finished_response_parses_as_the_sdk_response_with_usage() -> None:
    obj = render.finished(JOB, result(answer="5", candidates_generated=2, strategy="self_consistency"), record())
    sdk = Response.model_validate(obj.model_dump(mode="json"))
    assert sdk.id == f"resp_{JOB}" and sdk.status == "completed" and sdk.output_text == "5"
    assert [item.type for item in sdk.output] == ["reasoning", "message"]
    assert "self_consistency" in sdk.output[0].summary[0].text
    assert sdk.usage is not None
    assert (sdk.usage.input_tokens, sdk.usage.output_tokens, sdk.usage.total_tokens) == (25, 40, 65)
    assert sdk.usage.output_tokens_details.reasoning_tokens == 37  # 40 generated, 3 in the answer
    assert sdk.usage.input_tokens_details.cached_tokens == 5
    assert sdk.instructions == "Be brief." and sdk.metadata == {"k": "v"}
    assert obj.ttc is not None and obj.ttc.job_id == JOB


def test_tool_calls_are_function_call_items_and_no_empty_message() -> None:
    calls = [
        common_pb2.ToolCall(id="call_a", name="add", arguments='{"a":1}'),
        common_pb2.ToolCall(name="add", arguments="{}"),
    ]
    obj = render.finished(JOB, result(answer="", tool_calls=calls), record())
    sdk = Response.model_validate(obj.model_dump(mode="json"))
    assert [item.type for item in sdk.output] == ["reasoning", "function_call", "function_call"]
    first, second = sdk.output[1], sdk.output[2]
    assert (first.call_id, first.name, first.arguments) == ("call_a", "add", '{"a":1}')
    assert second.call_id and second.call_id != first.call_id


def test_statuses_incomplete_cancelled_failed_and_pending() -> None:
    assert render.finished(JOB, result(answer="12", finish_reason="length"), record()).status == "incomplete"
    cancelled = orchestrator_pb2.SearchResult(job_id=JOB, termination=orchestrator_pb2.TERMINATION_CANCELLED)
    assert render.finished(JOB, cancelled, record()).status == "cancelled"
    failed = orchestrator_pb2.SearchResult(
        job_id=JOB,
        termination=orchestrator_pb2.TERMINATION_ERROR,
        error=JobError("UNAVAILABLE", "policy down", component="policy").to_json(),
    )
    obj = render.finished(JOB, failed, record())
    assert obj.status == "failed" and obj.error is not None and "policy" in obj.error.message
    Response.model_validate(obj.model_dump(mode="json"))
    assert render.pending(JOB, record(status="queued")).status == "queued"
    assert render.pending(JOB, record(status="running")).status == "in_progress"


def test_response_ids_round_trip_and_reject_foreign_ids() -> None:
    assert render.job_id_of(render.response_id(JOB)) == JOB
    for bad in ("resp_", "chatcmpl-1", "resp_../x", "resp_XYZ", JOB):
        assert render.job_id_of(bad) is None


def parse_sse(chunks: list[bytes]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for chunk in chunks:
        text = chunk.decode()
        assert text.endswith("\n\n")
        lines = text.strip().split("\n")
        assert lines[0].startswith("event: ") and lines[1].startswith("data: ")
        out.append((lines[0][7:], json.loads(lines[1][6:])))
    return out


def accumulate(events: list[tuple[str, dict[str, Any]]]) -> Any:
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    for name, data in events:
        assert name == data["type"]
        event = construct_type_unchecked(type_=ResponseStreamEvent, value=data)  # type: ignore[arg-type]
        EVENT.validate_python(data)
        state.handle_event(event)
    return state._completed_response


@pytest.mark.parametrize("streamed", [True, False])
def test_the_event_sequence_is_what_the_sdk_accumulates(streamed: bool) -> None:
    events = ResponseEvents(JOB)
    rec = record()
    shell = render.pending(JOB, rec).model_copy(update={"status": "in_progress"})
    chunks = [events.lifecycle("response.created", shell), events.lifecycle("response.in_progress", shell)]
    chunks += events.reasoning_delta("candidate 1", "tokens", "Two plus")
    chunks += events.reasoning_delta("candidate 2", "tokens", "2+3")
    chunks += events.reasoning_delta("candidate 1", "tokens", " three")
    chunks += events.reasoning_delta("vote", "event", "2 of 2 on 5")
    if streamed:
        for piece in ("The answer", " is ", "5."):
            chunks += events.text_delta(piece)
    final = render.finished(JOB, result(answer="The answer is 5."), rec, reasoning=events.reasoning_text)
    chunks += events.finish(final)
    parsed = parse_sse(chunks)
    types = [name for name, _ in parsed]
    assert [data["sequence_number"] for _, data in parsed] == list(range(len(parsed)))
    assert types[:5] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
    ]
    assert parsed[2][1]["item"]["type"] == "reasoning" and parsed[3][1]["part"]["type"] == "reasoning_text"
    deltas = [d for n, d in parsed if n == "response.reasoning_text.delta"]
    assert [d["ttc"] for d in deltas] == [
        {"source": "candidate 1", "kind": "tokens"},
        {"source": "candidate 2", "kind": "tokens"},
        {"source": "candidate 1", "kind": "tokens"},
        {"source": "vote", "kind": "event"},
    ]
    text = "[candidate 1] Two plus\n[candidate 2] 2+3\n[candidate 1]  three\n[vote] 2 of 2 on 5\n"
    assert "".join(d["delta"] for d in deltas) == text
    assert types.count("response.output_text.delta") == (3 if streamed else 1)
    assert types.index("response.reasoning_text.done") < types.index("response.output_item.added", 3)
    assert types.index("response.reasoning_text.done") < types.index("response.output_text.delta")
    assert types[-1] == "response.completed"
    done = accumulate(parsed)
    assert done is not None and done.output_text == "The answer is 5."
    assert done.output[0].type == "reasoning" and done.output[0].content[0].text == text
    assert "Searched with" in done.output[0].summary[0].text  # the search's summary, once it ended
    answer = "".join(d["delta"] for n, d in parsed if n == "response.output_text.delta")
    assert answer == "The answer is 5."


def test_reasoning_after_the_answer_began_opens_a_new_reasoning_item() -> None:
    events = ResponseEvents(JOB)
    rec = record()
    chunks = [events.lifecycle("response.created", render.pending(JOB, rec))]
    chunks += events.reasoning_delta("candidate 1", "tokens", "think")
    chunks += events.text_delta("The")
    chunks += events.reasoning_delta("revision 2", "tokens", "again")
    chunks += events.finish(render.finished(JOB, result(answer="The end."), rec, reasoning=events.reasoning_text))
    parsed = parse_sse(chunks)
    added = [d["item"]["id"] for n, d in parsed if n == "response.output_item.added"]
    assert added == [f"rs_{JOB}", f"msg_{JOB}", f"rs_{JOB}_2"]
    done = accumulate(parsed)
    assert done is not None and done.output_text == "The end."


def test_no_reasoning_streams_the_message_alone() -> None:
    events = ResponseEvents(JOB)
    rec = record()
    chunks = [events.lifecycle("response.created", render.pending(JOB, rec))]
    for piece in ("4", "2"):
        chunks += events.text_delta(piece)
    chunks += events.finish(render.finished(JOB, result(answer="42"), rec))
    parsed = parse_sse(chunks)
    assert not any(n.startswith("response.reasoning") for n, _ in parsed)
    assert [d["item"]["type"] for n, d in parsed if n == "response.output_item.added"] == ["message"]
    done = accumulate(parsed)
    assert done is not None and done.output_text == "42" and done.output[0].content is None


def test_streamed_tool_calls_and_failures() -> None:
    events = ResponseEvents(JOB)
    rec = record()
    shell = render.pending(JOB, rec)
    chunks = [events.lifecycle("response.created", shell), *events.reasoning_delta("candidate 1", "tokens", "x")]
    calls = [common_pb2.ToolCall(id="call_a", name="add", arguments='{"a":1}')]
    chunks += events.finish(
        render.finished(JOB, result(answer="", tool_calls=calls), rec, reasoning=events.reasoning_text)
    )
    parsed = parse_sse(chunks)
    types = [n for n, _ in parsed]
    assert "response.function_call_arguments.done" in types and "response.output_text.delta" not in types
    done = accumulate(parsed)
    assert [o.type for o in done.output] == ["reasoning", "function_call"]
    assert done.output[1].arguments == '{"a":1}'

    events = ResponseEvents(JOB)
    failed = orchestrator_pb2.SearchResult(
        job_id=JOB, termination=orchestrator_pb2.TERMINATION_ERROR, error=JobError("INTERNAL", "boom").to_json()
    )
    chunks = [events.lifecycle("response.created", shell), *events.finish(render.finished(JOB, failed, rec))]
    parsed = parse_sse(chunks)
    assert parsed[-1][0] == "response.failed" and parsed[-1][1]["response"]["error"]["message"]
    assert "error" not in parsed[-1][1]  # a top-level "error" would make the SDK raise mid-stream
