"""The load-test runner: drives the gateway over a grid and records every request.

Closed loop (``concurrency`` requests in flight) or open loop (Poisson arrivals at ``rate``
per second). Every input is checked before the first request: the gateway must answer
``GET /v1/models`` and serve the model, the data sets and strategies must exist, the grid must
not be empty. Each finished request is appended and flushed to ``records.jsonl`` at once, so
Ctrl-C or SIGTERM leaves every measured request on disk; ``run.json`` says whether the run
finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import signal
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
from tqdm import tqdm

from evaluation.pools.provenance import load_average, provenance
from evaluation.problems.checkers import CodeRunner, check
from evaluation.problems.datasets import Problem, split_name, split_of
from evaluation.report.records import RecordWriter, RequestRecord, done_keys, write_problems, write_run_meta
from loadtests.client import Reply, candidate_texts, fetch_trace, request_kwargs, send
from loadtests.grid import Cell

# Terminations (as the gateway reports them) that mean the search gave up rather than answered.
GAVE_UP = {"deadline", "error", "cancelled"}


class PreflightError(RuntimeError):
    """The run cannot start; nothing has been sent. The message says what to fix."""


@dataclass
class RunConfig:
    base_url: str
    model: str
    out: Path
    api_key: str = "none"
    concurrency: int = 1
    rate: float | None = None  # arrivals per second (open loop); None = closed loop
    samples: int = 1  # requests per problem and cell, with different seeds
    temperature: float = 0.7
    max_tokens: int = 256
    stream: bool = True
    fetch_traces: bool = True
    request_timeout_s: float = 600.0
    seed: int = 0
    resume: bool = False
    max_candidate_checks: int = 16
    label: str = ""
    extra_meta: dict[str, Any] = field(default_factory=dict)


def request_seed(problem_id: str, sample: int, seed: int) -> int:
    """The same seed for a problem's sample in every cell: cells are compared on common draws."""
    digest = hashlib.sha256(f"{seed}:{problem_id}:{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


async def preflight(config: RunConfig, cells: Sequence[Cell], problems: Sequence[Problem]) -> None:
    """Fail with a clear message before any load is sent."""
    if not cells:
        raise PreflightError("the grid is empty: give at least one effort and one strategy")
    if not problems:
        raise PreflightError("no problems to run: check --datasets, --problems and --split")
    if config.concurrency < 1:
        raise PreflightError(f"concurrency must be >= 1, got {config.concurrency}")
    if config.rate is not None and config.rate <= 0:
        raise PreflightError(f"rate must be > 0 requests/s, got {config.rate}")
    if config.samples < 1:
        raise PreflightError(f"samples must be >= 1, got {config.samples}")
    client = openai.AsyncOpenAI(base_url=config.base_url, api_key=config.api_key, timeout=10.0, max_retries=0)
    try:
        models = [m.id async for m in client.models.list()]
    except openai.APIConnectionError as exc:
        raise PreflightError(
            f"gateway unreachable at {config.base_url} ({exc.__cause__ or exc}); start it with `make run`"
        ) from exc
    except openai.APIStatusError as exc:
        raise PreflightError(f"gateway at {config.base_url} answered GET /models with {exc.status_code}") from exc
    finally:
        await client.close()
    if config.model not in models:
        raise PreflightError(f"model {config.model!r} is not served by the gateway; it serves: {', '.join(models)}")


def git_revision() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _plan(problems: Sequence[Problem], cells: Sequence[Cell], config: RunConfig) -> list[tuple[Problem, Cell, int]]:
    """All requests, interleaved (problems outer, cells inner) and shuffled with the run seed so
    no cell is systematically measured under different load than another."""
    jobs = [(p, c, s) for p in problems for s in range(config.samples) for c in cells]
    random.Random(config.seed).shuffle(jobs)
    if config.resume:
        done = done_keys(config.out)
        jobs = [(p, c, s) for p, c, s in jobs if (p.id, c.effort, c.label, s) not in done]
    return jobs


def _verdict(value: Any) -> str:
    """``passed``/``failed`` (with the verifier and score) from the response's verdict object."""
    if not isinstance(value, dict):
        return ""
    state = "passed" if value.get("passed") else "failed"
    return f"{state} {value.get('verifier', '')} {float(value.get('score') or 0.0):.3f}".strip()


async def _record(
    problem: Problem, cell: Cell, sample: int, seed: int, reply: Reply, trace: dict[str, Any] | None,
    config: RunConfig, run_id: str, runner: CodeRunner | None,
) -> RequestRecord:  # fmt: skip
    ext = reply.ext
    record = RequestRecord(
        run_id=run_id,
        problem_id=problem.id,
        dataset=problem.dataset,
        level=problem.level,
        split=split_name(split_of(problem.id)),
        sample=sample,
        effort_requested=cell.effort,
        strategy_pinned=cell.label,
        outcome="error",
        effort_applied=str(ext.get("effort_applied") or ""),
        strategy=str(ext.get("strategy") or ""),
        n=int(ext.get("candidates_generated") or ext.get("n") or 0),
        difficulty_bin=str(ext.get("difficulty_bin") or ""),
        difficulty=float(ext["difficulty"]) if isinstance(ext.get("difficulty"), int | float) else None,
        termination=str(ext.get("termination") or ""),
        verifier_verdict=_verdict(ext.get("verifier_verdict")),
        finish_reason=reply.finish_reason,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        reasoning_tokens=reply.reasoning_tokens,
        cached_tokens=reply.cached_tokens,
        ttft_s=reply.ttft_s,
        ttfa_s=reply.ttfa_s,
        latency_s=reply.latency_s,
        started_at=reply.started_at,
        trace_id=str(ext.get("trace_id") or ""),
        seed=seed,
        error=reply.error,
        error_kind=reply.error_kind,
        budget_used=dict(ext.get("budget_used") or {}),
    )
    if reply.error:
        return record
    if not reply.text.strip() and record.termination in GAVE_UP:
        # The search ran out of time or failed and returned nothing: an infrastructure
        # outcome, not a wrong answer (PRIMER §2).
        record.error, record.error_kind = f"search ended by {record.termination} without an answer", "termination"
        return record
    verdict = await check(problem, reply.text, runner)
    record.answer = verdict.answer
    if verdict.correct is None:
        record.error, record.error_kind = verdict.error, "check"
        return record
    record.correct = verdict.correct
    record.outcome = "correct" if verdict.correct else "wrong"
    if trace is not None:
        for text in candidate_texts(trace)[: config.max_candidate_checks]:
            v = await check(problem, text, runner)
            if v.correct is not None:
                record.candidates.append((v.answer, v.correct))
    return record


async def run(
    config: RunConfig, cells: Sequence[Cell], problems: Sequence[Problem], runner: CodeRunner | None = None
) -> Path:
    """Run the grid; returns the run directory. Safe to interrupt: records are already on disk."""
    await preflight(config, cells, problems)
    run_id = config.label or time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    jobs = _plan(problems, cells, config)
    meta: dict[str, Any] = {
        "run_id": run_id,
        "model": config.model,
        "base_url": config.base_url,
        "grid": [{"effort": c.effort, "strategy": c.label or "auto"} for c in cells],
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items() if k != "api_key"},
        "problems": len(problems),
        "datasets": sorted({p.dataset for p in problems}),
        "levels": sorted({p.level for p in problems}),
        "requests_planned": len(jobs),
        "git": git_revision(),
        "provenance": provenance(config.model),
        "started_at": time.time(),
        "finished": False,
        **config.extra_meta,
    }
    write_run_meta(config.out, meta)
    write_problems(config.out, problems)
    client = openai.AsyncOpenAI(
        base_url=config.base_url, api_key=config.api_key, timeout=config.request_timeout_s, max_retries=0
    )
    http = httpx.AsyncClient(timeout=30.0, headers={"Authorization": f"Bearer {config.api_key}"})
    writer = RecordWriter(config.out)
    bar = tqdm(total=len(jobs), desc=f"loadtest {config.model}", unit="req", dynamic_ncols=True)
    counts = {"correct": 0, "wrong": 0, "error": 0}
    queue: asyncio.Queue[tuple[Problem, Cell, int]] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)

    async def one(problem: Problem, cell: Cell, sample: int) -> None:
        seed = request_seed(problem.id, sample, config.seed)
        kwargs = request_kwargs(
            config.model,
            problem.messages(),
            cell,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            seed=seed,
        )
        reply = await send(client, kwargs, stream=config.stream)
        trace_id = str(reply.ext.get("trace_id") or "")
        trace = await fetch_trace(http, config.base_url, trace_id) if config.fetch_traces and trace_id else None
        record = await _record(problem, cell, sample, seed, reply, trace, config, run_id, runner)
        writer.write(record)
        counts[record.outcome] += 1
        bar.update(1)
        bar.set_postfix(counts, refresh=False)

    async def closed_loop_worker() -> None:
        while not queue.empty():
            await one(*queue.get_nowait())

    async def open_loop() -> None:
        rng = random.Random(config.seed)
        tasks: set[asyncio.Task[None]] = set()
        try:
            while not queue.empty():
                task = asyncio.create_task(one(*queue.get_nowait()))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                await asyncio.sleep(rng.expovariate(config.rate or 1.0))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    interrupted = False

    def on_signal() -> None:
        nonlocal interrupted
        interrupted = True
        if main is not None:
            main.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, on_signal)
    try:
        if config.rate is not None:
            await open_loop()
        else:
            await asyncio.gather(*(closed_loop_worker() for _ in range(config.concurrency)))
    except (asyncio.CancelledError, KeyboardInterrupt):
        interrupted = True
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)
        bar.close()
        writer.close()
        await client.close()
        await http.aclose()
        meta.update(finished=not interrupted, interrupted=interrupted, ended_at=time.time(), recorded=writer.count)
        meta["provenance"]["load_average_end"] = load_average()
        write_run_meta(config.out, meta)
    if interrupted:
        raise KeyboardInterrupt(f"interrupted; {writer.count} records kept in {config.out}")
    return config.out
