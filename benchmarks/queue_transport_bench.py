"""The job transport alone: Celery on Redis against a plain Redis list, in one run.

A measurement, not a change to the system. It starts a private Redis and moves the same
serialized ``SearchJob`` payloads (~1.5 KB, shaped like the gateway's) from an asyncio publisher
in this process to a consumer subprocess, several ways, at concurrency 1 and 16 (jobs in flight):

* ``celery``: the gateway's publish up to commit 5ae9e66 (``send_task`` on one sender thread,
  with the project's ``make_celery`` app: JSON, acks late, prefetch 1) and a Celery worker
  started like ``ttc serve orchestrator`` (threads pool, same flags, the project's
  ``register_search_task``) whose runner hands each job to its asyncio loop thread, as
  ``JobRunner`` does, and only records that the job arrived.
* ``celery-lpush`` (where ``services/jobs/celery_message.py`` exists): the same Celery message
  built in-process by ``search_message`` and ``LPUSH``ed from the event loop; the same worker.
* ``list``: the publisher ``LPUSH``es the protobuf bytes (redis.asyncio with hiredis); the
  consumer, one asyncio loop, ``BLMOVE``s each job onto its processing list (reliable queue),
  records the arrival the same way and acknowledges with ``LREM``.
* ``loopback``: no transport and no consumer: the publisher writes the arrival record itself.
  It is the floor of the measurement's own per-job work in the publisher (the completion
  reader, one async Redis command), which both transports pay as well.

The arrival record is ``RPUSH`` of "<job_id> <wall time>" to one list; the publisher reads it
with ``BLMPOP`` (up to 64 at a time) to keep the jobs in flight and to get enqueue→consumed
latency (the consumer's clock stamp minus the publisher's just before the publish; one host).
CPU per job is user + system time from /proc over each phase: the publisher process (all its
threads), the consumer process with its children, and redis-server.

    flock /tmp/ttc-model.lock nice .venv/bin/python benchmarks/queue_transport_bench.py --jobs 2000
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis.asyncio as aioredis
from google.protobuf.struct_pb2 import Struct

from evaluation.pools.provenance import provenance, write_raw
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2
from services.jobs import events as ev
from services.jobs.celery_app import make_celery
from services.jobs.redis_client import redis_client
from tests.helpers.processes import RedisServer, cpu_seconds

DONE = "ttc.bench.done"
CELERY_QUEUE = "ttc.bench.celery"
LIST_QUEUE = "ttc.bench.list"


def _message_builder() -> Callable[[Any, str, str, str], str] | None:
    """The gateway's own Celery-message builder (``LPUSH`` from the event loop), where this tree has it."""
    try:
        module = importlib.import_module("services.jobs.celery_message")
    except ImportError:
        return None
    return cast(Callable[[Any, str, str, str], str], module.search_message)


search_message = _message_builder()
TRANSPORTS = ("celery", *(("celery-lpush",) if search_message is not None else ()), "list", "loopback")
QUESTION = (
    "A train leaves the station at 9:00 travelling at 72 km/h. A second train leaves the same station "
    "at 9:40 on a parallel track travelling at 96 km/h in the same direction. The first train stops "
    "for 12 minutes at a town 90 km from the station and then continues at the same speed. At what "
    "time does the second train overtake the first, and how far from the station are they then? "
    "Give the time to the minute and the distance to the nearest 0.1 km, and show your reasoning "
    "step by step, checking the answer against both trains' timetables before you state it. "
)


def search_job() -> orchestrator_pb2.SearchJob:
    """A job shaped like the gateway's for a self-consistency chat request (~1.5 KB)."""
    params = Struct()
    params.update({"temperature_schedule": "constant", "min_agreement": 0.5})
    job = orchestrator_pb2.SearchJob(
        job_id=uuid.uuid4().hex,
        model="HuggingFaceTB/SmolLM2-360M-Instruct",
        messages=[
            common_pb2.ChatMessage(role="system", content="You are a careful assistant. " * 6),
            common_pb2.ChatMessage(role="user", content=QUESTION * 2),
        ],
        temperature=0.7,
        top_p=0.95,
        max_tokens=512,
        stop=["</answer>"],
        effort_requested="medium",
        effort_applied="medium",
        trace_context={"traceparent": f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"},
        enqueued_at=time.time(),
        answers=1,
        owner="bench-key",
        quiet=True,
    )
    job.strategy.name = "self_consistency"
    job.strategy.n = 8
    job.strategy.params.CopyFrom(params)
    job.budget.max_generated_tokens = 4096
    job.budget.max_policy_calls = 16
    job.budget.max_verifier_calls = 8
    job.budget.deadline_seconds = 120.0
    return job


async def record_arrival(client: aioredis.Redis, job_id: str) -> None:
    """What both consumers do with a job: tell the publisher it arrived, and when."""
    await client.rpush(DONE, f"{job_id} {time.time():.6f}")


# ---------------------------------------------------------------- consumers (subprocesses)


class ArrivalRunner:
    """Stands in for ``JobRunner`` in the Celery worker: the same hand-off from Celery's thread to
    one asyncio loop thread, and a job that only decodes its payload and records its arrival."""

    def __init__(self, redis_url: str) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="ttc-jobs", daemon=True).start()
        self.redis = redis_client(redis_url)

    def submit(self, coro: Coroutine[Any, Any, str]) -> str:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def run(self, payload: str) -> str:
        await record_arrival(self.redis, ev.decode_job(payload).job_id)
        return ""


