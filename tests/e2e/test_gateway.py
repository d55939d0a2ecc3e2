"""The gateway against the real stack: Redis, Celery workers, the policy service on SmolLM2.

Stock clients (the official ``openai`` SDK, ``langchain-openai``) are used unmodified;
token counts are compared with what the engine itself reports for the same request; bad
input must be refused without anything reaching the queue.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
import redis

from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import RedisServer

pytestmark = pytest.mark.e2e
PROMPT = "What is 12 + 30? Answer with a number."


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer) -> Iterator[GatewayStack]:
    s = GatewayStack(redis_server)
    try:
        s.start_policy()
        s.start_worker()
        s.start_gateway()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def client(stack: GatewayStack) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0, timeout=120)


def _engine_generate(stack: GatewayStack, max_tokens: int) -> policy_pb2.GenerateResponse:
    with grpc.insecure_channel(stack.policy_target) as channel:
        return policy_pb2_grpc.PolicyStub(channel).Generate(
            policy_pb2.GenerateRequest(
                model=MODEL,
                input=policy_pb2.PromptInput(messages=[common_pb2.ChatMessage(role="user", content=PROMPT)]),
                sampling=policy_pb2.SamplingParams(n=1, max_tokens=max_tokens, temperature=0.0, seeds=[7]),
            ),
            timeout=120,
        )


def test_openai_sdk_single_sample_usage_equals_engine(stack: GatewayStack, client: Any) -> None:
    reply = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=24,
        temperature=0,
        seed=7,
        reasoning_effort="none",
    )
    engine = _engine_generate(stack, 24)
    # The prompt asks for a number: the content is the sample's answer in that form, and the
    # sample itself (the engine's own text) is the evidence, in reasoning_content;
    # a sample cut at max_tokens is shown as it is (a number read out of cut text may be cut).
    message = reply.choices[0].message
    content = message.content or ""
    sample = engine.candidates[0]
    assert content.strip()
    assert reply.usage.prompt_tokens == engine.usage.prompt_tokens
    assert reply.usage.completion_tokens == engine.usage.completion_tokens
    if sample.finish_reason == policy_pb2.FINISH_REASON_LENGTH:
        assert content == sample.text and not (message.model_extra or {}).get("reasoning_content")
        assert reply.usage.completion_tokens_details.reasoning_tokens == 0
    else:
        assert message.model_extra["reasoning_content"] == sample.text
        assert "\n" not in content and content in sample.text
        assert 0 < reply.usage.completion_tokens_details.reasoning_tokens <= reply.usage.completion_tokens
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    ttc = reply.model_extra["ttc"]
    assert ttc["strategy"] == "single"
    assert ttc["effort_requested"] == ttc["effort_applied"] == "none"
    assert ttc["termination"] in ("completed", "budget")
    assert reply.id.startswith("chatcmpl-")


def test_reasoning_effort_buys_hidden_candidates(client: Any, stack: GatewayStack) -> None:
    reply = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=16, reasoning_effort="low"
    )
    ttc = reply.model_extra["ttc"]
    assert ttc["strategy"] == "self_consistency"
    assert ttc["candidates_generated"] == 3
    usage = reply.usage
    reasoning = usage.completion_tokens_details.reasoning_tokens
    assert reasoning > 0
    assert usage.completion_tokens == ttc["budget_used"]["generated_tokens"]
    assert usage.completion_tokens - reasoning <= 16  # the answer itself
    trace = httpx.get(f"{stack.url}/v1/traces/{ttc['trace_id']}", timeout=10).json()
    assert len([n for n in trace["nodes"] if n["action"] == "generate" or n.get("tokens")]) >= 3
    # The vote's calibrated confidence (docs/confidence.md): a probability when the vote had an
    # answer to count, null (never a made-up number) when no candidate had one.
    vote = next(n for n in trace["nodes"] if n["action"] == "vote")
    if vote.get("text"):
        assert 0.0 < ttc["confidence"] < 1.0, ttc
    else:
        assert ttc["confidence"] is None, ttc
    assert stack.gateway_metric("ttc_gateway_reasoning_tokens_total", effort="low") >= reasoning


def test_probe_difficulty_is_counted(client: Any) -> None:
    reply = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=16, reasoning_effort="medium"
    )
    ttc = reply.model_extra["ttc"]
    assert ttc["difficulty"] is not None and 0.0 <= ttc["difficulty"] <= 1.0
    assert ttc["difficulty_bin"] in ("easy", "medium", "hard")
    assert ttc["budget_used"]["probe_generated_tokens"] > 0 and ttc["budget_used"]["probe_prompt_tokens"] > 0
    assert ttc["spend"]["probe"]["generated_tokens"] == ttc["budget_used"]["probe_generated_tokens"]
    hidden = reply.usage.completion_tokens_details.reasoning_tokens
    assert reply.usage.completion_tokens >= ttc["budget_used"]["generated_tokens"] + 1
    assert hidden >= reply.usage.completion_tokens - 16


def test_openai_sdk_streams_the_searchs_tokens_then_answer_then_usage(client: Any) -> None:
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=16,
        reasoning_effort="low",
        stream=True,
        stream_options={"include_usage": True},
    )
    kinds: list[str] = []
    content = ""
    usage = None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
            kinds.append("usage")
            continue
        delta = chunk.choices[0].delta
        extra = delta.model_extra or {}
        if extra.get("reasoning_content"):
            # The search's own text, labelled by the part that wrote it (not a narration line):
            # model tokens, or an event line between model calls (a program's run, the tally,
            # the chosen answer's evidence).
            label = extra.get("ttc") or {}
            kind = label.get("kind") if label.get("source") else None
            kinds.append({"tokens": "reasoning", "event": "event"}.get(kind or "", "unlabelled"))
        if delta.content:
            kinds.append("content")
            content += delta.content
    assert "reasoning" in kinds and "unlabelled" not in kinds, kinds
    assert kinds.index("reasoning") < kinds.index("content")
    assert kinds[-1] == "usage"
    assert content.strip()
    assert usage is not None and usage.completion_tokens_details.reasoning_tokens > 0


def test_langchain_openai_invoke_and_stream(stack: GatewayStack) -> None:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        model=MODEL,
        base_url=f"{stack.url}/v1",
        api_key="unused",
        max_tokens=16,
        reasoning_effort="low",
        max_retries=0,
        timeout=120,
    )
    message = llm.invoke(PROMPT)
    assert isinstance(message.content, str) and message.content.strip()
    assert message.usage_metadata is not None
    assert message.usage_metadata["output_token_details"].get("reasoning", 0) > 0
    pieces = [chunk.content for chunk in llm.stream(PROMPT)]
    assert "".join(str(p) for p in pieces).strip()


def test_legacy_completions_and_models(client: Any) -> None:
    models = client.models.list()
    assert MODEL in [m.id for m in models.data]
    reply = client.completions.create(
        model=MODEL,
        prompt="The capital of France is",
        max_tokens=8,
        temperature=0,
        extra_body={"reasoning_effort": "none"},
    )
    assert reply.choices[0].text
    assert reply.usage.completion_tokens >= 1


def test_background_job_poll_fetch_cancel(stack: GatewayStack) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 16,
        "reasoning_effort": "none",
        "background": True,
    }
    created = httpx.post(f"{stack.url}/v1/chat/completions", json=body, timeout=30)
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = httpx.get(f"{stack.url}/v1/jobs/{job_id}", timeout=10).json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.2)
    assert job["status"] == "succeeded", job
    result = httpx.get(f"{stack.url}/v1/jobs/{job_id}/result", timeout=10).json()
    assert result["object"] == "chat.completion"
    assert result["choices"][0]["message"]["content"] == job["result"]["choices"][0]["message"]["content"]
    # Cancelling a finished job changes nothing: its one result stays.
    after = httpx.post(f"{stack.url}/v1/jobs/{job_id}/cancel", timeout=10).json()
    assert after["status"] == "succeeded"


def _job_count(stack: GatewayStack) -> int:
    return len(redis.Redis.from_url(stack.redis.url).keys("ttc:job:*"))


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"n": 0}, 400, "n"),
        ({"temperature": -1}, 400, "temperature"),
        ({"max_tokens": 10**6}, 400, "max_tokens"),
        ({"model": "no-such-model"}, 404, "model"),
        ({"messages": [{"role": "user", "content": ""}]}, 400, "messages"),
        ({"reasoning_effort": "maximum"}, 400, "reasoning_effort"),
        ({"max_tokens": "many"}, 400, "max_tokens"),
        ({"messages": [{"role": "user", "content": "y" * 50_000}]}, 400, "messages"),
        ({"ttc": {"strategy": "single", "beams": 4}}, 400, "ttc.beams"),
        ({"ttc": {"strategy": "self_consistency", "params": {"bogus": 1}}}, 400, None),
    ],
)
def test_bad_input_is_refused_and_nothing_enqueued(
    stack: GatewayStack, body: dict[str, Any], status: int, param: str | None
) -> None:
    before = (_job_count(stack), stack.queue_length())
    full = {"model": MODEL, "messages": [{"role": "user", "content": PROMPT}], **body}
    reply = httpx.post(f"{stack.url}/v1/chat/completions", json=full, timeout=30)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["message"]
    if param is not None:
        assert error["param"] == param
    else:
        assert str(error["param"]).startswith("ttc")
    assert (_job_count(stack), stack.queue_length()) == before


def test_malformed_json_is_refused(stack: GatewayStack) -> None:
    before = _job_count(stack)
    reply = httpx.post(
        f"{stack.url}/v1/chat/completions",
        content=b"{not json",
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "invalid_json"
    assert _job_count(stack) == before


def test_schemathesis_finds_no_server_errors_or_schema_violations(stack: GatewayStack) -> None:
    """Property-based requests from the gateway's own OpenAPI schema, against a gateway that
    caps generation so each example stays short."""
    import hypothesis
    import schemathesis
    from schemathesis.checks import (
        content_type_conformance,
        not_a_server_error,
        response_headers_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    capped = GatewayStack(
        stack.redis,
        queue=stack.queue,
        policy_port=stack.policy_port,
        gateway_env={"TTC_GATEWAY_MAX_TOKENS_CAP": "8", "TTC_GATEWAY_JOB_TIMEOUT_S": "20"},
    )
    capped.start_gateway()
    try:
        schema = schemathesis.openapi.from_url(f"{capped.url}/openapi.json")
        checks = [
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
            response_headers_conformance,
        ]
        for result in schema.get_all_operations():
            operation = result.ok()

            @hypothesis.given(case=operation.as_strategy())
            @hypothesis.settings(
                max_examples=6,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(hypothesis.HealthCheck),
                phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
            )
            def check(case: Any) -> None:
                case.call_and_validate(base_url=capped.url, checks=checks, timeout=60)

            check()
        assert httpx.get(f"{capped.url}/healthz", timeout=5).status_code == 200
    finally:
        capped.stop()


def test_orchestrator_grpc_runs_a_search_and_serves_its_trace(stack: GatewayStack) -> None:
    from services.gen.ttc.v1 import orchestrator_pb2, orchestrator_pb2_grpc

    job = orchestrator_pb2.SearchJob(
        model=MODEL,
        messages=[common_pb2.ChatMessage(role="user", content=PROMPT)],
        max_tokens=12,
        temperature=0.7,
        strategy=orchestrator_pb2.StrategySpec(name="self_consistency", n=2),
        budget=orchestrator_pb2.Budget(max_generated_tokens=256, deadline_seconds=120),
    )
    with grpc.insecure_channel(f"127.0.0.1:{stack.worker_grpc_ports[0]}") as channel:
        stub = orchestrator_pb2_grpc.OrchestratorStub(channel)
        events = list(stub.RunSearch(job, timeout=180))
        assert any(d.kind == "tokens" for e in events if e.HasField("reasoning") for d in e.reasoning.deltas)
        result = events[-1].result
        assert result.candidates_generated == 2
        assert result.budget_used.generated_tokens > 0
        trace = stub.GetTrace(orchestrator_pb2.GetTraceRequest(trace_id=result.trace_id), timeout=10)
        assert trace.result.job_id == result.job_id
        assert len(trace.nodes) >= 2
        bad = orchestrator_pb2.SearchJob()
        bad.CopyFrom(job)
        bad.strategy.name = "nonexistent"
        with pytest.raises(grpc.RpcError) as err:
            list(stub.RunSearch(bad, timeout=10))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_policy_down_gives_503_and_gateway_stays_up(stack: GatewayStack, client: Any) -> None:
    """Runs last in this module: it stops the policy service."""
    from openai import APIStatusError

    assert stack.policy is not None
    stack.policy.stop()
    stack.wait_for(lambda: httpx.get(f"{stack.url}/readyz", timeout=5).status_code == 503, what="readyz 503")
    with pytest.raises(APIStatusError) as err:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=4)
    assert err.value.status_code == 503
    assert "policy service" in json.dumps(err.value.body)
    assert httpx.get(f"{stack.url}/healthz", timeout=5).status_code == 200
