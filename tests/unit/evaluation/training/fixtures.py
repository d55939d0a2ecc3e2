"""Hand-built pools and served traces for the training-export tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from evaluation.pools.store import Call, Draw, DrawKind, PoolCandidate, ProblemPool
from evaluation.problems.datasets import split_of


def side_id(side: str, tag: str) -> str:
    """A problem id that the split function puts on ``side`` (``calibration`` or ``heldout``)."""
    return next(pid for n in range(1000) if split_of(pid := f"chain_sum/L1/{tag}{n:04d}") == side)


def cot(index: int, answer: str, correct: bool, *, tokens: int = 10, cut: bool = False,
        text: str = "", scores: dict[str, float] | None = None) -> PoolCandidate:  # fmt: skip
    text = text or f"Adding up step {index}: the answer is \\boxed{{{answer}}}."
    return PoolCandidate(index, index == 0, index, 0, text, tokens, cut, answer, correct, answer=answer,
                         scores=scores or {})  # fmt: skip


def program(index: int, source: str, stdout: str, correct: bool, *, status: str = "ok",
            tokens: int = 10) -> PoolCandidate:  # fmt: skip
    answer = stdout.strip().splitlines()[-1] if stdout.strip() and status == "ok" else ""
    return PoolCandidate(index, index == 0, index, 0, f"```python\n{source}\n```", tokens, False, answer, correct,
                         answer=answer, program=source, status=status, stdout=stdout)  # fmt: skip


def problem_pool(question: str, reference: str, *, pid: str = "", split: str = "calibration",
                 family: str = "chain_sum", kind: str = "arithmetic",
                 **draws: Sequence[PoolCandidate]) -> ProblemPool:  # fmt: skip
    pid = pid or side_id(split, "p")
    problem = {"id": pid, "dataset": family, "level": 1, "question": question, "reference": reference,
               "check": "math", "extra": {}}  # fmt: skip
    calls = (Call(1, 0.0, 64, 10, 0, 10, 1.0),)
    made = {name: Draw(cast(DrawKind, name), tuple(cands), calls) for name, cands in draws.items()}
    return ProblemPool(problem, family, kind, split, "arithmetic", made)


def trace(question: str, text: str, *, reference: str = "", finish: str = "stop", score: float = 0.0) -> dict[str, Any]:
    """A served trace document as the trace store keeps it: the job, the nodes, the result."""
    return {
        "job": {"messages": [{"role": "user", "content": question, "tool_calls": []}], "reference": reference},
        "nodes": [
            {"id": "n0", "parent_id": "", "action": "prompt", "text": f"user: {question}", "chosen": True},
            {
                "id": "n1",
                "parent_id": "n0",
                "action": "generate",
                "text": text,
                "chosen": True,
                "tokens": "7",
                "score": score,
            },
        ],
        "result": {"answer": text, "finish_reason": finish, "verifier_score": score, "verifier_passed": True},
    }
