"""Run the sandbox service as root or as a non-root user, and find what its programs left.

The chart runs the sandbox as a non-root uid (rootless bubblewrap); CI runs as root. Tests that
want both start the service through ``setpriv`` as ``nobody`` with a memory cgroup delegated to
it, as an operator would. The containment check fits each mode: as root, programs run as the
slot uids, so any process of those uids is a leftover; not root, programs run as the service's
own uid, so any process of that uid outside the service's own PID namespace is one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

from services.sandbox.cgroups import detect_parent

NOBODY = 65534


def uid_of(pid: int | str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _pid_namespace(pid: int | str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def program_processes(user: str, service_pid: int, uid_base: int, slots: int) -> list[int]:
    """Host pids of processes the service's sandboxed programs started, still alive."""
    service_ns = _pid_namespace(service_pid)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        uid = uid_of(entry.name)
        if uid is None:
            continue
        if user == "root":
            if uid_base <= uid < uid_base + slots:
                found.append(int(entry.name))
        elif uid == NOBODY and _pid_namespace(entry.name) not in ("", service_ns):
            found.append(int(entry.name))
    return found


def nonroot_command() -> list[str]:
    """``ttc serve sandbox`` as ``nobody``, with no capabilities and no supplementary groups."""
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    user = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all"]
    return [*user, sys.executable, "-m", "services.cli", "serve", "sandbox"]


def delegate_cgroup() -> Path | None:
    """A memory cgroup handed to ``nobody`` (under this process's own), or None where not possible."""
    found = detect_parent()
    if found is None or os.geteuid() != 0:
        return None
    path = found[0] / f"ttc-test-delegated-{os.getpid()}-{os.urandom(3).hex()}"
    try:
        path.mkdir()
        for item in [path, *path.iterdir()]:
            os.chown(item, NOBODY, NOBODY)
    except OSError:
        return None
    return path


def release_cgroup(path: Path | None) -> None:
    """Remove a delegated cgroup once its service has stopped (and removed its slots)."""
    if path is None:
        return
    for slot in path.glob("ttc-sandbox-*"):
        with contextlib.suppress(OSError):
            slot.rmdir()
    with contextlib.suppress(OSError):
        path.rmdir()


def nonroot_env(tmpdir: Path) -> tuple[dict[str, str], Path | None]:
    """Settings for a non-root service: its TMPDIR owned by it, its delegated cgroup (or off)."""
    os.chown(tmpdir, NOBODY, NOBODY)
    delegated = delegate_cgroup()
    return {"TTC_SANDBOX_MEMORY_CGROUP": str(delegated) if delegated else "off"}, delegated
