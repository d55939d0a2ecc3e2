"""What the servicer needs of a backend: run one program under limits in a slot."""

from __future__ import annotations

from typing import Protocol

from services.gen.ttc.v1 import sandbox_pb2
from services.sandbox.executor import Program
from services.sandbox.limits import ExecLimits


class Runner(Protocol):
    """``executor.Executor`` (bubblewrap) and ``docker_executor.DockerExecutor`` (containers)."""

    async def run(self, program: Program, limits: ExecLimits, uid: int | None) -> tuple[sandbox_pb2.RunOutcome, str]:
        """The run's outcome and, when not OK, why."""
        ...
