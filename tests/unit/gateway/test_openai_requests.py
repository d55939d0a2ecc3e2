"""The OpenAI request surface beyond plain chat: tools, tool turns, response formats, n, logprobs
and OpenAI's no-effect fields, checked at the gateway (400 naming the field) and carried into the
job."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from services.common.errors import InvalidArgument
from services.common.metrics import ServiceMetrics
from services.common.settings import CommonSettings
from services.gateway.app import build_app
from services.gateway.metrics import GatewayMetrics
from services.gateway.planning import Planner
from services.gateway.protocol import NO_EFFECT, ChatCompletionRequest, CompletionRequest
from services.gateway.routing import load_routing_table
from services.gateway.settings import GatewaySettings
from services.jobs import validation
from services.jobs.settings import JobsSettings
from tests.helpers.processes import RedisServer, free_port
from tests.unit.gateway.fake_watch import ModelWatch

QUEUE = "ttc.search.unit-openai"
_METRICS = GatewayMetrics(ServiceMetrics("gateway-openai-test"))
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
STRICT_NOT = {"type": "function", "function": {"name": "g", "parameters": {"not": {}}, "strict": True}}
NAMED_NOPE = {"type": "function", "function": {"name": "nope"}}
NOT_STRING = {"name": "a", "schema": {"not": {"type": "string"}}}
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}


@pytest.fixture(scope="module")
def client(redis_server: RedisServer) -> Iterator[TestClient]:
    """The app with its policy down: a request that passes every check answers 503, not 400."""
    settings = GatewaySettings(policy_target=f"127.0.0.1:{free_port()}", stats_interval_s=0.2)
    app = build_app(settings, CommonSettings(redis_url=redis_server.url), jobs_settings=JobsSettings(queue=QUEUE))
    with TestClient(app) as c:
        yield c
    assert redis.Redis.from_url(redis_server.url).llen(QUEUE) == 0, "a rejected request was enqueued"


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"}], **extra}


def _param(response: Any, status: int = 400) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    return str(error["param"])


BAD = [
    (
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}]},
        "tools[0].function.parameters",
    ),
    (
        {
            "tools": [WEATHER, STRICT_NOT],
        },
        "tools[1].function.parameters",
    ),
    ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name"),
    ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools.0.function.name"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": NAMED_NOPE}, "tool_choice.function.name"),
    (
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "call_9", "content": "18C"},
            ]
        },
        "messages[1].tool_call_id",
    ),
    (
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_2", "content": "18C"},
            ]
        },
        "messages[2].tool_call_id",
    ),
    ({"messages": [{"role": "tool", "content": "18C"}]}, "messages.0.tool_call_id"),
    ({"messages": [{"role": "user", "content": "hi", "tool_calls": [CALL]}]}, "messages.0.tool_calls"),
    ({"messages": [{"role": "user", "content": "hi", "tool_call_id": "call_1"}]}, "messages.0.tool_call_id"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages.0"),
    (
        {"response_format": {"type": "json_schema", "json_schema": NOT_STRING}},
        "response_format.json_schema.schema",
    ),
    (
        {"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": 3}}}},
        "response_format.json_schema.schema",
    ),
    ({"response_format": {"type": "yaml"}}, "response_format"),
    ({"n": 9}, "n"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"toolz": []}, "toolz"),
    ({"modalities": ["text", "audio"]}, "modalities.1"),
    ({"audio": {"voice": "alloy", "format": "mp3"}}, "audio"),
    ({"logit_bias": {"50256": -100}}, "logit_bias"),
    ({"service_tier": "platinum"}, "service_tier"),
]


@pytest.mark.parametrize(("extra", "param"), BAD, ids=[p for _, p in BAD])
def test_bad_input_is_400_naming_the_field(client: TestClient, extra: dict[str, Any], param: str) -> None:
    assert _param(client.post("/v1/chat/completions", json=_chat(**extra))) == param


def test_completions_logprobs_cap_and_best_of(client: TestClient) -> None:
    body = {"model": "m", "prompt": "Say hi"}
    assert _param(client.post("/v1/completions", json={**body, "logprobs": 6})) == "logprobs"
    assert _param(client.post("/v1/completions", json={**body, "n": 3, "best_of": 2})) == "best_of"


NO_EFFECT_VALUES: dict[str, Any] = {
    "store": True,
    "metadata": {"a": "b"},
    "user": "u1",
    "service_tier": "flex",
    "prompt_cache_key": "k",
    "prompt_cache_options": {"mode": "implicit"},
    "prompt_cache_retention": "24h",
    "safety_identifier": "s1",
    "prediction": {"type": "content", "content": "x"},
    "web_search_options": {"search_context_size": "low"},
    "verbosity": "low",
    "moderation": {"model": "omni-moderation-latest"},
    "stream_options.include_obfuscation": None,
}


def test_every_no_effect_field_is_accepted(client: TestClient) -> None:
    """OpenAI's fields that change nothing here pass validation (the dead policy answers 503)."""
    assert set(NO_EFFECT) == set(NO_EFFECT_VALUES)
    body = _chat(**{k: v for k, v in NO_EFFECT_VALUES.items() if "." not in k}, logit_bias={})
    body |= {"stream": True, "stream_options": {"include_usage": True, "include_obfuscation": False}}
    body |= {"modalities": ["text"], "parallel_tool_calls": False, "tools": [WEATHER], "tool_choice": "auto"}
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 503, response.text


