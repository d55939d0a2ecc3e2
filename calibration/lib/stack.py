"""A local ``ttc stack`` for a live run: the gateway every request of ``validate``, ``live`` and
``routed`` goes through when no ``--base-url`` is given, on free ports (the chaos suite's
:class:`~loadtests.chaos_stack.LocalStack`)."""

from __future__ import annotations

from typing import Any

from loadtests.chaos_stack import LocalStack


def start_stack(model: str, timeout_s: float, log: Any, env: dict[str, str] | None = None,
                serving: str = "on free ports") -> tuple[Any, str]:  # fmt: skip
    """``ttc stack`` on ``model`` (the chaos suite's LocalStack), the job timeout at ``timeout_s``
    plus ``env``; returns the stack and its /v1 URL. Call it inside the model lock."""
    stack = LocalStack(model=model, concurrency=1,
                       extra_env={**(env or {}), "TTC_GATEWAY_JOB_TIMEOUT_S": str(int(timeout_s))})  # fmt: skip
    log(f"starting ttc stack with {model} {serving} (log {stack.log_path})")
    stack.start(timeout=900)
    return stack, f"{stack.url}/v1"
