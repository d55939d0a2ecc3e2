"""Resource limits of one execution: request values, service defaults and maxima.

A zero (unset) field in the request takes the service default; anything negative or above
the service maximum is refused with ``InvalidArgument`` naming the field, before anything
runs. Pure: no I/O, so the rules are unit-tested directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import sandbox_pb2
from services.sandbox.settings import SandboxSettings


@dataclass(frozen=True)
class ExecLimits:
    """The limits one execution actually runs under."""

    cpu_seconds: float
    wall_seconds: float
    memory_bytes: int
    max_processes: int
    max_output_bytes: int

    @property
    def cpu_rlimit(self) -> tuple[int, int]:
        """RLIMIT_CPU (whole seconds): SIGXCPU at the soft limit, SIGKILL one second later."""
        soft = max(1, math.ceil(self.cpu_seconds))
        return soft, soft + 1


def _pick_float(value: float, default: float, maximum: float, field: str) -> float:
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise InvalidArgument(f"must be a finite number >= 0 (0 = default {default:g}), got {value!r}", field=field)
    if value == 0:
        return default
    if value > maximum:
        raise InvalidArgument(f"{value:g} exceeds the maximum {maximum:g}", field=field)
    return value


def _pick_int(value: int, default: int, maximum: int, field: str, minimum: int = 1) -> int:
    if value == 0:
        return default
    if value < minimum:
        raise InvalidArgument(f"must be >= {minimum} (0 = default {default}), got {value}", field=field)
    if value > maximum:
        raise InvalidArgument(f"{value} exceeds the maximum {maximum}", field=field)
    return value


# Below this an interpreter cannot even start, so such a request is a mistake, not a limit.
MIN_MEMORY_BYTES = 32 * 1024 * 1024


def resolve_limits(request: sandbox_pb2.Limits | None, settings: SandboxSettings) -> ExecLimits:
    """Merge a request's limits with the service's defaults; refuse out-of-range values."""
    req = request if request is not None else sandbox_pb2.Limits()
    return ExecLimits(
        cpu_seconds=_pick_float(
            req.cpu_seconds, settings.default_cpu_seconds, settings.max_cpu_seconds, "limits.cpu_seconds"
        ),
        wall_seconds=_pick_float(
            req.wall_seconds, settings.default_wall_seconds, settings.max_wall_seconds, "limits.wall_seconds"
        ),
        memory_bytes=_pick_int(
            req.memory_bytes,
            settings.default_memory_bytes,
            settings.max_memory_bytes,
            "limits.memory_bytes",
            minimum=MIN_MEMORY_BYTES,
        ),
        max_processes=_pick_int(
            req.max_processes, settings.default_max_processes, settings.max_processes, "limits.max_processes"
        ),
        max_output_bytes=_pick_int(
            req.max_output_bytes,
            settings.default_max_output_bytes,
            settings.max_output_bytes,
            "limits.max_output_bytes",
        ),
    )
