"""Structural validation of a ``SearchJob``, and the hook the gateway validates jobs through.

:func:`validate` checks what any job needs whatever its strategy (a strategy name, a problem
with known roles, a positive token budget, a finite deadline, sampling in range), with no
strategy code imported. The orchestrator's full ``validate_job``
(``services/orchestrator/search.py``) runs it first and then builds the strategy, which checks
the strategy's own parameters and verifier. The gateway depends only on :data:`JobValidator`:
its process entry point (``ttc serve gateway``, ``services/cli.py``) hands it the
orchestrator's full validation so a bad pinned strategy is refused with 400 before anything is
enqueued; a gateway built without one (unit tests) validates structurally and the worker
reports strategy-level mistakes as a typed ``INVALID_ARGUMENT`` job error (also a 400).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import orchestrator_pb2

ROLES = ("system", "user", "assistant", "tool")

JobValidator = Callable[[orchestrator_pb2.SearchJob], None]


def validate(job: orchestrator_pb2.SearchJob) -> None:
    """Raise ``InvalidArgument`` naming the field for a job no strategy could run."""
    if not job.strategy.name:
        raise InvalidArgument("a strategy name is required", field="strategy.name")
    if job.messages:
        for i, message in enumerate(job.messages):
            if message.role not in ROLES:
                raise InvalidArgument(f"unknown role {message.role!r}", field=f"messages[{i}].role")
    elif not job.prompt:
        raise InvalidArgument("a job needs messages or a prompt", field="messages")
    budget = job.budget
    if budget.max_generated_tokens <= 0:
        raise InvalidArgument("the generated-token budget must be positive", field="budget.max_generated_tokens")
    if not math.isfinite(budget.deadline_seconds) or budget.deadline_seconds < 0:
        raise InvalidArgument("must be >= 0 (0 means no deadline)", field="budget.deadline_seconds")
    if not (math.isfinite(job.temperature) and 0.0 <= job.temperature <= 2.0):
        raise InvalidArgument("must be between 0 and 2", field="temperature")
    if not (math.isfinite(job.top_p) and 0.0 <= job.top_p <= 1.0):
        raise InvalidArgument("must be between 0 and 1", field="top_p")
