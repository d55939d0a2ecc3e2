"""The real policy and sandbox services a pool is drawn through, and the shared model lock.

Pools are drawn through the same gRPC services a request goes through (``ttc serve policy``,
``ttc serve sandbox``), so a candidate in a pool is what the strategy would have received.
The drawer starts both on free 127.0.0.1 ports unless it is given running targets; the
verbs that draw through the policy outside a pool (``train eval``, ``process``) do the same with
:func:`running`.

The model lock (``fcntl.flock`` on ``/tmp/ttc-model.lock``, the lock e2e tests and benchmarks
take) is held only while a chunk is drawn, so other model workloads run between chunks.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from calibration.lib.paths import ROOT
from services.common.ports import free_port

MODEL_LOCK = Path("/tmp/ttc-model.lock")
# Slot uids of the drawer's sandbox: apart from the ranges the e2e tests use.
SANDBOX_UID_BASE = 160_000


def healthy(target: str) -> bool:
    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1.0)
        except grpc.RpcError:
            return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


@dataclass
class Service:
    """One ``ttc serve <name>`` child on a free port, its log in a temporary file."""

    name: str
    env: dict[str, str]
    port: int
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path = field(default_factory=lambda: Path(tempfile.mkstemp(prefix="ttc-pools-", suffix=".log")[1]))

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float) -> Service:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TTC_LOG_JSON": "false", **self.env}
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "services.cli", "serve", self.name],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
            if healthy(self.target):
                return self
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"{self.name} not healthy after {timeout_s}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def on_free_ports(name: str, **settings: str) -> Service:
    """``ttc serve <name>`` on a free port, its metrics on another; ``settings``: the rest of its
    environment, named without the ``TTC_<NAME>_`` prefix."""
    prefix = f"TTC_{name.upper()}_"
    port = free_port()
    env = {f"{prefix}PORT": str(port), f"{prefix}METRICS_PORT": str(free_port())}
    return Service(name, env | {prefix + key: value for key, value in settings.items()}, port)


def policy_service(model: str, *, kv_cache_tokens: int = 0) -> Service:
    """The policy on ``model``; ``kv_cache_tokens`` (0: the service's default) sizes its cache."""
    cache = {"KV_CACHE_TOKENS": str(kv_cache_tokens)} if kv_cache_tokens else {}
    return on_free_ports("policy", HOST="127.0.0.1", MODEL=model, **cache)


def verifier_service(policy_target: str) -> Service:
    return on_free_ports("verifier", HOST="127.0.0.1", POLICY_TARGET=policy_target)


def sandbox_service(slots: int = 4, uid_base: int = SANDBOX_UID_BASE) -> Service:
    """A sandbox whose slots run as ``uid_base`` + slot (two sandboxes alive at once need
    ranges of their own)."""
    return on_free_ports("sandbox", MAX_CONCURRENCY=str(slots), UID_BASE=str(uid_base))


@contextmanager
def running(
    model: str,
    *,
    policy_target: str = "",
    sandbox_target: str | None = "",
    hold: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> Iterator[tuple[str, str]]:
    """The policy and sandbox targets: the given ones, else services started here and stopped
    after (the policy on the GGUF ``model``, started inside ``hold()``: loading a model is model
    work). ``sandbox_target=None``: no sandbox is wanted, and ``""`` is yielded for it."""
    services: list[Service] = []
    try:
        policy, sandbox = policy_target, sandbox_target
        if not policy:
            with hold():
                services.append(policy_service(model).start(600.0))
            policy = services[-1].target
        if sandbox == "":
            services.append(sandbox_service().start(60.0))
            sandbox = services[-1].target
        yield policy, sandbox or ""
    finally:
        for service in reversed(services):
            service.stop()


def lock_contended(inode: int, locks: Path = Path("/proc/locks")) -> bool:
    """True while any process holds or waits for the lock file's flock (read from /proc/locks)."""
    try:
        text = locks.read_text()
    except OSError:
        return False
    return any(line.split()[-3].endswith(f":{inode}") for line in text.splitlines() if "FLOCK" in line)


def waiting_marker(lock: Path) -> Path:
    """Where a polite waiter announces itself (a file beside the lock naming the waiter)."""
    return lock.with_name(lock.name + ".waiting")


def other_waiter(marker: Path, me: str, poll_s: float) -> bool:
    """True while a polite waiter other than ``me`` has announced itself within two polls (a
    crashed waiter's marker goes stale and stops counting)."""
    try:
        owner = marker.read_text().strip()
        fresh = time.time() - marker.stat().st_mtime < 2 * poll_s
    except OSError:
        return False
    return fresh and owner != me


@contextmanager
def model_lock(path: Path = MODEL_LOCK, poll_s: float = 5.0, me: str | None = None) -> Iterator[float]:
    """Hold the shared model lock, politely: a pool draw runs for hours, so it asks for the lock
    only when nobody holds it or waits for it (flock is not first-come first-served, and a
    drawer that re-asks at once after each chunk would starve every test and benchmark queued
    behind it). Blocking ``flock`` waiters show in ``/proc/locks``; polite ones (which poll)
    do not, so the first polite waiter also writes its name to :func:`waiting_marker`, and a
    holder that re-asks right after its chunk lets that waiter go first: two polite jobs
    alternate instead of one starving the other. ``me`` names this waiter (default: the pid).
    Yields the seconds spent waiting."""
    started = time.monotonic()
    me = me or str(os.getpid())
    marker = waiting_marker(path)
    with path.open("a") as handle:
        inode = os.fstat(handle.fileno()).st_ino
        while True:
            if not lock_contended(inode) and not other_waiter(marker, me, poll_s):
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    pass
            if not other_waiter(marker, me, poll_s):
                marker.write_text(me)  # first in the queue of polite waiters (or still there)
            time.sleep(poll_s)
        _withdraw(marker, me)
        try:
            yield time.monotonic() - started
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _withdraw(marker: Path, me: str) -> None:
    """Remove this waiter's announcement once it holds the lock (another's stays)."""
    try:
        if marker.read_text().strip() == me:
            marker.unlink()
    except OSError:
        pass
