"""Hostile programs against the real bubblewrap sandbox run as root AND as a non-root user
(``tests/helpers/sandbox_users.py``): each test ends by asserting that nothing the program
started is left on the host. With ``test_sandbox_adversarial.py`` this is the adversarial suite.
"""

from __future__ import annotations

import ast
import asyncio
import os
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.common.sandbox_client import SandboxClient
from services.gen.ttc.v1 import sandbox_pb2
from tests.helpers.processes import ServiceProcess, free_port, grpc_healthy
from tests.helpers.sandbox_users import NOBODY, nonroot_command, nonroot_env, program_processes, release_cgroup, uid_of

pytestmark = pytest.mark.e2e

S = sandbox_pb2
SLOTS = 3


@dataclass
class Sandbox:
    mode: str  # "root" or "nonroot"
    target: str
    uid_base: int
    service: ServiceProcess
    tmpdir: Path

    @property
    def pid(self) -> int:
        assert self.service.proc is not None
        return self.service.proc.pid


def leftovers(sandbox: Sandbox) -> list[int]:
    """Host processes a sandboxed program started that are still alive."""
    return program_processes(sandbox.mode, sandbox.pid, sandbox.uid_base, SLOTS)


async def assert_nothing_left(sandbox: Sandbox) -> None:
    for _ in range(50):  # the kernel tears a PID namespace down asynchronously
        if not leftovers(sandbox):
            break
        await asyncio.sleep(0.1)
    assert leftovers(sandbox) == []
    assert sandbox.service.proc is not None and sandbox.service.proc.poll() is None
    assert grpc_healthy(sandbox.target)


@pytest.fixture(scope="module", params=["root", "nonroot"])
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    mode = request.param
    if os.geteuid() != 0:
        pytest.fail("these tests start the sandbox as root and as another user: run them as root (CI does)")
    port = free_port()
    uid_base = 75000 + (os.getpid() % 300) * 64 + (0 if mode == "root" else 32)
    tmpdir = Path(tempfile.mkdtemp(prefix=f"ttc-hostile-{mode}-"))
    env = {
        "TTC_SANDBOX_PORT": str(port),
        "TTC_SANDBOX_METRICS_PORT": str(free_port()),
        "TTC_SANDBOX_MAX_CONCURRENCY": str(SLOTS),
        "TTC_SANDBOX_UID_BASE": str(uid_base),
        "TTC_SANDBOX_TMPFS_BYTES": str(16 * 1024 * 1024),
        "TMPDIR": str(tmpdir),
    }
    args: list[str] = []
    delegated = None
    if mode == "nonroot":
        extra, delegated = nonroot_env(tmpdir)
        env |= extra
        args = nonroot_command()
    service = ServiceProcess("sandbox", env=env, args=args).start()
    try:
        service.wait_until(lambda: grpc_healthy(f"127.0.0.1:{port}"), 60)
        if mode == "nonroot":
            assert uid_of(service.proc.pid if service.proc else 0) == NOBODY
        yield Sandbox(mode, f"127.0.0.1:{port}", uid_base, service, tmpdir)
    finally:
        service.stop()
        release_cgroup(delegated)
    assert list(tmpdir.iterdir()) == [], "the service left files behind"
    tmpdir.rmdir()


@pytest.fixture
async def client(sandbox: Sandbox) -> AsyncIterator[SandboxClient]:
    async with SandboxClient(sandbox.target) as c:
        yield c


async def run(client: SandboxClient, code: str, wall: float = 10, **kwargs: object) -> sandbox_pb2.ExecuteResponse:
    return await client.execute(code, limits=S.Limits(wall_seconds=wall), **kwargs)  # type: ignore[arg-type]


def stdout(reply: sandbox_pb2.ExecuteResponse) -> str:
    assert reply.outcome.status == S.EXEC_STATUS_OK, reply
    return reply.outcome.stdout.decode()


async def test_proc_lists_only_the_executions_own_processes(sandbox: Sandbox, client: SandboxClient) -> None:
    out = stdout(await run(client, "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"))
    assert out.strip() == "[1]"  # the program is PID 1 of its namespace and alone in it
    await assert_nothing_left(sandbox)


async def test_ptrace_and_proc_mem_cannot_reach_the_host(sandbox: Sandbox, client: SandboxClient) -> None:
    code = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH = 16
