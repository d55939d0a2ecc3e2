"""Gateway settings, read once from ``TTC_GATEWAY_*`` environment variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class GatewaySettings(BaseSettings):
    """Where the gateway listens, what it talks to, and the limits it enforces."""

    model_config = SettingsConfigDict(env_prefix="TTC_GATEWAY_", extra="ignore")

    host: str = Field("0.0.0.0", description="Address the gateway's HTTP server binds.")
    port: int = Field(8000, description="Gateway HTTP port (serves the OpenAI API, /healthz, /readyz and /metrics).")
    policy_target: str = Field(
        "127.0.0.1:50051",
        description="gRPC target of the default policy deployment (model list, difficulty probes, stats).",
    )
    policy_targets: str = Field(
        "",
        description="Further policy deployments by model, 'model=host:port,...' (as the workers' "
        "TTC_ORCHESTRATOR_POLICY_TARGETS): every deployment's models are listed by /v1/models and requests route "
        "by model name.",
    )
    model_aliases: str = Field(
        "",
        description="Model names clients may use for served ones, 'alias=model,...' (e.g. "
        "'gpt-4o-mini=qwen2.5-coder-0.5b'); a name neither served nor aliased is a 404 model_not_found.",
    )
    api_keys: str = Field(
        "",
        description="Comma-separated API keys accepted as `Authorization: Bearer <key>`; each entry is `key` or "
        "`name:key` (the name labels limits and logs). Empty disables authentication.",
    )
    admin_api_keys: str = Field(
        "",
        description="Comma-separated admin keys, each `key` or `name:key`: accepted like API keys, and they read "
        "(and cancel) every key's jobs, traces and stored responses, which other keys see only for themselves. "
        "Empty: no admin key.",
    )
    rate_limit_per_minute: int = Field(
        0, ge=0, description="Requests per minute allowed per API key (0 = unlimited); excess gets 429."
    )
    token_limit_per_minute: int = Field(
        0,
        ge=0,
        description="Tokens (prompt + completion, reasoning included) per minute per API key (0 = unlimited); "
        "once spent, further requests get 429 until the window rolls over.",
    )
    max_queue_depth: int = Field(
        64, ge=1, description="Jobs waiting in the queue above which new requests are shed with 429 + Retry-After."
    )
    degrade_queue_depth: int = Field(
        8, ge=1, description="Queue depth at which the effective effort starts dropping, one step per this many jobs."
    )
    degrade_kv_utilization: float = Field(
        0.85, ge=0, le=1, description="Engine KV-cache utilization above which the effective effort drops one step."
    )
    shed_kv_utilization: float = Field(
        0.98, ge=0, le=1, description="Engine KV-cache utilization above which new requests are shed with 429."
    )
    retry_after_s: int = Field(2, ge=1, description="Seconds advertised in Retry-After when shedding load.")
    stats_interval_s: float = Field(1.0, gt=0, description="How often engine stats (KV utilization) are polled.")
    policy_grace_s: float = Field(
        60.0,
        ge=0,
        description="Seconds after the policy last answered a stats poll during which requests are still admitted "
        "against its last model list (a restart: workers wait for the policy within the job's deadline, so the "
        "request is answered late); past them, or before it ever answered, requests get 503.",
    )
    default_effort: str = Field(
        "low", description="Reasoning effort applied when a request names none (none|minimal|low|medium|high|xhigh)."
    )
    model_default_efforts: str = Field(
        "",
        description="Per-model default efforts as `model=effort` pairs, comma-separated; overrides default_effort.",
    )
    routing_table: str = Field(
        "services/gateway/routing/routing.v2.json",
        description="Path of the default routing table mapping (task type, effort, difficulty bin) to strategy and "
        "budget, for every model without a table of its own (routing_tables): the conservative v2 ladder, measured "
        "on Qwen2.5-Coder-0.5B only, which the card of such a model says (docs/effort-ladder.md).",
    )
    routing_tables: str = Field(
        "qwen2.5-coder-0.5b=services/gateway/routing/routing.qwen2.5-coder-0.5b.json",
        description="Per-model routing tables, `model=path,...` (a served model name, not an alias; `make calibrate` "
        "writes `routing.<model>.json`): each is loaded and validated at start-up, and a model named here is routed "
        "by its own table and its ladder card (`/v1/models/{model}/ladder`) carries that table's measured figures. "
        "Other models use routing_table and their card says they are not calibrated. Shipped: Qwen2.5-Coder-0.5B's "
        "table, fitted on its calibration pools (`make routing-table`; docs/effort-ladder.md).",
    )
    modality_models: str = Field(
        "qwen2.5-coder-0.5b=services/gateway/routing/modality.qwen2.5-coder-0.5b.json",
        description="Per-model modality classifiers, `model=path,...` (`python -m calibration modality` writes "
        "`modality.<model>.json`): at the efforts a file names, an `open` prompt goes to the program-of-thought "
        "routes where the classifier finds a program better (`ttc.modality`). Each file is validated at start-up; "
        "one that calibration left switched off costs nothing per request (docs/effort-ladder.md).",
    )
    default_max_tokens: int = Field(
        512, ge=1, description="Per-candidate max_tokens when a request names none (chat completions)."
    )
    max_tokens_cap: int = Field(
        0, ge=0, description="Largest per-candidate max_tokens a request may ask for (0 = only the context window)."
    )
    max_request_bytes: int = Field(
        1_000_000,
        ge=1024,
        description="Largest accepted request body in bytes, counted as it arrives (chunked bodies too; 413 above).",
    )
    header_timeout_s: float = Field(
        10.0, gt=0, description="Seconds a client has to send a request's headers; slower ones get 408 and are closed."
    )
    body_timeout_s: float = Field(
        30.0, gt=0, description="Seconds a client has to send a request's body once its headers arrived, else closed."
    )
    keep_alive_s: int = Field(5, ge=1, description="Seconds an idle kept-alive connection stays open.")
    max_connections: int = Field(
        1024, ge=1, description="Open client connections above which a new connection is closed at once."
    )
    max_header_bytes: int = Field(
        65_536, ge=1024, description="Largest request line and headers in bytes (431 and closed above)."
    )
    max_prompt_chars: int = Field(
        32_000, ge=1, description="Largest accepted prompt (all message contents together) in characters."
    )
    job_timeout_s: float = Field(300.0, gt=0, description="Deadline of one job from enqueue to result.")
    result_ttl_s: int = Field(86_400, ge=60, description="How long job records and results stay retrievable in Redis.")
    response_ttl_s: int = Field(
        2_592_000,
        ge=60,
        description="How long a stored /v1/responses response (its conversation, for previous_response_id) stays "
        "retrievable in Redis.",
    )
