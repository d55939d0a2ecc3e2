"""Run one sandboxed process: spawn, stream output under a cap, enforce the wall clock, reap.

The process tree is killed as a whole: ``bwrap`` leads its own process group, the program
is PID 1 of its own PID namespace and dies with ``bwrap`` (``--die-with-parent``), and when
PID 1 dies the kernel kills every process left in the namespace. The service reaps the
``bwrap`` monitor itself through a pidfd, so ``wait4`` reports the CPU time and peak RSS of
the program and of the children it reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from services.sandbox.cgroups import SlotCgroup

# After the process exits, how long to wait for the pipes to reach EOF.
_DRAIN_SECONDS = 2.0
_READ_CHUNK = 65536


@dataclass
class RawRun:
    """What the OS reported about one run, before it is classified."""

    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wait_status: int = 0
    bwrap_exit_code: int | None = None  # from --json-status-fd; None when bwrap was killed
    sandbox_started: bool = False  # bwrap reported the child's pid: setup succeeded
    timed_out: bool = False
    output_exceeded: bool = False
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    peak_memory_bytes: int = 0
    spawn_error: str = ""
    killed: bool = False
    oom_killed: bool = False  # the memory cgroup's OOM killer struck during the run
    leftovers: int = 0  # processes still in the cgroup after the run, killed then
    status_lines: list[dict[str, object]] = field(default_factory=list)


class _CappedReader:
    """Reads a non-blocking pipe into a buffer of at most ``cap`` bytes; calls ``on_overflow`` once."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, cap: int, on_overflow: Callable[[], None]) -> None:
        self.loop, self.fd, self.cap, self.on_overflow = loop, fd, cap, on_overflow
        self.buffer = bytearray()
        self.truncated = False
        self.eof: asyncio.Future[None] = loop.create_future()
        os.set_blocking(fd, False)
        loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, _READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.close()
            return
        room = self.cap - len(self.buffer)
        if len(data) > room:
            self.buffer += data[: max(room, 0)]
            if not self.truncated:
                self.truncated = True
                self.on_overflow()
        else:
            self.buffer += data

    def close(self) -> None:
        if not self.eof.done():
            self.loop.remove_reader(self.fd)
            os.close(self.fd)
            self.eof.set_result(None)


def memfd_with(content: bytes, name: str = "ttc") -> int:
    """An anonymous in-memory file holding ``content``, positioned at its start (nothing on disk)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    view = memoryview(content)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _parse_status(data: bytes) -> list[dict[str, object]]:
    lines = []
    for line in data.decode(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict):
                lines.append(item)
    return lines


def _read_all_nonblocking(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            data = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


async def run_sandboxed(
    command: Sequence[str],
    *,
    stdin: bytes,
    pass_fds: Sequence[int],
    status_fd_w: int,
    status_fd_r: int,
    wall_seconds: float,
    max_output_bytes: int,
    on_kill: Callable[[str], None] = lambda reason: None,
    cgroup: SlotCgroup | None = None,
    block_fd_w: int | None = None,
) -> RawRun:
    """Run ``command`` (setpriv … prlimit … bwrap …); the caller owns and closes ``pass_fds``.

    With ``cgroup``, the command must hold the program on ``--block-fd`` (whose write end is
    ``block_fd_w``) until the program's process has been moved into the cgroup, so that not
    one instruction of it runs outside.
    """
    loop = asyncio.get_running_loop()
    run = RawRun()
    oom_before = cgroup.oom_kills() if cgroup is not None else 0
    stdin_fd = memfd_with(stdin, "stdin")
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            list(command),
            stdin=stdin_fd,
            stdout=out_w,
            stderr=err_w,
            pass_fds=(*pass_fds, status_fd_w),
            close_fds=True,
            env={},
            cwd="/",
            start_new_session=True,
        )
    except OSError as exc:
        for fd in (out_r, err_r, status_fd_r):
            os.close(fd)
        run.spawn_error = f"cannot start {command[0]}: {exc}"
        return run
    finally:
        for fd in (stdin_fd, out_w, err_w, status_fd_w):
            os.close(fd)

    pid = proc.pid
    reaped = False

    def release(child_pid: int) -> None:
        """The program's process exists and waits on --block-fd: contain it, then let it run."""
        if block_fd_w is None:
            return
        try:
            if cgroup is not None:
                cgroup.add(child_pid)
            os.write(block_fd_w, b"go")
        except OSError as exc:
            run.spawn_error = f"cannot place the execution in its memory cgroup: {exc}"
            kill("sandbox_error")

    child = _ChildTracker(loop, status_fd_r, pid, on_child=release)

    def kill(reason: str) -> None:
        # Only while the monitor is unreaped, so neither pid can have been reused.
        if reaped:
            return
        if not run.killed:
            run.killed = True
            on_kill(reason)
        # Killing the namespace's PID 1 makes the kernel kill everything inside before PID 1
        # is reaped; the monitor then exits on its own, reporting CPU time and peak RSS.
        if not child.kill():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    def overflow() -> None:
        run.output_exceeded = True
        kill("output_limit")

    out = _CappedReader(loop, out_r, max_output_bytes, overflow)
    err = _CappedReader(loop, err_r, max_output_bytes, overflow)
    pidfd = os.pidfd_open(pid)
    exited = _readable(loop, pidfd)
    try:
        try:
            await asyncio.wait_for(asyncio.shield(exited), timeout=wall_seconds)
        except TimeoutError:
            run.timed_out = True
            kill("timeout")
            try:
                await asyncio.wait_for(asyncio.shield(exited), timeout=_DRAIN_SECONDS)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                await exited
    finally:
        # Also reached when the caller is cancelled: never leave a tree running or unreaped.
        if not exited.done():
            kill("cancelled")
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        loop.remove_reader(pidfd)
        os.close(pidfd)
        _, wait_status, usage = os.wait4(pid, 0)
        reaped = True
        proc.returncode = os.waitstatus_to_exitcode(wait_status)  # keep Popen from reaping again
        run.wall_seconds = time.perf_counter() - start
        # If the monitor died first, PID 1 is being torn down asynchronously: wait for it.
        await child.gone(_DRAIN_SECONDS)
        if cgroup is not None:
            run.leftovers = await _empty_cgroup(cgroup)
            run.oom_killed = cgroup.oom_kills() > oom_before
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(out.eof, err.eof), timeout=_DRAIN_SECONDS)
        out.close()
        err.close()
        child.close()

    run.status_lines = child.lines
    run.wait_status = wait_status
    run.cpu_seconds = usage.ru_utime + usage.ru_stime
    run.peak_memory_bytes = usage.ru_maxrss * 1024
    run.stdout, run.stdout_truncated = bytes(out.buffer), out.truncated
    run.stderr, run.stderr_truncated = bytes(err.buffer), err.truncated
    run.sandbox_started = child.pid is not None
    for line in run.status_lines:
        code = line.get("exit-code")
        if isinstance(code, int):
            run.bwrap_exit_code = code
    return run


