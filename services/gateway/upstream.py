"""What the gateway knows about the policy service: its models, health and KV-cache utilization.

Polled in the background (one ``GetStats`` per interval, ``ListModels`` now and then) so a
request never waits on it: admission control reads the last KV utilization, model lookup
reads the cached list. A policy service that stopped answering is still admitted against
for ``grace_s`` seconds after it last answered (``TTC_GATEWAY_POLICY_GRACE_S``): a restart is
seconds, and the workers wait for the policy within the job's deadline
(``services/orchestrator/retry.py``), so the request is answered late rather than refused.
Past the grace period, or before the policy has ever answered, a request is a fast 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import grpc

from services.common.errors import NotFound, Unavailable
from services.gen.ttc.v1 import policy_pb2, policy_pb2_grpc

log = logging.getLogger(__name__)
STATS_TIMEOUT_S = 5.0


class PolicyWatch:
    def __init__(self, stub: policy_pb2_grpc.PolicyStub, target: str, interval_s: float, grace_s: float = 0.0) -> None:
        self.stub = stub
        self.target = target
        self.interval_s = interval_s
        self.grace_s = grace_s
        self.models: dict[str, policy_pb2.ModelInfo] = {}
        self.kv_utilization = 0.0
        self.reachable = False  # the last poll's answer
        self.last_error = "not polled yet"
        self.last_ok = 0.0
        self._seen_at: float | None = None  # monotonic time of the last answered poll
        self._task: asyncio.Task[None] | None = None
        self._models_at = 0.0

    async def refresh(self) -> None:
        """One poll: stats always, the model list when missing or older than 30 s."""
        try:
            stats = await self.stub.GetStats(policy_pb2.StatsRequest(), timeout=STATS_TIMEOUT_S)
            if not self.models or time.monotonic() - self._models_at > 30:
                listing = await self.stub.ListModels(policy_pb2.ListModelsRequest(), timeout=STATS_TIMEOUT_S)
                self.models = {m.id: m for m in listing.models}
                self._models_at = time.monotonic()
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED and self.reachable:
                # A saturated engine answers slowly; that is load, not an outage. Keep the
                # last known state - admission control deals with load.
                log.info("policy stats poll timed out; keeping the last state", extra={"target": self.target})
                return
            if self.reachable:
                log.warning(
                    "policy service unreachable; admitting against its last model list for the grace period",
                    extra={"target": self.target, "error": err.details(), "grace_s": self.grace_s},
                )
            self.reachable = False
            self.last_error = f"{err.code().name}: {err.details()}"
            return
        self.kv_utilization = stats.kv_cache_utilization
        self.reachable = True
        self.last_error = ""
        self.last_ok = time.time()
        self._seen_at = time.monotonic()

    @property
    def up(self) -> bool:
        """Requests are admitted: the policy answered its last poll, or was seen answering less
        than ``grace_s`` ago (with its model list then)."""
        if self.reachable:
            return True
        return self._seen_at is not None and time.monotonic() - self._seen_at <= self.grace_s

    async def _loop(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def require_up(self) -> None:
        if not self.up:
            unseen = "never answered" if self._seen_at is None else f"not seen for over {self.grace_s:g}s"
            raise Unavailable(
                f"the policy service at {self.target} is unavailable ({unseen}: {self.last_error}); retry shortly",
            )

    def model(self, name: str) -> policy_pb2.ModelInfo:
        """The named model; 503 when the policy is down past the grace period, 404 when it does not
        serve ``name``."""
        self.require_up()
        info = self.models.get(name)
        if info is None:
            known = ", ".join(sorted(self.models)) or "none"
            raise NotFound(f"the model {name!r} does not exist (served models: {known})", field="model")
        return info
