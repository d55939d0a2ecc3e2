"""The job record as one typed model: written and read through ``JobRecord`` on both sides,
the Redis wire shape (one JSON value per hash field) unchanged for a rolling upgrade."""

from __future__ import annotations

import json

import pytest
import redis.asyncio as aioredis

from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import events as ev
from services.jobs.errors import JobError
from services.jobs.record import JobRecord, MalformedJobRecord, ProbeTokens, RecordBudget, status_fields
from tests.conftest import RedisServer


def _full() -> JobRecord:
    return JobRecord(
        kind="text_completion",
        model="m",
        created_at=12.5,
        caller="alice",
        include_usage=True,
        effort_requested="high",
        effort_applied="medium",
        degraded_by=["queue_depth"],
        difficulty=0.4,
        difficulty_bin="medium",
        task_type="arithmetic",
        strategy="self_consistency",
        n=4,
        verifier="math_equivalence",
        budget=RecordBudget(max_generated_tokens=4096, max_policy_calls=8, deadline_seconds=60.0),
        probe=ProbeTokens(prompt_tokens=15, generated_tokens=12, cached_tokens=5),
        enqueued_at=12.5,
    )


def _as_stored(fields: dict[str, str]) -> dict[bytes, bytes]:
    """What HGETALL returns for what HSET was given."""
    return {k.encode(): v.encode() for k, v in fields.items()}


def test_round_trip_through_the_redis_shape() -> None:
    record = _full()
    fields = record.to_redis()
    assert all(isinstance(v, str) for v in fields.values())
    assert json.loads(fields["probe"]) == {"prompt_tokens": 15, "generated_tokens": 12, "cached_tokens": 5}
    assert "started_at" not in fields and "error" not in fields  # unset fields are not written
    assert JobRecord.from_redis(_as_stored(fields)) == record


def test_status_updates_merge_into_the_record_and_the_error_stays_typed() -> None:
    error = JobError("UNAVAILABLE", "policy down", component="policy")
    stored = {
        **_full().to_redis(),
        **status_fields("running", started_at=20.0, worker="host:1"),
        **status_fields("failed", finished_at=30.0, error=error),
    }
    record = JobRecord.from_redis(_as_stored(stored))
    assert (record.status, record.started_at, record.worker, record.finished_at) == ("failed", 20.0, "host:1", 30.0)
    assert record.error == error
    assert record.queue_wait() == pytest.approx(7.5)
    assert json.loads(stored["error"]) == error.to_dict()  # the wire shape old readers parse


def test_a_record_written_before_new_fields_existed_still_loads() -> None:
    old = {"caller": "alice", "status": "queued", "created_at": 1.0, "model": "m", "kind": "chat.completion"}
    record = JobRecord.from_redis(_as_stored({k: json.dumps(v) for k, v in old.items()}))
    assert (record.caller, record.model, record.n, record.budget, record.task_type) == ("alice", "m", 1, None, None)
    assert record.probe == ProbeTokens() and record.degraded_by == []


def test_unknown_fields_are_ignored_and_non_json_values_read_as_text() -> None:
    record = JobRecord.from_redis({b"status": b'"running"', b"from_a_newer_peer": b"1", b"worker": b"host:9"})
    assert (record.status, record.worker) == ("running", "host:9")
    assert JobRecord.from_redis({"probe": "null", "degraded_by": "null"}).probe == ProbeTokens()


@pytest.mark.parametrize(
    ("fields", "bad"),
    [
        ({"n": "many"}, ["n"]),
        ({"status": '"exploded"'}, ["status"]),
        ({"kind": '"embedding"', "created_at": '"yesterday"'}, ["created_at", "kind"]),
        ({"error": json.dumps({"code": "NOT_A_CODE", "message": "x"})}, ["error"]),
        ({"probe": json.dumps({"prompt_tokens": "lots"})}, ["probe.prompt_tokens"]),
    ],
)
def test_a_malformed_record_is_refused_naming_its_fields(fields: dict[str, str], bad: list[str]) -> None:
    with pytest.raises(MalformedJobRecord) as caught:
        JobRecord.from_redis(fields, "ttc:job:x")
    assert caught.value.fields == bad
    assert "ttc:job:x" in str(caught.value)


def test_status_updates_are_validated_when_written() -> None:
    with pytest.raises(ValueError, match="not job record fields"):
        status_fields("running", startd_at=1.0)
    with pytest.raises(ValueError):
        status_fields("running", started_at="soon")


async def test_worker_writes_and_gateway_reads_the_same_record(redis_server: RedisServer) -> None:
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        key = ev.job_key("rt")
        await client.hset(key, mapping=_full().to_redis())  # type: ignore[arg-type]
        events = ev.JobEvents(client, ttl_s=60)
        await events.set_status("rt", ev.RUNNING, started_at=13.0, worker="w:1")
        error = JobError("INVALID_ARGUMENT", "bad verifier", field="strategy.verifier")
        result = orchestrator_pb2.SearchResult(job_id="rt", error=error.to_json())
        assert await events.record_result(result, ev.FAILED)
        record = JobRecord.from_redis(await client.hgetall(key), key)
        assert (record.status, record.worker, record.error) == ("failed", "w:1", error)
        assert record.model_copy(update={"status": "queued", "started_at": None, "worker": None}).model_dump(
            exclude={"finished_at", "error"}
        ) == _full().model_dump(exclude={"finished_at", "error"})
    finally:
        await client.aclose()