async def _empty_cgroup(cgroup: SlotCgroup, timeout: float = _DRAIN_SECONDS) -> int:
    """Kill whatever is still in the slot's cgroup and wait until it is empty; the count found."""
    found = 0
    deadline = time.monotonic() + timeout
    while True:
        alive = cgroup.kill_all()
        found = max(found, alive)
        if not alive or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.01)


def _readable(loop: asyncio.AbstractEventLoop, fd: int) -> asyncio.Future[None]:
    """A future set when ``fd`` becomes readable (a pidfd: when the process has exited)."""
    future: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not future.done():
            future.set_result(None)

    loop.add_reader(fd, ready)
    return future


class _ChildTracker:
    """Follows bwrap's ``--json-status-fd`` to hold a pidfd on the namespace's PID 1.

    The pidfd is opened while the monitor (its parent) is alive and checked to be the
    monitor's child, so it names the right process even if pids are recycled later.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, fd: int, monitor_pid: int, on_child: Callable[[int], None]
    ) -> None:
        self.loop, self.fd, self.monitor_pid, self.on_child = loop, fd, monitor_pid, on_child
        self.buffer = b""
        self.lines: list[dict[str, object]] = []
        self.pid: int | None = None
        self.pidfd: int | None = None
        self.open = True
        os.set_blocking(fd, False)
        loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, _READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.loop.remove_reader(self.fd)
            return
        self.buffer += data
        *complete, self.buffer = self.buffer.split(b"\n")
        for item in _parse_status(b"\n".join(complete)):
            self.lines.append(item)
            if isinstance(item.get("child-pid"), int) and self.pid is None:
                self.pid = int(item["child-pid"])  # type: ignore[call-overload]
                self._open_pidfd(self.pid)

    def _open_pidfd(self, pid: int) -> None:
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return
        try:
            with open(f"/proc/{pid}/status") as f:
                ppid = next((int(line.split()[1]) for line in f if line.startswith("PPid:")), -1)
        except OSError:
            ppid = -1
        if ppid == self.monitor_pid:
            self.pidfd = pidfd
            self.on_child(pid)
        else:
            os.close(pidfd)

    def kill(self) -> bool:
        """SIGKILL PID 1 of the namespace; False when it is not known (yet)."""
        self._readable()  # pick up a child-pid line that arrived since the last loop turn
        if self.pidfd is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        return True

    async def gone(self, timeout: float) -> None:
        """Wait until PID 1 (and so its whole namespace) has exited."""
        if self.pidfd is None:
            return
        done = _readable(self.loop, self.pidfd)
        try:
            await asyncio.wait_for(done, timeout)
        except TimeoutError:
            pass
        finally:
            self.loop.remove_reader(self.pidfd)

    def close(self) -> None:
        if self.open:
            self.open = False
            with contextlib.suppress(ValueError, OSError):
                self.loop.remove_reader(self.fd)
            rest = _read_all_nonblocking(self.fd)
            os.close(self.fd)
            self.lines += _parse_status(self.buffer + rest)
            if self.pid is None:
                pids = [x["child-pid"] for x in self.lines if isinstance(x.get("child-pid"), int)]
                self.pid = int(pids[0]) if pids else None  # type: ignore[call-overload]
            if self.pidfd is not None:
                os.close(self.pidfd)
                self.pidfd = None
