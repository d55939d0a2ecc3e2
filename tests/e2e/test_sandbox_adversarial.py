"""Hostile programs against the real sandbox service, on each backend: bubblewrap on this host
and containers through the Docker API (served here by podman's ``podman system service``).
Each program is contained, reported with the right status, and an ordinary execution running
at the same time succeeds. Bubblewrap runs as root (CI) and as a non-root user (the chart's
pods, ``tests/helpers/sandbox_users.py``). After each, nothing is left: no process a program
started (the slot uids' processes, or the non-root service's outside its own PID namespace)
and, for containers, no container of the service.
"""

from __future__ import annotations

import ast
import asyncio
import os
import secrets
import signal
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from services.common.sandbox_client import SandboxClient
from services.gen.ttc.v1 import sandbox_pb2
from tests.helpers import podman
from tests.helpers.processes import ROOT, RedisServer, ServiceProcess, free_port, grpc_healthy
from tests.helpers.sandbox_users import nonroot_command, nonroot_env, program_processes, release_cgroup

pytestmark = pytest.mark.e2e

S = sandbox_pb2
SLOTS = 4
# bubblewrap as root (CI) and as a non-root user (the chart's pods), containers through podman.
SETUPS = ["bwrap", "bwrap-nonroot", "docker"]


@dataclass
class Sandbox:
    backend: str
    target: str
    metrics_url: str
    secret: str
    uid_base: int
    tmpdir: Path
    service: ServiceProcess
    instance: str = ""
    runtime: podman.PodmanService | None = None
    user: str = "root"

    def processes(self) -> list[int]:
        """Host pids of every process a sandboxed program started that is still alive."""
        assert self.service.proc is not None
        return program_processes(self.user, self.service.proc.pid, self.uid_base, SLOTS)


@pytest.fixture(scope="module")
def podman_service() -> Iterator[podman.LazyPodman]:
    """podman's Docker-compatible API on a socket of this module's own, started on first use."""
    lazy = podman.LazyPodman()
    yield lazy
    lazy.stop()


@pytest.fixture(scope="module", params=SETUPS)
def sandbox(request: pytest.FixtureRequest, podman_service: podman.LazyPodman) -> Iterator[Sandbox]:
    setup = request.param
    backend, user = ("bwrap", "nonroot") if setup == "bwrap-nonroot" else (setup, "root")
    port, metrics_port = free_port(), free_port()
    secret = "ttc-secret-" + secrets.token_hex(8)
    # Apart from other sandboxes on this host, and between the two backends of this module.
    uid_base = 70000 + (os.getpid() % 500) * 64 + SETUPS.index(setup) * SLOTS
    tmpdir = Path(tempfile.mkdtemp(prefix="ttc-sandbox-tmp-"))
    env = {
        "TTC_SANDBOX_PORT": str(port),
        "TTC_SANDBOX_METRICS_PORT": str(metrics_port),
        "TTC_SANDBOX_MAX_CONCURRENCY": str(SLOTS),
        "TTC_SANDBOX_UID_BASE": str(uid_base),
        "TTC_SANDBOX_TMPFS_BYTES": str(16 * 1024 * 1024),
        "TTC_SERVICE_SECRET": secret,
        "TMPDIR": str(tmpdir),
        "TTC_SANDBOX_BACKEND": backend,
    }
    runtime, instance = None, ""
    if backend == "docker":
        runtime = podman_service.get()
        instance = "adversarial-" + uuid.uuid4().hex[:8]
        env |= {"TTC_SANDBOX_DOCKER_URL": runtime.url, "TTC_SANDBOX_DOCKER_INSTANCE": instance}
    args: list[str] = []
    delegated = None
    if user == "nonroot":
        extra, delegated = nonroot_env(tmpdir)
        env |= extra
        args = nonroot_command()
    service = ServiceProcess("sandbox", env=env, args=args).start()
    service.wait_until(lambda: grpc_healthy(f"127.0.0.1:{port}"), 120)
    yield Sandbox(
        backend,
        f"127.0.0.1:{port}",
        f"http://127.0.0.1:{metrics_port}/metrics",
        secret,
        uid_base,
        tmpdir,
        service,
        instance,
        runtime,
        user,
    )
    service.stop()
    release_cgroup(delegated)
    if runtime is not None:
        assert runtime.containers(instance) == [], "the service left containers behind"
    assert list(tmpdir.iterdir()) == [], "the service left files behind"
    tmpdir.rmdir()


