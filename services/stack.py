"""``ttc stack``: the whole system on one machine, each service its own process.

Starts Redis when none answers at ``TTC_REDIS_URL`` (with its append-only file in
``.run/redis-<port>/``, ``appendfsync everysec``: a Redis restart keeps queued jobs), then
policy → sandbox → verifier → orchestrator worker → gateway, waiting for each to report healthy
before starting the next that depends on it; prints how to call the gateway.

Then it supervises: a child that exits is restarted after an exponential backoff (``Backoff``:
1 s doubling to 30 s, reset once a child has stayed up 10 s), and each exit and restart is
logged, a signal by name (``killed by SIGILL (illegal instruction, -4)``); from the second quick
exit in a row (a crash loop) the last lines of the child's log follow, and a child that exits
while the stack starts stops it with those lines (the policy's engine self-check line, say).
Only a signal (Ctrl-C, SIGTERM) stops the stack, and then it stops every child in reverse order.
Logs of every process go to ``.run/<service>.log``, the current pid of each to
``.run/<service>.pid``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import urlopen

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.exit_status import describe_exit
from services.common.settings import CommonSettings, StackSettings

RUN_DIR = Path(".run")
ROUTING_DIR = Path(__file__).resolve().parent / "gateway" / "routing"
#: lines of a child's log shown when it crash-loops or dies while the stack starts
TAIL_LINES = 10


@dataclass(frozen=True)
class Backoff:
    """How long to wait before restarting a child that exited: ``initial_s`` after the first
    exit, times ``factor`` after each further exit, at most ``max_s``. A child that ran at least
    ``stable_s`` before it exited counts as healthy again: its next restart waits ``initial_s``."""

    initial_s: float = 1.0
    factor: float = 2.0
    max_s: float = 30.0
    stable_s: float = 10.0

    def delay(self, failures: int) -> float:
        """The wait before restart number ``failures`` (1-based) of a run of quick exits."""
        return float(min(self.max_s, self.initial_s * self.factor ** max(failures - 1, 0)))


@dataclass
class RestartState:
    """One child's restart bookkeeping, driven by a clock passed in (pure, unit-tested)."""

    backoff: Backoff = field(default_factory=Backoff)
    started_at: float = 0.0
    failures: int = 0
    restarts: int = 0
    restart_at: float | None = None

    def started(self, now: float) -> None:
        self.started_at = now
        self.restart_at = None

    def exited(self, now: float) -> float:
        """Record an exit seen at ``now``; return the delay before its restart."""
        if now - self.started_at >= self.backoff.stable_s:
            self.failures = 0
        self.failures += 1
        delay = self.backoff.delay(self.failures)
        self.restart_at = now + delay
        return delay

    @property
    def waiting(self) -> bool:
        """True between an exit and its restart."""
        return self.restart_at is not None

    def due(self, now: float) -> bool:
        return self.restart_at is not None and now >= self.restart_at


def log_tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last ``lines`` non-empty lines of a log file (its last 64 KiB), ``[]`` when unreadable."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 65536))
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


def exit_report(name: str, returncode: int, delay: float, failures: int, tail: list[str]) -> str:
    """The supervisor's line for an exit, and from the second quick exit in a row (a crash loop)
    the last lines of the child's log under it."""
    report = f"{name} {describe_exit(returncode)}; restarting in {delay:.1f}s (see {RUN_DIR}/{name}.log)"
    if failures < 2 or not tail:
        return report
    return f"{report}\n{name} is crash-looping ({failures} quick exits in a row){tail_block(name, tail)}"


def tail_block(name: str, tail: list[str]) -> str:
    """``; last lines of .run/<name>.log:`` and the lines, indented, each on its own line."""
    return f"; last lines of {RUN_DIR}/{name}.log:" + "".join(f"\n  | {line}" for line in tail)


def _log(message: str) -> None:
    print(f"{datetime.now(UTC).isoformat(timespec='milliseconds')} stack: {message}", file=sys.stderr, flush=True)


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
class Child:
    name: str
    command: list[str]
    ready: Callable[[], bool]
    proc: subprocess.Popen[bytes] | None = None
    state: RestartState = field(default_factory=RestartState)
    #: settings of this child only, over the stack's environment (a second policy's model and ports)
    overrides: dict[str, str] = field(default_factory=dict)

    def start(self, env: dict[str, str]) -> None:
        with open(RUN_DIR / f"{self.name}.log", "ab") as log:
            self.proc = subprocess.Popen(
                self.command, env={**env, **self.overrides}, stdout=log, stderr=subprocess.STDOUT
            )
        (RUN_DIR / f"{self.name}.pid").write_text(f"{self.proc.pid}\n")
        self.state.started(time.monotonic())

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def wait_ready(self, timeout: float, stopping: Callable[[], bool]) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not stopping():
            if self.proc is not None and self.proc.poll() is not None:
                tail = tail_block(self.name, log_tail(RUN_DIR / f"{self.name}.log"))
                raise RuntimeError(f"{self.name} {describe_exit(self.proc.returncode)} while starting{tail}")
            if self.ready():
                return
            time.sleep(0.3)
        if stopping():
            return
        raise TimeoutError(f"{self.name} not ready after {timeout:.0f}s; see {RUN_DIR}/{self.name}.log")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _redis_child(redis_url: str) -> Child | None:
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

    data_dir = (RUN_DIR / f"redis-{port}").resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    return Child("redis", redis_command(binary, port, data_dir), ping)


def redis_command(binary: str, port: int, data_dir: Path) -> list[str]:
    """redis-server on 127.0.0.1:``port`` with its append-only file in ``data_dir``: every write
    is logged and fsynced once a second, so a restart (or a crash, less the last second) keeps
    queued jobs, records and results. No RDB snapshots; the AOF is the only persistence."""
    return [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        str(data_dir),
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
    ]


