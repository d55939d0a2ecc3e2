"""Free TCP ports for the local stacks that tests, load tests, benchmarks and scripts start.

Why not bind port 0 and hand its number on: the kernel draws port-0 binds from the ephemeral
range, the same range every outgoing connection takes its source port from. Between picking a
port and the child service binding it, one of the many client connections of a test run (gRPC
channels, Redis clients, HTTP probes) can take that port, and the service dies with EADDRINUSE
(CI saw a policy's metrics server do so). Ports below the ephemeral range are never handed to
outgoing connections, so a port picked there stays free unless something binds it on purpose;
a process-wide set keeps one process from handing the same port out twice.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL_RANGE = (32768, 60999)  # Linux's default
LOWEST_PORT = 10000  # below it live the well-known and registered services a host may run
ATTEMPTS = 500

_handed_out: set[int] = set()
_lock = threading.Lock()
_random = random.SystemRandom()


def ephemeral_range(path: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The host's ephemeral port range (inclusive), or Linux's default where it cannot be read."""
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL_RANGE
    return low, high


def candidate_range(ephemeral: tuple[int, int]) -> tuple[int, int] | None:
    """The widest stretch of ports outside ``ephemeral`` above ``LOWEST_PORT``, or None if none
    is worth drawing from (a host whose ephemeral range covers nearly everything)."""
    low, high = ephemeral
    below = (LOWEST_PORT, low - 1)
    above = (high + 1, 65535)
    best = max((below, above), key=lambda r: r[1] - r[0])
    return best if best[1] - best[0] >= 1000 else None


def bindable(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing holds ``port`` on ``host`` (a bind without SO_REUSEADDR, the strict test)."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing holds and that this process has not handed out before."""
    stretch = candidate_range(ephemeral_range())
    with _lock:
        if stretch is not None:
            for _ in range(ATTEMPTS):
                port = _random.randint(*stretch)
                if port not in _handed_out and bindable(port, host):
                    _handed_out.add(port)
                    return port
        while True:  # no stretch outside the ephemeral range: the kernel's pick, never twice
            with socket.socket() as s:
                s.bind((host, 0))
                port = int(s.getsockname()[1])
            if port not in _handed_out:
                _handed_out.add(port)
                return port