@pytest.fixture
async def client(sandbox: Sandbox) -> AsyncIterator[SandboxClient]:
    async with SandboxClient(sandbox.target) as c:
        yield c


CANARY = "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))\n"


async def run_with_canary(
    client: SandboxClient, code: str, limits: sandbox_pb2.Limits, **kwargs: object
) -> sandbox_pb2.ExecuteResponse:
    """Run a hostile program and, while it runs, an ordinary one that must still succeed."""
    hostile = asyncio.create_task(client.execute(code, limits=limits, **kwargs))  # type: ignore[arg-type]
    await asyncio.sleep(0.3)
    canary = await client.execute(CANARY, stdin=b"1 2 3 4", limits=S.Limits(wall_seconds=30))
    assert canary.outcome.status == S.EXEC_STATUS_OK, canary
    assert canary.outcome.stdout == b"10\n"
    return await hostile


def assert_no_leftovers(sandbox: Sandbox) -> None:
    assert sandbox.processes() == []
    assert sandbox.service.proc is not None and sandbox.service.proc.poll() is None
    assert grpc_healthy(sandbox.target)
    if sandbox.runtime is not None:
        # A container removes itself when it exits; the reply may come a moment before that.
        deadline = time.monotonic() + 10
        while (left := sandbox.runtime.containers(sandbox.instance)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert left == [], "labelled containers left behind"


FORK_BOMB = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


async def test_fork_bomb_is_capped_and_killed(sandbox: Sandbox, client: SandboxClient) -> None:
    limits = S.Limits(max_processes=16, wall_seconds=3, cpu_seconds=2)
    hostile = asyncio.create_task(client.execute(FORK_BOMB, limits=limits))
    most = 0
    for _ in range(40):  # sample while it runs (a loaded machine may start it late)
        most = max(most, len(sandbox.processes()))
        if hostile.done():
            break
        await asyncio.sleep(0.05)
    # The bomb is visible from the host while it runs (so the leftover check below can fail),
    # and capped: bwrap's monitor plus at most max_processes.
    assert 1 < most <= 16 + 1
    canary = await client.execute(CANARY, stdin=b"5 5", limits=S.Limits(wall_seconds=30))
    assert canary.outcome.status == S.EXEC_STATUS_OK and canary.outcome.stdout == b"10\n"
    reply = await hostile
    assert reply.outcome.status == S.EXEC_STATUS_TIMEOUT
    assert_no_leftovers(sandbox)


async def test_infinite_loop_hits_cpu_limit(sandbox: Sandbox, client: SandboxClient) -> None:
    reply = await run_with_canary(client, "while True:\n    pass\n", S.Limits(cpu_seconds=1, wall_seconds=20))
    assert reply.outcome.status == S.EXEC_STATUS_TIMEOUT
    if sandbox.backend == "bwrap":
        # The kernel stops it at 1 s of tick-sampled CPU time, which bwrap's monitor reads.
        assert reply.outcome.cpu_seconds >= 1.0
    else:
        # The CPU limit stopped it (SIGXCPU from RLIMIT_CPU), not the wall clock. The container's
        # init reports the time it measured, which on a loaded or single-core host can read
        # a tenth of a second below the limit, so the signal is what is checked.
        assert reply.outcome.signal == signal.SIGXCPU, reply.outcome
        assert 0.5 <= reply.outcome.cpu_seconds < reply.outcome.wall_seconds + 0.1, reply.outcome
    assert "CPU" in reply.message
    assert_no_leftovers(sandbox)


async def test_sleeper_hits_wall_clock(sandbox: Sandbox, client: SandboxClient) -> None:
    reply = await run_with_canary(client, "import time\ntime.sleep(60)\n", S.Limits(wall_seconds=1.5))
    assert reply.outcome.status == S.EXEC_STATUS_TIMEOUT
    assert 1.5 <= reply.outcome.wall_seconds < 10
    assert reply.outcome.signal == 9
    assert_no_leftovers(sandbox)


async def test_memory_bomb(sandbox: Sandbox, client: SandboxClient) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(10 * 1024 * 1024))\n"
    reply = await run_with_canary(client, code, S.Limits(memory_bytes=256 * 1024 * 1024))
    assert reply.outcome.status == S.EXEC_STATUS_MEMORY_LIMIT
    assert b"MemoryError" in reply.outcome.stderr
    assert 100 * 1024 * 1024 < reply.outcome.peak_memory_bytes <= 256 * 1024 * 1024
    assert_no_leftovers(sandbox)