def supervise(children: list[Child], env: dict[str, str], stopping: Callable[[], bool], tick_s: float = 0.2) -> None:
    """Restart every child that exits, after its backoff, until ``stopping()``; log each exit
    and restart."""
    while not stopping():
        now = time.monotonic()
        for child in children:
            code = child.exit_code()
            if code is not None and not child.state.waiting:
                delay = child.state.exited(now)
                tail = log_tail(RUN_DIR / f"{child.name}.log") if child.state.failures >= 2 else []
                _log(exit_report(child.name, code, delay, child.state.failures, tail))
            elif child.state.due(now):
                child.start(env)
                child.state.restarts += 1
                pid = child.proc.pid if child.proc is not None else 0
                _log(f"{child.name} restarted (pid {pid}, restart {child.state.restarts})")
        time.sleep(tick_s)


def escalation_table(small: str, large: str, routing_dir: Path = ROUTING_DIR) -> Path | None:
    """The shipped table of ``small`` fitted with cascades onto ``large`` (``make routing-table``
    writes ``routing.<small>+<large>.json`` where both models have pools), if there is one."""
    path = routing_dir / f"routing.{small}+{large}.json"
    return path if path.is_file() else None


#: a policy child's own settings, and the stack environment wired to its deployment
Wiring = tuple[dict[str, str], dict[str, str]]


def policy_deployment(model: str, port: int, metrics_port: int, env: dict[str, str]) -> Wiring:
    """A further model's policy child's settings, and the stack environment with its deployment added
    to the gateway's, the workers' and the verifier's per-model targets (kept with any the user set)."""
    from services.policy.models import model_id

    child = {"TTC_POLICY_MODEL": model, "TTC_POLICY_PORT": str(port), "TTC_POLICY_METRICS_PORT": str(metrics_port)}
    wired, entry = dict(env), f"{model_id(model)}=127.0.0.1:{port}"
    for name in ("TTC_GATEWAY_POLICY_TARGETS", "TTC_ORCHESTRATOR_POLICY_TARGETS", "TTC_VERIFIER_POLICY_TARGETS"):
        wired[name] = ",".join(part for part in (env.get(name, ""), entry) if part)
    return child, wired


def large_model_wiring(stack: StackSettings, env: dict[str, str], routing_dir: Path = ROUTING_DIR) -> Wiring:
    """The large model's deployment (:func:`policy_deployment`), the cascade's escalation target.
    Where a table fitted with cascades onto it exists for the default model, the gateway routes
    the default model by that table (unless TTC_GATEWAY_ROUTING_TABLES is set): its efforts
    escalate where calibration found escalating pays."""
    from services.gateway.fleet import parse_pairs
    from services.gateway.settings import GatewaySettings
    from services.policy.models import model_id
    from services.policy.settings import PolicySettings

    if not stack.large_model:
        return {}, env
    child, wired = policy_deployment(stack.large_model, stack.large_model_port, stack.large_model_metrics_port, env)
    wired.setdefault("TTC_ORCHESTRATOR_ESCALATION_MODEL", model_id(stack.large_model))  # the cascade's target
    small = model_id(env.get("TTC_POLICY_MODEL") or str(PolicySettings.model_fields["model"].default))
    table = escalation_table(small, model_id(stack.large_model), routing_dir)
    if table is not None and "TTC_GATEWAY_ROUTING_TABLES" not in env:
        tables = parse_pairs(str(GatewaySettings.model_fields["routing_tables"].default), "TTC_GATEWAY_ROUTING_TABLES")
        wired["TTC_GATEWAY_ROUTING_TABLES"] = ",".join(f"{m}={p}" for m, p in {**tables, small: str(table)}.items())
    return child, wired


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
    """Start every service, print the banner, restart what exits, and stop them all on a signal."""
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
    stack = StackSettings()
    large, env = large_model_wiring(stack, env)
    tuned: dict[str, str] = {}
    if stack.tuned_model:  # a fine-tuned model of its own beside the default one (docs/training.md)
        tuned, env = policy_deployment(stack.tuned_model, stack.tuned_model_port, stack.tuned_model_metrics_port, env)
    children = [
        child
        for child in [
            _redis_child(common.redis_url),
            Child("policy", [*serve, "policy"], _grpc_ready(PolicySettings().port)),
            Child("policy-large", [*serve, "policy"], _grpc_ready(stack.large_model_port), overrides=large)
            if large
            else None,
            Child("policy-tuned", [*serve, "policy"], _grpc_ready(stack.tuned_model_port), overrides=tuned)
            if tuned
            else None,
            Child("sandbox", [*serve, "sandbox"], _grpc_ready(SandboxSettings().port)),
            Child("verifier", [*serve, "verifier"], _grpc_ready(VerifierSettings().port)),
            Child(
                "orchestrator",
                [*serve, "orchestrator"],
                _http_ready(f"http://127.0.0.1:{OrchestratorSettings().metrics_port}/metrics"),
            ),
            Child("gateway", [*serve, "gateway"], _http_ready(f"http://127.0.0.1:{gateway_port}/healthz")),
        ]
        if child is not None
    ]
    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    started: list[Child] = []
    try:
        for child in children:
            if stopping:
                return 0
            print(f"starting {child.name} ...", flush=True)
            child.start(env)
            started.append(child)
            child.wait_ready(timeout=600, stopping=lambda: stopping)
        if not stopping:
            print(_banner(gateway_port, _served_model(gateway_port)), flush=True)
        supervise(started, env, lambda: stopping)
        _log("signal received; stopping every service")
        return 0
    except (RuntimeError, TimeoutError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        for child in reversed(started):
            child.stop()
