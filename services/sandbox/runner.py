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
    uid: int | None,
    wall_seconds: float,
    max_output_bytes: int,
    on_kill: Callable[[str], None] = lambda reason: None,
) -> RawRun:
    """Run ``command`` (prlimit … bwrap …) as ``uid``; the caller owns and closes ``pass_fds``."""
    loop = asyncio.get_running_loop()
    run = RawRun()
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
            user=uid,
            group=uid,
            extra_groups=[] if uid is not None else None,
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

    def kill(reason: str) -> None:
        # Only while the monitor is unreaped, so the process group id cannot have been reused.
        if reaped:
            return
        if not run.killed:
            run.killed = True
            on_kill(reason)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    def overflow() -> None:
        run.output_exceeded = True
        kill("output_limit")

    out = _CappedReader(loop, out_r, max_output_bytes, overflow)
    err = _CappedReader(loop, err_r, max_output_bytes, overflow)
    pidfd = os.pidfd_open(pid)
    exited: asyncio.Future[None] = loop.create_future()

    def on_exit() -> None:
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(pidfd, on_exit)
    try:
        try:
            await asyncio.wait_for(asyncio.shield(exited), timeout=wall_seconds)
        except TimeoutError:
            run.timed_out = True
            kill("timeout")
            await exited
    finally:
        # Also reached when the caller is cancelled: never leave a tree running or unreaped.
        if not exited.done():
            kill("cancelled")
        loop.remove_reader(pidfd)
        os.close(pidfd)
        _, wait_status, usage = os.wait4(pid, 0)
        reaped = True
        proc.returncode = os.waitstatus_to_exitcode(wait_status)  # keep Popen from reaping again
        run.wall_seconds = time.perf_counter() - start
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(out.eof, err.eof), timeout=_DRAIN_SECONDS)
        out.close()
        err.close()
        run.status_lines = _parse_status(_read_all_nonblocking(status_fd_r))
        os.close(status_fd_r)

    run.wait_status = wait_status
    run.cpu_seconds = usage.ru_utime + usage.ru_stime
    run.peak_memory_bytes = usage.ru_maxrss * 1024
    run.stdout, run.stdout_truncated = bytes(out.buffer), out.truncated
    run.stderr, run.stderr_truncated = bytes(err.buffer), err.truncated
    run.sandbox_started = any("child-pid" in line for line in run.status_lines)
    for line in run.status_lines:
        code = line.get("exit-code")
        if isinstance(code, int):
            run.bwrap_exit_code = code
    return run
