"""One execution end to end: program and files into memfds, prlimit + bwrap, run, classify.

Files reach the sandbox through ``bwrap --file`` from in-memory descriptors and live only in
the execution's tmpfs, so nothing is ever written to the host's disk and there is nothing to
clean up once the namespace is gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from services.gen.ttc.v1 import sandbox_pb2
from services.sandbox.cgroups import SlotCgroup
from services.sandbox.isolation import (
    Interpreter,
    MountedFile,
    bwrap_args,
    prlimit_args,
    program_argv,
    setpriv_args,
)
from services.sandbox.limits import ExecLimits
from services.sandbox.outcome import run_outcome
from services.sandbox.runner import memfd_with, run_sandboxed
from services.sandbox.settings import SandboxSettings
from services.sandbox.validation import PROGRAM_NAME

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Program:
    """What one run executes: source, stdin and extra files (paths validated)."""

    source: bytes
    stdin: bytes = b""
    files: Sequence[tuple[str, bytes]] = ()


class Executor:
    """Runs programs in the sandbox; holds configuration only, no per-run state."""

    def __init__(
        self,
        settings: SandboxSettings,
        interpreter: Interpreter | None,
        on_kill: Callable[[str], None] = lambda reason: None,
        unavailable: str = "",
        cgroups: Mapping[int, SlotCgroup] | None = None,
    ) -> None:
        """``interpreter`` None (with ``unavailable`` saying why): every run is a SANDBOX_ERROR."""
        self.settings = settings
        self.interpreter = interpreter
        self.on_kill = on_kill
        self.cgroups = dict(cgroups or {})
        self.unavailable = unavailable or ("" if interpreter is not None else "no interpreter configured")

    def tree_memory_bytes(self, limits: ExecLimits) -> int:
        """The whole tree's memory: one process's allowance plus both tmpfs (/tmp, /dev/shm)."""
        return limits.memory_bytes + 2 * self.settings.tmpfs_bytes

    async def run(self, program: Program, limits: ExecLimits, uid: int | None) -> tuple[sandbox_pb2.RunOutcome, str]:
        """Run ``program`` under ``limits`` as host ``uid``: its outcome and, when not OK, why."""
        if self.interpreter is None or self.unavailable:
            return sandbox_pb2.RunOutcome(status=sandbox_pb2.EXEC_STATUS_SANDBOX_ERROR), self.unavailable
        if uid is None and os.geteuid() == 0:
            # bwrap started by root keeps root's powers over the namespaces it creates.
            return sandbox_pb2.RunOutcome(status=sandbox_pb2.EXEC_STATUS_SANDBOX_ERROR), (
                "refusing to run sandboxed code as root: the service must hand out slot uids"
            )
        # Only root switches to the slot's uid; otherwise the slot only names its cgroup and the
        # program runs as this user inside its own user namespace (rootless bubblewrap).
        run_as = uid if os.geteuid() == 0 else None
        interpreter = self.interpreter
        s = self.settings
        cgroup = self.cgroups.get(uid) if uid is not None else None
        if cgroup is not None:
            try:
                cgroup.set_limit(self.tree_memory_bytes(limits))
            except OSError as exc:
                message = f"cannot set the execution's memory cgroup limit: {exc}"
                log.error("sandbox error: %s", message)
                return sandbox_pb2.RunOutcome(status=sandbox_pb2.EXEC_STATUS_SANDBOX_ERROR), message
        fds: list[int] = []
        try:
            mounted = [MountedFile(memfd_with(program.source, "program"), PROGRAM_NAME)]
            mounted += [MountedFile(memfd_with(content, "file"), path) for path, content in program.files]
            fds = [m.fd for m in mounted]
            # bwrap reads descriptors by number; the CLOEXEC ones are passed explicitly by Popen.
            status_r, status_w = os.pipe()
            block_r = block_w = None
            if cgroup is not None:
                block_r, block_w = os.pipe()
                fds += [block_r, block_w]
            command = setpriv_args(s.setpriv_path, run_as)
            command += prlimit_args(s.prlimit_path, limits, tmpfs_bytes=s.tmpfs_bytes, max_open_files=s.max_open_files)
            command += bwrap_args(
                s.bwrap_path,
                interpreter,
                tmpfs_bytes=s.tmpfs_bytes,
                files=mounted,
                status_fd=status_w,
                argv=program_argv(
                    interpreter, PROGRAM_NAME, prlimit_path=s.prlimit_path, max_processes=limits.max_processes
                ),
                tools=[s.prlimit_path],
                block_fd=block_r,
            )
            raw = await run_sandboxed(
                command,
                stdin=program.stdin,
                pass_fds=[fd for fd in fds if fd != block_w],
                status_fd_w=status_w,
                status_fd_r=status_r,
                wall_seconds=limits.wall_seconds,
                max_output_bytes=limits.max_output_bytes,
                on_kill=self.on_kill,
                cgroup=cgroup,
                block_fd_w=block_w,
            )
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if raw.leftovers:
            log.warning("killed %d processes left in the memory cgroup after the run", raw.leftovers)
        return run_outcome(raw, limits)
