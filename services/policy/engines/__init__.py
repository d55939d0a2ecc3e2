"""Engine factory: picks the adapter named by ``settings.engine``.

Each engine module is imported only when chosen, so the llama.cpp default never imports vLLM
(and torch), and the vLLM engine never needs llama-cpp-python. Every engine module exposes
``async def create_engine(settings: PolicySettings) -> Engine``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.policy.engines.base import Engine
    from services.policy.settings import PolicySettings

# The one list of engine names. scripts/helm_schema.py builds the chart's enum from it (the
# chart's only engine list); the settings' ``engine`` Literal is held equal to it by
# tests/unit/test_name_lists.py. Adding an engine: a module with ``create_engine``, a line here,
# the Literal, then ``python scripts/helm_schema.py``.
ENGINE_MODULES: dict[str, str] = {
    "llamacpp": "services.policy.engines.llamacpp.engine",
    "vllm": "services.policy.engines.vllm_engine",
    "openai": "services.policy.engines.openai_remote",
}


async def create_engine(settings: PolicySettings) -> Engine:
    """Load the configured engine and model; raises ``ValueError`` for an unknown engine."""
    try:
        module_name = ENGINE_MODULES[settings.engine]
    except KeyError:
        raise ValueError(f"unknown engine {settings.engine!r}; choose one of {', '.join(ENGINE_MODULES)}") from None
    module = importlib.import_module(module_name)
    engine: Engine = await module.create_engine(settings)
    return engine