print(libc.ptrace(PTRACE_ATTACH, {sandbox.pid}, 0, 0), ctypes.get_errno())
print(libc.ptrace(PTRACE_ATTACH, {os.getpid()}, 0, 0), ctypes.get_errno())
for path in ("/proc/{sandbox.pid}/mem", "/proc/{os.getpid()}/mem"):
    try:
        open(path, "rb").read(1)
        print("read", path)
    except OSError as exc:
        print("denied", exc.errno)
"""
    lines = stdout(await run(client, code)).split("\n")
    assert lines[0].split()[0] == "-1" and lines[1].split()[0] == "-1", lines
    assert all(line.startswith("denied") for line in lines[2:4]), lines
    await assert_nothing_left(sandbox)


async def test_setuid_binaries_grant_nothing(sandbox: Sandbox, client: SandboxClient) -> None:
    """Shared-library folders may hold set-id helpers (utempter is setgid utmp); every mount
    they sit on is ``nosuid`` and the program runs with no_new_privs and no capabilities."""
    code = """
import os, stat
mounts = []
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    mounts.append((fields[4], fields[5].split(",")))
def mount_of(path):
    return max((m for m in mounts if path == m[0] or path.startswith(m[0].rstrip("/") + "/")), key=lambda m: len(m[0]))
