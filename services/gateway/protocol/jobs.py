"""The job a poll returns, with what a job that ended without a reply had spent.

A finished job's usage is in its ``result`` (the chat completion). A cancelled job has no
result, yet its worker had decoded tokens for it: ``usage`` reports them (the worker's count,
``services/orchestrator/metering.py``), and likewise for a job that failed after it spent.
"""

from __future__ import annotations

from pydantic import Field

from services.gateway.protocol.replies import Job
from services.gateway.protocol.report import Usage


class JobView(Job):
    """``Job`` plus the spend of a job that ended without a reply."""

    usage: Usage | None = Field(
        None,
        description="Tokens a job that ended without a reply (cancelled, failed) had spent, as its worker "
        "counted them; absent while it runs, when it succeeded (see result.usage), or when no worker had started it.",
    )
