"""Stock OpenAI clients against the real stack on Qwen2.5-Coder-0.5B: tools through a full
round trip, structured outputs, n, logprobs, token streaming, langchain-openai and litellm,
unmodified. Each answer is checked for correctness and for usage.

Run under the model lock: ``flock /tmp/ttc-model.lock nice .venv/bin/python -m pytest
tests/e2e/test_openai_clients.py``. Generation is kept short (small max_tokens, efforts none
and low) because each Qwen call costs seconds on a 2-core machine.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from tests.e2e.gateway_stack import GatewayStack
from tests.helpers.processes import RedisServer

pytestmark = pytest.mark.e2e
QWEN = "qwen2.5-coder-0.5b"
ALIAS = "gpt-4o-mini"
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
ASK_WEATHER = [
    {"role": "system", "content": "You are a helpful assistant. Use the tools to answer."},
    {"role": "user", "content": "What is the weather in Paris right now?"},
]


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer) -> Iterator[GatewayStack]:
    s = GatewayStack(redis_server, gateway_env={"TTC_GATEWAY_MODEL_ALIASES": f"{ALIAS}={QWEN}"})
    try:
        s.start_policy({"TTC_POLICY_MODEL": QWEN})
        s.start_worker(concurrency=2)
        s.start_gateway()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def client(stack: GatewayStack) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0, timeout=180)


def _usage_ok(usage: Any) -> None:
    assert usage is not None
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def _is_paris(value: str) -> bool:
    return value.strip().lower().startswith("paris")


def test_models_lists_the_served_model_and_its_alias_and_unknown_is_404(client: Any) -> None:
    import openai

    ids = [m.id for m in client.models.list().data]
    assert QWEN in ids and ALIAS in ids
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="gpt-99", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert err.value.code == "model_not_found"


def test_openai_sdk_tool_round_trip_with_a_vote_over_calls(client: Any) -> None:
    """Effort low: three candidates vote over normalized calls; then the tool's result comes back
    and the model answers from it."""
    first = client.chat.completions.create(
        model=QWEN,
        messages=ASK_WEATHER,
        tools=[WEATHER_TOOL],
        tool_choice="required",
        max_tokens=48,
        reasoning_effort="low",
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather" and call.id
    assert _is_paris(json.loads(call.function.arguments)["city"])
    _usage_ok(first.usage)
    ttc = first.model_extra["ttc"]
    assert ttc["strategy"] == "self_consistency" and ttc["candidates_generated"] >= 3

    history = [
        *ASK_WEATHER,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"city": "Paris", "temperature_c": 31})},
    ]
    second = client.chat.completions.create(
        model=QWEN, messages=history, tools=[WEATHER_TOOL], max_tokens=40, reasoning_effort="none", temperature=0
    )
    answer = second.choices[0]
    assert answer.finish_reason == "stop" and not answer.message.tool_calls
    assert "31" in (answer.message.content or ""), answer.message.content
    _usage_ok(second.usage)


class Capital(BaseModel):
    city: str
    country: str


def test_openai_sdk_parse_with_a_pydantic_model(client: Any) -> None:
    reply = client.chat.completions.parse(
        model=QWEN,
        messages=[{"role": "user", "content": "What is the capital of France? Answer with the city and country."}],
        response_format=Capital,
        max_tokens=40,
        reasoning_effort="none",
        temperature=0,
    )
    parsed = reply.choices[0].message.parsed
    assert isinstance(parsed, Capital)
    assert _is_paris(parsed.city) and "france" in parsed.country.lower()
    _usage_ok(reply.usage)


def test_openai_sdk_n_answers_with_logprobs(client: Any) -> None:
    reply = client.chat.completions.create(
        model=QWEN,
        messages=[{"role": "user", "content": "Name one primary color. One word."}],
        n=2,
        logprobs=True,
        top_logprobs=2,
        max_tokens=6,
        reasoning_effort="none",
        temperature=1.0,
    )
    assert [c.index for c in reply.choices] == [0, 1]
    for choice in reply.choices:
        assert choice.message.content and choice.message.content.strip()
        tokens = choice.logprobs.content
        assert tokens and "".join(t.token for t in tokens).strip() == choice.message.content.strip()
        assert all(t.logprob <= 0 and len(t.top_logprobs) <= 2 for t in tokens)
    _usage_ok(reply.usage)
    assert reply.usage.completion_tokens >= sum(len(c.logprobs.content) for c in reply.choices)


def test_openai_sdk_streams_the_answer_token_by_token(client: Any, stack: GatewayStack) -> None:
    """The answer's tokens reach the client as the engine decodes them: once the first has
    arrived, the policy is frozen (SIGSTOP) for a while, and tokens still come after it goes on
    (an answer sent whole at the end would all have arrived before; a thread reads the stream
    meanwhile, so what arrives is stamped when it arrives)."""
    before = stack.gateway_metric("ttc_gateway_time_to_first_answer_token_seconds_count")
    started = time.monotonic()
    stream = client.chat.completions.create(
        model=QWEN,
        messages=[{"role": "user", "content": "Count from 1 to 25, separated by commas."}],
        max_tokens=60,
        reasoning_effort="none",
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    arrivals: list[tuple[float, str]] = []
    ending: dict[str, Any] = {}
    first_arrived = threading.Event()

    def read() -> None:
        try:
            for chunk in stream:
                if chunk.usage is not None:
                    ending["usage"] = chunk.usage
                for choice in chunk.choices:
                    if choice.delta.content:
                        arrivals.append((time.monotonic() - started, choice.delta.content))
                        first_arrived.set()
                    ending["finish"] = choice.finish_reason or ending.get("finish")
        finally:
            first_arrived.set()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        first_arrived.wait(180)
        assert stack.policy is not None
        with stack.policy.paused():
            time.sleep(1.0)  # what the engine decoded before the freeze arrives meanwhile
        resumed = time.monotonic() - started
    finally:
        reader.join(180)
    usage, finish = ending.get("usage"), ending.get("finish")
    text = "".join(piece for _, piece in arrivals)
    assert text.replace(" ", "").startswith("1,2,3,4,5"), text
    assert len(arrivals) > 10, f"{len(arrivals)} content chunks"
    first, last = arrivals[0][0], arrivals[-1][0]
    print(f"stream: {len(arrivals)} content chunks, first answer token at {first:.2f}s, last at {last:.2f}s")
    assert last > resumed, (
        f"the answer arrived at once ({first:.2f}s .. {last:.2f}s, engine frozen until {resumed:.2f}s)"
    )
    assert finish in ("stop", "length")
    _usage_ok(usage)
    assert stack.gateway_metric("ttc_gateway_time_to_first_answer_token_seconds_count") == before + 1


def _langchain(stack: GatewayStack, **extra: Any) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=QWEN, base_url=f"{stack.url}/v1", api_key="unused", max_retries=0, timeout=180, temperature=0, **extra
    )


def test_langchain_bind_tools_and_with_structured_output(stack: GatewayStack) -> None:
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        return "sunny"

    llm = _langchain(stack, max_tokens=48, reasoning_effort="none")
    message = llm.bind_tools([get_weather], tool_choice="get_weather").invoke("What is the weather in Paris?")
    (call,) = message.tool_calls
    assert call["name"] == "get_weather" and _is_paris(call["args"]["city"])
    assert message.usage_metadata["input_tokens"] > 0 and message.usage_metadata["output_tokens"] > 0

    structured = _langchain(stack, max_tokens=40, reasoning_effort="none").with_structured_output(
        Capital, include_raw=True
    )
    out = structured.invoke("What is the capital of France? Give the city and country.")
    parsed = out["parsed"]
    assert isinstance(parsed, Capital) and _is_paris(parsed.city)
    assert out["raw"].usage_metadata["total_tokens"] > 0


def test_litellm_completion_streaming_and_tools(stack: GatewayStack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # its packaged model map: no network
    import litellm

    common = {
        "model": f"openai/{ALIAS}",
        "api_base": f"{stack.url}/v1",
        "api_key": "unused",
        "temperature": 0,
        # litellm's map says gpt-4o-mini takes no reasoning_effort; this is how its users send it anyway.
        "allowed_openai_params": ["reasoning_effort"],
    }
    reply = litellm.completion(
        messages=[{"role": "user", "content": "What is 2 + 3? Answer with the number only."}],
        max_tokens=8,
        reasoning_effort="none",
        **common,
    )
    assert "5" in reply.choices[0].message.content
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0

    pieces = [
        chunk.choices[0].delta.content or ""
        for chunk in litellm.completion(
            messages=[{"role": "user", "content": "Count from 1 to 10, separated by commas."}],
            max_tokens=40,
            stream=True,
            reasoning_effort="none",
            **common,
        )
        if chunk.choices
    ]
    assert len([p for p in pieces if p]) > 1 and "".join(pieces).replace(" ", "").startswith("1,2,3")

    called = litellm.completion(
        messages=ASK_WEATHER,
        tools=[WEATHER_TOOL],
        tool_choice="required",
        max_tokens=48,
        reasoning_effort="none",
        **common,
    )
    (call,) = called.choices[0].message.tool_calls
    assert called.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather" and _is_paris(json.loads(call.function.arguments)["city"])
    assert called.usage.total_tokens > 0


def test_two_policy_deployments_behind_one_gateway(stack: GatewayStack) -> None:
    """A second deployment (SmolLM2) next to Qwen: /v1/models lists both, each request goes to its
    model's deployment (the gateway's and the worker's policy targets name it)."""
    from openai import OpenAI

    smol = "smollm2-135m"
    second = GatewayStack(stack.redis)
    multi: GatewayStack | None = None
    try:
        second.start_policy({"TTC_POLICY_MODEL": smol})
        targets = f"{smol}={second.policy_target}"
        multi = GatewayStack(
            stack.redis,
            policy_port=stack.policy_port,
            gateway_env={"TTC_GATEWAY_POLICY_TARGETS": targets, "TTC_GATEWAY_MODEL_ALIASES": f"{ALIAS}={QWEN}"},
            worker_env={"TTC_ORCHESTRATOR_POLICY_TARGETS": targets},
        )
        multi.start_worker(concurrency=1)
        multi.start_gateway()
        client = OpenAI(base_url=f"{multi.url}/v1", api_key="unused", max_retries=0, timeout=180)
        assert {QWEN, smol, ALIAS} <= {m.id for m in client.models.list().data}
        generated = lambda: second.policy_metric("ttc_tokens_total", kind="generated")  # noqa: E731
        before = generated()
        for model in (smol, ALIAS):
            reply = client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": "Say hello."}],
                max_tokens=4,
                reasoning_effort="none",
            )
            assert reply.model == (smol if model == smol else QWEN)
            assert reply.choices[0].message.content
            _usage_ok(reply.usage)
            if model == smol:  # SmolLM2's own deployment generated it
                assert generated() >= before + reply.usage.completion_tokens
    finally:
        if multi is not None:
            multi.stop()
        second.stop()


