"""``presence_penalty`` and ``frequency_penalty`` are carried into the job (the policy applies
them to every candidate), not validated and dropped."""

from __future__ import annotations

from services.gateway.protocol import CompletionRequest
from tests.unit.gateway.fake_watch import ModelWatch
from tests.unit.gateway.test_planning import Validator, _chat, _planner


async def test_chat_penalties_reach_the_job() -> None:
    plan = await _planner(ModelWatch(), Validator()).plan(
        _chat(presence_penalty=0.75, frequency_penalty=-1.5, reasoning_effort="none"), queue_depth=0
    )
    assert (plan.job.presence_penalty, plan.job.frequency_penalty) == (0.75, -1.5)


async def test_completion_penalties_reach_the_job_and_default_to_none() -> None:
    body = {"model": "m", "prompt": "1, 2, 3,", "frequency_penalty": 2.0, "reasoning_effort": "none"}
    plan = await _planner(ModelWatch(), Validator()).plan(CompletionRequest.model_validate(body), queue_depth=0)
    assert (plan.job.presence_penalty, plan.job.frequency_penalty) == (0.0, 2.0)
    plain = await _planner(ModelWatch(), Validator()).plan(_chat(reasoning_effort="none"), queue_depth=0)
    assert (plain.job.presence_penalty, plain.job.frequency_penalty) == (0.0, 0.0)
