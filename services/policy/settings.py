"""Policy service settings, read once from ``TTC_POLICY_*`` environment variables."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class PolicySettings(BaseSettings):
    """Which engine and model the policy service runs, and its limits."""

    model_config = SettingsConfigDict(env_prefix="TTC_POLICY_", extra="ignore")

    host: str = Field("0.0.0.0", description="Address the policy gRPC server binds.")
    port: int = Field(50051, description="Policy gRPC port.")
    metrics_port: int = Field(9101, description="Port of the policy service's Prometheus /metrics endpoint.")
    engine: Literal["llamacpp", "vllm", "openai"] = Field(
        "llamacpp",
        description="Engine behind the policy service: llamacpp (embedded default), vllm or openai (remote).",
    )
    model: str = Field(
        "qwen2.5-coder-0.5b",
        description="Model id from the registry (smollm2-135m, qwen2.5-coder-0.5b) or a filesystem path to a .gguf.",
    )
    models_dir: str = Field(
        "models", description="Directory where prepared models (assembled GGUFs, HF checkpoints) live."
    )
    n_ctx: int = Field(4096, ge=64, description="Context window per sequence in tokens (prompt + completion).")
    kv_cache_tokens: int = Field(
        16384,
        ge=64,
        description="llama.cpp: KV-cache cells shared by every request in flight (unified cache). A request "
        "waits until its prompt and first candidate fit; candidates beyond what fits run in waves.",
    )
    parallel_requests: int = Field(
        16,
        ge=1,
        description="llama.cpp: requests decoded together by the continuous-batching loop (the others wait); "
        "1 serializes them (one request at a time).",
    )
    retained_prompts: int = Field(
        16,
        ge=0,
        description="llama.cpp: prompts of finished requests kept in the KV cache for prefix reuse by later "
        "requests (evicted least recently used). 0 keeps none: every request prefills alone, so its output "
        "depends only on itself (exact trace replay); concurrent requests still share prefixes.",
    )
    n_threads: int = Field(0, ge=0, description="llama.cpp: CPU threads for decoding; 0 uses all cores.")
    n_batch: int = Field(512, ge=8, description="llama.cpp: tokens per llama_decode call when evaluating a prompt.")
    max_n: int = Field(64, ge=1, le=255, description="Largest number of candidates one request may ask for.")
    max_tokens_limit: int = Field(
        0, ge=0, description="Upper bound on max_tokens per request; 0 means only the context window limits it."
    )
    engine_self_check: bool = Field(
        True,
        description="llama.cpp: before reporting ready, load the engine in a child process and decode a few "
        "tokens; if the child dies (SIGILL from a library built for another CPU, SIGSEGV, ...) or fails, log one "
        "line naming the cause and remedy and exit 3 instead of crashing on the first request. vllm and openai "
        "skip it (vLLM's engine core is already a child process; the remote engine has nothing local).",
    )
    engine_self_check_timeout_s: float = Field(
        120.0, gt=0, description="How long the engine self-check child may take before the policy refuses to start."
    )
    stats_interval_s: float = Field(
        2.0, gt=0, description="How often the KV-cache utilization gauge is refreshed from the engine (seconds)."
    )
    vllm_kv_cache_gib: float = Field(2, description="vLLM: KV-cache size in GiB (VLLM_CPU_KVCACHE_SPACE on CPU).")
    vllm_tensor_parallel_size: int = Field(1, description="vLLM: tensor-parallel size.")
    vllm_gpu_memory_utilization: float = Field(0.9, description="vLLM: fraction of GPU memory to use (GPU builds).")
    vllm_enforce_eager: bool = Field(True, description="vLLM: disable graph capture (much faster start on CPU).")
    vllm_max_model_len: int = Field(4096, description="vLLM: context window in tokens.")
    openai_base_url: str = Field(
        "", description="openai engine: base URL of the remote server, e.g. http://host:8000/v1."
    )
    openai_api_key: str = Field("", description="openai engine: API key sent to the remote server.")
    openai_model: str = Field("", description="openai engine: model name on the remote server.")
