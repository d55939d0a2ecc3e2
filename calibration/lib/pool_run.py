"""A pool run that stops and resumes at any point: chunks of a few problems, each written
whole with its provenance, each drawn under the shared model lock.

On start the run reads the chunks already in its folder and draws only the problems none of
them holds. A chunk whose draw settings or program version differ from this run's is stale:
with ``redraw_stale`` its problems are drawn again (and the stale file is removed once every
problem in it has a newer record); without it, stale program versions are kept and reported,
and differing draw settings are an error (pools of different ``k`` or temperatures do not mix).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calibration.lib.drawer import DrawSettings, PoolDrawer, all_at_once, program_prompt_changed, program_version
from calibration.lib.latency_probe import latency_probe
from calibration.lib.services import Service, model_lock, policy_service, sandbox_service
from evaluation.pools.provenance import git_describe
from evaluation.pools.store import DRAW_KINDS, Call, Chunk, ProblemPool, iter_chunks, latest_pools, write_chunk
from evaluation.problems.datasets import SPLIT_SALT, Problem, split_name
from services.common.grpc_client import insecure_channel
from services.gen.ttc.v1 import sandbox_pb2_grpc
from services.orchestrator.clients import GrpcExecutor, GrpcPolicy
from services.search.interfaces import ComponentError

# An overlapped chunk of two problems keeps up to 36 sequences of up to ~1.2k tokens in flight.
DRAWER_KV_CACHE_TOKENS = 49_152


class StaleSettings(RuntimeError):
    """Chunks in the folder were drawn with other settings and no re-draw was asked for."""


def model_sha256(model: str) -> str:
    """The pinned sha256 of a registry model, the hash of a GGUF file, or for a model served by
    another engine (vLLM, a remote API: no file here) ``remote:<name>``, so its chunks still
    refuse to mix with another model's."""
    from services.policy.models import REGISTRY, sha256_of

    spec = REGISTRY.get(model)
    if spec is not None:
        return spec.sha256
    path = Path(model)
    return sha256_of(path) if path.is_file() else f"remote:{model}"


@dataclass
class RunPlan:
    todo: list[Problem]
    next_seq: int
    stale: list[Chunk] = field(default_factory=list)
    kept_stale: int = 0  # problems kept from chunks of another program version


def chunks_model(chunks: Sequence[Chunk], given: str = "") -> str:
    """The model a rewrite of ``chunks`` runs: ``given``, else the one model their headers name
    ("" when there are no chunks); chunks of several models need it given."""
    models = {str(c.header.get("model", "")) for c in chunks}
    model = given or (models.pop() if len(models) == 1 else "")
    if not model and chunks:
        raise SystemExit(f"chunks of several models {sorted(models)}: pass --model")
    return model


def stamped(message: str) -> None:
    """A progress line with the local time, flushed (long rewrites are followed in their log)."""
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}", flush=True)


def is_stale(chunk: Chunk, settings: DrawSettings, version: str) -> bool:
    return chunk.header.get("settings") != settings.as_dict() or chunk.header.get("program_version") != version


def plan(directory: Path, split: str, problems: Sequence[Problem], settings: DrawSettings, version: str,
         *, redraw_stale: bool, sha256: str) -> RunPlan:  # fmt: skip
    """What is left to draw, the next chunk number and the stale chunks."""
    chunks = list(iter_chunks(directory, split))
    for chunk in chunks:
        if chunk.header.get("model_sha256") != sha256:
            raise StaleSettings(f"{chunk.path}: drawn from model sha256 {chunk.header.get('model_sha256')}")
    stale = [c for c in chunks if is_stale(c, settings, version)]
    other_settings = [c for c in stale if c.header.get("settings") != settings.as_dict()]
    if other_settings and not redraw_stale:
        raise StaleSettings(
            f"{other_settings[0].path} was drawn with settings {other_settings[0].header.get('settings')}, this run "
            f"uses {settings.as_dict()}: pass --redraw-stale, or draw into another folder"
        )
    fresh = [c for c in chunks if not redraw_stale or c not in stale]
    latest = latest_pools(fresh)
    changed = {pid for pid, (pool, _) in latest.items() if program_prompt_changed(pool)}
    kept = sum(len(c.pools) for c in stale) if not redraw_stale else 0
    # Problems whose program prompt changed come first: the table should price today's prompts.
    todo = [p for p in problems if p.id in changed] + [p for p in problems if p.id not in latest]
    return RunPlan(todo, max((c.seq for c in chunks), default=0) + 1, stale if redraw_stale else [], kept)