def test_bad_tool_input_is_400_naming_the_field(stack: GatewayStack) -> None:
    body = {"model": QWEN, "messages": ASK_WEATHER, "max_tokens": 4}
    bad_schema = {**WEATHER_TOOL, "function": {**WEATHER_TOOL["function"], "parameters": {"type": "objekt"}}}
    cases = [
        ({"tools": [bad_schema]}, "tools[0].function.parameters"),
        (
            {"messages": [*ASK_WEATHER, {"role": "tool", "tool_call_id": "call_x", "content": "20C"}]},
            "messages[2].tool_call_id",
        ),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"not": {}}}}},
            "response_format.json_schema.schema",
        ),
    ]
    for extra, param in cases:
        response = httpx.post(f"{stack.url}/v1/chat/completions", json={**body, **extra}, timeout=30)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"] == param


def test_schemathesis_over_the_completion_endpoints(stack: GatewayStack) -> None:
    """Property-based requests from the OpenAPI schema (tools, response formats, n, logprobs
    included) against a gateway capping generation: no 5xx, no schema violations."""
    import hypothesis
    import schemathesis
    from schemathesis.checks import (
        content_type_conformance,
        not_a_server_error,
        response_schema_conformance,
        status_code_conformance,
    )

    capped = GatewayStack(
        stack.redis,
        queue=stack.queue,
        policy_port=stack.policy_port,
        gateway_env={
            "TTC_GATEWAY_MAX_TOKENS_CAP": "4",
            "TTC_GATEWAY_JOB_TIMEOUT_S": "60",
            "TTC_GATEWAY_MODEL_ALIASES": f"{ALIAS}={QWEN}",
        },
    )
    capped.start_gateway()
    try:
        schema = schemathesis.openapi.from_url(f"{capped.url}/openapi.json")
        checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
        # One explicit valid body per generation endpoint: the engine path is always exercised and
        # checked against the response schema. Which generated bodies are valid is not stable:
        # Hypothesis mines constants from the modules loaded so far, so the suite's history changes
        # what it generates (in full-suite runs none of 12 generated chat bodies was valid).
        valid_bodies: dict[str, dict[str, Any]] = {
            "/v1/chat/completions": {"model": QWEN, "messages": [{"role": "user", "content": "Say hi."}]},
            "/v1/completions": {"model": QWEN, "prompt": "Say hi."},
        }
        for path in ("/v1/chat/completions", "/v1/completions", "/v1/models"):
            for result in schema.include(path_regex=f"^{path}$").get_all_operations():
                operation = result.ok()
                explicit = (
                    [operation.Case(body=valid_bodies[path], media_type="application/json")]
                    if path in valid_bodies
                    else []
                )

                @hypothesis.given(case=operation.as_strategy())
                @hypothesis.settings(
                    max_examples=12,
                    deadline=None,
                    database=None,
                    derandomize=True,
                    suppress_health_check=list(hypothesis.HealthCheck),
                    phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                )
                def check(case: Any) -> None:
                    if isinstance(case.body, dict) and "model" in case.body:
                        case.body["model"] = QWEN  # past the model check: the engine sees the generated body
                    case.call_and_validate(base_url=capped.url, checks=checks, timeout=120)

                for case in explicit:
                    check = hypothesis.example(case=case)(check)
                check()
        assert httpx.get(f"{capped.url}/healthz", timeout=5).status_code == 200
        # Both generation endpoints answered (at least their explicit bodies), under the checks.
        statuses = [
            line
            for line in httpx.get(f"{capped.url}/metrics", timeout=5).text.splitlines()
            if line.startswith("ttc_gateway_requests_total{")
        ]
        for endpoint in ("chat", "completions"):
            answered = capped.gateway_metric("ttc_gateway_requests_total", endpoint=endpoint, status="200")
            assert answered > 0, (endpoint, statuses)
    finally:
        capped.stop()
