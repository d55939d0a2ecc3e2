"""``ttc stack``: the whole system on one machine, each service its own process.

Starts Redis when none answers at ``TTC_REDIS_URL``, then policy → sandbox → verifier →
orchestrator worker → gateway, waiting for each to report healthy before starting the next
that depends on it; prints how to call the gateway; stops everything in reverse order on
Ctrl-C or SIGTERM. Logs of every process go to ``.run/<service>.log``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import urlopen

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.settings import CommonSettings

RUN_DIR = Path(".run")


def _grpc_ready(port: int) -> Callable[[], bool]:
    def check() -> bool:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
            except grpc.RpcError:
                return False
            return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    return check


def _http_ready(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            with urlopen(url, timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    return check


@dataclass
class _Child:
    name: str
    command: list[str]
    ready: Callable[[], bool]
    proc: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str]) -> None:
        log = open(RUN_DIR / f"{self.name}.log", "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(self.command, env=env, stdout=log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {RUN_DIR}/{self.name}.log")
            if self.ready():
                return
            time.sleep(0.3)
        raise TimeoutError(f"{self.name} not ready after {timeout:.0f}s; see {RUN_DIR}/{self.name}.log")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _redis_child(redis_url: str) -> _Child | None:
    """A child Redis for ``redis_url`` unless one already answers there."""
    parsed = urlparse(redis_url)
    port = parsed.port or 6379
    import redis

    try:
        if redis.Redis.from_url(redis_url, socket_timeout=1).ping():
            return None
    except redis.RedisError:
        pass
    binary = shutil.which("redis-server")
    if binary is None or parsed.hostname not in ("127.0.0.1", "localhost"):
        raise RuntimeError(f"no Redis answers at {redis_url}; install redis-server (make install)")

    def ping() -> bool:
        try:
            return bool(redis.Redis.from_url(redis_url, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    return _Child("redis", command, ping)


def _served_model(port: int) -> str:
    """The first model the gateway serves, for copy-pasteable examples."""
    import json

    from services.policy.settings import PolicySettings

    try:
        with urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as response:
            return str(json.load(response)["data"][0]["id"])
    except (OSError, KeyError, IndexError, ValueError):
        return PolicySettings().model


def _banner(port: int, model: str) -> str:
    base = f"http://127.0.0.1:{port}/v1"
    return f"""
ttc-serve is up: {base}   (metrics: http://127.0.0.1:{port}/metrics; logs in {RUN_DIR}/)

  curl {base}/chat/completions -H 'Content-Type: application/json' \\
    -d '{{"model": "{model}", "reasoning_effort": "low",
         "messages": [{{"role": "user", "content": "What is 17 + 25?"}}]}}'

  from openai import OpenAI
  client = OpenAI(base_url="{base}", api_key="unused")
  reply = client.chat.completions.create(
      model="{model}", reasoning_effort="medium",
      messages=[{{"role": "user", "content": "What is 17 + 25?"}}])
  print(reply.choices[0].message.content, reply.usage)

Press Ctrl-C to stop.
"""


def run_stack() -> int:
    """Start every service, print the banner, and stop them all on a signal."""
    from services.gateway.settings import GatewaySettings
    from services.orchestrator.settings import OrchestratorSettings
    from services.policy.settings import PolicySettings
    from services.sandbox.settings import SandboxSettings
    from services.verifier.settings import VerifierSettings

    RUN_DIR.mkdir(exist_ok=True)
    common = CommonSettings()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    serve = [sys.executable, "-m", "services.cli", "serve"]
    gateway_port = GatewaySettings().port
    children = [
        child
        for child in [
            _redis_child(common.redis_url),
            _Child("policy", [*serve, "policy"], _grpc_ready(PolicySettings().port)),
            _Child("sandbox", [*serve, "sandbox"], _grpc_ready(SandboxSettings().port)),
            _Child("verifier", [*serve, "verifier"], _grpc_ready(VerifierSettings().port)),
            _Child(
                "orchestrator",
                [*serve, "orchestrator"],
                _http_ready(f"http://127.0.0.1:{OrchestratorSettings().metrics_port}/metrics"),
            ),
            _Child("gateway", [*serve, "gateway"], _http_ready(f"http://127.0.0.1:{gateway_port}/healthz")),
        ]
        if child is not None
    ]
    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    started: list[_Child] = []
    try:
        for child in children:
            print(f"starting {child.name} ...", flush=True)
            child.start(env)
            started.append(child)
            child.wait_ready(timeout=600)
        print(_banner(gateway_port, _served_model(gateway_port)), flush=True)
        while not stopping:
            for child in started:
                if child.proc is not None and child.proc.poll() is not None:
                    print(f"{child.name} exited ({child.proc.returncode}); stopping", file=sys.stderr)
                    return 1
            time.sleep(0.5)
        return 0
    except (RuntimeError, TimeoutError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        for child in reversed(started):
            child.stop()