def celery_worker(redis_url: str, concurrency: int) -> None:
    """A Celery worker as ``services/orchestrator/server.py`` starts one, running no-op jobs."""
    from services.common.logging import configure_logging
    from services.orchestrator.worker import register_search_task

    configure_logging("bench-worker", "INFO", False)
    for name in ("celery.worker.strategy", "celery.app.trace"):  # as the orchestrator below DEBUG
        logging.getLogger(name).setLevel(logging.WARNING)
    app = make_celery(redis_url, CELERY_QUEUE)
    runner = ArrivalRunner(redis_url)
    register_search_task(app, lambda: runner)
    app.worker_main(
        [
            "worker",
            "--pool=threads",
            f"--concurrency={concurrency}",
            f"--queues={CELERY_QUEUE}",
            "--hostname=bench@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel=INFO",
        ]
    )


async def list_consumer(redis_url: str, slots: int) -> None:
    """A reliable-queue consumer: BLMOVE to a processing list, handle, ack with LREM."""
    client = redis_client(redis_url)
    processing = f"{LIST_QUEUE}.processing.{os.getpid()}"
    free = asyncio.Semaphore(slots)
    running: set[asyncio.Task[None]] = set()

    async def handle(raw: bytes) -> None:
        try:
            job = orchestrator_pb2.SearchJob.FromString(raw)
            await record_arrival(client, job.job_id)
            await client.lrem(processing, 1, raw)  # type: ignore[arg-type]  # bytes are sent as they are
        finally:
            free.release()

    while True:
        await free.acquire()
        raw = await client.blmove(LIST_QUEUE, processing, 0, "RIGHT", "LEFT")
        assert isinstance(raw, bytes)
        task = asyncio.create_task(handle(raw))
        running.add(task)
        task.add_done_callback(running.discard)


# ---------------------------------------------------------------- publisher (this process)


