"""The budget of one search: generated tokens, policy calls, verifier calls and a deadline.

A strategy never checks limits itself: every policy and verifier call goes through the
search context, which asks the budget first and charges it afterwards, so no token can be
spent uncounted. When a limit is reached the context raises :class:`BudgetExhausted` or
:class:`DeadlineReached`; the runner turns that into a clean stop with the best answer so far.

Limits: ``max_generated_tokens`` caps the policy's completion tokens (the search's own
reasoning), counting those of calls that ended early as far as they were received.
Verifier tokens (generative ORM/PRM judge prompts the engine prefills, and any tokens a
judge generates) are counted apart - ``verifier_prompt_tokens``,
``verifier_cached_tokens``, ``verifier_generated_tokens`` - and bounded by
``max_verifier_calls``, but do not eat into the generation budget — otherwise a
verifier-heavy strategy would starve its own generator. A limit of 0 for calls or the
deadline means "no limit"; the token limit must be positive (validated before the search
starts).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from services.gen.ttc.v1 import orchestrator_pb2
from services.search.interfaces import ComponentError, Generation, Verification


class StopSearch(Exception):
    """Raised inside a strategy to end the search; carries the termination reason."""

    termination = "error"
    code = ""  # gRPC status code name of the job's error when the stop is one ("" = INTERNAL)
    component = ""


class BudgetExhausted(StopSearch):
    termination = "budget"


class DeadlineReached(StopSearch):
    termination = "deadline"


class Cancelled(StopSearch):
    termination = "cancelled"
    code = "CANCELLED"


class ComponentFailed(StopSearch):
    """A component (``"policy"``, ``"verifier"``, ``"sandbox"``) failed; ``component`` and
    ``code`` (a gRPC status code name) are typed attributes the job's error is built from."""

    termination = "error"

    def __init__(self, message: str, *, component: str = "", code: str = "INTERNAL") -> None:
        super().__init__(message)
        self.message = message
        self.component = component
        self.code = code

    @classmethod
    def caused_by(cls, component: str, err: BaseException) -> ComponentFailed:
        """The stop for ``err`` raised by ``component``'s adapter: a ``ComponentError`` keeps
        its component and code; anything else is that component's INTERNAL failure."""
        if isinstance(err, ComponentError):
            return cls(f"{err.component}: {err.message}", component=err.component, code=err.code)
        return cls(f"{component}: {err}", component=component, code="INTERNAL")


@dataclass(frozen=True)
class Limits:
    max_generated_tokens: int
    max_policy_calls: int = 0
    max_verifier_calls: int = 0
    deadline_seconds: float = 0.0


