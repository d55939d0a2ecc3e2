"""Fixtures shared by all tests: a private Redis and the embedded model's path."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.helpers.processes import RedisServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A private Redis for one test module: its keys and queues are its own."""
    server = RedisServer().start()
    try:
        yield server.url
    finally:
        server.stop()
