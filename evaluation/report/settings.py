"""Evaluation settings (prices for cost per correct answer), from ``TTC_EVAL_*`` variables."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class EvaluationSettings(BaseSettings):
    """How reports turn tokens and time into money; the CLI flags of ``python -m loadtests`` override."""

    model_config = SettingsConfigDict(env_prefix="TTC_EVAL_", extra="ignore")

    pricing: Literal["tokens", "gpu_hour"] = Field(
        "tokens", description="Cost model of reports: per token (`tokens`) or per accelerator hour (`gpu_hour`)."
    )
    price_per_mtok_prompt: float = Field(0.05, ge=0, description="Price of one million prompt tokens (USD).")
    price_per_mtok_completion: float = Field(
        0.20, ge=0, description="Price of one million completion tokens, hidden reasoning included (USD)."
    )
    price_per_gpu_hour: float = Field(
        2.0, ge=0, description="Price of one accelerator hour (USD) when `pricing` is `gpu_hour`."
    )
