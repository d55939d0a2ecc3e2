"""Continuous batching for the llama.cpp engine: one decode loop, on its own thread, over the
sequences of every request in flight (as llama.cpp's own server does with its slots).

Each turn of the loop:

1. reads what the last ``llama_decode`` produced for each request (a prompt's last logits,
   which every candidate of that request draws its first token from; a scoring's logits);
2. drops cancelled requests (a cancelled or timed-out RPC sets its task's flag; its
   sequences are freed at the next turn while the others keep decoding);
3. samples the next token of every live candidate (each with its own seeded llama.cpp
   sampler chain) and puts them in the next batch;
4. admits waiting requests, oldest first, while their prompt and first candidate's KV cells
   and sequence ids are free (``slots.py``); a new request starts from a copy
   (``llama_memory_seq_cp``: shared cells, no compute) of the longest prefix of its prompt
   that any sequence holds: a request in flight or a retained prompt of a finished one (a
   request whose prefix another request is still prefilling waits for it, so requests that
   arrive together with a shared prefix decode it once);
5. fills the rest of the batch, up to ``n_batch`` tokens, with prompt chunks of the requests
   still prefilling, oldest first; then decodes it all at once.

With ``parallel`` set to 1 one request runs at a time (the serialized engine of before). A
request that runs alone is decoded in exactly the batches of the serialized engine, so it
gives the same tokens per seed; see docs/policy-engines.md for the tolerance under load.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import AsyncGenerator, Callable
from typing import Any

import llama_cpp
import numpy as np

from services.policy.engines.base import StreamDelta
from services.policy.engines.llamacpp.protocol import Emit, Entry, Occupant, Vocab
from services.policy.engines.llamacpp.sampling import Logits
from services.policy.engines.llamacpp.slots import Slots
from services.policy.engines.llamacpp.tasks import GenTask, Task
from services.policy.engines.stream_coalesce import DeltaMailbox, coalesce

log = logging.getLogger(__name__)

#: a waiting request whose prompt shares at least this many more tokens with a prompt still being
#: prefilled waits for it (then copies those cells) instead of computing them a second time
SHARE_WAIT = 16
#: prompt tokens a turn feeds even when the candidates' tokens fill ``n_batch`` already, so a
#: new request is never starved by long-running ones
MIN_PREFILL = 32


class DecodeError(RuntimeError):
    """llama_decode failed; the requests in flight fail and the cache is cleared."""


class EngineClosed(RuntimeError):
    """The engine was closed while the request waited or ran."""


class BatchLoop:
    """The decode loop of one llama.cpp context. ``submit`` from any thread; every llama.cpp
    call happens on the loop's own thread."""

    def __init__(
        self,
        ctx: Any,
        vocab: Vocab,
        *,
        n_vocab: int,
        kv_cells: int,
        n_seqs: int,
        n_batch: int,
        parallel: int,
        retained_prompts: int,
    ) -> None:
        self.ctx = ctx
        self.mem = llama_cpp.llama_get_memory(ctx)
        self.vocab = vocab
        self.n_vocab = n_vocab
        self.kv_cells = kv_cells
        self.n_seqs = n_seqs
        self.n_batch = n_batch
        self.parallel = parallel
        self.retained_prompts = retained_prompts
        self.batch = llama_cpp.llama_batch_init(n_batch + n_seqs, 0, 1)
        self.slots = Slots(kv_cells, n_seqs, retained_prompts)
        self.waiting: deque[Task] = deque()
        self.running: list[Task] = []
        self._inbox: list[Task] = []
        self._cv = threading.Condition()
        self._closing = False
        # statistics (written here, read by the engine's stats())
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.aborted = 0
        self.batches = 0
        self.peak_batch_requests = 0  # the most requests one decode step has advanced together
        # (running requests, KV cells they hold), replaced whole at the end of each turn so a
        # reader on another thread never sees a request gone while its cells are still counted
        self._occupancy: tuple[int, int] = (0, 0)
        self._thread = threading.Thread(target=self._run, name="llamacpp-batch", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ any thread

    def submit(self, task: Task) -> None:
        with self._cv:
            if self._closing:
                raise EngineClosed("the engine is closed")
            self._inbox.append(task)
            self._cv.notify()

    def wake(self) -> None:
        """Make the loop look at cancel flags now (it also does every turn)."""
        with self._cv:
            self._cv.notify()

    @property
    def n_waiting(self) -> int:
        return len(self._inbox) + len(self.waiting)

    @property
    def n_running(self) -> int:
        return self._occupancy[0]

    @property
    def used_cells(self) -> int:
        return self._occupancy[1]

    def close(self) -> None:
        with self._cv:
            self._closing = True
            self._cv.notify()
        self._thread.join()
        llama_cpp.llama_batch_free(self.batch)

    # ------------------------------------------------------------------ llama.cpp (loop thread)

    def logits(self, i: int) -> Logits:
        """A view of batch entry ``i``'s logits, valid until the next decode."""
        ptr = llama_cpp.llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def seq_cp(self, src: int, dst: int) -> None:
        """Sequence ``dst`` becomes a copy of ``src`` (shared cells, no compute)."""
        llama_cpp.llama_memory_seq_rm(self.mem, dst, -1, -1)
        llama_cpp.llama_memory_seq_cp(self.mem, src, dst, -1, -1)

    def seq_rm(self, seq: int, p0: int = -1) -> None:
        llama_cpp.llama_memory_seq_rm(self.mem, seq, p0, -1)

    def reserve(self, cells: int, seqs: int, force: bool = False, protect: int = -1) -> list[int] | None:
        """Sequence ids with ``cells`` KV cells reserved, or None when they must wait."""
        got = self.slots.reserve(cells, seqs, force=force, protect=protect)
        if got is None:
            return None
        ids, evicted = got
        for seq in evicted:
            self.seq_rm(seq)
        return ids

    def alone(self, task: Occupant) -> bool:
        return len(self.running) == 1 and self.running[0] is task

    def retire(self, task: Occupant) -> None:
        """``task`` is finished: its prompt stays cached on its sequence (or is evicted)."""
        for seq in self.slots.retire(task.seq, keep=task.fed):
            self.seq_rm(seq)
        if task.seq in self.slots.prompts:
            self.seq_rm(task.seq, task.fed)

    def _decode(self, entries: list[Entry]) -> None:
        b = self.batch
        for i, (token, pos, seq, want) in enumerate(entries):
            b.token[i] = token
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = want
        b.n_tokens = len(entries)
        rc = llama_cpp.llama_decode(self.ctx, b)
        if rc != 0:
            raise DecodeError(f"llama_decode returned {rc} (KV cache full or internal error)")
        self.batches += 1

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        while True:
            with self._cv:
                while not (self._inbox or self.waiting or self.running or self._closing):
                    self._cv.wait()
                if self._closing:
                    break
                self.waiting.extend(self._inbox)
                self._inbox.clear()
            try:
                self._turn()
            except Exception as exc:  # a failed decode (or a bug): fail what runs, keep serving
                log.exception("llama.cpp batch failed; failing the requests in flight")
                self._fail_running(exc if isinstance(exc, DecodeError) else DecodeError(str(exc)))
        closed = EngineClosed("the engine was closed")
        self._fail_running(closed)
        for task in [*self.waiting, *self._inbox]:
            task.resolve(closed)

    def _fail_running(self, exc: Exception) -> None:
        for task in self.running:
            task.resolve(exc)  # the first resolution wins; abort below only frees
            task.abort(self)
        self.running = []
        llama_cpp.llama_memory_clear(self.mem, True)
        self.slots = Slots(self.kv_cells, self.n_seqs, self.retained_prompts)
        self._occupancy = (0, 0)

    def _turn(self) -> None:
        for task in [t for t in self.waiting if t.cancel.is_set()]:
            self.waiting.remove(task)
            task.resolve(None)
        for task in self.running:
            task.collect(self)
        for task in [t for t in self.running if t.cancel.is_set()]:
            self.running.remove(task)
            task.abort(self)
            self.aborted += 1
        entries: list[Entry] = []
        advanced: set[int] = set()  # the tasks (by id) this step decodes tokens of
        for task in list(self.running):
            before = len(entries)
            task.advance(self, entries)
            if len(entries) > before:
                advanced.add(id(task))
            if task.done:
                self.running.remove(task)
        self._admit()
        budget = max(self.n_batch - len(entries), min(MIN_PREFILL, self.n_batch))
        for task in self.running:
            if budget <= 0:
                break
            fed = task.feed(self, entries, budget)
            budget -= fed
            if fed:
                advanced.add(id(task))
        if entries:
            self._decode(entries)
            self.peak_batch_requests = max(self.peak_batch_requests, len(advanced))
        elif self.running:  # every request waits for cells another one holds: don't spin
            with self._cv:
                self._cv.wait(0.001)
        for task in self.running:
            if task.seq in self.slots.prompts:
                self.slots.filled(task.seq, min(task.fed, task.n_prompt))
        self._occupancy = (len(self.running), sum(t.used_cells() for t in self.running))

    def _admit(self) -> None:
        """Start waiting requests, oldest first, while their cells and sequence ids are free."""
        while self.waiting and len(self.running) < self.parallel:
            task = self.waiting[0]
            if task.cancel.is_set():
                self.waiting.popleft()
                task.resolve(None)
                continue
            src, common = self.slots.best_prefix(task.tokens)
            if self.slots.coming_prefix(task.tokens) >= common + SHARE_WAIT:
                return  # requests that share a prompt prefix arrived together: decode it once
            ids = self.reserve(task.n_prompt + task.first_cells, 2, force=not self.running, protect=src)
            if ids is None:
                return
            self.waiting.popleft()
            task.seq, task.spare_seq = ids
            self.seq_rm(task.seq)
            if common > 0:
                llama_cpp.llama_memory_seq_cp(self.mem, src, task.seq, 0, common)
                self.slots.touch(src)
            self.slots.hold(task.seq, task.tokens, ready=common)
            task.admitted(common)
            self.prefix_queries += task.n_prompt
            self.prefix_hits += common
            self.running.append(task)


async def run_task(batch: BatchLoop, task: Task) -> Any:
    """Run ``task`` in the loop and return its result. If this coroutine is cancelled, the
    task's flag is set and the cancellation goes through only once the loop has freed the
    task's sequences (no orphaned decoding)."""
    batch.submit(task)
    try:
        return await asyncio.shield(task.future)
    except asyncio.CancelledError:
        task.cancel.set()
        batch.wake()
        while not task.future.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task.future})
        raise


async def stream_task(batch: BatchLoop, build: Callable[[Emit], GenTask]) -> AsyncGenerator[StreamDelta, None]:
    """Run the generation ``build(emit)`` and yield its deltas as they are decoded."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[list[StreamDelta] | None] = asyncio.Queue()
    mailbox = DeltaMailbox(loop.call_soon_threadsafe, queue.put_nowait)
    task = build(mailbox.put)
    # deltas and the result are handed over in order, so the end marker comes after every delta
    task.future.add_done_callback(lambda _: queue.put_nowait(None))
    batch.submit(task)
    try:
        while (ready := await queue.get()) is not None:
            ended = False
            while not queue.empty():  # everything already waiting goes out as one delta per candidate
                more = queue.get_nowait()
                if more is None:
                    ended = True
                    break
                ready.extend(more)
            for delta in coalesce(ready):
                yield delta
            if ended:
                break
        task.future.result()
    finally:
        if not task.future.done():
            task.cancel.set()
            batch.wake()
            while not task.future.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({task.future})
