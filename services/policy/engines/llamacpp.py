"""The embedded llama.cpp engine: n candidates of one prompt share one prompt evaluation.

One llama context holds a unified KV cache with several sequences. A request's prompt is
decoded once on sequence 0; each candidate's sequence is a ``llama_memory_seq_cp`` of it
(cells are shared, not copied), and then every live candidate advances one token per
``llama_decode`` batch. Candidates that do not fit in the cache at once run in waves from the
same evaluated prompt. Sequence 0 keeps the last prompt between requests, so a request that
extends it (step-level search, a shared system prompt) decodes only the new suffix.

Requests are serialized on the context: one decodes while the others wait in this engine's
queue (counted as waiting). Decoding runs in a worker thread that checks a cancel flag every
step, so a cancelled RPC stops generating at the next token and frees its sequences.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# llama.cpp's CPU backend runs on OpenMP, whose idle workers spin by default. Inside a service
# process (gRPC threads, an event loop, a decode thread) on few, shared cores those spinning
# threads starve the ones doing work: measured 60-100x slower generation. libgomp reads this
# when it is loaded, i.e. on the import below, so it is set first (an explicit value wins).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from services.common.errors import InvalidArgument
from services.policy.engines.base import (
    Completion,
    ContinuationScore,
    Engine,
    EngineStats,
    FinishReason,
    Generation,
    Prompt,
    Sampling,
    Scoring,
    StreamDelta,
    TokenLogprob,
)
from services.policy.engines.llamacpp_grammar import CandidateSampler, check_grammar
from services.policy.engines.llamacpp_sampling import Logits, StopScanner, log_softmax, top_k_ids
from services.policy.engines.tool_prompt import GrammarPlan, request_grammar, template_inputs, template_supports_tools
from services.policy.models import gguf_path, model_id
from services.policy.settings import PolicySettings

log = logging.getLogger(__name__)

#: used when a GGUF carries no chat template
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

Emit = Callable[[StreamDelta], None]


class DecodeError(RuntimeError):
    """llama_decode failed (e.g. no free KV cells); the cache is reset."""


@dataclass
class _Candidate:
    index: int
    seed: int
    scanner: StopScanner
    sampler: CandidateSampler | None = None
    seq: int = -1
    #: last sampled token, and its entry in the last decoded batch
    token: int = -1
    out: int = -1
    n_tokens: int = 0
    finish: FinishReason | None = None
    logprobs: list[TokenLogprob] = field(default_factory=list)


class LlamaCppEngine(Engine):
    """A GGUF model in one llama.cpp context with ``n_seq_max`` sequences."""

    kind = "llamacpp"

    def __init__(self, path: Path, model_name: str, settings: PolicySettings) -> None:
        logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # llama.cpp's load chatter
        llama_cpp.llama_backend_init()
        mparams = llama_cpp.llama_model_default_params()
        self._model = llama_cpp.llama_model_load_from_file(str(path).encode(), mparams)
        if not self._model:
            raise ValueError(f"llama.cpp could not load {path}")
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        self.model_id = model_name
        self.max_context = min(settings.n_ctx, int(llama_cpp.llama_model_n_ctx_train(self._model)))
        self.n_batch = settings.n_batch
        self.n_seq_max = min(settings.max_n + 1, int(llama_cpp.llama_max_parallel_sequences()))
        threads = settings.n_threads or len(os.sched_getaffinity(0)) or 1
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = max(settings.kv_cache_tokens, settings.n_ctx)
        cparams.n_batch = cparams.n_ubatch = settings.n_batch
        cparams.n_seq_max = self.n_seq_max
        cparams.kv_unified = True
        cparams.n_threads = cparams.n_threads_batch = threads
        self._ctx = llama_cpp.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            raise ValueError("llama.cpp could not create a context")
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self.kv_cells = int(llama_cpp.llama_n_ctx(self._ctx))
        self._batch = llama_cpp.llama_batch_init(max(self.n_batch, self.n_seq_max), 0, 1)
        self._pieces: dict[int, bytes] = {}
        self._chat = self._chat_formatter()
        self._bos_text = self._token_text(llama_cpp.llama_vocab_bos(self._vocab))
        self._add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        # prompt kept on sequence 0 between requests, and its last-position logits
        self._cached: list[int] = []
        self._prompt_logits: Logits = np.zeros(self.n_vocab, dtype=np.float32)
        self._prompt_idx = 0
        # queue and statistics (written by the worker thread, read by stats())
        self._lock = asyncio.Lock()
        self._waiting = 0
        self._running = 0
        self._used_cells = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.aborted = 0
        self._closed = False

    # ------------------------------------------------------------------ rendering, tokens

    def _metadata(self, key: str) -> str:
        buf = ctypes.create_string_buffer(1 << 16)
        n = llama_cpp.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf))
        if n < 0:
            return ""
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            llama_cpp.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", errors="replace")

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return (llama_cpp.llama_vocab_get_text(self._vocab, token) or b"").decode("utf-8", errors="replace")

    def _chat_formatter(self) -> Jinja2ChatFormatter:
        template = self._metadata("tokenizer.chat_template") or CHATML
        self._native_tools = template_supports_tools(template)
        eos = self._token_text(llama_cpp.llama_vocab_eos(self._vocab))
        bos = self._token_text(llama_cpp.llama_vocab_bos(self._vocab))
        return Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos, add_generation_prompt=True)

    def render(self, prompt: Prompt) -> str:
        """The text the model sees: chat template (with generation prompt and the tools) or
        raw text, then the assistant prefix verbatim."""
        if prompt.messages:
            messages, tools = template_inputs(prompt, self._native_tools)
            text = self._chat(messages=messages, tools=tools).prompt  # type: ignore[arg-type]
        else:
            text = prompt.text
        return text + prompt.assistant_prefix

    def _tokenize_text(self, text: str, add_bos: bool, special: bool) -> list[int]:
        raw = text.encode("utf-8")
        capacity = len(raw) + 8
        buf = (llama_cpp.llama_token * capacity)()
        n = llama_cpp.llama_tokenize(self._vocab, raw, len(raw), buf, capacity, add_bos, special)
        if n < 0:
            capacity = -n
            buf = (llama_cpp.llama_token * capacity)()
            n = llama_cpp.llama_tokenize(self._vocab, raw, len(raw), buf, capacity, add_bos, special)
        return list(buf[:n])

    def prompt_tokens(self, prompt: Prompt) -> list[int]:
        text = self.render(prompt)
        add_bos = self._add_bos and not (self._bos_text and text.startswith(self._bos_text))
        tokens = self._tokenize_text(text, add_bos=add_bos, special=True)
        if not tokens:
            raise InvalidArgument("the prompt renders to no tokens", field="input")
        return tokens

    def _piece(self, token: int) -> bytes:
        piece = self._pieces.get(token)
        if piece is None:
            buf = ctypes.create_string_buffer(64)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
            piece = buf.raw[:n]
            self._pieces[token] = piece
        return piece

    def _token_logprob(self, lp: np.ndarray, token: int, top: int) -> TokenLogprob:
        alternatives = [
            (self._piece(int(t)).decode("utf-8", errors="replace"), int(t), float(lp[t])) for t in top_k_ids(lp, top)
        ]
        text = self._piece(token).decode("utf-8", errors="replace")
        return TokenLogprob(token=text, token_id=token, logprob=float(lp[token]), top=alternatives)

    # ------------------------------------------------------------------ llama.cpp calls (worker thread)

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> None:
        """Decode ``(token, pos, seq, want_logits)`` entries as one batch."""
        b = self._batch
        for i, (token, pos, seq, want) in enumerate(entries):
            b.token[i] = token
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = want
        b.n_tokens = len(entries)
        rc = llama_cpp.llama_decode(self._ctx, b)
        if rc != 0:
            self._reset_cache()
            raise DecodeError(f"llama_decode returned {rc} (KV cache full or internal error)")

    def _logits(self, i: int) -> Logits:
        """A view of batch entry ``i``'s logits, valid until the next decode."""
        ptr = llama_cpp.llama_get_logits_ith(self._ctx, i)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def _reset_cache(self) -> None:
        llama_cpp.llama_memory_clear(self._mem, True)
        self._cached = []

    def _eval_prompt(self, tokens: list[int], cancel: threading.Event) -> int:
        """Decode ``tokens`` on sequence 0, reusing the common prefix already there; returns the
        number of prompt tokens served from the cache. Leaves the last position's logits in
        ``self._prompt_logits``."""
        common = 0
        for a, b in zip(self._cached, tokens, strict=False):
            if a != b:
                break
            common += 1
        common = min(common, len(tokens) - 1)  # re-decode at least one token to get its logits
        llama_cpp.llama_memory_seq_rm(self._mem, 0, common, -1)
        self._cached = tokens[:common]
        for start in range(common, len(tokens) - 1, self.n_batch):
            if cancel.is_set():
                return common
            chunk = tokens[start : min(start + self.n_batch, len(tokens) - 1)]
            self._decode([(t, start + i, 0, False) for i, t in enumerate(chunk)])
            self._cached = tokens[: start + len(chunk)]
        # The last prompt token always goes alone: its logits (every candidate's first draw) then
        # come from the same kernel whether or not the rest of the prompt was cached.
        self._decode([(tokens[-1], len(tokens) - 1, 0, True)])
        self._cached = list(tokens)
        self._prompt_idx = 0
        self._prompt_logits = self._logits(0).copy()
        self.prefix_queries += len(tokens)
        self.prefix_hits += common
        return common

    def _measure_cells(self, seqs: Iterator[int]) -> None:
        """KV cells held by the running request, read from llama.cpp's per-sequence positions:
        the shared prompt cells plus each candidate's own cells past the prompt."""
        base = int(llama_cpp.llama_memory_seq_pos_max(self._mem, 0)) + 1
        own = sum(max(0, int(llama_cpp.llama_memory_seq_pos_max(self._mem, s)) + 1 - base) for s in seqs)
        self._used_cells = base + own

    def _run(
        self,
        tokens: list[int],
        sampling: Sampling,
        cancel: threading.Event,
        emit: Emit | None,
        grammar: GrammarPlan | None = None,
    ) -> Generation:
        """Generate all candidates of one request (worker thread)."""
        try:
            cached = self._eval_prompt(tokens, cancel)
            return self._generate_candidates(tokens, cached, sampling, cancel, emit, grammar)
        finally:
            for seq in range(1, self.n_seq_max):
                llama_cpp.llama_memory_seq_rm(self._mem, seq, -1, -1)
            self._used_cells = 0
            if cancel.is_set():
                self.aborted += 1

    def _generate_candidates(
        self,
        tokens: list[int],
        cached: int,
        sampling: Sampling,
        cancel: threading.Event,
        emit: Emit | None,
        grammar: GrammarPlan | None = None,
    ) -> Generation:
        n_prompt = len(tokens)
        cands = [_Candidate(i, seed, StopScanner(sampling.stop)) for i, seed in enumerate(sampling.seeds)]
        try:
            # every candidate's first token comes from the one prompt evaluation: draw them all
            # now, while its logits are still the context's latest output
            prompt_lp = log_softmax(self._prompt_logits) if sampling.logprobs else None
            for c in cands:
                c.sampler = CandidateSampler(self._vocab, c.seed, sampling, grammar, self.n_vocab)
                c.token = c.sampler.sample(self._ctx, self._prompt_idx)
            self._decode_candidates(cands, n_prompt, prompt_lp, sampling, cancel, emit)
        finally:
            for c in cands:
                if c.sampler is not None:
                    c.sampler.free()
        for c in cands:
            if c.finish is None:
                c.finish = "abort"
                c.scanner.finish()
                if emit is not None:
                    emit(StreamDelta(c.index, c.scanner.pending(final=True), "abort", c.n_tokens))
        completions = [
            Completion(c.index, c.scanner.text, c.finish or "abort", c.n_tokens, c.seed, c.logprobs) for c in cands
        ]
        return Generation(completions=completions, prompt_tokens=n_prompt, cached_tokens=cached)

    def _decode_candidates(
        self,
        cands: list[_Candidate],
        n_prompt: int,
        prompt_lp: npt.NDArray[np.float64] | None,
        sampling: Sampling,
        cancel: threading.Event,
        emit: Emit | None,
    ) -> None:
        """Advance all live candidates one token per ``llama_decode``; admit waiting ones as
        sequences free up (a wave never reserves more cells than the cache has)."""
        pending = deque(cands)
        free = list(range(self.n_seq_max - 1, 0, -1))
        fits = (self.kv_cells - n_prompt) // max(1, sampling.max_tokens)
        max_active = max(1, min(len(free), fits))
        active: list[_Candidate] = []
        while pending or active:
            if cancel.is_set():
                return
            while pending and len(active) < max_active:
                c = pending.popleft()
                c.seq = free.pop()
                llama_cpp.llama_memory_seq_cp(self._mem, 0, c.seq, -1, -1)
                active.append(c)
            entries: list[tuple[int, int, int, bool]] = []
            stepping: list[_Candidate] = []
            for c in active:
                if c.n_tokens > 0 and c.sampler is not None:  # the first token came from the prompt's logits
                    c.token = c.sampler.sample(self._ctx, c.out)
                lp = prompt_lp if c.n_tokens == 0 else None
                if sampling.logprobs and lp is None:
                    lp = log_softmax(self._logits(c.out))
                self._step(c, lp, sampling, emit)
                if c.finish is None:
                    c.out = len(entries)
                    entries.append((c.token, n_prompt + c.n_tokens - 1, c.seq, True))
                    stepping.append(c)
                else:
                    llama_cpp.llama_memory_seq_rm(self._mem, c.seq, -1, -1)
                    free.append(c.seq)
            active = stepping
            if entries:
                self._decode(entries)
                self._measure_cells(c.seq for c in active)

    def _step(self, c: _Candidate, lp: npt.NDArray[np.float64] | None, sampling: Sampling, emit: Emit | None) -> None:
        """Take candidate ``c``'s sampled token: text, log-probability, finish reason."""
        token = c.token
        c.n_tokens += 1
        if lp is not None:
            c.logprobs.append(self._token_logprob(lp, token, sampling.top_logprobs))
        if llama_cpp.llama_vocab_is_eog(self._vocab, token):
            c.finish = "stop"
            c.scanner.finish()
        elif c.scanner.feed(self._piece(token)):
            c.finish = "stop"
        elif c.n_tokens >= sampling.max_tokens:
            c.finish = "length"
            c.scanner.finish()
        if emit is not None:
            text = c.scanner.pending(final=c.finish is not None)
            if text or c.finish is not None:
                emit(StreamDelta(c.index, text, c.finish, c.n_tokens))

    def _score(
        self, tokens: list[int], conts: list[list[int]], top: int, cancel: threading.Event
    ) -> list[ContinuationScore]:
        """Log-probability of each continuation's tokens after the prompt (worker thread)."""
        self._eval_prompt(tokens, cancel)
        n_prompt = len(tokens)
        scores: list[ContinuationScore] = []
        try:
            for cont in conts:
                if cancel.is_set():
                    break
                llama_cpp.llama_memory_seq_cp(self._mem, 0, 1, -1, -1)
                prev = self._prompt_logits
                out: list[TokenLogprob] = []
                for start in range(0, len(cont), self.n_batch):
                    chunk = cont[start : start + self.n_batch]
                    self._decode([(t, n_prompt + start + i, 1, True) for i, t in enumerate(chunk)])
                    for i, token in enumerate(chunk):
                        out.append(self._token_logprob(log_softmax(prev), token, top))
                        prev = self._logits(i)
                    prev = prev.copy()
                llama_cpp.llama_memory_seq_rm(self._mem, 1, -1, -1)
                scores.append(ContinuationScore(tokens=out))
        finally:
            llama_cpp.llama_memory_seq_rm(self._mem, 1, -1, -1)
            if cancel.is_set():
                self.aborted += 1
        return scores

    # ------------------------------------------------------------------ async interface

    @contextlib.asynccontextmanager
    async def _turn(self) -> AsyncIterator[None]:
        """Wait for the context (counted as waiting), then hold it (counted as running)."""
        self._waiting += 1
        try:
            await self._lock.acquire()
        finally:
            self._waiting -= 1
        self._running += 1
        try:
            yield
        finally:
            self._running -= 1
            self._lock.release()

    async def _in_worker(self, fn: Callable[[threading.Event], Any]) -> Any:
        """Run ``fn(cancel)`` in a thread; if this coroutine is cancelled, set the flag and wait
        for the thread to stop before letting the cancellation through, so the context is free
        (no orphaned decode) by the time the caller sees the error."""
        cancel = threading.Event()
        fut = asyncio.ensure_future(asyncio.to_thread(fn, cancel))
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancel.set()
            while not fut.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({fut})
            raise

    def grammar(self, prompt: Prompt, sampling: Sampling) -> GrammarPlan | None:
        """The request's grammar (tools, JSON constraint), compiled once to fail early."""
        plan = request_grammar(prompt, sampling.constraint)
        check_grammar(self._vocab, plan)
        return plan

    async def generate(self, prompt: Prompt, sampling: Sampling, request_id: str) -> Generation:
        tokens = self.prompt_tokens(prompt)
        plan = self.grammar(prompt, sampling)
        async with self._turn():
            result: Generation = await self._in_worker(lambda cancel: self._run(tokens, sampling, cancel, None, plan))
            return result

    async def generate_stream(self, prompt: Prompt, sampling: Sampling, request_id: str) -> AsyncIterator[StreamDelta]:
        tokens = self.prompt_tokens(prompt)
        plan = self.grammar(prompt, sampling)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[StreamDelta | None] = asyncio.Queue()

        def emit(delta: StreamDelta) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, delta)

        async with self._turn():
            cancel = threading.Event()
            fut = asyncio.ensure_future(asyncio.to_thread(self._run, tokens, sampling, cancel, emit, plan))
            fut.add_done_callback(lambda _: loop.call_soon(queue.put_nowait, None))
            try:
                while (delta := await queue.get()) is not None:
                    yield delta
                fut.result()
            finally:
                if not fut.done():
                    cancel.set()
                    while not fut.done():
                        with contextlib.suppress(asyncio.CancelledError):
                            await asyncio.wait({fut})

    async def score(self, prompt: Prompt, continuations: list[str], top_logprobs: int, request_id: str) -> Scoring:
        tokens = self.prompt_tokens(prompt)
        conts = [self._tokenize_text(c, add_bos=False, special=False) for c in continuations]
        for i, cont in enumerate(conts):
            if not cont:
                raise InvalidArgument(f"continuation {i} has no tokens", field=f"continuations[{i}]")
            if len(tokens) + len(cont) > self.max_context:
                raise InvalidArgument(
                    f"prompt ({len(tokens)} tokens) plus continuation {i} ({len(cont)} tokens) exceeds the "
                    f"context window of {self.max_context}",
                    field=f"continuations[{i}]",
                )
        async with self._turn():
            scores: list[ContinuationScore] = await self._in_worker(
                lambda cancel: self._score(tokens, conts, top_logprobs, cancel)
            )
        return Scoring(scores=scores, prompt_tokens=len(tokens))

    async def tokenize(self, prompt: Prompt) -> list[int]:
        return self.prompt_tokens(prompt)

    async def stats(self) -> EngineStats:
        return EngineStats(
            kv_cache_utilization=min(1.0, self._used_cells / self.kv_cells),
            running_requests=self._running,
            waiting_requests=self._waiting,
            prefix_cache_queries=self.prefix_queries,
            prefix_cache_hits=self.prefix_hits,
        )

    async def close(self) -> None:
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            llama_cpp.llama_batch_free(self._batch)
            llama_cpp.llama_free(self._ctx)
            llama_cpp.llama_model_free(self._model)


async def create_engine(settings: PolicySettings) -> LlamaCppEngine:
    """Resolve the model (assembling it if needed) and load it off the event loop."""
    path = gguf_path(settings.model, Path(settings.models_dir))
    engine = await asyncio.to_thread(LlamaCppEngine, path, model_id(settings.model), settings)
    log.info("llama.cpp engine ready", extra={"model": engine.model_id, "path": str(path), "kv_cells": engine.kv_cells})
    return engine
