"""Optional per-slot memory cgroups: one memory limit for an execution's whole process tree.

RLIMIT_AS bounds each process; a program that forks can still hold ``max_processes`` times
that. Where this process may create memory cgroups (v1 ``memory`` controller or v2 with
``memory`` enabled), each execution slot gets its own cgroup whose limit covers the tree's
resident memory and its tmpfs pages, whose OOM kills mark the run MEMORY_LIMIT, and whose
member list is a last, uid-independent handle on every process left behind. Where it may
not, the service says so at start-up and relies on the rlimits alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

PREFIX = "ttc-sandbox-"


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, super options) of every cgroup mount, from /proc/self/mountinfo."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[4], tail[0], set(tail[2].split(","))))
    return found


def detect_parent() -> tuple[Path, int] | None:
    """This process's own memory cgroup directory and its version, if any is mounted."""
    own: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    for mount, fstype, options in _mounts():
        if fstype == "cgroup" and "memory" in options and "memory" in own:
            return Path(mount + own["memory"]), 1
        if fstype == "cgroup2" and "" in own:
            parent = Path(mount + own[""])
            # The controllers this process's own cgroup may hand to children: the mount root's
            # list says nothing about whether the path down to us delegates ``memory``.
            if "memory" in _words(parent / "cgroup.controllers"):
                return parent, 2
    return None


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def delegate_memory_v2(parent: Path, owner: int | None = None) -> Path | None:
    """Let ``parent`` (a v2 cgroup holding this service) give its children memory limits.

    cgroup v2's no-internal-processes rule: a non-root cgroup that holds processes cannot
    enable controllers for its children, so writing ``+memory`` to ``cgroup.subtree_control``
    fails with EBUSY while the service still sits in ``parent``. The service's processes (and
    any other member, e.g. a container's init) move into a leaf ``<prefix><owner>-service``
    first, the same delegation container runtimes do; the slot cgroups are then its siblings.
    Returns the leaf (``None`` when ``memory`` was already enabled); raises ``OSError`` when
    not permitted.
    """
    control = parent / "cgroup.subtree_control"
    if "memory" in _words(control):
        return None
    owner = os.getpid() if owner is None else owner
    leaf = parent / f"{PREFIX}{owner}-service"
    leaf.mkdir(exist_ok=True)
    for pid in _words(parent / "cgroup.procs"):
        with contextlib.suppress(ProcessLookupError):  # exited meanwhile
            (leaf / "cgroup.procs").write_text(pid)
    control.write_text("+memory")
    return leaf


@dataclass
class SlotCgroup:
    """The memory cgroup of one execution slot."""

    path: Path
    version: int

    def _file(self, v1: str, v2: str) -> Path:
        return self.path / (v1 if self.version == 1 else v2)

    def set_limit(self, limit_bytes: int) -> None:
        if self.version == 1:
            # v1 keeps memory <= memory+swap: lower memory first, raise memory+swap first.
            files = [self.path / "memory.limit_in_bytes", self.path / "memory.memsw.limit_in_bytes"]
            files = [f for f in files if f.exists()]
            current = int(files[0].read_text())
            for f in files if limit_bytes <= current else reversed(files):
                f.write_text(str(limit_bytes))
        else:
            (self.path / "memory.max").write_text(str(limit_bytes))
            swap = self.path / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")

    def add(self, pid: int) -> None:
        """Move ``pid`` (not its existing children) into this cgroup."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def oom_kills(self) -> int:
        text = self._file("memory.oom_control", "memory.events").read_text()
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def pids(self) -> list[int]:
        return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]

    def kill_all(self) -> int:
        """SIGKILL every member (a v1 cgroup has no cgroup.kill); the number found."""
        members = self.pids()
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(members)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.kill_all()
        with contextlib.suppress(OSError):
            self.path.rmdir()


def _owner_alive(name: str) -> bool:
    """Whether the service that created ``ttc-sandbox-<pid>-<uid>`` still runs."""
    try:
        pid = int(name.removeprefix(PREFIX).split("-")[0])
    except ValueError:
        return True  # not ours to judge
    return Path(f"/proc/{pid}").exists()


def create_slots(parent: Path, version: int, uids: list[int], owner: int | None = None) -> dict[int, SlotCgroup]:
    """One cgroup per slot uid under ``parent``; raises ``OSError`` when not permitted.

    Names carry the owning service's pid, so two services on one host never share (or remove)
    each other's cgroups; those left by a service that was killed are removed here.
    """
    owner = os.getpid() if owner is None else owner
    for stale in parent.glob(f"{PREFIX}*"):
        if stale.is_dir() and not _owner_alive(stale.name) and not stale.name.endswith("-service"):
            SlotCgroup(stale, version).remove()
    if version == 2:
        delegate_memory_v2(parent, owner)
    slots = {}
    for uid in uids:
        path = parent / f"{PREFIX}{owner}-{uid}"
        path.mkdir(exist_ok=True)
        slots[uid] = SlotCgroup(path, version)
    return slots
