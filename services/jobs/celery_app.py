"""The Celery application both the gateway (sender) and the workers (consumers) build.

One function so the two sides agree on the broker, the queue and the delivery guarantees:
late acknowledgement (a job is acked only after its result is recorded), requeue when a
worker process is lost, one job prefetched per slot, and a broker visibility timeout after
which an unacknowledged job (its worker died) is delivered again.
"""

from __future__ import annotations

from celery import Celery
from kombu.entity import Queue

from services.jobs.events import SEARCH_TASK
from services.jobs.redis_client import PUBLISH_RETRY_POLICY


def make_celery(
    broker_url: str,
    queue: str = "ttc.search",
    visibility_timeout_s: int = 600,
    restore_interval_s: int = 10,
) -> Celery:
    """A Celery app on ``broker_url`` routing ``ttc.search`` tasks to ``queue``."""
    app = Celery("ttc", broker=broker_url, set_as_current=False)
    app.conf.update(
        task_default_queue=queue,
        task_queues=(Queue(queue, routing_key=queue),),
        task_routes={SEARCH_TASK: {"queue": queue}},
        task_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        task_ignore_result=True,
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        broker_connection_retry_on_startup=True,
        # A publish retries through a Redis restart (services/jobs/redis_client.py).
        task_publish_retry_policy=PUBLISH_RETRY_POLICY,
        broker_transport_options={
            "visibility_timeout": visibility_timeout_s,
            # Sweep for unacknowledged jobs of dead workers every restore_interval_s seconds.
            "unacked_restore_interval": restore_interval_s,
            "unacked_restore_throttle": 1,
        },
    )
    return app