setid = []
for top in ("/usr", "/bin", "/lib", "/tmp", "/dev"):
    for root, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(root, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if mode & (stat.S_ISUID | stat.S_ISGID):
                setid.append((path, "nosuid" in mount_of(os.path.realpath(path))[1]))
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
print(all(nosuid for _, nosuid in setid), len(setid))
print(status["NoNewPrivs"].strip(), status["CapEff"].strip(), status["CapPrm"].strip(), status["CapBnd"].strip())
"""
    lines = stdout(await run(client, code)).split("\n")
    assert lines[0].split()[0] == "True", lines
    assert lines[1].split() == ["1", "0" * 16, "0" * 16, "0" * 16], lines
    await assert_nothing_left(sandbox)


async def test_inode_exhaustion_with_many_small_files_is_contained(sandbox: Sandbox, client: SandboxClient) -> None:
    code = """
import os, time
made, error = 0, ""
deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    try:
        os.close(os.open(f"/tmp/f{made}", os.O_CREAT | os.O_WRONLY))
        made += 1
    except OSError as exc:
        error = exc.strerror
        break
print(made, error)
"""
    hostile = asyncio.create_task(run(client, code, wall=8))
    await asyncio.sleep(0.5)
    canary = await run(client, "open('/tmp/x', 'w').write('ok')\nprint(open('/tmp/x').read())")
    assert stdout(canary) == "ok\n"  # another execution's tmpfs is untouched
    reply = await hostile
    # Contained either way: the tmpfs runs out of inodes (OK, with the error printed), the wall
    # clock ends it (TIMEOUT), or, where the kernel charges the files' inodes and dentries to the
    # execution's memory cgroup (seen on a CI host), that cgroup's limit does (MEMORY_LIMIT).
    contained = (S.EXEC_STATUS_OK, S.EXEC_STATUS_TIMEOUT, S.EXEC_STATUS_MEMORY_LIMIT)
    assert reply.outcome.status in contained, reply
    assert list(sandbox.tmpdir.iterdir()) == []  # nothing reached the host's disk
    await assert_nothing_left(sandbox)


async def test_another_executions_files_are_invisible_while_it_runs(sandbox: Sandbox, client: SandboxClient) -> None:
    secret = secrets.token_hex(16)
    writer = f"""
import time
open("/tmp/secret.txt", "w").write("{secret}")
print("written", flush=True)
time.sleep(3)
"""
    spy = """
import os
seen = []
for top in ("/tmp", "/dev/shm", "/proc"):
    for root, dirs, files in os.walk(top):
        if root.startswith("/proc/") and root.count("/") > 3:
            dirs[:] = []
        for name in files:
            if name.startswith("secret"):
                seen.append(os.path.join(root, name))
print(seen)
"""
    hostile = asyncio.create_task(run(client, writer))
    await asyncio.sleep(1.0)
    out = stdout(await run(client, spy))
    assert out.strip() == "[]" and secret not in out
    assert stdout(await hostile).startswith("written")
    await assert_nothing_left(sandbox)


async def test_symlinks_cannot_reach_host_files(sandbox: Sandbox, client: SandboxClient) -> None:
    marker = Path(tempfile.mkdtemp(prefix="ttc-host-")) / "host-only.txt"
    marker.write_text("host secret")
    marker.chmod(0o644)
    code = f"""
import os
results = []
targets = ("{marker}", "/etc/shadow", "/etc/hostname", "/proc/1/root/{marker}", "/proc/{sandbox.pid}/root/etc/passwd")
for target in targets:
    link = "/tmp/link"
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(target, link)
    try:
        results.append(open(link).read())
    except OSError as exc:
        results.append(type(exc).__name__)
print(results)
"""
    try:
        out = stdout(await run(client, code))
        assert "host secret" not in out and "root:" not in out, out
    finally:
        shutil.rmtree(marker.parent)
    await assert_nothing_left(sandbox)


async def test_hard_links_cannot_cross_into_read_only_mounts(sandbox: Sandbox, client: SandboxClient) -> None:
    code = """
import os, sys
out = []
for src, dst in ((sys.executable, "/tmp/python"), ("/tmp/mine", "/usr/mine"), ("/tmp/mine", "/mine")):
    if src == "/tmp/mine":
        open(src, "w").write("x")
    try:
        os.link(os.path.realpath(src), dst)
        out.append("linked " + dst)
    except OSError as exc:
        out.append(exc.errno)
print(out)
"""
    out = stdout(await run(client, code))
    assert "linked" not in out, out
    await assert_nothing_left(sandbox)


async def test_deep_recursion_crashes_only_itself(sandbox: Sandbox, client: SandboxClient) -> None:
    code = "import sys\nsys.setrecursionlimit(10**8)\ndef f(n):\n    return f(n + 1) + 1\nf(0)\n"
    reply = await run(client, code, wall=8)
    # Python 3.11 keeps Python frames off the C stack: the recursion eats memory and CPU until a
    # limit strikes; which one first depends on the machine. Contained is what matters.
    assert reply.outcome.status not in (S.EXEC_STATUS_OK, S.EXEC_STATUS_SANDBOX_ERROR), reply
    assert stdout(await run(client, "print('still fine')")) == "still fine\n"
    await assert_nothing_left(sandbox)


async def test_inherited_descriptors_are_stdio_only(sandbox: Sandbox, client: SandboxClient) -> None:
    code = """
import os
fds = {}
for fd in range(1024):
    try:
        os.fstat(fd)
    except OSError:
        continue
    try:
        fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        fds[fd] = "?"
print(sorted(fds))
print([t for fd, t in fds.items() if fd > 2])
"""
    lines = stdout(await run(client, code)).split("\n")
    extra = ast.literal_eval(lines[1])
    # Beyond stdio only the program's own file may be open (the interpreter reads it).
    assert all(t.startswith("/tmp/") for t in extra), lines
    assert not any(t.startswith(("socket:", "pipe:", "anon_inode:")) for t in extra), lines
    await assert_nothing_left(sandbox)


async def test_privileged_syscalls_are_refused(sandbox: Sandbox, client: SandboxClient) -> None:
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def errno(result):
    return 0 if result == 0 else ctypes.get_errno()
out = {}
out["mount"] = errno(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
out["unshare_user"] = errno(libc.unshare(0x10000000))
out["unshare_mount"] = errno(libc.unshare(0x00020000))
try:
    os.chroot("/tmp"); out["chroot"] = 0
except OSError as exc:
    out["chroot"] = exc.errno
try:
    os.setuid(0); out["setuid"] = 0
except OSError as exc:
    out["setuid"] = exc.errno
out["sethostname"] = errno(libc.sethostname(b"x", 1))
print(out)
"""
    out = ast.literal_eval(stdout(await run(client, code)))
    assert all(err != 0 for err in out.values()), out
    await assert_nothing_left(sandbox)


async def test_killing_host_processes_is_impossible(sandbox: Sandbox, client: SandboxClient) -> None:
    code = f"""
import os, signal
out = []
for pid in ({sandbox.pid}, {os.getpid()}, {os.getppid()}):
    try:
        os.kill(pid, signal.SIGKILL)
        out.append("sent")
    except OSError as exc:
        out.append(exc.errno)
try:
    os.kill(-1, signal.SIGKILL)  # every process the program may signal: none outside it
except OSError:
    pass
print(out)
"""
    out = stdout(await run(client, code))
    assert out.strip() == "[3, 3, 3]", out  # ESRCH: host pids do not exist in its namespace
    assert sandbox.service.proc is not None and sandbox.service.proc.poll() is None
    await assert_nothing_left(sandbox)
