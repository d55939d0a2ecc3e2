"""Orchestrator settings, read once from ``TTC_ORCHESTRATOR_*`` environment variables."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.common.targets import parse_targets


class OrchestratorSettings(BaseSettings):
    """Where the worker finds its services, how many jobs it runs, and how long records live."""

    model_config = SettingsConfigDict(env_prefix="TTC_ORCHESTRATOR_", extra="ignore")

    policy_target: str = Field(
        "127.0.0.1:50051", description="gRPC target of the policy service (jobs for a model not in policy_targets)."
    )
    policy_targets: str = Field(
        "",
        description="Policy deployments by model, 'model=host:port,...': a job for a listed model goes to its "
        "deployment, any other to policy_target.",
    )
    escalation_model: str = Field(
        "",
        description="The larger model the cascade strategy escalates an unsettled vote to (e.g. qwen2.5-coder-1.5b, "
        "served by TTC_STACK_LARGE_MODEL); it needs a deployment in policy_targets. Empty: the cascade is refused.",
    )
    judge_model: str = Field(
        "",
        description="Model the verifier's generative judges (ORM, PRM: best-of-N, beam search, weighted votes) "
        "score with; empty = the job's own model. A stronger deployment (e.g. TTC_STACK_LARGE_MODEL) must be in "
        "the verifier's TTC_VERIFIER_POLICY_TARGETS.",
    )
    policy_affinity: bool = Field(
        True,
        description="Send every policy call of one job to the same policy replica (consistent hashing on the job "
        "id over the addresses the policy target resolves to), failing over round the ring on UNAVAILABLE; "
        "false spreads calls round robin.",
    )
    policy_replicas: str = Field(
        "",
        description="Policy replica addresses 'host:port,...' for policy_target's affinity ring; empty resolves "
        "policy_target's host name (a headless Service lists every ready pod).",
    )
    policy_replicas_refresh_s: float = Field(
        30.0, gt=0, description="How often the policy replicas are resolved again (seconds)."
    )
    policy_wait_s: float = Field(
        120.0,
        ge=0,
        description="Longest a job waits for a policy that answers UNAVAILABLE (a restart): its calls are retried "
        "with backoff (0.1 s doubling to 2 s) until this many seconds after the job started or its deadline, "
        "whichever comes first; then the job fails UNAVAILABLE (503). 0 fails at once.",
    )
    verifier_target: str = Field("127.0.0.1:50052", description="gRPC target of the verifier service.")
    sandbox_target: str = Field(
        "127.0.0.1:50053", description="gRPC target of the sandbox service (program-of-thought runs programs there)."
    )
    concurrency: int = Field(8, ge=1, le=256, description="Jobs one worker process runs at once (Celery threads).")
    metrics_port: int = Field(9104, description="Port of the worker's Prometheus /metrics endpoint.")
    host: str = Field("0.0.0.0", description="Address the metrics endpoint binds.")
    port: int = Field(
        50054,
        description="Orchestrator gRPC port (RunSearch without the queue, GetTrace); 0 disables it. Each worker "
        "process needs its own port.",
    )
    result_ttl_s: int = Field(86_400, ge=60, description="How long job results and events stay in Redis.")
    trace_ttl_s: int = Field(7 * 86_400, ge=60, description="How long search traces stay in Redis.")
    visibility_timeout_s: int = Field(
        600,
        ge=5,
        description="Seconds after which a job taken by a worker that never acknowledged it (crashed) is delivered "
        "again, and after which a queued job whose message a dying worker lost is sent again; must exceed the "
        "longest job.",
    )
    restore_interval_s: int = Field(
        10, ge=1, description="How often a worker sweeps for unacknowledged and lost jobs of dead workers (seconds)."
    )
    lease_ttl_s: int = Field(
        15,
        ge=2,
        description="Lease a running job holds (refreshed every third of it); a redelivered job whose lease "
        "is alive is retried later instead of run twice.",
    )
    cancel_poll_s: float = Field(
        1.0,
        gt=0,
        description="How often a running job re-checks its cancel key (seconds); the pub/sub message normally "
        "cancels it at once, this is the fallback (each check is a Redis round trip per running job).",
    )
    worker_name: str = Field("", description="Celery node name; empty derives one from host and pid.")

    @field_validator("policy_targets")
    @classmethod
    def _targets(cls, value: str) -> str:
        parse_targets(value)
        return value
