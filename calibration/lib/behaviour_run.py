"""Record ``code_execution``'s view of existing pools' code draws (``python -m calibration behaviour``).

Code chosen by execution is priced from a code draw's recorded tests and each candidate's
behaviour on them (:mod:`evaluation.pricing.code_exec`). Pools drawn before the drawer recorded
them, or recorded under other strategy code (:func:`~.code_runs.behaviour_version`), hold code
candidates without that behaviour; this records it for them through the real policy and sandbox
services, on the chunks' own model (the model writes the tests, as it would when served), with
:func:`~.code_runs.with_behaviour`, the drawer's own step.

A chunk is rewritten whole (:func:`evaluation.pools.store.write_chunk`) once its code problems
are done, its header gaining one ``behaviour`` note (the code's ``git describe --dirty``, the
behaviour version, the model and its sha256, when, how many problems, the seconds it took).
Only problems whose newest record is in the chunk are recorded, and a chunk with none left to
record is skipped, so a sitting resumes at chunk granularity. The draw settings and program
version in the header are kept as they were, so ``draw`` and ``status`` treat the chunk as the
chunk it was. Each chunk is recorded under the shared model lock; ``--hours`` bounds a sitting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from calibration.lib.code_runs import behaviour_version, needs_behaviour, tests_seed, with_behaviour
from calibration.lib.drawer import problem_messages
from calibration.lib.pool_run import chunks_model, model_sha256, stamped
from calibration.lib.services import SANDBOX_UID_BASE, Service, model_lock, policy_service, sandbox_service
from evaluation.pools.provenance import git_describe
from evaluation.pools.store import Chunk, ProblemPool, iter_chunks, latest_pools, write_chunk
from evaluation.problems.datasets import Problem
from services.common.grpc_client import insecure_channel
from services.orchestrator.clients import GrpcExecutor, GrpcPolicy

_WRITTEN_BY_WRITER = ("type", "schema", "problems")
# Slot uids of this sandbox: apart from a drawer's, which may run beside it.
BEHAVIOUR_UID_BASE = SANDBOX_UID_BASE + 64

Record = Callable[[ProblemPool, int], Awaitable[ProblemPool]]  # a code pool, the chunk's draw seed -> recorded


def pending(chunk: Chunk, latest: dict[str, tuple[ProblemPool, Chunk]], version: str) -> list[int]:
    """Positions of ``chunk``'s problems to record: newest here, with a code draw lacking behaviour
    of this ``version``."""
    return [
        i
        for i, p in enumerate(chunk.pools)
        if latest[p.id][1].path == chunk.path and "code" in p.draws and needs_behaviour(p.draws["code"], version)
    ]


def to_record(chunks: Sequence[Chunk], version: str) -> list[tuple[Chunk, list[int]]]:
    """Each chunk with problems still to record, and their positions."""
    latest = latest_pools(chunks)
    found = [(chunk, pending(chunk, latest, version)) for chunk in chunks]
    return [(chunk, todo) for chunk, todo in found if todo]


async def record_chunk(chunk: Chunk, todo: Sequence[int], record: Record, note: dict[str, Any]) -> Path:
    """Record the problems at ``todo`` and rewrite ``chunk`` whole, its header gaining a
    ``behaviour`` note (``note`` plus the count and the seconds)."""
    began = time.monotonic()
    seed = int((chunk.header.get("settings") or {}).get("seed", 0))
    pools = list(chunk.pools)
    for i in todo:
        pools[i] = await record(pools[i], seed)
    header = {k: v for k, v in chunk.header.items() if k not in _WRITTEN_BY_WRITER}
    done = {**note, "problems": len(todo), "wall_s": round(time.monotonic() - began, 1)}
    header["behaviour"] = [*header.get("behaviour", []), done]
    return write_chunk(chunk.path.parent, chunk.split, chunk.seq, header, pools)


@dataclasses.dataclass
class BehaviourRun:
    """Record the code draws under ``directory``; policy and sandbox start on first use."""

    directory: Path
    model: str = ""  # default: the chunks' own model
    hours: float = 0.0
    policy_target: str = ""
    sandbox_target: str = ""
    lock: bool = True
    clock: Callable[[], float] = time.monotonic  # what ``hours`` is measured on
    _services: list[Service] = dataclasses.field(default_factory=list)
    _record: Record | None = None

    def log(self, message: str) -> None:
        stamped(message)

    async def run(self) -> int:
        """Record until done or out of time; returns the number of chunks rewritten."""
        chunks = list(iter_chunks(self.directory))
        model = chunks_model(chunks, self.model)
        version = behaviour_version()
        todo = to_record(chunks, version)
        problems = sum(len(t) for _, t in todo)
        self.log(f"{self.directory}: {len(chunks)} chunks, {problems} code problem(s) in {len(todo)} chunk(s) to "
                 f"record (behaviour version {version})")  # fmt: skip
        note = {"git_describe": git_describe(), "version": version, "model": model, "model_sha256": model_sha256(model)}
        deadline = self.clock() + self.hours * 3600 if self.hours else None
        done = 0
        try:
            for chunk, positions in todo:
                if deadline is not None and self.clock() > deadline:
                    self.log("time limit reached")
                    break
                with model_lock() if self.lock else nullcontext(0.0) as waited:
                    record = await self._connect(model)
                    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                    load = [round(x, 2) for x in os.getloadavg()]
                    path = await record_chunk(chunk, positions, record, {**note, "at": at, "loadavg": load})
                self.log(f"{path.name}: {len(positions)} code problem(s) recorded (waited {waited:.0f}s for the lock)")
                done += 1
        finally:
            for service in reversed(self._services):
                service.stop()
        return done

    async def _connect(self, model: str) -> Record:
        """The recorder, starting the policy and sandbox on first use (inside the lock: loading
        the model is a model workload)."""
        if self._record is not None:
            return self._record
        policy_target, sandbox_target = self.policy_target, self.sandbox_target
        if not policy_target:
            service = await asyncio.to_thread(policy_service(model).start, 600.0)
            self._services.append(service)
            policy_target = service.target
        if not sandbox_target:
            service = await asyncio.to_thread(sandbox_service(uid_base=BEHAVIOUR_UID_BASE).start, 60.0)
            self._services.append(service)
            sandbox_target = service.target
        self.log(f"policy at {policy_target}, sandbox at {sandbox_target}")
        policy = GrpcPolicy(insecure_channel(policy_target), "", timeout=1800.0)
        executor = GrpcExecutor(insecure_channel(sandbox_target))

        async def record(pool: ProblemPool, seed: int) -> ProblemPool:
            messages = problem_messages(Problem.from_dict(pool.problem))
            code = await with_behaviour(pool.draws["code"], messages, policy, executor, seed=tests_seed(pool.id, seed))
            return dataclasses.replace(pool, draws={**pool.draws, "code": code})

        self._record = record
        return record