class Budget:
    """Mutable spend counters against fixed :class:`Limits`; ``clock`` is injectable for tests."""

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._started = clock()
        self.generated_tokens = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.policy_calls = 0
        self.verifier_calls = 0
        self.verifier_prompt_tokens = 0
        self.verifier_cached_tokens = 0
        self.verifier_generated_tokens = 0
        self.sandbox_runs = 0
        self.sandbox_seconds = 0.0
        self._reserved_tokens = 0
        self._calls_in_flight = 0

    def elapsed(self) -> float:
        return self._clock() - self._started

    def time_left(self) -> float | None:
        """Seconds until the deadline, ``None`` without one."""
        if self.limits.deadline_seconds <= 0:
            return None
        return self.limits.deadline_seconds - self.elapsed()

    def tokens_left(self) -> int:
        """Tokens not yet spent nor reserved by a call in flight (concurrent calls cannot
        together overshoot the limit)."""
        return max(0, self.limits.max_generated_tokens - self.generated_tokens - self._reserved_tokens)

    def check_deadline(self) -> None:
        left = self.time_left()
        if left is not None and left <= 0:
            raise DeadlineReached(f"deadline of {self.limits.deadline_seconds:g}s reached")

    def reserve_policy_call(self, n: int, max_tokens: int) -> tuple[int, int]:
        """Admit a policy call of ``n`` candidates, shrinking it to fit the remaining tokens.

        Returns ``(n, max_tokens)`` actually allowed. When the remaining tokens cannot give
        every candidate its ``max_tokens``, each gets an equal share (candidates come back
        truncated with ``finish_reason="length"``); with fewer tokens than candidates, fewer
        candidates are asked for. Raises when nothing can be spent.
        """
        self.check_deadline()
        calls = self.policy_calls + self._calls_in_flight
        if self.limits.max_policy_calls and calls >= self.limits.max_policy_calls:
            raise BudgetExhausted(f"policy call limit of {self.limits.max_policy_calls} reached")
        left = self.tokens_left()
        if left <= 0:
            raise BudgetExhausted(f"generated-token limit of {self.limits.max_generated_tokens} reached")
        if n * max_tokens <= left:
            allowed = (n, max_tokens)
        elif left >= n:
            allowed = (n, left // n)
        else:
            allowed = (left, 1)
        self._reserved_tokens += allowed[0] * allowed[1]
        self._calls_in_flight += 1
        return allowed

    def release(self, n: int, max_tokens: int) -> None:
        """Return a reservation made by :meth:`reserve_policy_call` (charged or failed)."""
        self._reserved_tokens = max(0, self._reserved_tokens - n * max_tokens)
        self._calls_in_flight = max(0, self._calls_in_flight - 1)

    def reserve_verifier_call(self) -> None:
        self.check_deadline()
        if self.limits.max_verifier_calls and self.verifier_calls >= self.limits.max_verifier_calls:
            raise BudgetExhausted(f"verifier call limit of {self.limits.max_verifier_calls} reached")

    def charge_generation(self, generation: Generation) -> None:
        self.policy_calls += 1
        self.generated_tokens += sum(max(0, c.completion_tokens) for c in generation.candidates)
        self.prompt_tokens += max(0, generation.prompt_tokens)
        self.cached_tokens += max(0, generation.cached_tokens)

    def charge_failed_policy_call(self) -> None:
        self.policy_calls += 1

    def charge_partial(self, generation: Generation) -> None:
        """The tokens of a policy call that ended without a result (cancelled, past the
        deadline, failed mid-stream) as far as they reached us: the engine decoded them, so
        they are spent (the call itself is counted by ``charge_failed_policy_call``)."""
        self.generated_tokens += sum(max(0, c.completion_tokens) for c in generation.candidates)
        self.prompt_tokens += max(0, generation.prompt_tokens)
        self.cached_tokens += max(0, generation.cached_tokens)

    def charge_verification(self, verification: Verification | None) -> None:
        self.verifier_calls += 1
        if verification is not None:
            self.verifier_prompt_tokens += max(0, verification.prompt_tokens)
            self.verifier_cached_tokens += max(0, verification.cached_tokens)
            self.verifier_generated_tokens += max(0, verification.completion_tokens)

    def charge_execution(self, wall_seconds: float) -> None:
        """A sandboxed program run: counted, and its time is spent from the deadline anyway."""
        self.sandbox_runs += 1
        self.sandbox_seconds += max(0.0, wall_seconds)

    def usage(self) -> orchestrator_pb2.BudgetUse:
        """Everything spent so far as ``SearchResult.budget_used`` carries it (the proto's
        comments define each count); the probe's fields stay 0, the gateway fills them in."""
        return orchestrator_pb2.BudgetUse(
            generated_tokens=self.generated_tokens,
            prompt_tokens=self.prompt_tokens,
            cached_tokens=self.cached_tokens,
            policy_calls=self.policy_calls,
            verifier_calls=self.verifier_calls,
            verifier_prompt_tokens=self.verifier_prompt_tokens,
            verifier_cached_tokens=self.verifier_cached_tokens,
            verifier_generated_tokens=self.verifier_generated_tokens,
            sandbox_runs=self.sandbox_runs,
            sandbox_seconds=round(self.sandbox_seconds, 6),
            wall_seconds=round(self.elapsed(), 6),
        )
