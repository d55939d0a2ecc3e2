"""Turn what the OS reported about a run into one ``ExecStatus`` (pure, unit-tested).

Order matters: a sandbox that never started is the service's failure, never the program's;
then the limits the service enforced itself (output cap, wall clock); then the limits the
kernel enforced (CPU: SIGXCPU/SIGKILL; memory: the interpreter's ``MemoryError`` under
RLIMIT_AS); then the program's own exit status.
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass

from services.gen.ttc.v1 import sandbox_pb2
from services.sandbox.limits import ExecLimits
from services.sandbox.runner import RawRun

log = logging.getLogger(__name__)
S = sandbox_pb2.ExecStatus
# bwrap reports a child killed by signal N as exit code 128 + N (the shell convention).
_SIGNAL_BASE = 128
_MEMORY_MARKERS = (b"MemoryError", b"Cannot allocate memory", b"std::bad_alloc")


@dataclass(frozen=True)
class Classified:
    status: int
    exit_code: int
    signal: int
    message: str = ""


def _exit_and_signal(raw: RawRun) -> tuple[int, int]:
    if raw.bwrap_exit_code is not None:
        code = raw.bwrap_exit_code
        if _SIGNAL_BASE < code <= _SIGNAL_BASE + 64:
            return code, code - _SIGNAL_BASE
        return code, 0
    if os.WIFSIGNALED(raw.wait_status):
        sig = os.WTERMSIG(raw.wait_status)
        return _SIGNAL_BASE + sig, sig
    return os.waitstatus_to_exitcode(raw.wait_status), 0


def classify(raw: RawRun, limits: ExecLimits) -> Classified:
    """The run's status, exit code, terminating signal and, for failures, a short reason."""
    if raw.spawn_error:
        return Classified(S.EXEC_STATUS_SANDBOX_ERROR, -1, 0, raw.spawn_error)
    exit_code, sig = _exit_and_signal(raw)
    if not raw.sandbox_started and not raw.killed:
        reason = raw.stderr.decode(errors="replace").strip()[-500:] or f"bwrap exited with {exit_code}"
        return Classified(S.EXEC_STATUS_SANDBOX_ERROR, exit_code, sig, f"sandbox setup failed: {reason}")
    if raw.output_exceeded:
        message = f"output exceeded {limits.max_output_bytes} bytes"
        return Classified(S.EXEC_STATUS_OUTPUT_LIMIT, exit_code, sig, message)
    if raw.oom_killed:
        message = f"the execution's memory cgroup ran out of memory (limit {limits.memory_bytes} bytes + tmpfs)"
        return Classified(S.EXEC_STATUS_MEMORY_LIMIT, exit_code, sig, message)
    if raw.timed_out:
        return Classified(S.EXEC_STATUS_TIMEOUT, exit_code, sig, f"wall-clock limit {limits.wall_seconds:g}s exceeded")
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and raw.cpu_seconds >= limits.cpu_rlimit[0]):
        return Classified(S.EXEC_STATUS_TIMEOUT, exit_code, sig, f"CPU limit {limits.cpu_seconds:g}s exceeded")
    if exit_code != 0 and any(marker in raw.stderr[-4096:] for marker in _MEMORY_MARKERS):
        return Classified(S.EXEC_STATUS_MEMORY_LIMIT, exit_code, sig, f"memory limit {limits.memory_bytes} bytes")
    if exit_code == 0:
        return Classified(S.EXEC_STATUS_OK, 0, 0)
    return Classified(S.EXEC_STATUS_RUNTIME_ERROR, exit_code, sig)


def run_outcome(raw: RawRun, limits: ExecLimits) -> tuple[sandbox_pb2.RunOutcome, str]:
    """The reply's ``RunOutcome`` for a run on either backend, and why it is not OK."""
    verdict = classify(raw, limits)
    if verdict.status == sandbox_pb2.EXEC_STATUS_SANDBOX_ERROR:
        log.error("sandbox error: %s", verdict.message)
    outcome = sandbox_pb2.RunOutcome(
        status=verdict.status,  # type: ignore[arg-type]
        stdout=raw.stdout,
        stderr=raw.stderr,
        stdout_truncated=raw.stdout_truncated,
        stderr_truncated=raw.stderr_truncated,
        exit_code=verdict.exit_code,
        signal=verdict.signal,
        cpu_seconds=raw.cpu_seconds,
        wall_seconds=raw.wall_seconds,
        peak_memory_bytes=raw.peak_memory_bytes,
    )
    return outcome, verdict.message
