"""Several policy deployments behind one gateway: their models, aliases, health and load.

Each deployment (a policy service at one gRPC target) serves its own models and is watched by
its own :class:`PolicyWatch`. The fleet lists every deployment's models, resolves a request's
model name (an alias from ``TTC_GATEWAY_MODEL_ALIASES`` first) to the deployment that serves
it, and answers OpenAI's 404 ``model_not_found`` for a name none serves. Workers send a job to
the deployment their own ``TTC_ORCHESTRATOR_POLICY_TARGETS`` names for its model; the gateway
finds each deployment's models by asking it (``ListModels``), so the two need only the same
targets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import grpc

from services.common.errors import Unavailable
from services.gateway.errors import HTTPError
from services.gateway.upstream import PolicyWatch
from services.gen.ttc.v1 import policy_pb2


def parse_pairs(text: str, what: str) -> dict[str, str]:
    """``"a=b,c=d"`` as a mapping; ``ValueError`` naming a malformed or repeated entry."""
    pairs: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        key, sep, value = (part.strip() for part in entry.partition("="))
        if not sep or not key or not value:
            raise ValueError(f"{what}: expected name=value, got {entry!r}")
        if key in pairs:
            raise ValueError(f"{what}: {key!r} is listed twice")
        pairs[key] = value
    return pairs


def fleet_targets(default: str, per_model: str) -> list[str]:
    """The distinct deployments to watch: the default target and every per-model one, in order."""
    targets = [default, *parse_pairs(per_model, "TTC_GATEWAY_POLICY_TARGETS").values()]
    return list(dict.fromkeys(targets))


class PolicyFleet:
    """The watched deployments, with the one interface planning, routers and health read."""

    def __init__(self, watches: Sequence[PolicyWatch], aliases: dict[str, str] | None = None) -> None:
        if not watches:
            raise ValueError("a fleet needs at least one policy deployment")
        self.watches = list(watches)
        self.aliases = dict(aliases or {})

    # ------------------------------------------------------------ state

    @property
    def up(self) -> bool:
        """Some deployment is admitted against: it answers, or answered within its grace period
        (``PolicyWatch.up``; each model's own deployment is checked per request)."""
        return any(w.up for w in self.watches)

    @property
    def last_error(self) -> str:
        return "; ".join(f"{w.target}: {w.last_error}" for w in self.watches if w.last_error)

    @property
    def kv_utilization(self) -> float:
        """The fullest deployment's KV-cache utilization (admission control sheds on the worst)."""
        return max(w.kv_utilization for w in self.watches)

    @property
    def models(self) -> dict[str, policy_pb2.ModelInfo]:
        """Every served model of every deployment that answers (the first deployment wins a shared name)."""
        served: dict[str, policy_pb2.ModelInfo] = {}
        for watch in self.watches:
            for name, info in watch.models.items():
                served.setdefault(name, info)
        return served

    def resolve(self, name: str) -> str:
        """The served model name behind ``name`` (an alias, or the name itself)."""
        return self.aliases.get(name, name)

    def require_up(self) -> None:
        if len(self.watches) == 1:
            self.watches[0].require_up()
        elif not self.up:
            raise Unavailable(f"no policy service deployment is available ({self.last_error}); retry shortly")

    def watch_of(self, name: str) -> PolicyWatch | None:
        served = self.resolve(name)
        return next((w for w in self.watches if served in w.models), None)

    def model(self, name: str) -> policy_pb2.ModelInfo:
        """The model ``name`` (or its alias) names: 503 when its deployment (or, for a name no
        answering deployment serves, any deployment) is down past its grace period, else 404
        ``model_not_found``. A deployment within its grace period answers from its last model list."""
        self.require_up()
        watch = self.watch_of(name)
        if watch is not None:
            watch.require_up()
            return watch.models[self.resolve(name)]
        down = [w for w in self.watches if not w.up]
        if down:
            down[0].require_up()
        known = ", ".join(sorted([*self.models, *self.aliases])) or "none"
        raise HTTPError(
            404,
            f"The model {name!r} does not exist (served models: {known})",
            param="model",
            code="model_not_found",
        )

    # ------------------------------------------------------------ polling

    async def refresh(self) -> None:
        await asyncio.gather(*(w.refresh() for w in self.watches))

    def start(self) -> None:
        for watch in self.watches:
            watch.start()

    async def stop(self) -> None:
        for watch in self.watches:
            await watch.stop()


class RoutedPolicy:
    """The policy's ``Generate`` sent to the deployment that serves the request's model (the
    difficulty probe uses it as it would one deployment's stub). The call waits for the
    deployment's channel to be ready (``wait_for_ready``) within its timeout, so a probe sent
    while the policy restarts is answered late instead of failing the request with 503."""

    def __init__(self, fleet: PolicyFleet) -> None:
        self.fleet = fleet

    def Generate(
        self, request: policy_pb2.GenerateRequest, timeout: float | None = None
    ) -> grpc.aio.UnaryUnaryCall[policy_pb2.GenerateRequest, policy_pb2.GenerateResponse]:
        watch = self.fleet.watch_of(request.model) or self.fleet.watches[0]
        routed = policy_pb2.GenerateRequest()
        routed.CopyFrom(request)
        routed.model = self.fleet.resolve(request.model)
        return watch.stub.Generate(routed, timeout=timeout, wait_for_ready=True)
