"""Memory-cgroup bookkeeping over a directory laid out like cgroupfs (v1 and v2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.sandbox.cgroups import SlotCgroup, create_slots
from services.sandbox.isolation import Interpreter, bwrap_args


def v1_dir(path: Path, memory: int, memsw: int) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "memory.limit_in_bytes").write_text(str(memory))
    (path / "memory.memsw.limit_in_bytes").write_text(str(memsw))
    (path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    (path / "cgroup.procs").write_text("")
    return path


class OrderedV1(SlotCgroup):
    """Fails like the kernel when memory would exceed memory+swap."""

    def set_limit(self, limit_bytes: int) -> None:
        original = Path.write_text

        def checked(target: Path, data: str, *args: object, **kwargs: object) -> int:
            memory = self.path / "memory.limit_in_bytes"
            memsw = self.path / "memory.memsw.limit_in_bytes"
            if target == memory and int(data) > int(memsw.read_text()):
                raise OSError(22, "Invalid argument")
            if target == memsw and int(data) < int(memory.read_text()):
                raise OSError(22, "Invalid argument")
            return original(target, data)

        Path.write_text = checked  # type: ignore[method-assign,assignment]
        try:
            super().set_limit(limit_bytes)
        finally:
            Path.write_text = original  # type: ignore[method-assign]


@pytest.mark.parametrize("new", [100, 5000])
def test_v1_limit_respects_memory_below_memsw(tmp_path: Path, new: int) -> None:
    cg = OrderedV1(v1_dir(tmp_path / "cg", 1000, 1000), 1)
    cg.set_limit(new)
    assert (cg.path / "memory.limit_in_bytes").read_text() == str(new)
    assert (cg.path / "memory.memsw.limit_in_bytes").read_text() == str(new)


def test_oom_kills_and_members(tmp_path: Path) -> None:
    cg = SlotCgroup(v1_dir(tmp_path / "cg", 1, 1), 1)
    assert cg.oom_kills() == 3
    assert cg.pids() == []
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n")
    (v2 / "cgroup.procs").write_text("")
    assert SlotCgroup(v2, 2).oom_kills() == 2


def test_create_slots_makes_one_directory_per_uid_and_owner(tmp_path: Path) -> None:
    dead = tmp_path / "ttc-sandbox-999999999-7000"  # a pid that cannot exist: a killed service's
    dead.mkdir()  # (empty: a plain directory cannot be removed with files in it, a cgroup can)
    other = tmp_path / f"ttc-sandbox-{os.getppid()}-7000"  # a live service's: left alone
    other.mkdir()
    slots = create_slots(tmp_path, 1, [7000, 7001], owner=os.getpid())
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted([other.name, f"ttc-sandbox-{os.getpid()}-7000", f"ttc-sandbox-{os.getpid()}-7001"])
    assert slots[7001].path == tmp_path / f"ttc-sandbox-{os.getpid()}-7001"


def test_block_fd_holds_the_program_until_released() -> None:
    interp = Interpreter("/usr/bin/python3", ("/usr/lib",))
    args = bwrap_args("/usr/bin/bwrap", interp, tmpfs_bytes=1, files=[], status_fd=5, argv=["x"], block_fd=6)
    assert args[args.index("--block-fd") + 1] == "6"
    assert args.index("--block-fd") < args.index("--")
    no_block = bwrap_args("/usr/bin/bwrap", interp, tmpfs_bytes=1, files=[], status_fd=5, argv=["x"])
    assert "--block-fd" not in no_block


def v2_dir(path: Path, procs: str = "", subtree: str = "") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "cgroup.controllers").write_text("cpu memory pids\n")
    (path / "cgroup.subtree_control").write_text(subtree)
    (path / "cgroup.procs").write_text(procs)
    return path


def test_v2_delegation_moves_members_to_a_leaf_then_enables_memory(tmp_path: Path) -> None:
    """The no-internal-processes rule: members leave the parent before ``+memory`` is written."""
    parent = v2_dir(tmp_path / "svc", procs="41\n42\n")
    writes: list[tuple[str, str]] = []
    original = Path.write_text

    def recording(target: Path, data: str, *args: object, **kwargs: object) -> int:
        writes.append((str(target.relative_to(tmp_path)), data))
        if target.name == "cgroup.procs" and target.parent != parent:
            (parent / "cgroup.procs").write_text("")  # the kernel moves the pid out of the parent
        if target == parent / "cgroup.subtree_control" and (parent / "cgroup.procs").read_text().strip():
            raise OSError(16, "Device or resource busy")
        return original(target, data)

    Path.write_text = recording  # type: ignore[method-assign,assignment]
    try:
        slots = create_slots(parent, 2, [7000], owner=123)
    finally:
        Path.write_text = original  # type: ignore[method-assign]
    assert ("svc/ttc-sandbox-123-service/cgroup.procs", "41") in writes
    assert writes[-1] == ("svc/cgroup.subtree_control", "+memory")
    assert slots[7000].path == parent / "ttc-sandbox-123-7000"


def test_v2_delegation_is_skipped_when_memory_is_already_enabled(tmp_path: Path) -> None:
    parent = v2_dir(tmp_path / "svc", procs="41\n", subtree="memory pids\n")
    create_slots(parent, 2, [7000], owner=123)
    assert not (parent / "ttc-sandbox-123-service").exists()


def test_stale_service_leaf_is_never_removed(tmp_path: Path) -> None:
    """A killed service's leaf may still hold processes moved there (a container's init)."""
    parent = v2_dir(tmp_path / "svc", subtree="memory\n")
    leaf = parent / "ttc-sandbox-999999999-service"
    leaf.mkdir()
    create_slots(parent, 2, [7000], owner=123)
    assert leaf.exists()