def counts(pools: Sequence[ProblemPool]) -> dict[str, Any]:
    """Per kind of draw: candidates, cut ones (stopped at max_tokens) and correct ones."""
    out: dict[str, Any] = {"problems": len(pools)}
    for kind in DRAW_KINDS:
        cands = [c for p in pools if kind in p.draws for c in p.draws[kind].candidates]
        if cands:
            out[kind] = {
                "candidates": len(cands),
                "cut": sum(c.cut for c in cands),
                "correct": sum(bool(c.correct) for c in cands),
                "unchecked": sum(c.correct is None for c in cands),
            }
    return out


def remove_replaced(directory: Path, split: str, stale: Sequence[Chunk]) -> list[Path]:
    """Delete stale chunk files whose every problem now has a newer record."""
    latest = latest_pools(iter_chunks(directory, split))
    removed = []
    for chunk in stale:
        if chunk.path.exists() and all(latest[p.id][1].seq > chunk.seq for p in chunk.pools):
            chunk.path.unlink()
            removed.append(chunk.path)
    return removed


@dataclass
class PoolRun:
    """Draw ``problems`` of ``split`` for ``model`` into ``directory``, ``chunk_size`` per chunk."""

    model: str
    split: str
    problems: Sequence[Problem]
    directory: Path
    settings: DrawSettings
    data: dict[str, Any]
    chunk_size: int = 5
    redraw_stale: bool = False
    hours: float = 0.0  # 0: no time limit
    policy_target: str = ""
    sandbox_target: str = ""
    # Take the shared model lock per chunk (a model on this machine's cores); a run against an
    # engine elsewhere, or inside a process that already holds the lock, passes False.
    lock: bool = True
    # With ``hours``: also drop the chunk in flight when the time is up (its problems are drawn
    # on the next run), so the limit is a wall-clock limit and not "no new chunk after".
    stop_at_deadline: bool = False
    # Overlap a chunk's calls to keep the engine's batch full (calibration/lib/drawer.py); the
    # sitting then starts with a latency probe (calibration/lib/latency_probe.py).
    overlap: bool = True
    _services: list[Service] = field(default_factory=list)
    _drawer_cache: PoolDrawer | None = None

    def log(self, message: str) -> None:
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}", flush=True)

    async def run(self) -> int:
        """Draw until done or out of time; returns the number of problems drawn."""
        version, sha256, describe = program_version(), model_sha256(self.model), git_describe()
        todo = plan(self.directory, self.split, self.problems, self.settings, version,
                    redraw_stale=self.redraw_stale, sha256=sha256)  # fmt: skip
        self.log(f"{self.model} {split_name(self.split)}: {len(self.problems)} problems, {len(todo.todo)} to draw, "
                 f"{len(todo.stale)} stale chunk(s) to re-draw, {todo.kept_stale} kept from other program versions; "
                 f"program version {version}, code {describe}")  # fmt: skip
        deadline = time.monotonic() + self.hours * 3600 if self.hours else None
        seq, drawn = todo.next_seq, 0
        try:
            for start in range(0, len(todo.todo), self.chunk_size):
                if deadline is not None and time.monotonic() > deadline:
                    self.log("time limit reached")
                    break
                batch = todo.todo[start : start + self.chunk_size]
                with model_lock() if self.lock else nullcontext(0.0) as waited:
                    began = time.monotonic()
                    left = deadline - time.monotonic() if deadline is not None and self.stop_at_deadline else None
                    try:
                        pools = await asyncio.wait_for(self._draw_batch(batch), left)
                    except TimeoutError:
                        self.log(f"time limit reached while drawing a chunk: its {len(batch)} problem(s) are dropped")
                        break
                    wall = time.monotonic() - began
                header = {
                    "git_describe": describe, "model": self.model, "model_sha256": sha256,
                    "program_version": version, "settings": self.settings.as_dict(), "data": self.data,
                    "counts": counts(pools), "drawn_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "wall_s": round(wall, 1), "lock_wait_s": round(waited, 1), "loadavg": list(os.getloadavg()),
                    "draw_mode": "overlapped" if self.overlap else "sequential",
                    "completion_tokens": sum(c.completion_tokens for p in pools for d in p.draws.values()
                                             for c in d.calls),
                }  # fmt: skip
                path = write_chunk(self.directory, self.split, seq, header, pools)
                seq, drawn = seq + 1, drawn + len(pools)
                for old in remove_replaced(self.directory, self.split, todo.stale):
                    self.log(f"removed stale {old.name}")
                self.log(f"{path.name}: {len(pools)} problems in {wall:.0f}s (waited {waited:.0f}s for the lock); "
                         f"{drawn}/{len(todo.todo)} this run; {header['counts']}")  # fmt: skip
        finally:
            for service in reversed(self._services):
                service.stop()
        return drawn

    async def _draw_batch(self, batch: Sequence[Problem]) -> list[ProblemPool]:
        drawer = await self._drawer()
        if not self.overlap:
            return [await self._draw_one(drawer, p) for p in batch]
        return await all_at_once([self._draw_one(drawer, p) for p in batch])

    async def _draw_one(self, drawer: PoolDrawer, problem: Problem, attempts: int = 3) -> ProblemPool:
        """One problem's pool; a failed service call (a policy restart, a sandbox outage) is
        retried after a pause, and the run stops after ``attempts`` (it resumes from its chunks)."""
        for attempt in range(1, attempts):
            try:
                return await drawer.draw(problem, self.split)
            except ComponentError as err:
                self.log(f"{problem.id}: {err} (attempt {attempt} of {attempts})")
                await asyncio.sleep(30.0 * attempt)
        return await drawer.draw(problem, self.split)

    async def _drawer(self) -> PoolDrawer:
        """The drawer, starting the services on first use (inside the lock: loading the model is
        a model workload)."""
        if self._drawer_cache is not None:
            return self._drawer_cache
        policy_target, sandbox_target = self.policy_target, self.sandbox_target
        if not policy_target:
            service = await asyncio.to_thread(
                policy_service(self.model, kv_cache_tokens=DRAWER_KV_CACHE_TOKENS).start, 600.0
            )
            self._services.append(service)
            policy_target = service.target
        if not sandbox_target:
            service = await asyncio.to_thread(sandbox_service().start, 60.0)
            self._services.append(service)
            sandbox_target = service.target
        self.log(f"policy at {policy_target}, sandbox at {sandbox_target}")
        policy = GrpcPolicy(insecure_channel(policy_target), "", timeout=1800.0)
        probe: tuple[Call, ...] = ()
        if self.overlap:
            probe = await latency_probe(policy, seed=self.settings.seed)
            self.log("latency probe (calls alone): " + ", ".join(f"n={c.n} {c.wall_s:.1f}s" for c in probe))
        drawer = PoolDrawer(
            policy,
            GrpcExecutor(insecure_channel(sandbox_target)),
            sandbox_pb2_grpc.SandboxStub(insecure_channel(sandbox_target)),
            self.settings,
            overlap=self.overlap,
            latency_probe=probe,
        )
        self._drawer_cache = drawer
        return drawer


def data_provenance(split: str, seed: int, per_family: int, families: Sequence[str]) -> dict[str, Any]:
    return {
        "split": split,
        "seed": seed,
        "per_family": per_family,
        "families": list(families),
        "split_salt": SPLIT_SALT,
    }
