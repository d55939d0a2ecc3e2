"""The Celery task that runs one search job, and the runner that owns a worker's connections.

Delivery is at-least-once (late acknowledgement, redelivery after a crash); the runner makes
the *outcome* exactly-once: a job whose result key exists is skipped, a job whose lease is
held by a live worker is retried later instead of run twice, and the result is recorded with
SET NX so only one ever counts. Jobs run as asyncio tasks on one event loop per worker
process (shared gRPC channels and Redis pool); Celery's threads only hand them over and wait.
Cancellation (a key plus a pub/sub message) cancels the task, which cancels its in-flight
gRPC calls, which makes the policy service abort the engine request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import grpc
from celery import Celery, Task
from opentelemetry import trace
from redis.asyncio.client import Pipeline

from services.common.errors import ServiceError
from services.common.grpc_client import insecure_channel
from services.common.logging import request_id_var
from services.common.replicas import ReplicaRouter
from services.common.targets import parse_targets
from services.common.tracing import extract_context, set_genai_attributes
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import events as ev
from services.jobs.errors import JobError
from services.jobs.pending import PendingSweeper
from services.jobs.redis_client import redis_client
from services.jobs.trace_store import TraceStore
from services.orchestrator.adapters import AdapterFactory, call_timeout
from services.orchestrator.clients import GrpcPolicy
from services.orchestrator.metering import Meter
from services.orchestrator.metrics import OrchestratorMetrics
from services.orchestrator.settings import OrchestratorSettings

log = logging.getLogger(__name__)
T = TypeVar("T")


class LeaseHeld(Exception):
    """Another live worker is running this job (a redelivery raced it): try again later."""


class JobRunner:
    """One per worker process: an event loop thread, channels to policy/verifier, Redis."""

    def __init__(
        self, settings: OrchestratorSettings, redis_url: str, metrics: OrchestratorMetrics, queue: str = "ttc.search"
    ) -> None:
        self.settings = settings
        self.queue = queue  # the Celery queue this worker consumes: it sweeps that queue's lost jobs
        self.redis_url = redis_url
        self.metrics = metrics
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}"
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="ttc-jobs", daemon=True)
        self._thread.start()
        self._running: dict[str, asyncio.Task[Any]] = {}
        self._released: set[str] = set()  # jobs whose lease went out with their result
        self._ready = self.submit(self._connect())
        self.tracer = trace.get_tracer("ttc.orchestrator")

    def submit(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the runner's loop and wait for it (called from Celery threads)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _connect(self) -> bool:
        self.redis = redis_client(self.redis_url)
        self.events = ev.JobEvents(self.redis, self.settings.result_ttl_s)
        self.traces = TraceStore(self.redis, self.settings.trace_ttl_s)
        # One channel per policy deployment (TTC_ORCHESTRATOR_POLICY_TARGETS); jobs pick theirs by model.
        self.policy_targets = parse_targets(self.settings.policy_targets)
        targets = {self.settings.policy_target, *self.policy_targets.values()}
        self.policy_channels = {t: insecure_channel(t) for t in sorted(targets)}
        # Prefix affinity: every call of a job to one replica of its deployment (services/common/replicas.py).
        fixed = [a.strip() for a in self.settings.policy_replicas.split(",") if a.strip()]
        self.policy_routers = {
            t: ReplicaRouter(
                t,
                insecure_channel,
                replicas=fixed if t == self.settings.policy_target else (),
                refresh_s=self.settings.policy_replicas_refresh_s,
            )
            for t in sorted(targets)
            if self.settings.policy_affinity
        }
        self.verifier_channel = insecure_channel(self.settings.verifier_target)
        self.sandbox_channel = insecure_channel(self.settings.sandbox_target)
        self.adapters = AdapterFactory(
            self._policy,
            self.verifier_channel,
            self.sandbox_channel,
            judge_model=self.settings.judge_model,
            escalation_model=self.settings.escalation_model,
        )
        self._listener = asyncio.create_task(self._listen_cancellations())
        self.sweeper = PendingSweeper(self.redis, self.queue, self.settings.visibility_timeout_s, ev.result_key)
        self._sweeps = asyncio.create_task(self._sweep_pending())
        if self.settings.port:
            await self._serve_grpc()
        return True

    async def _serve_grpc(self) -> None:
        """Serve Orchestrator RunSearch/GetTrace (and gRPC health) on this runner's loop."""
        from grpc_health.v1 import health_pb2, health_pb2_grpc
        from grpc_health.v1.health import aio as health_aio

        from services.common.grpc_server import ObservabilityInterceptor
        from services.gen.ttc.v1 import orchestrator_pb2_grpc
        from services.orchestrator.servicer import OrchestratorServicer

        server = grpc.aio.server(interceptors=[ObservabilityInterceptor(self.metrics.base)])
        servicer = OrchestratorServicer(self.adapters, self.traces)
        orchestrator_pb2_grpc.add_OrchestratorServicer_to_server(servicer, server)
        health = health_aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health, server)
        if server.add_insecure_port(f"{self.settings.host}:{self.settings.port}") == 0:
            raise RuntimeError(f"cannot bind orchestrator gRPC port {self.settings.port}")
        await server.start()
        await health.set("", health_pb2.HealthCheckResponse.SERVING)
        await health.set("ttc.v1.Orchestrator", health_pb2.HealthCheckResponse.SERVING)
        self.grpc_server = server

    async def policy_route(self, model: str, job_id: str) -> grpc.aio.Channel | list[grpc.aio.Channel]:
        """The channels to ``model``'s policy replicas, the job's own first (affinity), or the
        round-robin channel when affinity is off."""
        target = self.policy_targets.get(model, self.settings.policy_target)
        router = self.policy_routers.get(target)
        return await router.channels(job_id) if router is not None else self.policy_channels[target]

    async def _sweep_pending(self) -> None:
        """Every ``restore_interval_s``, send again the jobs of this queue whose message a dying
        worker took off the list before kombu held it (``services/jobs/pending.py``)."""
        while True:
            await asyncio.sleep(self.settings.restore_interval_s)
            try:
                swept = await self.sweeper.sweep(time.time())
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis blip: the next sweep tries again
                log.warning("pending-job sweep failed", extra={"error": str(exc)})
                continue
            if swept.resent:
                log.warning("jobs lost by a worker sent again", extra={"job_ids": list(swept.resent)})
                self.metrics.redeliveries.labels("resent").inc(len(swept.resent))

    async def close(self) -> None:
        """Stop the runner's background tasks and close its Redis client (on its own loop)."""
        for task in (self._listener, self._sweeps):
            task.cancel()
        for task in (self._listener, self._sweeps):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.redis.aclose()

    async def _listen_cancellations(self) -> None:
        """Cancel a running job as soon as its cancellation is published."""
        while True:
            try:
                pubsub = self.redis.pubsub()
                await pubsub.subscribe(ev.CANCEL_CHANNEL)
                async for message in pubsub.listen():
                    if message.get("type") != "message":
                        continue
                    job_id = message["data"].decode() if isinstance(message["data"], bytes) else str(message["data"])
                    task = self._running.get(job_id)
                    if task is not None and not task.done():
                        task.cancel()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis blip: resubscribe
                log.warning("cancel listener failed; resubscribing", extra={"error": str(exc)})
                await asyncio.sleep(1.0)

    # ---------------------------------------------------------------- one job

    async def run(self, payload: str) -> str:
        """Run one delivered job to its single recorded result; returns what happened."""
        job = ev.decode_job(payload)
        job_id = job.job_id
        lease = ev.lease_key(job_id)
        # One round trip: is there a result already, is the job cancelled, can we take the lease?
        # If it may run, the same script marks its record running.
        started = time.time()
        has_result, cancelled, leased = await self.events.start(
            job_id, self.worker_id, self.settings.lease_ttl_s, started
        )
        if has_result:
            if leased:
                await self.redis.delete(lease)
            self.metrics.redeliveries.labels("skipped").inc()
            return "skipped"
        if not leased:
            self.metrics.redeliveries.labels("deferred").inc()
            raise LeaseHeld(job_id)
        try:
            if cancelled:
                await self._record_cancelled(job)
                return "cancelled"
            return await self._run_leased(job, started)
        finally:
            if job_id in self._released:
                self._released.discard(job_id)
            else:
                await self.redis.delete(lease)

    async def _run_leased(self, job: orchestrator_pb2.SearchJob, started: float) -> str:
        """Run a leased job whose record ``start`` marked running at ``started``."""
        job_id = job.job_id
        if job.enqueued_at:
            self.metrics.queue_wait.observe(max(0.0, started - job.enqueued_at))
        token = request_id_var.set(job_id[:16])
        self.metrics.running.inc()
        try:
            with self.tracer.start_as_current_span(
                "orchestrator/search", context=extract_context(job.trace_context), kind=trace.SpanKind.CONSUMER
            ) as span:
                set_genai_attributes(
                    span,
                    model=job.model,
                    effort=job.effort_applied,
                    strategy=job.strategy.name,
                    job_id=job_id,
                    max_tokens=job.max_tokens,
                )
                return await self._search(job, started)
        finally:
            self.metrics.running.dec()
            request_id_var.reset(token)

    async def _policy(self, model: str, job: orchestrator_pb2.SearchJob, timeout: float) -> GrpcPolicy:
        """The policy adapter for ``model``'s deployment, with the job's replica affinity, waiting
        for a restarting policy (services/orchestrator/retry.py) within the job's deadline."""
        return GrpcPolicy(
            await self.policy_route(model, job.job_id),
            model,
            request_id=job.job_id,
            timeout=timeout,
            retry_for=min(self.settings.policy_wait_s, job.budget.deadline_seconds or self.settings.policy_wait_s),
            on_retry=lambda reason: self.metrics.policy_retries.labels(reason).inc(),
            stream_always=True,  # a call cut off by a cancel or the deadline still says what it cost
        )

    async def _search(self, job: orchestrator_pb2.SearchJob, started: float) -> str:
        job_id = job.job_id
        timeout = call_timeout(job) if job.budget.deadline_seconds else None
        # Every call is metered: a cancelled search reports no spend of its own (metering.py).
        meter = Meter()
        adapters = await self.adapters.build(job, lambda event: self.events.publish(job_id, event), meter)
        publisher = adapters.publisher
        task = asyncio.ensure_future(adapters.search())
        self._running[job_id] = task
        keeper = asyncio.create_task(self._keep_lease_and_watch(job_id, task))
        try:
            result, search_trace = await asyncio.wait_for(task, timeout)
            await publisher.flush()  # the last window goes out before the result is recorded
        except asyncio.CancelledError:
            publisher.close()
            if asyncio.current_task() is not None and asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise  # the worker itself is stopping: leave the job for redelivery
            self.metrics.cancellations.inc()
            await self._record_cancelled(job, meter.usage(), started)
            return "cancelled"
        except ServiceError as err:
            publisher.close()
            result = self._failed(job, JobError(err.code.name, err.message, err.field))
            await self.events.record_result(result, ev.FAILED)
            self.metrics.jobs.labels(job.strategy.name, "invalid").inc()
            return "failed"
        except (TimeoutError, grpc.aio.AioRpcError, Exception) as err:
            log.exception("search failed", extra={"job_id": job_id})
            publisher.close()
            code = "DEADLINE_EXCEEDED" if isinstance(err, TimeoutError) else "INTERNAL"
            result = self._failed(job, JobError(code, str(err) or code))
            result.budget_used.CopyFrom(meter.usage())  # what was decoded before it failed is spent
            await self.events.record_result(result, ev.FAILED)
            self.metrics.jobs.labels(job.strategy.name, "error").inc()
            return "failed"
        finally:
            keeper.cancel()
            self._running.pop(job_id, None)
        result.budget_used.wall_seconds = time.time() - started
        result.started_at = started
        used = result.budget_used
        set_genai_attributes(
            trace.get_current_span(),
            input_tokens=used.prompt_tokens + used.verifier_prompt_tokens,
            output_tokens=used.generated_tokens + used.verifier_generated_tokens,
        )
        answer = []
        if result.answer and not publisher.streamed and not job.quiet:  # a quiet job's reader takes the result only
            answer.append(publisher.event(answer_delta=result.answer))
        failed = result.termination == orchestrator_pb2.TERMINATION_ERROR and not result.answer

        def also(pipe: Pipeline) -> None:
            """The trace (saved by every run, as before) and the lease's release ride the SET NX's trip."""
            self.traces.queue_save(pipe, search_trace, owner=job.owner)
            pipe.delete(ev.lease_key(job_id))

        recorded = await self.events.record_result(result, ev.FAILED if failed else ev.SUCCEEDED, answer, also=also)
        self._released.add(job_id)
        outcome = ("error" if failed else "ok") if recorded else "duplicate"
        self.metrics.jobs.labels(job.strategy.name, outcome).inc()
        self.metrics.duration.labels(job.strategy.name).observe(time.time() - started)
        self.metrics.generated_tokens.labels(job.strategy.name).inc(result.budget_used.generated_tokens)
        return outcome

    async def _keep_lease_and_watch(self, job_id: str, task: asyncio.Future[Any]) -> None:
        """Refresh the lease and poll the cancel key (pub/sub can miss a message across reconnects)."""
        lease = ev.lease_key(job_id)
        last_refresh = time.monotonic()
        while not task.done():
            await asyncio.sleep(self.settings.cancel_poll_s)
            if await self.events.cancelled(job_id):
                task.cancel()
                return
            if time.monotonic() - last_refresh > self.settings.lease_ttl_s / 3:
                await self.redis.set(lease, self.worker_id, ex=self.settings.lease_ttl_s)
                last_refresh = time.monotonic()

    def _failed(self, job: orchestrator_pb2.SearchJob, error: JobError) -> orchestrator_pb2.SearchResult:
        return orchestrator_pb2.SearchResult(
            job_id=job.job_id,
            strategy=job.strategy.name,
            termination=orchestrator_pb2.TERMINATION_ERROR,
            error=error.to_json(),
        )

    async def _record_cancelled(
        self,
        job: orchestrator_pb2.SearchJob,
        used: orchestrator_pb2.BudgetUse | None = None,
        started: float = 0.0,
    ) -> None:
        """Record a cancelled job. A search stopped by the cancel charges what its calls had
        spent (``used``, from the meter): in the result when the worker saw the cancel first,
        else (the gateway recorded the cancellation) beside it, where readers of the result
        find it (``JobEvents.result``)."""
        result = orchestrator_pb2.SearchResult(
            job_id=job.job_id,
            strategy=job.strategy.name,
            termination=orchestrator_pb2.TERMINATION_CANCELLED,
            error=JobError("CANCELLED", "cancelled").to_json(),
        )
        if used is not None:
            result.budget_used.CopyFrom(used)
            result.budget_used.wall_seconds = time.time() - started
            result.started_at = started
            self.metrics.generated_tokens.labels(job.strategy.name).inc(used.generated_tokens)
        if not await self.events.record_result(result, ev.CANCELLED) and used is not None:
            await self.events.record_spent(result)
        self.metrics.jobs.labels(job.strategy.name, "cancelled").inc()


def register_search_task(app: Celery, runner_factory: Any) -> Task:
    """Register ``ttc.search`` on ``app``; ``runner_factory()`` returns the process's runner."""

    def search(self: Task, payload: str) -> str:
        runner: JobRunner = runner_factory()
        try:
            return runner.submit(runner.run(payload))
        except LeaseHeld as held:
            # Re-publish for later and acknowledge this copy: the lease holder may still die.
            raise self.retry(countdown=runner.settings.lease_ttl_s, exc=held) from held

    # Celery's decorator is untyped; applied as a call, the registered task keeps a type.
    task: Task = app.task(name=ev.SEARCH_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)(
        search
    )
    return task
