"""What a job spent, counted once: the one place the gateway turns a ``SearchResult`` into tokens.

The renderers (chat and legacy completions in ``formatting.py``, the Responses API in
``responses/render.py``, the job view) show what this module counts; the session and the
cancel settlement charge the per-key token limit (``limits.py``) with :func:`usage_of`'s
``total_tokens``. Nothing else adds token counts up.

Accounting rule: one meaning per count, the engines' own. The job's ``BudgetUse`` (with the
gateway's probe filled in, :func:`budget_use_of`) is broken down by role (:func:`spend_of`:
policy, verifier, probe, sandbox) and ``usage`` is the sum over the token roles:
``prompt_tokens`` = every token an engine processed as input (policy prompts, verifier judge
prompts and scored continuations, the probe's prompt), ``cached_tokens`` the part of those
served from a prefix cache, ``completion_tokens`` = every token an engine generated, and
``reasoning_tokens`` = the generated tokens not in the visible answer (OpenAI's rule:
``completion_tokens`` = answer tokens + ``reasoning_tokens``).
"""

from __future__ import annotations

from services.gateway.protocol import (
    CompletionTokensDetails,
    PromptTokensDetails,
    RoleTokens,
    SandboxSpend,
    SpendByRole,
    Usage,
)
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.record import JobRecord


def budget_use_of(result: orchestrator_pb2.SearchResult, record: JobRecord) -> orchestrator_pb2.BudgetUse:
    """The job's spend with the gateway's difficulty probe (from the job record) filled in."""
    used = orchestrator_pb2.BudgetUse()
    used.CopyFrom(result.budget_used)
    probe = record.probe
    used.probe_prompt_tokens = max(0, probe.prompt_tokens)
    used.probe_cached_tokens = max(0, probe.cached_tokens)
    used.probe_generated_tokens = max(0, probe.generated_tokens)
    return used


def spend_of(used: orchestrator_pb2.BudgetUse) -> SpendByRole:
    """``used`` by role: the policy's, the verifier's and the probe's tokens, the sandbox's runs."""
    return SpendByRole(
        policy=RoleTokens(
            prompt_tokens=used.prompt_tokens, cached_tokens=used.cached_tokens, generated_tokens=used.generated_tokens
        ),
        verifier=RoleTokens(
            prompt_tokens=used.verifier_prompt_tokens,
            cached_tokens=used.verifier_cached_tokens,
            generated_tokens=used.verifier_generated_tokens,
        ),
        probe=RoleTokens(
            prompt_tokens=used.probe_prompt_tokens,
            cached_tokens=used.probe_cached_tokens,
            generated_tokens=used.probe_generated_tokens,
        ),
        sandbox=SandboxSpend(runs=used.sandbox_runs, seconds=used.sandbox_seconds),
    )


def usage_of(result: orchestrator_pb2.SearchResult, record: JobRecord) -> Usage:
    """OpenAI ``usage``: every token role summed by kind, the probe's included."""
    spend = spend_of(budget_use_of(result, record))
    roles = (spend.policy, spend.verifier, spend.probe)
    prompt = sum(r.prompt_tokens for r in roles)
    cached = sum(r.cached_tokens for r in roles)
    completion = sum(r.generated_tokens for r in roles)
    answer = min(result.answer_tokens, completion)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=cached),
        completion_tokens_details=CompletionTokensDetails(reasoning_tokens=completion - answer),
    )
