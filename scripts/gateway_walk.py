"""Count the gateway files one plain chat completion enters, and how often it returns to a file it
had left (a measure of how scattered one request's path is), in-process: TestClient on
``build_app``, a stub policy (model list and stats only), a stub worker that answers the job
from Redis, and a profiler that records every Python call into ``services/gateway/`` made on the
second request's behalf (the first warms imports and caches). Only the request's own work
counts: its task and the tasks it starts carry a context variable, so the gateway's background
loops (the stats poller, the queue gauge) that run meanwhile stay out. A coroutine resumed after
an await is not a new entry (the profiler reports each resume as a call, and how often a wait
resumes depends on timing), so the count is the same run to run.

    python scripts/gateway_walk.py [ROOT] [--record docs/data/gateway_walk.json]

ROOT is the source tree to measure (default: this one; e.g. a commit unpacked into a folder
named after it). Prints one JSON
object: files entered, returns, calls by file and the sequence of files. ``--record PATH`` also
rewrites PATH: its ``after`` becomes ``before`` and this walk (with ROOT's ``git describe
--always --dirty``) the new ``after``, so the file always compares the last two measurements.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextvars
import inspect
import json
import os
import subprocess
import sys
import threading
import time
from concurrent import futures
from types import FrameType
from typing import Any

import grpc

ARGS = sys.argv[1:]
RECORD = ARGS.pop(ARGS.index("--record") + 1) if "--record" in ARGS else None
ROOT = os.path.abspath(next((a for a in ARGS if a != "--record"), "."))
RECORD = os.path.abspath(RECORD) if RECORD else None
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, HERE]
os.chdir(ROOT)

from fastapi.testclient import TestClient  # noqa: E402

from services.common.ports import free_port  # noqa: E402
from services.common.settings import CommonSettings  # noqa: E402
from services.gateway.app import build_app  # noqa: E402
from services.gateway.settings import GatewaySettings  # noqa: E402
from services.gen.ttc.v1 import orchestrator_pb2, policy_pb2, policy_pb2_grpc  # noqa: E402
from services.jobs import events as ev  # noqa: E402
from services.jobs.settings import JobsSettings  # noqa: E402
from tests.helpers.processes import RedisServer  # noqa: E402

QUEUE = "q-walk"

#: set for the measured request's ASGI call; tasks it creates copy it, earlier tasks do not
WALKING: contextvars.ContextVar[bool] = contextvars.ContextVar("walking", default=False)


class StubPolicy(policy_pb2_grpc.PolicyServicer):
    def GetStats(self, request: Any, context: Any) -> policy_pb2.EngineStats:
        return policy_pb2.EngineStats(engine="stub", model="m")

    def ListModels(self, request: Any, context: Any) -> policy_pb2.ListModelsResponse:
        return policy_pb2.ListModelsResponse(models=[policy_pb2.ModelInfo(id="m", max_context=4096)])


def answer_one_job(redis_url: str) -> None:
    """A worker that takes one job off the queue and records its result."""
    import redis.asyncio as aioredis

    async def run() -> None:
        client = aioredis.Redis.from_url(redis_url)
        _, raw = await client.brpop([QUEUE], timeout=30)  # type: ignore[misc]
        body = json.loads(base64.b64decode(json.loads(raw)["body"]))
        job = ev.decode_job(body[0][0])
        result = orchestrator_pb2.SearchResult(
            job_id=job.job_id,
            answer="4",
            strategy="single",
            termination=orchestrator_pb2.TERMINATION_COMPLETED,
            started_at=time.time(),
            budget_used=orchestrator_pb2.BudgetUse(generated_tokens=3, prompt_tokens=10),
            answer_tokens=1,
        )
        await ev.JobEvents(client, 60).record_result(result, ev.SUCCEEDED)
        await client.aclose()

    asyncio.run(run())


def walk() -> dict[str, Any]:
    redis_server = RedisServer().start()
    port = free_port()
    server = grpc.server(futures.ThreadPoolExecutor(2))
    policy_pb2_grpc.add_PolicyServicer_to_server(StubPolicy(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    settings = GatewaySettings(
        policy_target=f"127.0.0.1:{port}",
        stats_interval_s=30,
        routing_table=f"{ROOT}/services/gateway/routing/routing.v1.json",
    )
    app = build_app(settings, CommonSettings(redis_url=redis_server.url), jobs_settings=JobsSettings(queue=QUEUE))
    gateway = os.path.join(ROOT, "services/gateway") + os.sep
    sequence: list[str] = []
    recording = [False]

    async def walked(scope: Any, receive: Any, send: Any) -> None:
        """The app, with the measured request's context marked (the lifespan's never is)."""
        token = WALKING.set(scope["type"] == "http" and recording[0])
        try:
            await app(scope, receive, send)
        finally:
            WALKING.reset(token)

    resumable = inspect.CO_COROUTINE | inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR
    started: dict[int, FrameType] = {}  # coroutine frames already entered (kept alive: ids stay unique)

    def resumed(frame: FrameType) -> bool:
        if not frame.f_code.co_flags & resumable:
            return False
        if id(frame) in started:
            return True
        started[id(frame)] = frame
        return False

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and WALKING.get() and frame.f_code.co_filename.startswith(gateway) and not resumed(frame):
            name = frame.f_code.co_filename[len(gateway) :]
            if not sequence or sequence[-1] != name:
                sequence.append(name)

    body = {"model": "m", "messages": [{"role": "user", "content": "What is 2+2?"}], "reasoning_effort": "none"}
    threading.setprofile(profile)  # the TestClient's portal thread starts below
    try:
        with TestClient(walked) as client:
            for measured in (False, True):
                threading.Thread(target=answer_one_job, args=(redis_server.url,), daemon=True).start()
                recording[0] = measured
                reply = client.post("/v1/chat/completions", json=body)
                recording[0] = False
                assert reply.status_code == 200, reply.text
    finally:
        threading.setprofile(None)
        server.stop(0)
        redis_server.stop()
    left: set[str] = set()
    returns = 0
    for before, name in zip([None, *sequence], sequence, strict=False):
        returns += name in left
        if before is not None:
            left.add(before)
    return {
        "root": ROOT,
        "files": len(set(sequence)),
        "returns": returns,
        "calls_by_file": dict(collections.Counter(sequence).most_common()),
        "sequence": sequence,
    }


def record(path: str, measured: dict[str, Any]) -> None:
    """Shift the file's last measurement to ``before`` and write this one as ``after``."""
    with open(path) as f:
        previous = json.load(f)
    described = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True)
    # An unpacked commit (git archive) is not a work tree: its folder is named after the commit.
    commit = described.stdout.strip() if described.returncode == 0 else os.path.basename(ROOT)
    after = {"commit": commit, **{k: measured[k] for k in ("files", "returns", "calls_by_file", "sequence")}}
    with open(path, "w") as f:
        json.dump({"what": previous["what"], "before": previous["after"], "after": after}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    measured = walk()
    if RECORD is not None:
        record(RECORD, measured)
    print(json.dumps(measured))
