"""What one sandbox container is: its create options, labels and rlimits (pure, unit-tested).

Every execution gets a fresh container: no network (``network_mode=none``, loopback only), a
read-only root, a size-limited tmpfs as its working directory, every capability dropped,
``no-new-privileges``, the runtime's default seccomp profile (nothing here overrides it), a
pids limit, a memory limit for the whole tree (the request's allowance plus both tmpfs plus
the init's own interpreter) with no swap beyond it, a CPU quota, and a non-root numeric uid
(the slot's: no passwd entry needed, and on a rootful runtime without user namespaces it is
the host uid, so the host can tell each slot's processes apart as with bubblewrap).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.sandbox.isolation import SANDBOX_ENV, WORKDIR
from services.sandbox.limits import ExecLimits

# Labels every container carries; the sweeper finds orphans by LABEL and their deadline.
LABEL = "ttc.sandbox"
INSTANCE_LABEL = "ttc.sandbox.instance"
EXPIRES_LABEL = "ttc.sandbox.expires"
# A container still there this long after its execution's wall-clock limit is an orphan.
EXPIRY_GRACE_SECONDS = 60.0
# The init (a second interpreter, PID 1) and the page cache of the files both load.
INIT_MEMORY_BYTES = 48 * 1024 * 1024
# Used when the service hands out no slot uid; "nobody" on Debian.
FALLBACK_UID = 65534

INIT_SOURCE = (Path(__file__).parent / "container_init.py").read_text()


@dataclass(frozen=True)
class ContainerConfig:
    """The parts of the settings a container's options depend on."""

    image: str
    python: str
    cpus: float
    tmpfs_bytes: int
    max_open_files: int
    instance: str


def rlimits(limits: ExecLimits, *, tmpfs_bytes: int, max_open_files: int) -> dict[str, tuple[int, int]]:
    """The program's rlimits, as bubblewrap's prlimit sets them (names of ``resource``)."""
    return {
        "RLIMIT_CPU": limits.cpu_rlimit,
        "RLIMIT_AS": (limits.memory_bytes, limits.memory_bytes),
        "RLIMIT_FSIZE": (tmpfs_bytes, tmpfs_bytes),
        "RLIMIT_NOFILE": (max_open_files, max_open_files),
        "RLIMIT_CORE": (0, 0),
    }


def program_argv(python: str, program: str) -> list[str]:
    """The program's command line inside the container (the same flags as under bubblewrap)."""
    return [python, "-E", "-s", "-B", program]


def tree_memory_bytes(limits: ExecLimits, tmpfs_bytes: int) -> int:
    """The container's memory limit: the program's allowance, /tmp and /dev/shm, and the init."""
    return limits.memory_bytes + 2 * tmpfs_bytes + INIT_MEMORY_BYTES


def labels(instance: str, wall_seconds: float, now: float | None = None) -> dict[str, str]:
    expires = (time.time() if now is None else now) + wall_seconds + EXPIRY_GRACE_SECONDS
    return {LABEL: "1", INSTANCE_LABEL: instance, EXPIRES_LABEL: f"{expires:.0f}"}


def create_options(config: ContainerConfig, limits: ExecLimits, uid: int | None) -> dict[str, Any]:
    """Keyword arguments of ``docker.APIClient.create_container`` (host config as a plain dict)."""
    user = FALLBACK_UID if uid is None else uid
    memory = tree_memory_bytes(limits, config.tmpfs_bytes)
    processes = limits.max_processes + 1  # the program's and the init's
    host_config: dict[str, Any] = {
        "NetworkMode": "none",
        "ReadonlyRootfs": True,
        "Tmpfs": {WORKDIR: f"rw,nosuid,nodev,size={config.tmpfs_bytes},mode=1777"},
        "ShmSize": config.tmpfs_bytes,
        "CapDrop": ["ALL"],
        "SecurityOpt": ["no-new-privileges"],
        "PidsLimit": processes,
        "Memory": memory,
        "MemorySwap": memory,  # no swap beyond the limit
        "NanoCpus": int(config.cpus * 1e9),
        "Ulimits": [
            {"Name": "nofile", "Soft": config.max_open_files, "Hard": config.max_open_files},
            # podman sets a default nproc above what it may set inside a container; the pids
            # cgroup above is the per-execution bound, this only keeps the runtime's hands off.
            {"Name": "nproc", "Soft": 4 * processes, "Hard": 4 * processes},
        ],
        "AutoRemove": True,
        "Init": False,
    }
    return {
        "image": config.image,
        "command": [config.python, "-I", "-S", "-c", INIT_SOURCE],
        "user": f"{user}:{user}",
        "working_dir": WORKDIR,
        "environment": dict(SANDBOX_ENV),
        "hostname": "sandbox",
        "stdin_open": True,
        "network_disabled": True,
        "labels": labels(config.instance, limits.wall_seconds),
        "host_config": host_config,
    }


class FrameDecoder:
    """Splits the Docker API's multiplexed attach stream into (stream, payload) frames.

    Each frame is an 8-byte header (stream 1 = stdout, 2 = stderr; three zero bytes; a
    big-endian 32-bit length) and the payload.
    """

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self.buffer += data
        frames: list[tuple[int, bytes]] = []
        while len(self.buffer) >= 8:
            size = int.from_bytes(self.buffer[4:8], "big")
            if len(self.buffer) < 8 + size:
                break
            frames.append((self.buffer[0], bytes(self.buffer[8 : 8 + size])))
            del self.buffer[: 8 + size]
        return frames
