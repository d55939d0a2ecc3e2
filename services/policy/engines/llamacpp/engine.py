"""The embedded llama.cpp engine: one context, continuous batching over every request.

One llama context holds a unified KV cache with many sequences. Every request in flight is
decoded by one loop on its own thread (``batch.py``): each turn advances every live
candidate of every request by one token and feeds prompt chunks of newly admitted requests
into the same ``llama_decode`` batch. A request's n candidates share one evaluation of its
prompt (each candidate's sequence is a ``llama_memory_seq_cp`` of it: cells shared, not
copied); a new request starts from a copy of the longest prefix of its prompt that any
sequence holds (a request in flight, or the retained prompt of a finished one), so step-level
search and shared system prompts decode only the new suffix. Requests wait (counted as
waiting) while the KV cells they need are not free (``slots.py``).

A cancelled or timed-out RPC sets its request's flag; the loop frees its sequences at the
next token while the other requests keep decoding. ``parallel_requests = 1`` gives back the
serialized engine (one request at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

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
    ContinuationScore,
    Engine,
    EngineStats,
    Generation,
    Prompt,
    Sampling,
    Scoring,
    Spent,
    StreamDelta,
    TokenLogprob,
)
from services.policy.engines.llamacpp.batch import BatchLoop, run_task, stream_task
from services.policy.engines.llamacpp.grammar import CandidateSampler, check_grammar
from services.policy.engines.llamacpp.protocol import Emit
from services.policy.engines.llamacpp.sampling import top_k_ids
from services.policy.engines.llamacpp.tasks import GenTask, ScoreTask
from services.policy.engines.tool_prompt import GrammarPlan, request_grammar, template_inputs, template_supports_tools
from services.policy.models import gguf_path, model_id
from services.policy.settings import PolicySettings

log = logging.getLogger(__name__)

#: used when a GGUF carries no chat template
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


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
        # sequences: every request's prompt and candidates, and retained prompts
        self.n_seq_max = int(llama_cpp.llama_max_parallel_sequences())
        threads = settings.n_threads or len(os.sched_getaffinity(0)) or 1
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = max(settings.kv_cache_tokens, settings.n_ctx)
        cparams.n_batch = settings.n_batch + self.n_seq_max  # a prompt chunk and every candidate's token
        cparams.n_ubatch = settings.n_batch
        cparams.n_seq_max = self.n_seq_max
        cparams.kv_unified = True
        cparams.n_threads = cparams.n_threads_batch = threads
        self._ctx = llama_cpp.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            raise ValueError("llama.cpp could not create a context")
        self.kv_cells = int(llama_cpp.llama_n_ctx(self._ctx))
        self._pieces: dict[int, bytes] = {}
        self._chat = self._chat_formatter()
        self._bos_text = self._token_text(llama_cpp.llama_vocab_bos(self._vocab))
        self._add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        self._batch = BatchLoop(
            self._ctx,
            self,
            n_vocab=self.n_vocab,
            kv_cells=self.kv_cells,
            n_seqs=self.n_seq_max,
            n_batch=self.n_batch,
            parallel=settings.parallel_requests,
            retained_prompts=settings.retained_prompts,
        )
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

    def piece(self, token: int) -> bytes:
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

    def token_logprob(self, lp: npt.NDArray[np.float64], token: int, top: int) -> TokenLogprob:
        alternatives = [
            (self.piece(int(t)).decode("utf-8", errors="replace"), int(t), float(lp[t])) for t in top_k_ids(lp, top)
        ]
        text = self.piece(token).decode("utf-8", errors="replace")
        return TokenLogprob(token=text, token_id=token, logprob=float(lp[token]), top=alternatives)

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    # ------------------------------------------------------------------ async interface

    def grammar(self, prompt: Prompt, sampling: Sampling) -> GrammarPlan | None:
        """The request's grammar (tools, JSON constraint), compiled once to fail early."""
        plan = request_grammar(prompt, sampling.constraint)
        check_grammar(self._vocab, plan)
        return plan

    def _task(self, prompt: Prompt, sampling: Sampling, spent: Spent | None, emit: Emit | None = None) -> GenTask:
        tokens = self.prompt_tokens(prompt)
        plan = self.grammar(prompt, sampling)

        def new_sampler(seed: int) -> CandidateSampler:
            return CandidateSampler(self._vocab, seed, sampling, plan, self.n_vocab)

        return GenTask(tokens, sampling, new_sampler, asyncio.get_running_loop(), emit, spent)

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> Generation:
        result: Generation = await run_task(self._batch, self._task(prompt, sampling, spent))
        return result

    async def generate_stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> AsyncIterator[StreamDelta]:
        self.prompt_tokens(prompt)  # bad input fails before the stream starts
        self.grammar(prompt, sampling)
        # Closed explicitly: closing this stream frees the request in the loop before it returns,
        # so ``spent`` is final by the time the caller counts it.
        deltas = stream_task(self._batch, lambda emit: self._task(prompt, sampling, spent, emit))
        async with contextlib.aclosing(deltas):
            async for delta in deltas:
                yield delta

    async def score(
        self, prompt: Prompt, continuations: list[str], top_logprobs: int, request_id: str, spent: Spent | None = None
    ) -> Scoring:
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
        task = ScoreTask(tokens, conts, top_logprobs, asyncio.get_running_loop(), spent)
        scores: list[ContinuationScore] = await run_task(self._batch, task)
        return Scoring(scores=scores, prompt_tokens=len(tokens))

    async def tokenize(self, prompt: Prompt) -> list[int]:
        return self.prompt_tokens(prompt)

    async def stats(self) -> EngineStats:
        b = self._batch
        return EngineStats(
            kv_cache_utilization=min(1.0, b.used_cells / self.kv_cells),
            running_requests=b.n_running,
            waiting_requests=b.n_waiting,
            prefix_cache_queries=b.prefix_queries,
            prefix_cache_hits=b.prefix_hits,
            peak_batch_requests=b.peak_batch_requests,
        )

    @property
    def aborted(self) -> int:
        return self._batch.aborted

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._batch.close)
        llama_cpp.llama_free(self._ctx)
        llama_cpp.llama_model_free(self._model)


async def create_engine(settings: PolicySettings) -> LlamaCppEngine:
    """Resolve the model (assembling it if needed) and load it off the event loop."""
    path = gguf_path(settings.model, Path(settings.models_dir))
    engine = await asyncio.to_thread(LlamaCppEngine, path, model_id(settings.model), settings)
    log.info("llama.cpp engine ready", extra={"model": engine.model_id, "path": str(path), "kv_cells": engine.kv_cells})
    return engine