async def test_endless_output_is_capped(sandbox: Sandbox, client: SandboxClient) -> None:
    code = "while True:\n    print('x' * 1000)\n"
    reply = await run_with_canary(client, code, S.Limits(max_output_bytes=10_000, wall_seconds=20))
    assert reply.outcome.status == S.EXEC_STATUS_OUTPUT_LIMIT
    assert reply.outcome.stdout_truncated
    assert len(reply.outcome.stdout) == 10_000
    assert_no_leftovers(sandbox)


async def test_host_secrets_are_invisible(sandbox: Sandbox, client: SandboxClient) -> None:
    code = f"""
import os
print(sorted(os.listdir('/')))
print(dict(os.environ))
for path in ['/etc/shadow', '/etc/passwd', '/root', {str(ROOT / "pyproject.toml")!r}, '/work', '/proc/1/environ']:
    try:
        with open(path, 'rb') as f:
            print(path, 'READ', f.read()[:2000])
    except OSError as e:
        print(path, 'DENIED', type(e).__name__)
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            print(pid, open(f'/proc/{{pid}}/environ', 'rb').read(), open(f'/proc/{{pid}}/cmdline', 'rb').read())
        except OSError as e:
            print(pid, type(e).__name__)
"""
    reply = await run_with_canary(client, code, S.Limits())
    out = reply.outcome.stdout.decode()
    assert reply.outcome.status == S.EXEC_STATUS_OK, reply
    assert sandbox.secret not in out and sandbox.secret not in reply.outcome.stderr.decode()
    assert "/etc/shadow DENIED" in out and "/root DENIED" in out
    assert f"{ROOT / 'pyproject.toml'} DENIED" in out and "/work DENIED" in out
    assert "TTC_" not in out and "VIRTUAL_ENV" not in out
    visible = [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0].isdigit()]
    if sandbox.backend == "bwrap":
        assert "['bin', 'dev', 'lib', 'lib64', 'proc', 'tmp', 'usr']" in out and "/etc/passwd DENIED" in out
        assert visible == ["1"]  # only the program itself is visible in its PID namespace
    else:
        # The image is /usr alone; the runtime adds /etc/{hosts,hostname,passwd,group}, /sys,
        # /run and /var/tmp. The program sees itself and the container's init (PID 1), which
        # is not dumpable: its environment, descriptors and memory are closed to the program.
        top = ast.literal_eval(out.splitlines()[0])  # the sorted listing of /
        assert set(top) <= {"bin", "dev", "etc", "lib", "lib64", "proc", "run", "sbin", "sys", "tmp", "usr", "var"}
        # /etc/passwd, if there, is the runtime's few lines, none of the host's accounts.
        host_accounts = [line for line in Path("/etc/passwd").read_text().splitlines() if line.split(":")[0] != "root"]
        assert not any(account in out for account in host_accounts)
        assert len(visible) == 2 and "1" in visible, visible
        assert next(line for line in out.splitlines() if line.startswith("1 ")) == "1 PermissionError"
    assert_no_leftovers(sandbox)


