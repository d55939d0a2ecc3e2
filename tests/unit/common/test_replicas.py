"""Prefix-affinity routing: the consistent-hash ring and the replica router's fail-over order."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from services.common.replicas import HashRing, ReplicaRouter, split_target

NODES = ["10.0.0.1:50051", "10.0.0.2:50051", "10.0.0.3:50051"]


def test_a_key_always_maps_to_the_same_node_and_every_node_follows_once() -> None:
    ring = HashRing(NODES)
    order = ring.order("job-42")
    assert order == HashRing(list(reversed(NODES))).order("job-42")  # input order does not matter
    assert sorted(order) == sorted(NODES)
    assert all(ring.order("job-42") == order for _ in range(5))


def test_keys_spread_over_the_nodes() -> None:
    owners = Counter(HashRing(NODES).order(f"job-{i}")[0] for i in range(3000))
    assert set(owners) == set(NODES)
    assert min(owners.values()) > 3000 / len(NODES) * 0.6


def test_adding_a_node_moves_only_its_share_of_keys() -> None:
    before, after = HashRing(NODES), HashRing([*NODES, "10.0.0.4:50051"])
    keys = [f"job-{i}" for i in range(3000)]
    moved = [k for k in keys if before.order(k)[0] != after.order(k)[0]]
    assert all(after.order(k)[0] == "10.0.0.4:50051" for k in moved)  # keys move only to the new node
    assert 0.1 < len(moved) / len(keys) < 0.4  # about a quarter, not a reshuffle


def test_removing_a_node_fails_its_keys_over_to_their_next_node() -> None:
    ring, smaller = HashRing(NODES), HashRing(NODES[1:])
    for i in range(500):
        order = ring.order(f"job-{i}")
        expected = [n for n in order if n != NODES[0]]
        assert smaller.order(f"job-{i}") == expected


def test_empty_ring_and_targets() -> None:
    assert HashRing([]).order("x") == []
    assert split_target("dns:///policy-headless:50051") == ("policy-headless", 50051)
    assert split_target("[::1]:50051") == ("::1", 50051)
    with pytest.raises(ValueError):
        split_target("no-port")


class FakeChannel:
    def __init__(self, address: str) -> None:
        self.address = address
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def test_router_resolves_orders_and_reresolves() -> None:
    answers = [NODES[:2], NODES]

    def resolver(target: str) -> list[str]:
        assert target == "policy:50051"
        return answers[0]

    async def run() -> None:
        router = ReplicaRouter("policy:50051", FakeChannel, refresh_s=0.0, resolver=resolver)  # type: ignore[arg-type]
        first = [c.address for c in await router.channels("job-1")]
        assert first == HashRing(NODES[:2]).order("job-1")
        answers.pop(0)
        again = [c.address for c in await router.channels("job-1")]
        assert again == HashRing(NODES).order("job-1")
        channels = await router.channels("job-2")
        assert len({id(c) for c in channels}) == 3  # one channel per replica, reused
        assert channels[0] in await router.channels("job-2")
        await router.close()
        assert all(c.closed for c in channels)

    asyncio.run(run())


def test_router_keeps_the_last_replicas_when_resolution_fails() -> None:
    calls = []

    def resolver(target: str) -> list[str]:
        calls.append(target)
        if len(calls) > 1:
            raise OSError("dns down")
        return NODES

    async def run() -> None:
        router = ReplicaRouter("policy:50051", FakeChannel, refresh_s=0.0, resolver=resolver)  # type: ignore[arg-type]
        a = [c.address for c in await router.channels("k")]
        b = [c.address for c in await router.channels("k")]
        assert a == b and len(calls) == 2

    asyncio.run(run())


def test_fixed_replicas_are_used_without_resolving() -> None:
    def resolver(target: str) -> list[str]:
        raise AssertionError("a fixed list is not resolved")

    async def run() -> None:
        router = ReplicaRouter("x:1", FakeChannel, replicas=NODES, resolver=resolver)  # type: ignore[arg-type]
        assert [c.address for c in await router.channels("job")] == HashRing(NODES).order("job")

    asyncio.run(run())


def test_resolve_keeps_one_address_family() -> None:
    from services.common.replicas import resolve

    assert resolve("127.0.0.1:50051") == ["127.0.0.1:50051"]
    assert resolve("localhost:50051") == ["127.0.0.1:50051"]
