"""What a job's calls spent, kept by the worker whatever becomes of the search.

A finished search reports its spend in ``SearchResult.budget_used``. A cancelled one reports
nothing: the cancel stops the search task, and its budget goes with it, though the engine had
decoded tokens for it. So the worker wraps the job's policy, verifier and sandbox adapters in
these meters, which charge one more ``Budget`` (without limits) exactly as the search's context
charges its own (services/search/strategies/context.py): a call's generation when it returns,
what a cut-off stream had sent (``on_partial``: its candidates' tokens, and its prompt's, which
the policy reports on a stream's first chunk), a failed call as a call. A call is charged
either its partial or its result, never both, so its prompt is counted once. The worker
records the meter's usage with a cancelled job (``JobRunner._record_cancelled``).
"""

from __future__ import annotations

from services.gen.ttc.v1 import orchestrator_pb2
from services.search.budget import Budget, Limits
from services.search.interfaces import (
    CandidateTextSink,
    Executor,
    GenerateCall,
    Generation,
    PartialSink,
    Policy,
    ProgramRun,
    Verification,
    Verifier,
    VerifyCall,
)


class Meter:
    """One job's spend across all its adapters (the escalation deployment's too)."""

    def __init__(self) -> None:
        self.budget = Budget(Limits(max_generated_tokens=0))  # counts only: no call reserves

    def usage(self) -> orchestrator_pb2.BudgetUse:
        """What was spent so far, in ``SearchResult.budget_used``'s shape."""
        return self.budget.usage()


class MeteredPolicy:
    """A ``Policy`` that charges every call to ``meter``, then hands on what it was given."""

    def __init__(self, inner: Policy, meter: Meter) -> None:
        self._inner = inner
        self._meter = meter

    async def generate(
        self,
        call: GenerateCall,
        *,
        on_text: CandidateTextSink | None = None,
        on_partial: PartialSink | None = None,
    ) -> Generation:
        budget = self._meter.budget

        def partial(generation: Generation) -> None:
            budget.charge_partial(generation)
            if on_partial is not None:
                on_partial(generation)

        try:
            generation = await self._inner.generate(call, on_text=on_text, on_partial=partial)
        except BaseException:  # failed, cancelled or cut by the deadline: still a call made
            budget.charge_failed_policy_call()
            raise
        budget.charge_generation(generation)
        return generation


class MeteredVerifier:
    """A ``Verifier`` that charges every verification (or failed call) to ``meter``."""

    def __init__(self, inner: Verifier, meter: Meter) -> None:
        self._inner = inner
        self._meter = meter

    async def verify(self, call: VerifyCall) -> Verification:
        try:
            verification = await self._inner.verify(call)
        except BaseException:
            self._meter.budget.charge_verification(None)
            raise
        self._meter.budget.charge_verification(verification)
        return verification


class MeteredExecutor:
    """An ``Executor`` that charges every program run's time to ``meter``."""

    def __init__(self, inner: Executor, meter: Meter) -> None:
        self._inner = inner
        self._meter = meter

    async def run(self, code: str, *, wall_seconds: float) -> ProgramRun:
        run = await self._inner.run(code, wall_seconds=wall_seconds)
        self._meter.budget.charge_execution(run.wall_seconds)
        return run
