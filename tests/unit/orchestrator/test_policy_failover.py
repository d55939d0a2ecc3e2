"""GrpcPolicy over several replicas: the job's replica first, the next one when it is down."""

from __future__ import annotations

from services.common.grpc_client import insecure_channel
from services.orchestrator.clients import GrpcPolicy
from services.search.interfaces import GenerateCall, Message
from tests.helpers.processes import free_port
from tests.unit.orchestrator.test_clients import FakePolicy, FakeVerifier, services

__all__ = ["services"]


async def generate(policy: GrpcPolicy) -> int:
    gen = await policy.generate(GenerateCall((Message("user", "What is 6*7?"),), n=1, seeds=(1,), max_tokens=8))
    return len(gen.candidates)


async def test_a_down_replica_fails_over_to_the_next_and_stays_there(
    services: tuple[FakePolicy, FakeVerifier, str],
) -> None:
    fake_policy, _, target = services
    dead = insecure_channel(f"127.0.0.1:{free_port()}")  # nothing listens there: UNAVAILABLE
    live = insecure_channel(target)
    try:
        policy = GrpcPolicy([dead, live], "qwen", timeout=10)
        assert await generate(policy) == 1
        assert await generate(policy) == 1
        assert len(fake_policy.requests) == 2  # both calls reached the live replica
    finally:
        await dead.close()
        await live.close()


async def test_one_replica_down_and_no_other_is_an_error(services: tuple[FakePolicy, FakeVerifier, str]) -> None:
    import pytest

    from services.search.interfaces import ComponentError

    dead = insecure_channel(f"127.0.0.1:{free_port()}")
    try:
        with pytest.raises(ComponentError) as err:
            await generate(GrpcPolicy([dead], "qwen", timeout=10))
        assert err.value.args and "UNAVAILABLE" in str(err.value.__dict__) + str(err.value.args)
    finally:
        await dead.close()
