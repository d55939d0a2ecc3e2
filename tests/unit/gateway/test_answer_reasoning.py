"""The answer and its evidence arrive apart (SearchResult.answer, .reasoning) and the gateway
maps them: content is the answer, the evidence is reasoning_content on the message and on
stream deltas, a reasoning summary on the Responses API, and reasoning tokens in usage."""

from __future__ import annotations

import json

from services.gateway.formatting import chat_response
from services.gateway.responses.render import finished
from services.gateway.streaming import Chunks
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.record import JobRecord

EVIDENCE = "```python\nprint(6 * 7)\n```\n\nOutput: 42\n\nVote: 1 of 1 vote weight on '42'.\n\nThe answer is 42."


def result() -> orchestrator_pb2.SearchResult:
    r = orchestrator_pb2.SearchResult(
        job_id="ab12", answer="42", reasoning=EVIDENCE, answer_tokens=2, strategy="program_of_thought"
    )
    r.termination = orchestrator_pb2.TERMINATION_COMPLETED
    r.budget_used.generated_tokens = 20
    r.alternatives.add(text="41", reasoning="```python\nprint(41)\n```")
    return r


def test_the_message_content_is_the_answer_and_the_evidence_is_reasoning_content() -> None:
    response = chat_response(result(), JobRecord(kind="chat.completion"))
    first, second = response.choices
    assert (first.message.content, first.message.reasoning_content) == ("42", EVIDENCE)
    assert (second.message.content, second.message.reasoning_content) == ("41", "```python\nprint(41)\n```")
    assert response.usage.completion_tokens_details.reasoning_tokens == 18  # everything but the answer


def test_a_reply_without_separate_evidence_sets_no_reasoning_content() -> None:
    plain = orchestrator_pb2.SearchResult(job_id="ab12", answer="A poem.")
    assert chat_response(plain, JobRecord(kind="chat.completion")).choices[0].message.reasoning_content is None


def test_stream_endings_carry_the_other_choices_evidence_as_reasoning() -> None:
    chunks = Chunks("chat", "ab12", "m", 0)
    payloads = [json.loads(c[len(b"data: ") :]) for c in chunks.ending(result(), JobRecord(), streamed="42")]
    deltas = [(p["choices"][0]["index"], p["choices"][0]["delta"]) for p in payloads if p["choices"]]
    assert (1, {"reasoning_content": "```python\nprint(41)\n```"}) in deltas
    assert (1, {"content": "41"}) in deltas
    assert not any(d.get("content") for i, d in deltas if i == 0)  # choice 0 was streamed already


def test_the_responses_api_puts_the_evidence_in_the_reasoning_item() -> None:
    obj = finished("ab12", result(), JobRecord(kind="response"))
    reasoning, message = obj.output[0], obj.output[1]
    assert [s.text for s in reasoning.summary][-1] == EVIDENCE  # type: ignore[union-attr]
    assert message.content[0].text == "42"  # type: ignore[union-attr]
    streamed = finished("ab12", result(), JobRecord(kind="response"), reasoning="[program 1] print(6 * 7)")
    assert [s.text for s in streamed.output[0].summary][-1] == EVIDENCE  # type: ignore[union-attr]
    assert [c.text for c in streamed.output[0].content or []] == ["[program 1] print(6 * 7)"]  # type: ignore[union-attr]
