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
    slots = create_slots(tmp_path, 2, [7000, 7001], owner=os.getpid())
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
