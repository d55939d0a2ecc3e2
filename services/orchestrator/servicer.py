"""The Orchestrator gRPC service: ``RunSearch`` runs a job directly (no queue) and streams its
events; ``GetTrace`` reads a stored trace. For benchmarks and tools that want a search
without the gateway; served by each worker process on its own event loop.

Its policy adapters come from the worker (``policy_for``), so a job run here gets what a queued
job gets: the replica affinity of its deployment, the wait for a restarting policy, and the
cascade's larger deployment."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
from google.protobuf.json_format import ParseDict

from services.common.errors import NotFound
from services.gen.ttc.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from services.jobs.trace_store import TraceStore
from services.orchestrator.clients import GrpcExecutor, GrpcVerifier
from services.orchestrator.events import JobEventPublisher
from services.search.interfaces import Policy
from services.search.run import run_search, validate_job

#: the policy adapter for a model's deployment, for one job, with the call timeout
PolicyFor = Callable[[str, orchestrator_pb2.SearchJob, float], Awaitable[Policy]]


class OrchestratorServicer(orchestrator_pb2_grpc.OrchestratorServicer):
    def __init__(
        self,
        policy_for: PolicyFor,
        verifier_channel: grpc.aio.Channel,
        sandbox_channel: grpc.aio.Channel,
        traces: TraceStore,
        *,
        judge_model: str = "",
        escalation_model: str = "",
    ):
        self.policy_for = policy_for
        self.escalation_model = escalation_model  # the cascade's larger deployment (TTC_ORCHESTRATOR_ESCALATION_MODEL)
        self.verifier_channel = verifier_channel
        self.sandbox_channel = sandbox_channel
        self.traces = traces
        self.judge_model = judge_model  # the generative judges' model; "" = the job's (TTC_ORCHESTRATOR_JUDGE_MODEL)

    async def RunSearch(
        self, request: orchestrator_pb2.SearchJob, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[orchestrator_pb2.JobEvent]:
        job = orchestrator_pb2.SearchJob()
        job.CopyFrom(request)
        if not job.job_id:
            job.job_id = uuid.uuid4().hex
        validate_job(job)  # InvalidArgument → INVALID_ARGUMENT naming the field
        timeout = job.budget.deadline_seconds + 30 if job.budget.deadline_seconds else 600.0
        policy = await self.policy_for(job.model, job, timeout)
        larger = self.escalation_model
        escalation = await self.policy_for(larger, job, timeout) if larger and larger != job.model else None
        judge = self.judge_model or job.model
        verifier = GrpcVerifier(self.verifier_channel, judge, request_id=job.job_id, timeout=timeout)
        executor = GrpcExecutor(self.sandbox_channel, request_id=job.job_id, timeout=timeout)
        events: asyncio.Queue[orchestrator_pb2.JobEvent] = asyncio.Queue()
        publisher = JobEventPublisher(job.job_id, events.put, quiet=job.quiet)
        search = asyncio.create_task(
            run_search(
                job,
                policy,
                verifier,
                on_reasoning=publisher.on_reasoning,
                executor=executor,
                # The answer streams as deltas when asked (the result carries it whole either way).
                on_answer=publisher.answer if job.stream_answer else None,
                escalation=escalation,
            )
        )
        try:
            while not search.done() or not events.empty():
                getter = asyncio.ensure_future(events.get())
                done, _ = await asyncio.wait({getter, search}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield getter.result()
                else:
                    getter.cancel()
            result, trace = search.result()
            await publisher.flush()  # the last window before the result
            while not events.empty():
                yield events.get_nowait()
            await self.traces.save(trace)
            yield publisher.event(result=result)
        finally:
            publisher.close()
            if not search.done():  # the caller went away: stop the search and its engine calls
                search.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await search

    async def GetTrace(
        self, request: orchestrator_pb2.GetTraceRequest, context: grpc.aio.ServicerContext
    ) -> orchestrator_pb2.SearchTrace:
        doc = await self.traces.load(request.trace_id)
        if doc is None:
            raise NotFound(f"no trace with id {request.trace_id!r}", field="trace_id")
        return ParseDict(doc, orchestrator_pb2.SearchTrace(), ignore_unknown_fields=True)
