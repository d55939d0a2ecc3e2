"""Fixtures shared by end-to-end test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.gateway_stack import GatewayStack
from tests.e2e.qwen_stack import running_qwen_stack
from tests.helpers.processes import RedisServer


@pytest.fixture(scope="module")
def qwen_stack(redis_server: RedisServer) -> Iterator[GatewayStack]:
    """Qwen2.5-Coder-0.5B behind the shipped routing table, with a sandbox (tests/e2e/qwen_stack.py);
    one per module that asks for it, stopped when that module's tests are done."""
    with running_qwen_stack(redis_server) as stack:
        yield stack
