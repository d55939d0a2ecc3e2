"""Prefix-affinity routing to the replicas of one service (the policy's, in practice).

Each replica keeps its own prefix cache (the llama.cpp engine's retained prompts, vLLM's
prefix cache), so the calls of one search should land on one replica: beam search, MCTS and
PRM scoring re-send long shared prefixes on every call. A consistent-hash ring over the
replica addresses maps a key (the job id) to a replica; the ring's next replicas are the
fail-over order when that one is down (UNAVAILABLE). Adding or removing one replica moves
only the keys of its arc of the ring (about 1/N of the jobs), so scaling out keeps most
caches warm.

Replicas are the addresses the target's host name resolves to (a Kubernetes headless Service
answers with every ready pod) or an explicit list, re-resolved every ``refresh_s`` seconds.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import logging
import socket
import time
from collections.abc import Callable, Sequence

import grpc

log = logging.getLogger(__name__)

#: points per replica on the ring (spreads keys evenly over few replicas)
VNODES = 64


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class HashRing:
    """A consistent-hash ring over ``nodes`` with ``vnodes`` points each."""

    def __init__(self, nodes: Sequence[str], vnodes: int = VNODES) -> None:
        self.nodes = sorted(set(nodes))
        points = sorted((_hash(f"{node}#{i}"), node) for node in self.nodes for i in range(vnodes))
        self._keys = [h for h, _ in points]
        self._nodes = [n for _, n in points]

    def order(self, key: str) -> list[str]:
        """Every node once, starting with ``key``'s owner and going round the ring."""
        if not self.nodes:
            return []
        start = bisect.bisect(self._keys, _hash(key)) % len(self._keys)
        seen: list[str] = []
        for i in range(len(self._nodes)):
            node = self._nodes[(start + i) % len(self._nodes)]
            if node not in seen:
                seen.append(node)
                if len(seen) == len(self.nodes):
                    break
        return seen


def split_target(target: str) -> tuple[str, int]:
    """``host:port`` (optionally ``dns:///host:port``) into its parts."""
    bare = target.removeprefix("dns:///").removeprefix("dns:")
    host, _, port = bare.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"target {target!r} is not host:port")
    return host.strip("[]"), int(port)


def resolve(target: str) -> list[str]:
    """The ``ip:port`` addresses ``target``'s host resolves to (sorted, distinct). IPv4 ones
    only when there are any: ``localhost`` also resolving to ``::1`` is one server, not two."""
    host, port = split_target(target)
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    v4 = {str(i[4][0]) for i in infos if i[0] == socket.AF_INET}
    if v4:
        return sorted(f"{ip}:{port}" for ip in v4)
    return sorted({f"[{i[4][0]}]:{port}" for i in infos})


class ReplicaRouter:
    """Channels to the replicas behind ``target``, in affinity order for a key."""

    def __init__(
        self,
        target: str,
        channel: Callable[[str], grpc.aio.Channel],
        *,
        replicas: Sequence[str] = (),
        refresh_s: float = 30.0,
        resolver: Callable[[str], list[str]] = resolve,
    ) -> None:
        self.target = target
        self._channel = channel
        self._fixed = list(replicas)
        self._refresh_s = refresh_s
        self._resolver = resolver
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._ring = HashRing([])
        self._resolved_at = -float("inf")

    async def _refresh(self) -> None:
        if self._fixed:
            addresses = self._fixed
        else:
            try:
                addresses = await asyncio.to_thread(self._resolver, self.target)
            except (OSError, ValueError) as exc:  # keep the last known replicas (or the target itself)
                log.warning("could not resolve policy replicas", extra={"target": self.target, "error": str(exc)})
                addresses = self._ring.nodes or [self.target]
        self._resolved_at = time.monotonic()
        if addresses != self._ring.nodes:
            log.info("policy replicas", extra={"target": self.target, "replicas": addresses})
            self._ring = HashRing(addresses)

    async def channels(self, key: str) -> list[grpc.aio.Channel]:
        """``key``'s replica first, then the others in ring order (its fail-over order)."""
        if time.monotonic() - self._resolved_at >= self._refresh_s:
            await self._refresh()
        out = []
        for address in self._ring.order(key):
            if address not in self._channels:
                self._channels[address] = self._channel(address)
            out.append(self._channels[address])
        return out

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
