"""Ownership of traces and jobs (keys, admin keys), and the gateway's server span, against the
real app and a real Redis (the policy service is down: nothing here needs a model).

The span tests read the spans from an in-memory exporter on this process's tracer provider.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient
from opentelemetry import trace

from services.common.settings import CommonSettings
from services.gateway.app import build_app
from services.gateway.auth import Authenticator, parse_api_keys
from services.gateway.settings import GatewaySettings
from services.jobs import events as ev
from services.jobs.record import JobRecord
from services.jobs.settings import JobsSettings
from services.jobs.trace_store import owner_key, readable_by, trace_key
from tests.helpers import spans
from tests.helpers.processes import RedisServer, free_port

ALICE, BOB, OPS = "sk-alice", "sk-bob", "sk-ops"


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[TestClient]:
    spans.install()
    settings = GatewaySettings(
        policy_target=f"127.0.0.1:{free_port()}",
        stats_interval_s=0.2,
        api_keys=f"alice:{ALICE},bob:{BOB}",
        admin_api_keys=f"ops:{OPS}",
    )
    app = build_app(
        settings, CommonSettings(redis_url=redis_server.url), jobs_settings=JobsSettings(queue="ttc.search.own")
    )
    with TestClient(app) as c:
        yield c


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _store_trace(redis_server: RedisServer, owner: str) -> str:
    trace_id = os.urandom(8).hex()
    client = redis.Redis.from_url(redis_server.url)
    client.set(trace_key(trace_id), json.dumps({"trace_id": trace_id, "nodes": [{"id": "n0", "text": "secret"}]}))
    if owner:
        client.set(owner_key(trace_id), owner)
    return trace_id


# ------------------------------------------------------------------------------------ pure rules


def test_readable_by_owner_or_admin_only() -> None:
    assert readable_by("alice", "alice")
    assert not readable_by("alice", "bob")
    assert readable_by("alice", "bob", admin=True)
    assert not readable_by("", "alice")  # no recorded owner: admin only
    assert readable_by("", "alice", admin=True)


def test_admin_keys_authenticate_and_see_all_but_names_may_not_clash() -> None:
    auth = Authenticator(parse_api_keys(f"alice:{ALICE}"), parse_api_keys(f"ops:{OPS}"))
    assert auth.caller(f"Bearer {OPS}") == "ops" and auth.sees_all("ops")
    assert auth.caller(f"Bearer {ALICE}") == "alice" and not auth.sees_all("alice")
    assert auth.owner_filter("alice") == "alice" and auth.owner_filter("ops") is None
    assert Authenticator({}).sees_all("anonymous")  # no keys: one anonymous caller owns everything
    with pytest.raises(ValueError, match="alice"):
        Authenticator(parse_api_keys(f"alice:{ALICE}"), parse_api_keys("alice:sk-other"))


# ------------------------------------------------------------------------------------ traces


def test_a_trace_is_readable_by_its_owner_and_admins_only(client: TestClient, redis_server: RedisServer) -> None:
    trace_id = _store_trace(redis_server, "alice")
    assert client.get(f"/v1/traces/{trace_id}", headers=_auth(ALICE)).json()["trace_id"] == trace_id
    other = client.get(f"/v1/traces/{trace_id}", headers=_auth(BOB))
    assert other.status_code == 404 and "secret" not in other.text
    assert other.json()["error"]["code"] == "trace_not_found"
    unknown = client.get("/v1/traces/does-not-exist", headers=_auth(BOB))
    assert unknown.json()["error"]["message"].replace("does-not-exist", trace_id) == other.json()["error"]["message"]
    assert client.get(f"/v1/traces/{trace_id}", headers=_auth(OPS)).status_code == 200
    assert client.get(f"/v1/traces/{trace_id}").status_code == 401


def test_a_trace_without_an_owner_is_for_admins(client: TestClient, redis_server: RedisServer) -> None:
    trace_id = _store_trace(redis_server, "")
    assert client.get(f"/v1/traces/{trace_id}", headers=_auth(ALICE)).status_code == 404
    assert client.get(f"/v1/traces/{trace_id}", headers=_auth(OPS)).status_code == 200


def test_the_viewer_page_carries_no_key_and_no_key_parameter(client: TestClient) -> None:
    page = client.get("/ui/traces/abc?key=sk-alice")
    assert page.status_code == 200 and "sessionStorage" in page.text
    assert "get('key')" not in page.text and "'api'" not in page.text
    assert ALICE not in page.text
    assert page.headers["cache-control"] == "no-store"


# -------------------------------------------------------------------------------------- jobs


def _store_job(redis_server: RedisServer, caller: str) -> str:
    job_id = os.urandom(8).hex()
    record = JobRecord(kind="chat.completion", model="m", created_at=1.0, caller=caller, status="queued")
    redis.Redis.from_url(redis_server.url).hset(ev.job_key(job_id), mapping=record.to_redis())  # type: ignore[arg-type]
    return job_id


def test_a_job_is_readable_and_cancellable_by_its_owner_and_admins_only(
    client: TestClient, redis_server: RedisServer
) -> None:
    job_id = _store_job(redis_server, "alice")
    assert client.get(f"/v1/jobs/{job_id}", headers=_auth(ALICE)).json()["status"] == "queued"
    assert client.get(f"/v1/jobs/{job_id}", headers=_auth(BOB)).status_code == 404
    assert client.get(f"/v1/jobs/{job_id}/result", headers=_auth(BOB)).status_code == 404
    assert client.post(f"/v1/jobs/{job_id}/cancel", headers=_auth(BOB)).status_code == 404
    assert client.get(f"/v1/jobs/{job_id}", headers=_auth(ALICE)).json()["status"] == "queued"
    assert client.get(f"/v1/jobs/{job_id}", headers=_auth(OPS)).status_code == 200
    cancelled = client.post(f"/v1/jobs/{job_id}/cancel", headers=_auth(OPS))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


# -------------------------------------------------------------------------------------- spans


def test_every_request_gets_a_server_span_with_its_route_and_status(client: TestClient) -> None:
    spans.EXPORTER.clear()
    client.get("/v1/jobs/nope", headers=_auth(ALICE))
    found = spans.finished("GET /v1/jobs/")
    assert len(found) == 1
    span = found[0]
    assert span.name == "GET /v1/jobs/{job_id}"  # the route template, not the id
    assert span.kind == trace.SpanKind.SERVER
    assert span.attributes is not None and span.attributes["http.response.status_code"] == 404
    assert span.parent is None


def test_probes_and_scrapes_are_not_traced(client: TestClient) -> None:
    spans.EXPORTER.clear()
    for path in ("/healthz", "/readyz", "/metrics"):
        client.get(path)
    assert spans.EXPORTER.get_finished_spans() == ()


def test_a_caller_traceparent_becomes_the_parent(client: TestClient) -> None:
    spans.EXPORTER.clear()
    trace_id, parent_id = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    client.get("/v1/models", headers={**_auth(ALICE), "traceparent": f"00-{trace_id}-{parent_id}-01"})
    (span,) = spans.finished("GET /v1/models")
    assert format(span.context.trace_id, "032x") == trace_id
    assert span.parent is not None and format(span.parent.span_id, "016x") == parent_id


def test_a_completion_has_admission_as_a_child_and_a_503_is_an_error(client: TestClient) -> None:
    spans.EXPORTER.clear()
    body = {"model": "smollm2-135m", "messages": [{"role": "user", "content": "2+2?"}], "reasoning_effort": "low"}
    reply = client.post("/v1/chat/completions", json=body, headers=_auth(ALICE))
    assert reply.status_code == 503  # the policy service is down
    (server,) = spans.finished("POST /v1/chat/completions")
    (admission,) = spans.finished("gateway/admission")
    assert admission.parent is not None and admission.parent.span_id == server.context.span_id
    assert admission.attributes is not None and admission.attributes["ttc.effort"] == "low"
    assert server.attributes is not None
    assert server.attributes["gen_ai.operation.name"] == "chat"
    assert server.attributes["http.response.status_code"] == 503
    assert server.status.status_code == trace.StatusCode.ERROR