# ---------------------------------------------------------------- planning


def _planner(table: str = "routing.v1.json", **settings: Any) -> Planner:
    routing = load_routing_table(Path("services/gateway/routing") / table)
    return Planner(
        GatewaySettings(**settings),
        routing,
        None,
        ModelWatch(aliases={"gpt-4o-mini": "m"}),
        _METRICS,
        {},
        validation.validate,
    )  # type: ignore[arg-type]


def _request(**extra: Any) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate(_chat(**extra))


async def test_the_job_carries_tools_history_format_logprobs_answers_and_streaming() -> None:
    history = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
    ]
    req = _request(
        model="gpt-4o-mini",
        messages=history,
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        parallel_tool_calls=False,
        logprobs=True,
        top_logprobs=2,
        n=2,
        stream=True,
        reasoning_effort="none",
    )
    job = (await _planner().plan(req, queue_depth=0)).job
    assert job.model == "m"  # the alias names the served model
    assert [m.role for m in job.messages] == ["system", "user", "assistant", "tool"]
    assert job.messages[2].tool_calls[0].name == "get_weather"
    assert json.loads(job.messages[2].tool_calls[0].arguments) == {"city": "Paris"}
    assert job.messages[3].tool_call_id == "call_1" and job.messages[3].name == "get_weather"
    assert [t.name for t in job.tools.tools] == ["get_weather"]
    assert json.loads(job.tools.tools[0].parameters_json)["required"] == ["city"]
    assert job.tools.choice == "get_weather" and not job.tools.parallel
    assert job.logprobs and job.top_logprobs == 2 and job.answers == 2 and job.stream_answer
    assert job.response_format.WhichOneof("kind") is None

    job = (await _planner().plan(_request(tools=[WEATHER]), queue_depth=0)).job
    assert job.tools.choice == "auto" and job.tools.parallel and job.answers == 1 and not job.stream_answer

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "X", "schema": schema, "strict": True}}
    job = (await _planner().plan(_request(response_format=fmt), queue_depth=0)).job
    assert json.loads(job.response_format.json_schema) == schema
    job = (await _planner().plan(_request(response_format={"type": "json_object"}), queue_depth=0)).job
    assert job.response_format.json_object


async def test_completions_logprobs_become_the_job_s_top_logprobs() -> None:
    req = CompletionRequest.model_validate({"model": "m", "prompt": "Say hi", "logprobs": 3, "max_tokens": 5})
    job = (await _planner().plan(req, queue_depth=0)).job
    assert job.logprobs and job.top_logprobs == 3 and job.max_tokens == 5
    req = CompletionRequest.model_validate({"model": "m", "prompt": "Say hi", "logprobs": 0})
    job = (await _planner().plan(req, queue_depth=0)).job
    assert job.logprobs and job.top_logprobs == 0


