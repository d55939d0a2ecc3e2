"""The stack the answer-form tests ask: the gateway with the shipped routing table, a worker,
the policy service on Qwen2.5-Coder-0.5B and the bubblewrap sandbox, each its own process.

Started by the ``qwen_stack`` fixture (tests/e2e/conftest.py), once per test module that asks
for it; the tests call it with the model name below, as a user of that routing table would.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from tests.e2e.gateway_stack import GatewayStack
from tests.helpers.processes import RedisServer, start_sandbox
from tests.helpers.routing import shipped_routing

QWEN = "qwen2.5-coder-0.5b"


@contextmanager
def running_qwen_stack(redis_server: RedisServer) -> Iterator[GatewayStack]:
    """The stack, started and healthy; stopped, sandbox included, when the block ends."""
    sandbox = start_sandbox(91000 + (os.getpid() % 500) * 64, 4)
    stack = GatewayStack(
        redis_server,
        worker_env={"TTC_ORCHESTRATOR_SANDBOX_TARGET": sandbox.target},
        gateway_env=shipped_routing(),
    )
    try:
        stack.start_policy({"TTC_POLICY_MODEL": QWEN})
        stack.start_worker()
        stack.start_gateway()
        yield stack
    finally:
        stack.stop()
        sandbox.process.stop()
