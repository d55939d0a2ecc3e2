"""A real gateway stack for end-to-end tests: Redis, the policy service on SmolLM2, Celery
workers and the gateway, each its own process on free ports (imported by the gateway e2e
test modules; each module builds its own stack because fault tests kill parts of it)."""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field

import httpx

from services.common.ports import free_port
from tests.helpers.processes import ROOT, RedisServer, ServiceProcess, grpc_healthy, http_healthy

MODEL = "smollm2-135m"


@dataclass
class GatewayStack:
    redis: RedisServer
    queue: str = field(default_factory=lambda: f"ttc.search.{uuid.uuid4().hex[:8]}")
    policy_port: int = field(default_factory=free_port)
    policy_metrics_port: int = field(default_factory=free_port)
    gateway_port: int = field(default_factory=free_port)
    gateway_env: dict[str, str] = field(default_factory=dict)
    worker_env: dict[str, str] = field(default_factory=dict)
    gateway_args: list[str] = field(default_factory=list)  # a command other than `ttc serve gateway`
    policy: ServiceProcess | None = None
    gateway: ServiceProcess | None = None
    workers: list[ServiceProcess] = field(default_factory=list)
    worker_metrics_ports: list[int] = field(default_factory=list)
    worker_grpc_ports: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}"

    @property
    def policy_target(self) -> str:
        return f"127.0.0.1:{self.policy_port}"

    def _common(self) -> dict[str, str]:
        return {"TTC_REDIS_URL": self.redis.url, "TTC_LOG_LEVEL": "INFO"}

    def start_policy(self, extra: dict[str, str] | None = None) -> ServiceProcess:
        env = {
            **self._common(),
            "TTC_POLICY_HOST": "127.0.0.1",
            "TTC_POLICY_PORT": str(self.policy_port),
            "TTC_POLICY_METRICS_PORT": str(self.policy_metrics_port),
            "TTC_POLICY_MODEL": MODEL,
            **(extra or {}),
        }
        self.policy = ServiceProcess("policy", env).start()
        self.policy.wait_until(lambda: grpc_healthy(self.policy_target), timeout=300)
        return self.policy

    def start_worker(self, concurrency: int = 4, extra: dict[str, str] | None = None) -> ServiceProcess:
        """A worker on the stack's queue; ``extra`` overrides its settings (say, another verifier target).
        By default its verifier target is a port nothing listens on: a verifier outage."""
        metrics_port, grpc_port = free_port(), free_port()
        env = {
            **self._common(),
            "TTC_ORCHESTRATOR_POLICY_TARGET": self.policy_target,
            "TTC_ORCHESTRATOR_VERIFIER_TARGET": f"127.0.0.1:{free_port()}",
            "TTC_JOBS_QUEUE": self.queue,
            "TTC_ORCHESTRATOR_METRICS_PORT": str(metrics_port),
            "TTC_ORCHESTRATOR_PORT": str(grpc_port),
            "TTC_ORCHESTRATOR_HOST": "127.0.0.1",
            "TTC_ORCHESTRATOR_CONCURRENCY": str(concurrency),
            "TTC_ORCHESTRATOR_VISIBILITY_TIMEOUT_S": "8",
            "TTC_ORCHESTRATOR_RESTORE_INTERVAL_S": "1",
            "TTC_ORCHESTRATOR_LEASE_TTL_S": "3",
            "TTC_ORCHESTRATOR_WORKER_NAME": f"w{len(self.workers)}-{uuid.uuid4().hex[:6]}",
            **self.worker_env,
            **(extra or {}),
        }
        worker = ServiceProcess("orchestrator", env).start()
        worker.wait_until(lambda: bool(re.search(r"ready\.", worker.log())), timeout=120)
        self.workers.append(worker)
        self.worker_metrics_ports.append(metrics_port)
        self.worker_grpc_ports.append(grpc_port)
        return worker

    def start_gateway(self) -> ServiceProcess:
        env = {
            **self._common(),
            "TTC_GATEWAY_HOST": "127.0.0.1",
            "TTC_GATEWAY_PORT": str(self.gateway_port),
            "TTC_GATEWAY_POLICY_TARGET": self.policy_target,
            "TTC_JOBS_QUEUE": self.queue,
            "TTC_GATEWAY_STATS_INTERVAL_S": "0.5",
            "TTC_GATEWAY_JOB_TIMEOUT_S": "120",
            # The policy-down tests (test_gateway, test_faults) stop the policy and expect the
            # gateway's own 503 soon after; the chaos suite runs with the default grace period.
            "TTC_GATEWAY_POLICY_GRACE_S": "2",
            # The gateway mechanics (probe, routed self-consistency) are tested on the hand-written
            # v1 table, for every model (no per-model table); the shipped tables, with
            # tests/helpers/routing.py:shipped_routing(), in test_program_of_thought.py and test_answer_form.py.
            "TTC_GATEWAY_ROUTING_TABLE": str(ROOT / "services/gateway/routing/routing.v1.json"),
            "TTC_GATEWAY_ROUTING_TABLES": "",
            **self.gateway_env,
        }
        self.gateway = ServiceProcess("gateway", env, args=self.gateway_args).start()
        self.gateway.wait_until(lambda: http_healthy(f"{self.url}/readyz"), timeout=120)
        return self.gateway

    def queue_length(self) -> int:
        import redis

        return int(redis.Redis.from_url(self.redis.url).llen(self.queue))

    def metric(self, url: str, name: str, **labels: str) -> float:
        """Sum of a Prometheus sample ``name`` whose labels include ``labels``."""
        total = 0.0
        for line in httpx.get(url, timeout=5).text.splitlines():
            if not line.startswith(name):
                continue
            head, _, value = line.rpartition(" ")
            if head.split("{")[0] != name:
                continue
            if all(f'{k}="{v}"' in head for k, v in labels.items()):
                total += float(value)
        return total

    def policy_metric(self, name: str, **labels: str) -> float:
        return self.metric(f"http://127.0.0.1:{self.policy_metrics_port}/metrics", name, **labels)

    def gateway_metric(self, name: str, **labels: str) -> float:
        return self.metric(f"{self.url}/metrics", name, **labels)

    def wait_for(self, predicate: object, timeout: float = 60.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():  # type: ignore[operator]
                return
            time.sleep(0.1)
        raise TimeoutError(f"timed out waiting for {what}")

    def stop(self) -> None:
        for proc in [self.gateway, *self.workers, self.policy]:
            if proc is not None:
                proc.stop()