@pytest.mark.parametrize(
    ("extra", "per_answer", "budget"),
    [
        ({"reasoning_effort": "low"}, 512, 4096),  # server default per answer, the routed budget
        ({"reasoning_effort": "low", "max_tokens": 64}, 64, 4096),  # max_tokens caps each answer only
        ({"reasoning_effort": "low", "max_completion_tokens": 300}, 300, 300),  # the whole search
        ({"reasoning_effort": "low", "max_tokens": 64, "max_completion_tokens": 150}, 64, 150),
        ({"reasoning_effort": "low", "max_completion_tokens": 5000}, 5000, 5000),  # never starves one answer
        ({"reasoning_effort": "low", "max_completion_tokens": 9000}, 8191, 8191),  # an answer fits the context
        ({"ttc": {"strategy": "self_consistency", "token_budget": 500}, "max_completion_tokens": 200}, 200, 200),
    ],
)
async def test_token_limits_have_openai_s_meaning(extra: dict[str, Any], per_answer: int, budget: int) -> None:
    job = (await _planner().plan(_request(**extra), queue_depth=0)).job
    assert job.max_tokens == per_answer
    assert job.budget.max_generated_tokens == budget


async def test_a_search_wide_cap_above_the_server_s_answer_cap_is_not_an_error() -> None:
    job = (await _planner(max_tokens_cap=256).plan(_request(max_completion_tokens=1000), queue_depth=0)).job
    assert job.max_tokens == 256 and job.budget.max_generated_tokens == 1000
    with pytest.raises(InvalidArgument) as err:
        await _planner(max_tokens_cap=256).plan(_request(max_tokens=1000), queue_depth=0)
    assert err.value.field == "max_tokens"


async def test_a_routed_strategy_that_cannot_serve_tools_is_replaced_and_reported() -> None:
    """The calibrated table routes arithmetic to program-of-thought, which cannot call tools."""
    req = _request(messages=[{"role": "user", "content": "What is 17 + 25?"}], tools=[WEATHER], reasoning_effort="low")
    plan = await _planner("routing.v2.json").plan(req, queue_depth=0)
    assert plan.route.strategy == "program_of_thought"
    assert plan.job.strategy.name == "self_consistency" and plan.job.strategy.n >= 3
    assert plan.fallback is not None
    assert (plan.fallback.requested, plan.fallback.applied) == ("program_of_thought", "self_consistency")
    assert "tools" in plan.fallback.reason
    record = plan.record("chat.completion", "k", False, False)
    assert record.strategy == "self_consistency" and record.strategy_fallback == plan.fallback

    plain = await _planner("routing.v2.json").plan(
        _request(messages=[{"role": "user", "content": "What is 17 + 25?"}], reasoning_effort="low"), queue_depth=0
    )
    assert plain.job.strategy.name == "program_of_thought" and plain.fallback is None


@pytest.mark.parametrize(
    ("extra", "feature"),
    [
        ({"tools": [WEATHER]}, "tools"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"logprobs": True}, "logprobs"),
    ],
)
async def test_a_pinned_strategy_that_cannot_serve_a_feature_is_400_saying_why(
    extra: dict[str, Any], feature: str
) -> None:
    with pytest.raises(InvalidArgument) as err:
        await _planner().plan(_request(ttc={"strategy": "beam_search"}, **extra), queue_depth=0)
    assert err.value.field == "ttc.strategy"
    assert "beam_search" in err.value.message and feature in err.value.message


async def test_logprobs_from_a_strategy_whose_answer_is_not_one_sample_is_400() -> None:
    with pytest.raises(InvalidArgument) as err:
        await _planner().plan(_request(logprobs=True, ttc={"strategy": "budget_forcing"}), queue_depth=0)
    assert err.value.field == "ttc.strategy" and "logprobs" in err.value.message
