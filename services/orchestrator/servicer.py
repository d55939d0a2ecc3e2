"""The Orchestrator gRPC service: ``RunSearch`` runs a job directly (no queue) and streams its
events; ``GetTrace`` reads a stored trace. For benchmarks and tools that want a search
without the gateway; served by each worker process on its own event loop.

Its adapters come from the worker's factory (``adapters.py``), so a job run here gets what a
queued job gets: the replica affinity of its deployment, the wait for a restarting policy, the
cascade's larger deployment and the judge model; only its calls are not metered."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import grpc
from google.protobuf.json_format import ParseDict

from services.common.errors import NotFound
from services.gen.ttc.v1 import orchestrator_pb2, orchestrator_pb2_grpc
from services.jobs.trace_store import TraceStore
from services.orchestrator.adapters import AdapterFactory
from services.search.run import validate_job


class OrchestratorServicer(orchestrator_pb2_grpc.OrchestratorServicer):
    def __init__(self, adapters: AdapterFactory, traces: TraceStore) -> None:
        self.adapters = adapters
        self.traces = traces

    async def RunSearch(
        self, request: orchestrator_pb2.SearchJob, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[orchestrator_pb2.JobEvent]:
        job = orchestrator_pb2.SearchJob()
        job.CopyFrom(request)
        if not job.job_id:
            job.job_id = uuid.uuid4().hex
        validate_job(job)  # InvalidArgument → INVALID_ARGUMENT naming the field
        events: asyncio.Queue[orchestrator_pb2.JobEvent] = asyncio.Queue()
        adapters = await self.adapters.build(job, events.put)
        publisher = adapters.publisher
        search = asyncio.create_task(adapters.search())
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
