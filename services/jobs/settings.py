"""Job-queue settings, read once from ``TTC_JOBS_*``: the one name both sides of the queue read."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class JobsSettings(BaseSettings):
    """What the gateway (sender) and the orchestrator workers (consumers) must agree on."""

    model_config = SettingsConfigDict(env_prefix="TTC_JOBS_", extra="ignore")

    queue: str = Field(
        "ttc.search", description="Celery queue of search jobs: the gateway enqueues on it, the workers consume it."
    )
