"""Start real services as separate processes for end-to-end tests.

Every test process binds 127.0.0.1 on a free port; logs go to a file that is printed when a
service fails to become ready, so a broken start explains itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def grpc_healthy(target: str, service: str = "") -> bool:
    """True when the gRPC health service at ``target`` reports SERVING."""
    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=1.0
            )
        except grpc.RpcError:
            return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def http_healthy(url: str) -> bool:
    """True when ``url`` answers 200."""
    import httpx

    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


@dataclass
class ServiceProcess:
    """One service started with ``python -m services.cli serve <name>``."""

    name: str
    env: dict[str, str]
    args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path = field(default_factory=lambda: Path(tempfile.mkstemp(prefix="ttc-", suffix=".log")[1]))

    def start(self) -> ServiceProcess:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TTC_LOG_JSON": "false", **self.env}
        cmd = self.args or [sys.executable, "-m", "services.cli", "serve", self.name]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        return self

    def wait_until(self, ready: Callable[[], bool], timeout: float = 120.0) -> ServiceProcess:
        """Poll ``ready`` until it holds; fail with the service's log if it dies or times out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
            if ready():
                return self
            time.sleep(0.2)
        raise TimeoutError(f"{self.name} not ready after {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-8000:]

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The process frozen (SIGSTOP) for the block and let go on (SIGCONT) however the block
        ends: a barrier the test holds, so work the process is doing (a generation mid-decode)
        cannot finish meanwhile however fast the host is. Only this process stops, not its
        children; nothing it serves answers until the block ends, its /metrics neither."""
        assert self.proc is not None and self.proc.poll() is None, f"{self.name} is not running"
        self.proc.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.proc.send_signal(signal.SIGCONT)


@dataclass
class SandboxService:
    """The sandbox service on free ports, ready when ``start_sandbox`` returns."""

    process: ServiceProcess
    port: int
    metrics_port: int

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


def start_sandbox(uid_base: int, slots: int = 4, **env: str) -> SandboxService:
    """Start ``ttc serve sandbox`` with ``slots`` slot uids from ``uid_base`` (keep bases of
    different test modules apart) and extra settings ``env``; wait until it is healthy."""
    port, metrics_port = free_port(), free_port()
    process = ServiceProcess(
        "sandbox",
        env={
            "TTC_SANDBOX_PORT": str(port),
            "TTC_SANDBOX_METRICS_PORT": str(metrics_port),
            "TTC_SANDBOX_MAX_CONCURRENCY": str(slots),
            "TTC_SANDBOX_UID_BASE": str(uid_base),
            **env,
        },
    ).start()
    service = SandboxService(process, port, metrics_port)
    try:
        process.wait_until(lambda: grpc_healthy(service.target), 60)
    except BaseException:
        process.stop()
        raise
    return service


@dataclass
class RedisServer:
    """A private redis-server on a free port; no persistence unless ``aof_dir`` is given (then
    an append-only file there, fsynced every second, as ``ttc stack`` and compose run it)."""

    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    aof_dir: Path | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server not installed; run `make install`")
        if self.aof_dir is not None:
            from services.stack import redis_command

            command = redis_command(binary, self.port, self.aof_dir)
        else:
            command = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        client = redis.Redis(port=self.port)
        for _ in range(100):
            try:
                if client.ping():
                    return self
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def cpu_seconds(pid: int, with_children: bool = False) -> float:
    """User + system CPU seconds of ``pid`` (all its threads) from ``/proc``, plus its descendants'
    (a prefork pool's children, a consumer's workers) if asked: what benchmarks charge a process
    for, since it holds on a busy machine where latency does not."""
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    entries = Path("/proc").iterdir() if with_children else iter([Path(f"/proc/{pid}")])
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += times.get(current, 0.0)
        if with_children:
            todo += children.get(current, [])
    return total


def start_policy(model: str, port: int, metrics_port: int | None = None, **env: str) -> ServiceProcess:
    """The policy service for ``model`` on 127.0.0.1:``port`` (metrics on ``metrics_port``, a free
    port if not given), with extra ``TTC_POLICY_*`` settings; the caller waits for it to be healthy."""
    settings = {
        "TTC_POLICY_HOST": "127.0.0.1",
        "TTC_POLICY_PORT": str(port),
        "TTC_POLICY_METRICS_PORT": str(metrics_port or free_port()),
        "TTC_POLICY_MODEL": model,
        **env,
    }
    return ServiceProcess("policy", env=settings).start()
