"""Settings shared by every service, read once from ``TTC_*`` environment variables.

Each service has its own settings class (``services/<service>/settings.py``) with a
``TTC_<SERVICE>_`` prefix; this module holds only what all of them share. Nothing else in
the code base reads ``os.environ``.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class CommonSettings(BaseSettings):
    """Logging, tracing and Redis settings common to all services."""

    model_config = SettingsConfigDict(env_prefix="TTC_", extra="ignore")

    log_level: str = Field("INFO", description="Python log level of every service.")
    log_json: bool = Field(True, description="Emit one JSON object per log line.")
    otel_endpoint: str = Field(
        "", description="OTLP/gRPC endpoint for traces (e.g. http://127.0.0.1:4317); empty disables export."
    )
    otel_console: bool = Field(False, description="Also print finished spans to stderr (debugging).")
    redis_url: str = Field("redis://127.0.0.1:6379/0", description="Redis used for queues, events and traces.")


class StackSettings(BaseSettings):
    """What `ttc stack` (everything on one machine, `make run`) serves beyond one of each service."""

    model_config = SettingsConfigDict(env_prefix="TTC_STACK_", extra="ignore")

    large_model: str = Field(
        "",
        description="A second, larger model `ttc stack` serves beside TTC_POLICY_MODEL, as its own policy "
        "deployment, for escalation (the cascade) and as a stronger judge: a registry name such as "
        "qwen2.5-coder-1.5b (prepare it with `make models-large`) or a .gguf path. Empty: one model.",
    )
    large_model_port: int = Field(50061, description="gRPC port of the large model's policy deployment.")
    large_model_metrics_port: int = Field(9111, description="Metrics port of the large model's policy deployment.")
    tuned_model: str = Field(
        "",
        description="A fine-tuned model `ttc stack` serves beside TTC_POLICY_MODEL as a model of its own (clients ask "
        "for it by name): qwen2.5-coder-0.5b-rft (build it with `python -m calibration train merge "
        "qwen2.5-coder-0.5b-rft`, docs/training.md) or a .gguf path. Empty: none.",
    )
    tuned_model_port: int = Field(50062, description="gRPC port of the tuned model's policy deployment.")
    tuned_model_metrics_port: int = Field(9112, description="Metrics port of the tuned model's policy deployment.")
