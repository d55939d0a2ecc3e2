"""One job's adapters and its search over them, built in one place for both ways a job runs.

A queued job (``worker.py``) and a direct ``RunSearch`` (``servicer.py``) search over the same
adapters: the policy of the job's model's deployment (the worker's factory: replica affinity,
the wait for a restarting policy), the cascade's larger deployment where one is configured and
differs from the job's, the verifier with the judge model (the job's own unless
``TTC_ORCHESTRATOR_JUDGE_MODEL`` names one), the sandbox, and the job's event publisher. Only
how an event is sent differs, and whether the calls are metered (a queued job's are: a
cancelled search reports no spend of its own, ``metering.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import grpc

from services.gen.ttc.v1 import orchestrator_pb2
from services.orchestrator.clients import GrpcExecutor, GrpcVerifier
from services.orchestrator.events import JobEventPublisher, Send
from services.orchestrator.metering import Meter, MeteredExecutor, MeteredPolicy, MeteredVerifier
from services.search.interfaces import Executor, Policy, Verifier
from services.search.run import run_search

#: the policy adapter for a model's deployment, for one job, with the call timeout
PolicyFor = Callable[[str, orchestrator_pb2.SearchJob, float], Awaitable[Policy]]

#: a call's timeout when the job has no deadline
DEFAULT_CALL_TIMEOUT_S = 600.0
#: how long past its deadline a job's calls may take (a deadline cut is the search's to make)
DEADLINE_GRACE_S = 30.0


def call_timeout(job: orchestrator_pb2.SearchJob) -> float:
    """Every engine, verifier and sandbox call's timeout for ``job``."""
    deadline = job.budget.deadline_seconds
    return deadline + DEADLINE_GRACE_S if deadline else DEFAULT_CALL_TIMEOUT_S


@dataclass(frozen=True)
class JobAdapters:
    """What one job's search calls and reports to."""

    job: orchestrator_pb2.SearchJob
    policy: Policy
    escalation: Policy | None
    verifier: Verifier
    executor: Executor
    publisher: JobEventPublisher

    def search(self) -> Coroutine[Any, Any, tuple[orchestrator_pb2.SearchResult, orchestrator_pb2.SearchTrace]]:
        """The job's ``run_search`` over these adapters, reasoning and answer deltas published."""
        return run_search(
            self.job,
            self.policy,
            self.verifier,
            on_reasoning=self.publisher.on_reasoning,
            executor=self.executor,
            # Answer deltas go out as they come (stream_answer); else once, with the result.
            on_answer=self.publisher.answer if self.job.stream_answer else None,
            escalation=self.escalation,
        )


@dataclass(frozen=True)
class AdapterFactory:
    """A worker's connections and model choices, from which every job's adapters are built."""

    policy_for: PolicyFor
    verifier_channel: grpc.aio.Channel
    sandbox_channel: grpc.aio.Channel
    judge_model: str = ""  # "" = the job's model (TTC_ORCHESTRATOR_JUDGE_MODEL)
    escalation_model: str = ""  # the cascade's larger deployment (TTC_ORCHESTRATOR_ESCALATION_MODEL)

    async def build(self, job: orchestrator_pb2.SearchJob, send: Send, meter: Meter | None = None) -> JobAdapters:
        """``job``'s adapters, its events sent by ``send``; every call charged to ``meter`` if given."""
        timeout = call_timeout(job)
        policy = await self.policy_for(job.model, job, timeout)
        larger = self.escalation_model
        escalation = await self.policy_for(larger, job, timeout) if larger and larger != job.model else None
        judge = self.judge_model or job.model
        verifier: Verifier = GrpcVerifier(self.verifier_channel, judge, request_id=job.job_id, timeout=timeout)
        executor: Executor = GrpcExecutor(self.sandbox_channel, request_id=job.job_id, timeout=timeout)
        if meter is not None:
            policy = MeteredPolicy(policy, meter)
            escalation = MeteredPolicy(escalation, meter) if escalation is not None else None
            verifier = MeteredVerifier(verifier, meter)
            executor = MeteredExecutor(executor, meter)
        publisher = JobEventPublisher(job.job_id, send, quiet=job.quiet)
        return JobAdapters(job, policy, escalation, verifier, executor, publisher)