async def test_writes_outside_the_workdir_fail(sandbox: Sandbox, client: SandboxClient) -> None:
    marker = "ttc-escape-" + secrets.token_hex(6)
    targets = ["/" + marker, f"/usr/lib/{marker}", f"/proc/{marker}", f"/dev/{marker}", str(ROOT / marker)]
    code = f"""
for path in {targets!r}:
    try:
        with open(path, 'w') as f:
            f.write('x')
        print(path, 'WROTE')
    except OSError as e:
        print(path, 'DENIED', type(e).__name__)
open('/tmp/{marker}', 'w').write('inside')  # allowed: the private tmpfs, gone afterwards
print(open('/tmp/{marker}').read())
"""
    reply = await run_with_canary(client, code, S.Limits())
    out = reply.outcome.stdout.decode()
    assert reply.outcome.status == S.EXEC_STATUS_OK, reply
    assert "WROTE" not in out and out.count("DENIED") == len(targets)
    assert out.endswith("inside\n")
    for path in [*targets, f"/tmp/{marker}", str(sandbox.tmpdir / marker)]:
        assert not Path(path).exists(), path
    assert_no_leftovers(sandbox)


async def test_no_network(sandbox: Sandbox, client: SandboxClient, redis_server: RedisServer) -> None:
    # A real Redis listens on the host, so a refused connection means isolation, not absence.
    code = f"""
import socket
for host, port in [('127.0.0.1', {redis_server.port}), ('127.0.0.1', 6379), ('8.8.8.8', 53), ('10.0.0.1', 80)]:
    try:
        socket.create_connection((host, port), timeout=2).close()
        print(host, port, 'CONNECTED')
    except OSError as e:
        print(host, port, 'FAILED', type(e).__name__)
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b'x', ('8.8.8.8', 53))
    print('udp SENT')
except OSError as e:
    print('udp FAILED', type(e).__name__)
print(open('/proc/net/dev').read())
"""
    assert redis_server.proc is not None and redis_server.proc.poll() is None
    reply = await run_with_canary(client, code, S.Limits(wall_seconds=20))
    out = reply.outcome.stdout.decode()
    assert reply.outcome.status == S.EXEC_STATUS_OK, reply
    assert "CONNECTED" not in out and "udp SENT" not in out
    assert out.count("FAILED") == 5
    interfaces = [line.split(":")[0].strip() for line in out.splitlines() if ":" in line and "|" not in line]
    assert interfaces == ["lo"]
    assert_no_leftovers(sandbox)


async def test_signalling_the_parent_harms_nothing(sandbox: Sandbox, client: SandboxClient) -> None:
    assert sandbox.service.proc is not None
    service_pid = sandbox.service.proc.pid
    code = f"""
import os, signal
for what, call in [('parent', lambda: os.kill(os.getppid(), signal.SIGKILL)),
                   ('all', lambda: os.kill(-1, signal.SIGKILL)),
                   ('group', lambda: os.killpg(0, signal.SIGKILL)),
                   ('service', lambda: os.kill({service_pid}, signal.SIGKILL)),
                   ('init', lambda: os.kill(1, signal.SIGTERM))]:
    try:
        call()
        print(what, 'sent', flush=True)
    except OSError as e:
        print(what, type(e).__name__, flush=True)
print('still here')
"""
    reply = await run_with_canary(client, code, S.Limits())
    if sandbox.backend == "bwrap":  # the program is PID 1 of its namespace: even its own group spares it
        assert reply.outcome.stdout.endswith(b"still here\n"), reply
    else:  # the program is PID 2 under the container's init: killing its own group ends it, nothing else
        assert reply.outcome.stdout == b"parent sent\nall ProcessLookupError\n", reply  # nothing else to kill
        assert reply.outcome.status == S.EXEC_STATUS_RUNTIME_ERROR and reply.outcome.signal == 9
    assert sandbox.service.proc.poll() is None
    assert_no_leftovers(sandbox)


async def test_background_process_does_not_outlive_the_execution(sandbox: Sandbox, client: SandboxClient) -> None:
    # A double-forked daemon in its own session, ignoring SIGTERM/SIGHUP, meant to run for a minute.
    code = """
import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        time.sleep(60)
    os._exit(0)
time.sleep(0.5)
print('parent done')
"""
    reply = await run_with_canary(client, code, S.Limits(wall_seconds=20))
    assert reply.outcome.status == S.EXEC_STATUS_OK
    assert reply.outcome.wall_seconds < 15  # returned when the program ended, not after the daemon
    assert_no_leftovers(sandbox)
    # And the same daemon behind a program that itself times out.
    reply = await run_with_canary(client, code.replace("time.sleep(0.5)", "time.sleep(60)"), S.Limits(wall_seconds=1))
    assert reply.outcome.status == S.EXEC_STATUS_TIMEOUT
    assert_no_leftovers(sandbox)


