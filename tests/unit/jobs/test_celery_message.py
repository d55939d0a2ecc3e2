"""The gateway's hand-built broker message is the one Celery's producer sends, and Celery's own
consumer reads it back as the same task (a real Redis; kombu's Redis transport on both sides)."""

from __future__ import annotations

import base64
import json
from typing import Any

import redis

from services.jobs.celery_app import make_celery
from services.jobs.celery_message import search_message
from services.jobs.events import SEARCH_TASK

# Per-message fields: fresh ids, the sender's name, and what only logs read.
PER_MESSAGE = {("properties", "delivery_tag"), ("headers", "origin"), ("headers", "argsrepr")}


def _decoded(raw: bytes | str) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(raw)
    message["body"] = json.loads(base64.b64decode(message["body"]))
    for section, field in PER_MESSAGE:
        message[section].pop(field)
    return message


def test_the_message_is_what_celery_sends(redis_url: str) -> None:
    app = make_celery(redis_url, queue="q-msg")
    client = redis.Redis.from_url(redis_url)
    try:
        client.delete("q-msg")
        app.send_task(SEARCH_TASK, args=["payload-1"], task_id="job-1", queue="q-msg")
        (sent,) = client.lrange("q-msg", 0, -1)
        built = search_message(app, "job-1", "payload-1", "q-msg")
        assert _decoded(built) == _decoded(sent)
        assert "payload-1" not in json.loads(built)["headers"]["argsrepr"]  # logs get the job id, not the job
    finally:
        client.delete("q-msg")
        client.close()


def test_celerys_consumer_reads_it_as_the_same_task(redis_url: str) -> None:
    app = make_celery(redis_url, queue="q-consume")
    client = redis.Redis.from_url(redis_url)
    try:
        client.delete("q-consume")
        client.lpush("q-consume", search_message(app, "job-2", "payload-2", "q-consume"))
        with app.connection_for_read() as connection:
            queue = app.amqp.queues["q-consume"](connection.default_channel)
            message = queue.get(no_ack=False)
            assert message is not None
            assert message.headers["task"] == SEARCH_TASK and message.headers["id"] == "job-2"
            args, kwargs, _embed = message.decode()
            assert args == ["payload-2"] and kwargs == {}
            assert message.delivery_info["routing_key"] == "q-consume"
            message.ack()
        assert client.llen("q-consume") == 0
    finally:
        client.delete("q-consume")
        client.close()