@dataclass
class Phase:
    transport: str
    concurrency: int
    jobs: int
    wall_s: float
    publisher_cpu_s: float
    consumer_cpu_s: float
    redis_cpu_s: float
    consumed_s: list[float]  # enqueue -> consumed, per job
    round_trip_s: list[float]  # enqueue -> the publisher saw the arrival, per job

    def per_job_ms(self, seconds: float) -> float:
        return 1000 * seconds / self.jobs

    def pct_ms(self, q: float, values: list[float] | None = None) -> float:
        ordered = sorted(self.consumed_s if values is None else values)
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Publisher:
    def __init__(self, redis_url: str, template: orchestrator_pb2.SearchJob, pids: dict[str, int]) -> None:
        self.redis_url = redis_url
        self.pids = pids  # "redis" and each transport's consumer
        self.client = redis_client(redis_url)
        self.template = template
        self.waiting: dict[str, asyncio.Future[float]] = {}
        self.reader: asyncio.Task[None] | None = None
        self.celery = make_celery(redis_url, CELERY_QUEUE)
        # kombu producers are not thread-safe: one sender thread, as the gateway had it.
        self.sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="celery-send")
        self.sends: dict[str, Callable[[orchestrator_pb2.SearchJob], Awaitable[None]]] = {
            "celery": self.send_celery,
            "celery-lpush": self.send_celery_message,
            "list": self.send_list,
            "loopback": self.send_loopback,
        }

    async def send_celery(self, job: orchestrator_pb2.SearchJob) -> None:
        """The gateway's publish up to commit 5ae9e66 (``Dispatcher._send`` on its sender thread)."""
        payload = ev.encode_job(job)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.sender, self._send, job.job_id, payload)

    def _send(self, job_id: str, payload: str) -> None:
        self.celery.send_task(ev.SEARCH_TASK, args=[payload], task_id=job_id, queue=CELERY_QUEUE)

    async def send_celery_message(self, job: orchestrator_pb2.SearchJob) -> None:
        """The same Celery message built in-process and LPUSHed from the event loop."""
        assert search_message is not None
        message = search_message(self.celery, job.job_id, ev.encode_job(job), CELERY_QUEUE)
        await self.client.lpush(CELERY_QUEUE, message)

    async def send_list(self, job: orchestrator_pb2.SearchJob) -> None:
        await self.client.lpush(LIST_QUEUE, job.SerializeToString())

    async def send_loopback(self, job: orchestrator_pb2.SearchJob) -> None:
        await record_arrival(self.client, job.job_id)

    async def read_arrivals(self) -> None:
        reader = redis_client(self.redis_url)
        while True:
            reply = await reader.blmpop(0, 1, DONE, direction="LEFT", count=64)
            for item in reply[1] if reply else []:
                assert isinstance(item, bytes)
                job_id, stamp = item.decode().split(" ")
                future = self.waiting.pop(job_id, None)
                if future is not None and not future.done():
                    future.set_result(float(stamp))

    async def move(self, transport: str, jobs: int, concurrency: int, timeout_s: float) -> Phase:
        send = self.sends[transport]
        batch = []
        for _ in range(jobs):  # built before the clock: the job itself is not the transport
            job = orchestrator_pb2.SearchJob()
            job.CopyFrom(self.template)
            job.job_id = uuid.uuid4().hex
            batch.append(job)
        todo = iter(batch)
        consumed: list[float] = []
        round_trip: list[float] = []
        loop = asyncio.get_running_loop()

        async def lane() -> None:
            for job in todo:
                future: asyncio.Future[float] = loop.create_future()
                self.waiting[job.job_id] = future
                start, wall = time.perf_counter(), time.time()
                job.enqueued_at = wall
                await send(job)
                arrived = await future
                round_trip.append(time.perf_counter() - start)
                consumed.append(arrived - wall)

        try:
            return await asyncio.wait_for(self._timed(transport, concurrency, lane, consumed, round_trip), timeout_s)
        except TimeoutError:
            depths = {q: await self.client.llen(q) for q in (CELERY_QUEUE, LIST_QUEUE, DONE)}
            reader = "running" if self.reader is not None and not self.reader.done() else f"ended: {self.reader}"
            raise RuntimeError(
                f"{transport} at concurrency {concurrency}: {len(consumed)} of {jobs} jobs arrived"
                f" in {timeout_s:.0f} s, {len(self.waiting)} awaited; list lengths {depths}; reader {reader}"
            ) from None

    def _cpu(self, transport: str) -> tuple[float, float, float]:
        consumer = self.pids.get(transport.split("-")[0])
        return (
            cpu_seconds(os.getpid()),
            cpu_seconds(consumer, with_children=True) if consumer is not None else 0.0,
            cpu_seconds(self.pids["redis"]),
        )

    async def _timed(
        self,
        transport: str,
        concurrency: int,
        lane: Callable[[], Coroutine[Any, Any, None]],
        consumed: list[float],
        round_trip: list[float],
    ) -> Phase:
        before = self._cpu(transport)
        start = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(concurrency)))
        wall = time.perf_counter() - start
        publisher, consumer, redis = (b - a for a, b in zip(before, self._cpu(transport), strict=True))
        return Phase(transport, concurrency, len(consumed), wall, publisher, consumer, redis, consumed, round_trip)


