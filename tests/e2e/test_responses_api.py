"""``/v1/responses`` end to end with the stock openai SDK: the real gateway, worker, Redis and
policy service on Qwen2.5-Coder-0.5B. Create, stream (``responses.stream`` and
``create(stream=True)``), background with retrieve, cancel and delete, ``previous_response_id``,
per-key ownership (another key's id is 404) and bad input naming the field."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.gateway_stack import GatewayStack
from tests.helpers.processes import RedisServer

pytestmark = pytest.mark.e2e
QWEN = "qwen2.5-coder-0.5b"
KEYS = "alice:sk-alice,bob:sk-bob"
FAST: dict[str, Any] = {"reasoning": {"effort": "none"}, "temperature": 0}


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer) -> Iterator[GatewayStack]:
    s = GatewayStack(redis_server, gateway_env={"TTC_GATEWAY_API_KEYS": KEYS})
    try:
        s.start_policy({"TTC_POLICY_MODEL": QWEN})
        s.start_worker()
        s.start_gateway()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def alice(stack: GatewayStack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.url}/v1", api_key="sk-alice", max_retries=0, timeout=180)


@pytest.fixture(scope="module")
def bob(stack: GatewayStack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.url}/v1", api_key="sk-bob", max_retries=0, timeout=180)


def test_create_answers_with_usage_reasoning_summary_and_ttc(alice: openai.OpenAI, bob: openai.OpenAI) -> None:
    r = alice.responses.create(
        model=QWEN,
        instructions="You are a calculator. Reply with only the number.",
        input="What is 2 + 3?",
        max_output_tokens=16,
        metadata={"suite": "e2e"},
        **FAST,
    )
    assert r.id.startswith("resp_") and r.object == "response" and r.status == "completed"
    assert "5" in r.output_text
    assert [item.type for item in r.output][:2] == ["reasoning", "message"]
    assert r.output[0].summary and "single" in r.output[0].summary[0].text  # type: ignore[union-attr]
    assert r.usage is not None and r.usage.input_tokens > 0 and 0 < r.usage.output_tokens <= 16
    assert r.usage.output_tokens_details.reasoning_tokens >= 0
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.instructions and r.metadata == {"suite": "e2e"} and r.max_output_tokens == 16
    ttc = (r.model_extra or {})["ttc"]
    assert ttc["effort_applied"] == "none" and ttc["job_id"] == r.id.removeprefix("resp_")

    # Stored: the owner retrieves it; another key gets 404 on every route, as for an unknown id.
    again = alice.responses.retrieve(r.id)
    assert again.output_text == r.output_text and again.status == "completed"
    with pytest.raises(openai.NotFoundError):
        bob.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        bob.responses.cancel(r.id)
    with pytest.raises(openai.NotFoundError):
        bob.responses.delete(r.id)
    with pytest.raises(openai.BadRequestError) as err:
        bob.responses.create(model=QWEN, input="hi", previous_response_id=r.id, max_output_tokens=4, **FAST)
    assert err.value.body["param"] == "previous_response_id"  # type: ignore[index]
    assert alice.responses.retrieve(r.id).status == "completed"  # bob's delete did nothing


def test_previous_response_id_continues_the_conversation(alice: openai.OpenAI) -> None:
    first = alice.responses.create(model=QWEN, input="My favourite colour is purple.", max_output_tokens=12, **FAST)
    assert first.status in ("completed", "incomplete")
    question = "What is my favourite colour? Answer with one word."
    second = alice.responses.create(
        model=QWEN, previous_response_id=first.id, input=question, max_output_tokens=8, **FAST
    )
    assert second.previous_response_id == first.id
    assert "purple" in second.output_text.lower(), second.output_text
    # The stored conversation (first input, first output, this input) is what the model read.
    alone = alice.responses.create(model=QWEN, input=question, max_output_tokens=8, store=False, **FAST)
    assert second.usage is not None and alone.usage is not None
    assert second.usage.input_tokens > alone.usage.input_tokens
    with pytest.raises(openai.NotFoundError):
        alice.responses.retrieve(alone.id)  # store: false keeps nothing to retrieve


def test_stream_sends_the_typed_event_sequence(alice: openai.OpenAI) -> None:
    with alice.responses.stream(
        model=QWEN, input="Count from 1 to 10, separated by spaces.", max_output_tokens=40, **FAST
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    # A single greedy sample: its tokens are the answer (no search to stream), its summary is in the final object.
    assert not any(t.startswith("response.reasoning_summary") for t in types)
    assert final.output[0].type == "reasoning" and final.output[0].summary
    for expected in (
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_item.done",
    ):
        assert expected in types, expected
    assert types[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1  # token by token, not one chunk after the search
    assert "".join(deltas) == final.output_text and "1 2 3" in final.output_text
    assert final.usage is not None and final.usage.output_tokens > 0

    raw = alice.responses.create(model=QWEN, input="Say hi.", max_output_tokens=8, stream=True, **FAST)
    kinds = [event.type for event in raw]
    assert kinds[0] == "response.created" and kinds[-1] in ("response.completed", "response.incomplete")


def test_background_retrieve_cancel_and_delete(alice: openai.OpenAI, stack: GatewayStack) -> None:
    r = alice.responses.create(
        model=QWEN, input="What is 4 + 4? Reply with only the number.", background=True, max_output_tokens=8, **FAST
    )
    assert r.status in ("queued", "in_progress") and r.background is True and not r.output
    deadline = time.monotonic() + 120
    while r.status in ("queued", "in_progress") and time.monotonic() < deadline:
        time.sleep(0.3)
        r = alice.responses.retrieve(r.id)
    assert r.status == "completed" and "8" in r.output_text
    # The one job store: the same job is visible at /v1/jobs.
    job = httpx.get(
        f"{stack.url}/v1/jobs/{r.id.removeprefix('resp_')}", headers={"Authorization": "Bearer sk-alice"}, timeout=10
    )
    assert job.status_code == 200 and job.json()["kind"] == "response"

    long = alice.responses.create(
        model=QWEN,
        input="Write a very long story about a lighthouse keeper.",
        background=True,
        max_output_tokens=800,
        **FAST,
    )
    cancelled = alice.responses.cancel(long.id)
    assert cancelled.status == "cancelled"
    assert alice.responses.retrieve(long.id).status == "cancelled"

    alice.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        alice.responses.retrieve(r.id)
    with pytest.raises(openai.BadRequestError):
        alice.responses.create(model=QWEN, input="hi", previous_response_id=r.id, max_output_tokens=4, **FAST)


def test_bad_input_is_a_400_naming_the_field(stack: GatewayStack) -> None:
    headers = {"Authorization": "Bearer sk-alice"}
    base = {"model": QWEN, "input": "hi", "max_output_tokens": 4}
    cases: list[tuple[dict[str, Any], str]] = [
        ({**base, "max_tokens": 4}, "max_tokens"),
        ({**base, "conversation": "conv_1"}, "conversation"),
        (
            {**base, "tools": [{"type": "function", "name": "f", "parameters": {"type": "banana"}}]},
            "tools[0].parameters",
        ),
        (
            {
                **base,
                "input": [
                    {"role": "user", "content": "hi"},
                    {"type": "function_call_output", "call_id": "nope", "output": "1"},
                ],
            },
            "input[1].call_id",
        ),
    ]
    for body, field in cases:
        reply = httpx.post(f"{stack.url}/v1/responses", json=body, headers=headers, timeout=30)
        assert reply.status_code == 400, (body, reply.text)
        assert reply.json()["error"]["param"] == field, reply.text
    for method, path in (
        ("GET", "/v1/responses/resp_0123"),
        ("POST", "/v1/responses/nope/cancel"),
        ("DELETE", "/v1/responses/resp_ab"),
    ):
        reply = httpx.request(method, f"{stack.url}{path}", headers=headers, timeout=10)
        assert reply.status_code == 404 and reply.json()["error"]["code"] == "response_not_found"


def test_schemathesis_over_the_responses_endpoints(stack: GatewayStack) -> None:
    """Property-based requests from the OpenAPI schema of the /v1/responses routes, with a valid
    key and examples that reach the model: no 5xx, every status and body as declared."""
    import hypothesis
    import schemathesis
    from schemathesis.checks import (
        content_type_conformance,
        not_a_server_error,
        response_headers_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    schema = schemathesis.openapi.from_url(f"{stack.url}/openapi.json")
    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
        response_headers_conformance,
    ]
    headers = {"Authorization": "Bearer sk-alice"}
    seen = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if not operation.path.startswith("/v1/responses"):
            continue
        seen += 1

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
            # Half the bodies name the served model so they reach planning and the worker.
            if isinstance(case.body, dict) and "model" in case.body and len(str(case.body.get("input"))) % 2 == 0:
                case.body["model"] = QWEN
                case.body["max_output_tokens"] = 4
                case.body.pop("previous_response_id", None)
            case.call_and_validate(base_url=stack.url, headers=headers, checks=checks, timeout=120)

        check()
    assert seen == 4  # create, retrieve, cancel, delete
    assert httpx.get(f"{stack.url}/healthz", timeout=5).status_code == 200
