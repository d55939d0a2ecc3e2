"""``SearchJob`` builders shared by the search and orchestrator unit tests, and the small
parameters per strategy that the contract tests run every strategy with."""

from __future__ import annotations

from typing import Any

from google.protobuf import struct_pb2

from services.gen.ttc.v1 import common_pb2, orchestrator_pb2

# Small, valid parameters per strategy (kept small so every scenario runs in milliseconds).
STRATEGY_CASES: dict[str, dict[str, Any]] = {
    "single": {"n": 1},
    "self_consistency": {"n": 5},
    "weighted_vote": {"n": 5},
    "best_of_n": {"n": 4},
    "beam_search": {"n": 4, "params": {"beam_width": 2, "expansion": 2, "max_steps": 6}},
    "dvts": {"n": 4, "params": {"subtrees": 2, "expansion": 2, "max_steps": 6}},
    "mcts": {"n": 4, "params": {"expansion_width": 2}},
    "ab_mcts_a": {"n": 6, "params": {"batch": 2}},
    "ab_mcts_m": {"n": 6, "params": {"batch": 2}},
    "budget_forcing": {"n": 1, "params": {"min_thinking_tokens": 30, "max_thinking_tokens": 60}},
    "revision": {"n": 2, "params": {"rounds": 2}},
    "program_of_thought": {"n": 4, "params": {"mode": "hybrid", "cot": 2}},
    "code_execution": {"n": 4, "params": {"tests": 4}},
    "cascade": {"n": 3, "params": {"inner": "self_consistency", "threshold": 0.9}},
    "adaptive": {"n": 6, "params": {"steps": "other,more", "confidence": 0.95}},
}


def make_job(
    name: str,
    *,
    n: int = 0,
    params: dict[str, Any] | None = None,
    tokens: int = 5000,
    verifier: str = "",
    reference: str = "",
    seed: int | None = 99,
    max_tokens: int = 64,
    deadline: float = 0.0,
    policy_calls: int = 0,
) -> orchestrator_pb2.SearchJob:
    struct = struct_pb2.Struct()
    struct.update(params or {})
    job = orchestrator_pb2.SearchJob(
        job_id=f"job-{name}",
        messages=[common_pb2.ChatMessage(role="user", content="What is 6*7?")],
        strategy=orchestrator_pb2.StrategySpec(name=name, n=n, verifier=verifier, params=struct),
        budget=orchestrator_pb2.Budget(
            max_generated_tokens=tokens, deadline_seconds=deadline, max_policy_calls=policy_calls
        ),
        temperature=0.7,
        max_tokens=max_tokens,
        reference=reference,
    )
    if seed is not None:
        job.seed = seed
    return job


def case_job(name: str, **overrides: Any) -> orchestrator_pb2.SearchJob:
    case = dict(STRATEGY_CASES[name])
    case.update(overrides)
    return make_job(name, **case)
