"""A search job as the broker message a Celery worker consumes, built without Celery's producer.

The gateway puts this message on the queue's Redis list inside the same transaction as the
job's record and the queue-length read. That saves the producer's round trip and its sender
thread (kombu producers are synchronous and not thread-safe), and it makes the queue depth that
admission reads exact: the job is on the list when the length is read, so no job is counted
both as "being sent" and as "waiting".

The message is what ``Celery.send_task`` puts on the list through kombu's Redis transport for
this app (task protocol 2 built by Celery's own ``as_task_v2``, the app's serializer, a base64
body, the anonymous exchange, priority 0). ``tests/unit/jobs/test_celery_message.py`` compares
the two on a real Redis, and every end-to-end test runs workers on it.
"""

from __future__ import annotations

import base64
import os
import socket
import uuid

from celery import Celery
from kombu.serialization import dumps as serialize
from kombu.utils.json import dumps as json_dumps

from services.jobs.events import SEARCH_TASK

# Celery's ``origin`` header: who sent the task (for logs and monitoring only).
ORIGIN = f"gen{os.getpid()}@{socket.gethostname()}"
PERSISTENT = 2  # AMQP delivery mode; kombu's Redis transport records it and nothing reads it


def search_message(app: Celery, job_id: str, payload: str, queue: str) -> str:
    """The broker message of one search job (its task id is the job id), as LPUSHed to ``queue``.

    ``argsrepr`` names the job instead of repeating the payload: Celery's default repr would
    double the message for a field only logs read."""
    task = app.amqp.as_task_v2(
        job_id,
        SEARCH_TASK,
        args=[payload],
        kwargs={},
        reply_to=app.thread_oid,
        origin=ORIGIN,
        argsrepr=f"[<search job {job_id}>]",
        kwargsrepr="{}",
        ignore_result=None,  # as send_task leaves it: the app's task_ignore_result decides
    )
    content_type, encoding, body = serialize(task.body, serializer=app.conf.task_serializer)
    raw = body if isinstance(body, bytes) else body.encode(encoding)
    properties = {
        **task.properties,
        "delivery_mode": PERSISTENT,
        "delivery_info": {"exchange": "", "routing_key": queue},
        "priority": 0,
        "body_encoding": "base64",
        "delivery_tag": str(uuid.uuid4()),
    }
    message = {
        "body": base64.b64encode(raw).decode("ascii"),
        "content-encoding": encoding,
        "content-type": content_type,
        "headers": task.headers,
        "properties": properties,
    }
    return str(json_dumps(message))
