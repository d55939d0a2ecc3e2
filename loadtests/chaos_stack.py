"""The system under chaos: a real ``ttc stack`` on free 127.0.0.1 ports in its own run directory,
and the faults done to it (SIGKILL of the orchestrator worker; restarts of the policy, the
verifier and Redis). ``ttc stack`` supervises its children, so every fault is healed by the
stack itself; the pids come from its ``.run/<service>.pid`` files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from services.common.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
# What each fault does: the worker crashes (SIGKILL, its jobs are unacknowledged and come back),
# the others are restarted (SIGTERM, as a deploy or an operator would).
FAULT_SIGNALS: dict[str, signal.Signals] = {
    "orchestrator": signal.SIGKILL,
    "policy": signal.SIGTERM,
    "verifier": signal.SIGTERM,
    "redis": signal.SIGTERM,
}


@dataclass
class LocalStack:
    """``ttc stack`` with ``model`` on free ports; worker settings tuned so a killed worker's jobs
    are redelivered within seconds (the e2e fault tests use the same)."""

    model: str = "smollm2-135m"
    concurrency: int = 4
    extra_env: dict[str, str] = field(default_factory=dict)
    run_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ttc-chaos-")))
    ports: dict[str, int] = field(default_factory=dict)
    queue: str = field(default_factory=lambda: f"ttc.search.chaos-{uuid.uuid4().hex[:6]}")
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports['gateway']}"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.ports['redis']}/0"

    @property
    def log_path(self) -> Path:
        return self.run_dir / "stack.log"

    def env(self) -> dict[str, str]:
        names = ["redis", "gateway", "policy", "policy_metrics", "sandbox", "sandbox_metrics", "verifier"]
        names += ["verifier_metrics", "orchestrator", "orchestrator_metrics"]
        self.ports = {name: free_port() for name in names}
        p = self.ports
        policy, sandbox, verifier = (f"127.0.0.1:{p[n]}" for n in ("policy", "sandbox", "verifier"))
        uid_base = 90000 + (os.getpid() % 500) * 64  # apart from the sandboxes of the e2e tests
        return {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TTC_LOG_JSON": "false",
            "TTC_REDIS_URL": self.redis_url,
            "TTC_JOBS_QUEUE": self.queue,
            "TTC_POLICY_HOST": "127.0.0.1",
            "TTC_POLICY_PORT": str(p["policy"]),
            "TTC_POLICY_METRICS_PORT": str(p["policy_metrics"]),
            "TTC_POLICY_MODEL": self.model,
            "TTC_POLICY_MODELS_DIR": str(ROOT / "models"),
            "TTC_SANDBOX_HOST": "127.0.0.1",
            "TTC_SANDBOX_PORT": str(p["sandbox"]),
            "TTC_SANDBOX_METRICS_PORT": str(p["sandbox_metrics"]),
            "TTC_SANDBOX_UID_BASE": str(uid_base),
            "TTC_VERIFIER_HOST": "127.0.0.1",
            "TTC_VERIFIER_PORT": str(p["verifier"]),
            "TTC_VERIFIER_METRICS_PORT": str(p["verifier_metrics"]),
            "TTC_VERIFIER_POLICY_TARGET": policy,
            "TTC_VERIFIER_SANDBOX_TARGET": sandbox,
            "TTC_ORCHESTRATOR_HOST": "127.0.0.1",
            "TTC_ORCHESTRATOR_PORT": str(p["orchestrator"]),
            "TTC_ORCHESTRATOR_METRICS_PORT": str(p["orchestrator_metrics"]),
            "TTC_ORCHESTRATOR_POLICY_TARGET": policy,
            "TTC_ORCHESTRATOR_VERIFIER_TARGET": verifier,
            "TTC_ORCHESTRATOR_SANDBOX_TARGET": sandbox,
            "TTC_ORCHESTRATOR_CONCURRENCY": str(self.concurrency),
            "TTC_ORCHESTRATOR_VISIBILITY_TIMEOUT_S": "8",
            "TTC_ORCHESTRATOR_RESTORE_INTERVAL_S": "1",
            "TTC_ORCHESTRATOR_LEASE_TTL_S": "3",
            "TTC_GATEWAY_HOST": "127.0.0.1",
            "TTC_GATEWAY_PORT": str(p["gateway"]),
            "TTC_GATEWAY_POLICY_TARGET": policy,
            "TTC_GATEWAY_JOB_TIMEOUT_S": "180",
            "TTC_GATEWAY_STATS_INTERVAL_S": "0.5",
            # The probe-estimator table the gateway e2e tests use with SmolLM2 (no embedding model).
            "TTC_GATEWAY_ROUTING_TABLE": str(ROOT / "services/gateway/routing/routing.v1.json"),
            "TTC_GATEWAY_ROUTING_TABLES": "",  # v1 routes every model
            **self.extra_env,
        }

    def start(self, timeout: float = 600) -> None:
        env = self.env()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "services.cli", "stack"],
                cwd=self.run_dir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ttc stack exited ({self.proc.returncode}):\n{self.log()}")
            if "ttc-serve is up" in self.log() and self.ready():
                return
            time.sleep(0.5)
        raise TimeoutError(f"ttc stack not up after {timeout:.0f}s:\n{self.log()}")

    def log(self, tail: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-tail:] if self.log_path.exists() else ""

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def pid(self, service: str) -> int:
        return int((self.run_dir / ".run" / f"{service}.pid").read_text())

    def fault(self, service: str) -> int:
        """Do ``service``'s fault to its current process; return the pid hit."""
        pid = self.pid(service)
        os.kill(pid, FAULT_SIGNALS[service])
        return pid

    def wait_restarted(self, service: str, old_pid: int, timeout: float = 120) -> float:
        """Seconds until the stack has started a new process for ``service``."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            try:
                if self.pid(service) != old_pid:
                    return time.monotonic() - start
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        raise TimeoutError(f"{service} not restarted within {timeout:.0f}s")

    def restarts_logged(self) -> int:
        return self.log(tail=10_000_000).count(" restarted (pid ")

    def stop(self) -> None:
        """SIGTERM to the stack (it stops its children); SIGKILL to whatever is left."""
        if self.proc is None:
            return
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(90)
            return
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        # The stack could not stop its children: end those still running in its run directory.
        for pid_file in (self.run_dir / ".run").glob("*.pid"):
            try:
                pid = int(pid_file.read_text())
                if Path(f"/proc/{pid}/cwd").resolve() == self.run_dir.resolve():
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass
