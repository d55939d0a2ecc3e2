"""What every live run through the gateway shares (``validate``, ``live``, ``routed``): its
settings, the client, the shared model lock per chunk, and the loop that sends pending requests
in chunks and writes each chunk's records whole, even when interrupted.

Without ``base_url`` a run starts its own ``ttc stack`` (:mod:`~.stack`) and takes the model
lock (:func:`~.services.model_lock`) per chunk; with one, the gateway is someone else's model and
no lock is taken unless ``lock`` says so (``False``: the caller holds it, under ``flock``).
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import openai

from calibration.lib.grading import CodeGrader
from calibration.lib.records import REPORT, LiveRunError
from calibration.lib.services import model_lock

T = TypeVar("T")


@dataclass(kw_only=True)
class GatewayRun:
    """A run's settings and its gateway; subclasses plan the requests, send one batch and write
    a chunk (:meth:`send_chunks` does the rest)."""

    model: str
    pools_dir: Path
    out: Path
    base_url: str = ""
    hours: float = 0.0
    chunk_size: int = 5
    seed: int = 0
    timeout_s: float = 1800.0
    retry_errors: bool = False
    api_key: str = "none"
    # Take the shared model lock per chunk; None: only when this run starts its own stack (a
    # gateway elsewhere is someone else's model), False: the caller holds it (under ``flock``).
    lock: bool | None = None
    grader: CodeGrader = field(default_factory=CodeGrader)
    _stack: Any = None
    _url: str = ""

    def log(self, message: str) -> None:
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}", flush=True)

    def client(self, url: str) -> openai.AsyncOpenAI:
        """The official SDK's client on ``url``: the run's timeout per request, no retries (a
        failure is recorded as such)."""
        return openai.AsyncOpenAI(base_url=url, api_key=self.api_key, timeout=self.timeout_s, max_retries=0)

    def chunk_lock(self) -> AbstractContextManager[float]:
        """The model lock for one chunk, or none (see ``lock``); yields the seconds waited."""
        locked = self.lock if self.lock is not None else not self.base_url
        return model_lock() if locked else nullcontext(0.0)

    async def send_chunks(
        self,
        todo: Sequence[T],
        per_chunk: int,
        seq: int,
        send: Callable[[Sequence[T], float | None, list[dict[str, Any]]], Awaitable[None]],
        write: Callable[[int, list[dict[str, Any]], float, float], Path],
    ) -> int:
        """Send ``todo`` in chunks of ``per_chunk``, each inside :meth:`chunk_lock`:
        ``send(batch, deadline, done)`` appends each finished record to ``done``, and
        ``write(seq, done, wall_s, lock_wait_s)`` writes them as chunk ``seq``, also when the
        chunk was interrupted. Stops at ``hours`` (a chunk cut short ends the run); the grader
        and a stack this run started are stopped at the end. Returns how many were sent."""
        deadline = time.monotonic() + self.hours * 3600 if self.hours else None
        sent = 0
        try:
            for start in range(0, len(todo), per_chunk):
                if deadline is not None and time.monotonic() > deadline:
                    self.log("time limit reached")
                    break
                batch = todo[start : start + per_chunk]
                done: list[dict[str, Any]] = []
                with self.chunk_lock() as waited:
                    began = time.monotonic()
                    try:
                        await send(batch, deadline, done)
                    finally:  # an interrupted chunk keeps the requests it finished
                        if done:
                            wall = time.monotonic() - began
                            path = write(seq, done, wall, waited)
                            seq, sent = seq + 1, sent + len(done)
                            errors = sum(1 for r in done if r["error"])
                            self.log(
                                f"{path.name}: {len(done)} requests in {wall:.0f}s (waited {waited:.0f}s for the "
                                f"lock), {errors} infrastructure error(s); {sent}/{len(todo)} this run"
                            )
                if len(done) < len(batch):
                    self.log("time limit reached inside a chunk: the rest is sent on the next run")
                    break
        finally:
            self.grader.stop()
            if self._stack is not None:
                self._stack.stop()
        return sent


def run_then_report(run: GatewayRun, send: Callable[[], None], write_report: Callable[[], dict[str, Any]]) -> int:
    """A live-run command's course: ``send()``, then ``write_report()``, whose Markdown and path are
    printed; a :class:`~.records.LiveRunError` is printed instead (exit status 2). SIGTERM unwinds
    through ``finally``, so the chunk being sent is written and a stack this run started stops."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        send()
        body = write_report()
    except LiveRunError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(body["markdown"])
    print(f"report: {run.out / REPORT}")
    return 0
