"""The gateway app against a real Redis and a policy service that is down.

Everything here must fail before anything is enqueued: bad input gets a 400 naming the
field (OpenAI error shape), a dead policy service a 503 with a clear message, and the
gateway itself keeps answering.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from fastapi import FastAPI
from fastapi.testclient import TestClient

from services.common.settings import CommonSettings
from services.gateway.app import build_app
from services.gateway.settings import GatewaySettings
from services.jobs.settings import JobsSettings
from tests.helpers.processes import RedisServer, free_port

QUEUE = "ttc.search.unit"


def _app(settings: GatewaySettings, redis_server: RedisServer) -> FastAPI:
    return build_app(settings, CommonSettings(redis_url=redis_server.url), jobs_settings=JobsSettings(queue=QUEUE))


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[TestClient]:
    settings = GatewaySettings(policy_target=f"127.0.0.1:{free_port()}", stats_interval_s=0.2)
    app = _app(settings, redis_server)
    with TestClient(app) as c:
        yield c
    assert redis.Redis.from_url(redis_server.url).llen(QUEUE) == 0, "a rejected request was enqueued"


def _chat(**extra: object) -> dict[str, object]:
    return {"model": "smollm2-135m", "messages": [{"role": "user", "content": "What is 2+2?"}], **extra}


def _error(response: object, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 0}, "n"),
        ({"temperature": -0.5}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"reasoning": {"effort": "ultra"}}, "reasoning.effort"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"ttc": {"strategy": "single", "bogus": 1}}, "ttc.bogus"),
        ({"ttc": {"strategy": "nonexistent"}}, "ttc.strategy"),
        ({"ttc": {"n": 0}}, "ttc.n"),
        ({"frobnicate": True}, "frobnicate"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "user", "content": "   "}]}, "messages"),
        ({"messages": [{"role": "user", "content": "x" * 40_000}]}, "messages"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"reasoning_effort": "high", "reasoning": {"effort": "low"}}, "reasoning_effort"),
    ],
)
def test_bad_input_is_400_naming_the_field(client: TestClient, extra: dict[str, object], param: str) -> None:
    error = _error(client.post("/v1/chat/completions", json=_chat(**extra)), 400)
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"


def test_missing_model_is_named(client: TestClient) -> None:
    error = _error(client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}), 400)
    assert error["param"] == "model"


def test_malformed_json_is_400(client: TestClient) -> None:
    response = client.post(
        "/v1/chat/completions", content=b'{"model": "x", "messages": [', headers={"content-type": "application/json"}
    )
    error = _error(response, 400)
    assert error["code"] == "invalid_json"
    assert "malformed JSON" in str(error["message"])


def test_empty_completion_prompt_is_400(client: TestClient) -> None:
    error = _error(client.post("/v1/completions", json={"model": "smollm2-135m", "prompt": ""}), 400)
    assert error["param"] == "prompt"


def test_oversized_body_is_413(client: TestClient) -> None:
    body = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"x" * 1_100_000 + b'"}]}'
    response = client.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert _error(response, 413)["code"] == "request_too_large"


def test_policy_down_is_503_and_gateway_stays_up(client: TestClient) -> None:
    error = _error(client.post("/v1/chat/completions", json=_chat()), 503)
    assert "policy service" in str(error["message"])
    assert error["type"] == "server_error"
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 503
    _error(client.get("/v1/models"), 503)
    assert client.get("/healthz").status_code == 200


def test_unknown_route_and_job_are_openai_errors(client: TestClient) -> None:
    assert _error(client.get("/v1/nothing"), 404)["code"] == "not_found"
    assert _error(client.get("/v1/jobs/abc"), 404)["param"] == "job_id"
    assert _error(client.get("/v1/traces/abc"), 404)["param"] == "trace_id"


def test_metrics_endpoint_exports_gateway_families(client: TestClient) -> None:
    client.post("/v1/chat/completions", json=_chat(n=0))
    text = client.get("/metrics").text
    assert "ttc_requests_total" in text
    assert "ttc_gateway_queue_depth" in text


def test_auth_rejects_bad_keys(redis_server: RedisServer) -> None:
    settings = GatewaySettings(policy_target=f"127.0.0.1:{free_port()}", api_keys="alice:sk-test")
    with TestClient(_app(settings, redis_server)) as c:
        assert _error(c.post("/v1/chat/completions", json=_chat()), 401)["code"] == "invalid_api_key"
        bad = c.post("/v1/chat/completions", json=_chat(), headers={"Authorization": "Bearer wrong"})
        assert _error(bad, 401)["type"] == "authentication_error"
        ok = c.post("/v1/chat/completions", json=_chat(), headers={"Authorization": "Bearer sk-test"})
        assert ok.status_code == 503  # authenticated; the policy is down
        assert c.get("/healthz").status_code == 200


def test_rate_limit_per_key_is_429_with_retry_after(redis_server: RedisServer) -> None:
    settings = GatewaySettings(policy_target=f"127.0.0.1:{free_port()}", api_keys="bob:sk-rl", rate_limit_per_minute=2)
    headers = {"Authorization": "Bearer sk-rl"}
    redis.Redis.from_url(redis_server.url).delete(*redis.Redis.from_url(redis_server.url).keys("ttc:limit:*") or ["x"])
    with TestClient(_app(settings, redis_server)) as c:
        codes = [c.post("/v1/chat/completions", json=_chat(), headers=headers).status_code for _ in range(3)]
        assert codes[:2] == [503, 503]
        limited = c.post("/v1/chat/completions", json=_chat(), headers=headers)
        assert _error(limited, 429)["code"] == "rate_limit_exceeded"
        assert int(limited.headers["retry-after"]) >= 1


def test_jobs_are_visible_only_to_their_key(redis_server: RedisServer) -> None:
    import json

    settings = GatewaySettings(policy_target=f"127.0.0.1:{free_port()}", api_keys="alice:sk-alice,bob:sk-bob")
    client = redis.Redis.from_url(redis_server.url)
    record = {"caller": "alice", "status": "queued", "created_at": 1.0, "model": "m", "kind": "chat.completion"}
    client.hset("ttc:job:owned", mapping={k: json.dumps(v) for k, v in record.items()})
    with TestClient(_app(settings, redis_server)) as c:
        mine = c.get("/v1/jobs/owned", headers={"Authorization": "Bearer sk-alice"})
        assert mine.status_code == 200 and mine.json()["status"] == "queued"
        theirs = c.get("/v1/jobs/owned", headers={"Authorization": "Bearer sk-bob"})
        assert _error(theirs, 404)["code"] == "job_not_found"
        assert _error(c.post("/v1/jobs/owned/cancel", headers={"Authorization": "Bearer sk-bob"}), 404)
        pending = c.get("/v1/jobs/owned/result", headers={"Authorization": "Bearer sk-alice"})
        assert _error(pending, 409)["code"] == "job_not_finished"
        cancelled = c.post("/v1/jobs/owned/cancel", headers={"Authorization": "Bearer sk-alice"})
        assert cancelled.json()["status"] == "cancelled"
    client.delete("ttc:job:owned", "ttc:job:owned:result", "ttc:job:owned:cancel", "ttc:job:owned:events")


def test_a_malformed_job_record_is_500_naming_its_fields(redis_server: RedisServer) -> None:
    settings = GatewaySettings(policy_target=f"127.0.0.1:{free_port()}")
    client = redis.Redis.from_url(redis_server.url)
    client.hset("ttc:job:mangled", mapping={"status": '"exploded"', "n": "many", "model": '"m"'})
    try:
        with TestClient(_app(settings, redis_server)) as c:
            error = _error(c.get("/v1/jobs/mangled"), 500)
        assert error["code"] == "job_record_invalid"
        assert "n, status" in str(error["message"])
    finally:
        client.delete("ttc:job:mangled")
