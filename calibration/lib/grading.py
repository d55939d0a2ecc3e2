"""The sandbox that grades code replies of the live runs (``validate``, ``live``, ``routed``) as
the pools grade code candidates: the reply's program run on the problem's hidden tests.

It is a ``ttc serve sandbox`` of its own (slot uids apart from the drawer's and the stacks'), so
grading works against any gateway (``--base-url`` too) and never takes a slot from the system
measured. It starts on the first code reply: a run without code starts nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from calibration.lib.services import Service, sandbox_service
from evaluation.problems.checkers import CodeRunner, sandbox_runner

START_TIMEOUT_S = 120.0
# Slot uids apart from the drawer's sandbox (160 000) and the stacks' (below 150 000): the grader
# lives for a whole run, and a pool draw may take the model lock between its chunks.
GRADER_UID_BASE = 170_000


@dataclass
class CodeGrader:
    """``runner()`` gives the :data:`~evaluation.problems.checkers.CodeRunner` of the grading sandbox,
    starting it once; ``stop()`` ends it. A grader built with a ``runner`` uses that one (a
    sandbox the caller runs)."""

    given: CodeRunner | None = None
    timeout_s: float = 60.0
    _service: Service | None = None
    _runner: CodeRunner | None = None

    async def runner(self) -> CodeRunner:
        if self.given is not None:
            return self.given
        if self._runner is None:
            self._service = await asyncio.to_thread(
                sandbox_service(slots=2, uid_base=GRADER_UID_BASE).start, START_TIMEOUT_S
            )
            self._runner = sandbox_runner(self._service.target, timeout=self.timeout_s)
        return self._runner

    def stop(self) -> None:
        if self._service is not None:
            self._service.stop()
            self._service, self._runner = None, None
