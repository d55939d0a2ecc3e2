"""Which searches stream their answer token by token as content, and which send it once.

A search whose reply is one drawn candidate's text as it is (``single``, and a vote or a
judge of one sample) streams that candidate as answer deltas while it is decoded. A reply
chosen among several candidates, a value rendered in the asked form, an answer whose logprobs
were asked for and a cascade's small vote (the larger model may replace it) arrive as one
delta once chosen, the candidates streaming as reasoning. Either way the deltas add up to
``result.answer``.
"""

from __future__ import annotations

from typing import Any

import pytest

from services.common.task_type import classify_task
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2
from services.search.interfaces import ReasoningDelta
from services.search.run import run_search
from tests.helpers.search_fakes import PolicyCall, ScriptedPolicy, ScriptedVerifier
from tests.helpers.search_jobs import make_job

OPEN = "Explain in one sentence what a hash table is."
REPLY = "A hash table stores values under keys and finds them by hashing the key."
LARGER = "A hash table is an array indexed by the hash of each key."


def reply(text: str) -> Any:
    def respond(call: PolicyCall, index: int, seed: int) -> str:
        del call, index, seed
        return text

    return respond


def job_for(name: str, n: int, question: str = OPEN, **fields: Any) -> orchestrator_pb2.SearchJob:
    job = make_job(name, n=n, params=fields.pop("params", None), verifier=fields.pop("verifier", ""))
    del job.messages[:]
    job.messages.append(common_pb2.ChatMessage(role="user", content=question))
    job.stream_answer = True
    for key, value in fields.items():
        setattr(job, key, value)
    return job


async def stream(
    job: orchestrator_pb2.SearchJob, text: str = REPLY, escalation: ScriptedPolicy | None = None
) -> tuple[orchestrator_pb2.SearchResult, list[str], list[ReasoningDelta]]:
    answer: list[str] = []
    reasoning: list[ReasoningDelta] = []

    async def on_answer(delta: str) -> None:
        answer.append(delta)

    result, _ = await run_search(
        job,
        ScriptedPolicy(reply(text)),
        ScriptedVerifier(lambda candidate: 0.8),
        on_reasoning=reasoning.append,
        on_answer=on_answer,
        escalation=escalation,
    )
    return result, answer, reasoning


def test_the_prompt_is_an_open_one() -> None:
    assert classify_task(OPEN) == "open"


ONE_SAMPLE = [
    pytest.param("single", 1, {}, id="single"),
    pytest.param("self_consistency", 1, {}, id="self_consistency-n1"),
    pytest.param("self_consistency", 1, {"params": {"early_stop": True}}, id="self_consistency-n1-early-stop"),
    pytest.param("weighted_vote", 1, {"verifier": "orm"}, id="weighted_vote-n1"),
    pytest.param("best_of_n", 1, {"verifier": "orm"}, id="best_of_n-n1"),
]


@pytest.mark.parametrize(("name", "n", "fields"), ONE_SAMPLE)
async def test_one_sample_of_an_open_prompt_streams_its_answer_token_by_token(
    name: str, n: int, fields: dict[str, Any]
) -> None:
    result, answer, reasoning = await stream(job_for(name, n, **fields))
    assert len(answer) == len(REPLY.split(" ")) and "".join(answer) == result.answer == REPLY
    assert not [d for d in reasoning if d.kind == "tokens"]  # never streamed twice


@pytest.mark.parametrize(("name", "fields"), [("self_consistency", {}), ("weighted_vote", {"verifier": "orm"}),
                                              ("best_of_n", {"verifier": "orm"})])  # fmt: skip
async def test_a_choice_among_several_samples_arrives_once_chosen(name: str, fields: dict[str, Any]) -> None:
    result, answer, reasoning = await stream(job_for(name, 3, **fields))
    assert answer == [result.answer] == [REPLY]
    assert {d.source for d in reasoning if d.kind == "tokens"} == {"candidate 1", "candidate 2", "candidate 3"}


async def test_a_value_rendered_from_one_sample_arrives_whole_and_its_evidence_streams_as_reasoning() -> None:
    result, answer, reasoning = await stream(
        job_for("self_consistency", 1, "What is 6*7?"), "6 * 7 = 42. The answer is 42."
    )
    assert answer == [result.answer] == ["The answer is 42."]
    assert "".join(d.text for d in reasoning if d.source == "candidate 1") == "6 * 7 = 42. The answer is 42."


async def test_an_answer_whose_logprobs_were_asked_for_arrives_whole() -> None:
    result, answer, _ = await stream(job_for("self_consistency", 1, logprobs=True))
    assert answer == [result.answer] == [REPLY]


async def test_several_answers_of_one_sample_each_arrive_whole() -> None:
    result, answer, _ = await stream(job_for("self_consistency", 1, answers=2))
    assert answer == [result.answer]


async def test_a_cascades_small_vote_of_one_sample_never_streams_as_the_answer() -> None:
    """An open answer's vote has no confidence, so the cascade escalates: the small model's one
    sample streams as reasoning, and the larger model's, the last step, as the answer."""
    job = job_for("cascade", 1, params={"inner": "self_consistency", "threshold": 0.05})
    result, answer, reasoning = await stream(job, escalation=ScriptedPolicy(reply(LARGER)))
    assert "".join(d.text for d in reasoning if d.kind == "tokens") == REPLY
    assert len(answer) > 1 and "".join(answer) == result.answer == LARGER
