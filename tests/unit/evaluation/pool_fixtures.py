"""Hand-built candidate pools for the pool and pricing tests."""

from __future__ import annotations

from collections.abc import Sequence

from evaluation.pools.store import Call, Draw, DrawKind, PoolCandidate, ProblemPool

Spec = tuple[str, bool]  # (vote key, correct)


def draw(kind: DrawKind, greedy: Spec, sampled: Sequence[Spec], tokens: int = 10, sandbox_s: float = 0.0,
         logprobs: Sequence[float] | None = None) -> Draw:  # fmt: skip
    """A greedy candidate (call 0) and ``sampled`` ones (call 1), ``tokens`` each."""
    cands = [PoolCandidate(0, True, 0, 0, "g", tokens, False, greedy[0], greedy[1], sandbox_s=sandbox_s)]
    for i, (key, right) in enumerate(sampled, start=1):
        lp = logprobs[i - 1] if logprobs is not None else None
        cands.append(PoolCandidate(i, False, i, 1, f"s{i}", tokens, False, key, right, mean_logprob=lp,
                                   sandbox_s=sandbox_s))  # fmt: skip
    calls = (
        Call(1, 0.0, 64, 100, 0, tokens, 1.0),
        Call(len(sampled), 0.7, 64, 100, 99, tokens * len(sampled), 2.0),
    )
    return Draw(kind, tuple(cands), calls)


def pool(pid: str = "p1", kind: str = "arithmetic", **draws: Draw) -> ProblemPool:
    problem = {"id": pid, "dataset": "chain_sum", "level": 1, "question": "What is 0 + 1?", "reference": "1",
               "check": "math", "extra": {}}  # fmt: skip
    return ProblemPool(problem, "chain_sum", kind, "calibration", "arithmetic", dict(draws))