def start_consumer(role: str, redis_url: str, concurrency: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, __file__, "--role", role, "--redis-url", redis_url, "--worker-concurrency", str(concurrency)]
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "TTC_LOG_JSON": "false"})


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def report(phases: list[Phase], payload_bytes: int, loads: tuple[str, str]) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs")
    print(f"payload: SearchJob protobuf {payload_bytes} B ({4 * ((payload_bytes + 2) // 3)} B base64 for Celery)")
    print(f"load average before: {loads[0]}   after: {loads[1]}")
    print(
        "| transport | concurrency | jobs | publisher CPU ms/job | consumer CPU ms/job | Redis CPU ms/job "
        "| enqueue→consumed p50 ms | p99 ms | round trip p50 ms | jobs/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for p in phases:
        print(
            f"| {p.transport} | {p.concurrency} | {p.jobs} | {p.per_job_ms(p.publisher_cpu_s):.3f} "
            f"| {p.per_job_ms(p.consumer_cpu_s):.3f} | {p.per_job_ms(p.redis_cpu_s):.3f} "
            f"| {p.pct_ms(0.5):.2f} | {p.pct_ms(0.99):.2f} | {p.pct_ms(0.5, p.round_trip_s):.2f} "
            f"| {p.jobs / p.wall_s:.0f} |"
        )
    print("ratios list / Celery (the first rounds):")
    first = {(p.transport, p.concurrency): p for p in reversed(phases)}
    for (name, conc), c in sorted(first.items(), key=lambda item: (item[0][1], item[0][0])):
        a = first.get(("list", conc))
        if not name.startswith("celery") or a is None:
            continue
        print(
            f"  list/{name} at concurrency {conc:2d}: publisher CPU {a.publisher_cpu_s / c.publisher_cpu_s:.2f}  "
            f"consumer CPU {a.consumer_cpu_s / c.consumer_cpu_s:.2f}  "
            f"both {(a.publisher_cpu_s + a.consumer_cpu_s) / (c.publisher_cpu_s + c.consumer_cpu_s):.2f}"
            f"  p50 {a.pct_ms(0.5) / c.pct_ms(0.5):.2f}  p99 {a.pct_ms(0.99) / c.pct_ms(0.99):.2f}"
        )


async def publish_all(args: argparse.Namespace, redis_url: str, pids: dict[str, int]) -> list[Phase]:
    publisher = Publisher(redis_url, search_job(), pids)
    reader = publisher.reader = asyncio.create_task(publisher.read_arrivals())
    try:
        for transport in TRANSPORTS:  # warm up: consumers ready, connections and caches made
            await publisher.move(transport, args.warmup, 16, timeout_s=120)
        phases = []
        for concurrency in args.concurrency:
            for _ in range(args.rounds):
                for transport in TRANSPORTS:
                    try:
                        phases.append(await publisher.move(transport, args.jobs, concurrency, args.phase_timeout))
                    except RuntimeError as stalled:  # say so and go on: the other phases still count
                        print(f"STALLED: {stalled}", file=sys.stderr)
                        publisher.waiting.clear()
                        continue
                    print(f"  done: {transport} at concurrency {concurrency}", file=sys.stderr)
        return phases
    finally:
        reader.cancel()
        publisher.sender.shutdown(wait=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per transport and concurrency")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16], help="jobs in flight")
    parser.add_argument("--worker-concurrency", type=int, default=16, help="Celery threads / list consumer slots")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--phase-timeout", type=float, default=60.0, help="seconds before a phase counts as stalled")
    parser.add_argument("--role", choices=["publisher", "celery-worker", "list-consumer"], default="publisher")
    parser.add_argument("--redis-url", default="")
    args = parser.parse_args()
    if args.role == "celery-worker":
        celery_worker(args.redis_url, args.worker_concurrency)
        return
    if args.role == "list-consumer":
        asyncio.run(list_consumer(args.redis_url, args.worker_concurrency))
        return

    import uvloop  # the gateway's loop (uvicorn picks uvloop)

    started = provenance(None)

    redis_server = RedisServer().start()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    logs: dict[str, Path] = {}
    try:
        for transport, role in (("celery", "celery-worker"), ("list", "list-consumer")):
            logs[transport] = Path(f"/tmp/ttc-queue-bench-{role}-{os.getpid()}.log")
            procs[transport] = start_consumer(role, redis_server.url, args.worker_concurrency, logs[transport])
        before = load()
        try:
            assert redis_server.proc is not None
            pids = {"redis": redis_server.proc.pid, **{t: p.pid for t, p in procs.items()}}
            phases = uvloop.run(publish_all(args, redis_server.url, pids))
        except BaseException:
            for transport, path in logs.items():
                print(f"--- {transport} consumer log:\n{path.read_text(errors='replace')[-3000:]}", file=sys.stderr)
            raise
        after = load()
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        redis_server.stop()
    for path in logs.values():
        path.unlink(missing_ok=True)
    report(phases, len(search_job().SerializeToString()), (before, after))
    results = {
        "args": vars(args),
        "payload_bytes": len(search_job().SerializeToString()),
        "phases": [dataclasses.asdict(p) for p in phases],
    }
    print("raw results:", write_raw("queue_transport", results, started=started, argv=sys.argv))


if __name__ == "__main__":
    main()
