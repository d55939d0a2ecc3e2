"""The one way the gateway and the workers open Redis: every command rides through a short Redis
outage (a restart: with the append-only file the data comes back, docs/reliability.md) by
reconnecting with a capped exponential backoff, instead of failing the request it serves."""

from __future__ import annotations

from redis import asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError, TimeoutError

# 0.05 s doubling to 0.5 s: about 15 s of retries, longer than a supervised restart takes.
OUTAGE_RETRIES = 32


def redis_client(url: str) -> aioredis.Redis:
    """An asyncio Redis client for ``url`` whose commands retry through a restart."""
    retry = Retry(ExponentialBackoff(cap=0.5, base=0.05), OUTAGE_RETRIES)
    return aioredis.Redis.from_url(url, retry=retry, retry_on_error=[ConnectionError, TimeoutError])


# A publish through Celery's own producer (tools and tests: the gateway writes its jobs' messages
# in its own retried transaction, celery_message.py) retries as long: Celery's default gives up after ~0.6 s.
PUBLISH_RETRY_POLICY = {
    "max_retries": OUTAGE_RETRIES,
    "interval_start": 0.05,
    "interval_step": 0.1,
    "interval_max": 0.5,
}