async def test_filling_the_disk_is_contained(sandbox: Sandbox, client: SandboxClient) -> None:
    code = """
import os
written = 0
try:
    with open('fill', 'wb') as f:
        while True:
            f.write(b'\\0' * (1 << 20))
            f.flush()
            written += 1 << 20
except OSError as e:
    print('stopped', written, e.errno)
    raise
"""
    before = os.statvfs(tempfile.gettempdir())
    reply = await run_with_canary(client, code, S.Limits(wall_seconds=20))
    assert reply.outcome.status == S.EXEC_STATUS_RUNTIME_ERROR
    assert b"No space left on device" in reply.outcome.stderr or b"File too large" in reply.outcome.stderr
    written = int(reply.outcome.stdout.split()[1])
    assert written <= 16 * 1024 * 1024  # the tmpfs size given to the service
    after = os.statvfs(tempfile.gettempdir())
    # Nothing reached the host's disk (allow for other writers on this shared machine).
    assert (before.f_bfree - after.f_bfree) * before.f_frsize < 8 * 1024 * 1024
    assert list(sandbox.tmpdir.iterdir()) == []
    assert_no_leftovers(sandbox)


async def test_no_new_namespaces_or_mounts(sandbox: Sandbox, client: SandboxClient) -> None:
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, flag in [('user', 0x10000000), ('net', 0x40000000), ('mount', 0x00020000), ('pid', 0x20000000)]:
    print(name, 'unshare', libc.unshare(flag))
print('mount', libc.mount(b'none', b'/usr', b'tmpfs', 0, None))
print('remount', libc.mount(None, b'/', None, 0x20 | 0x1000, None))  # MS_REMOUNT|MS_BIND, i.e. make / writable
status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines())
print('uid', os.getuid(), 'caps', status['CapEff'].strip(), status['CapPrm'].strip(), status['CapBnd'].strip())
"""
    reply = await run_with_canary(client, code, S.Limits())
    out = reply.outcome.stdout.decode().split("\n")
    assert reply.outcome.status == S.EXEC_STATUS_OK, reply
    assert [line.split()[-1] for line in out[:6]] == ["-1"] * 6, out
    uid_line = out[6].split()
    assert uid_line[1] != "0" and uid_line[3:] == ["0000000000000000"] * 3, out
    assert_no_leftovers(sandbox)


async def test_cancelled_call_kills_its_execution(sandbox: Sandbox, client: SandboxClient) -> None:
    hostile = asyncio.create_task(
        client.execute("import time\ntime.sleep(60)\n", limits=S.Limits(wall_seconds=60), timeout=1.5)
    )
    while not sandbox.processes():  # it runs (a 60 s sleep: only the call's end stops it)...
        assert not hostile.done(), "the call ended before its program ran"
        await asyncio.sleep(0.05)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await hostile
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    for _ in range(50):  # ...and is killed once the caller gave up
        if not sandbox.processes():
            break
        await asyncio.sleep(0.1)
    assert_no_leftovers(sandbox)


async def test_memory_bomb_across_forks_is_bounded_per_execution(sandbox: Sandbox, client: SandboxClient) -> None:
    """Six children of 200 MB each stay under the per-process limit but not under the tree's."""
    if sandbox.backend == "bwrap" and "memory cgroups per slot" not in sandbox.service.log():
        pytest.skip("this host gives the service no memory cgroup; only per-process RLIMIT_AS applies")
    code = """
import os, time
kids = []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        block = bytearray(200 * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
print([os.waitpid(k, 0)[1] for k in kids])
"""
    reply = await run_with_canary(client, code, S.Limits(memory_bytes=256 * 1024 * 1024, wall_seconds=30))
    assert reply.outcome.status == S.EXEC_STATUS_MEMORY_LIMIT, reply
    assert "memory cgroup" in reply.message
    assert_no_leftovers(sandbox)
