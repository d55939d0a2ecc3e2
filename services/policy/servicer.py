"""The Policy gRPC service over one ``Engine``: validate, bound by the deadline, count, translate.

The engine speaks dataclasses; this module is the only place that knows the protobuf shapes.
Deadlines: the caller's remaining time bounds the engine call; when it runs out the engine
request is cancelled (the engine stops decoding at the next step and frees its sequences)
and the RPC ends with ``DEADLINE_EXCEEDED``. A cancelled RPC cancels the engine call the same way.
Either way the tokens the engine spent on the call until then (its ``Spent``) are counted
like a finished call's, and by ``ttc_policy_aborted_tokens_total``; a stream also reports
each candidate's running token count in every chunk, and the prompt's count (with its
prefix-cache hits) on its first chunk, so a caller whose stream is cut knows what it spent.
A stream that asked for logprobs carries each token's in the chunk that carries its text, so
a call that wants them streams like any other (and is counted like one when it is cut).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from typing import TypeVar, cast

import grpc

from services.common.errors import DeadlineExceeded
from services.common.logging import request_id_var
from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from services.policy.chunk_window import ChunkWindow
from services.policy.engines.base import Engine, EngineStats, Spent, StreamDelta, TokenLogprob
from services.policy.metrics import PolicyMetrics
from services.policy.settings import PolicySettings
from services.policy.tool_output import StreamToolCalls, attach_tool_calls, tool_calls_pb
from services.policy.validation import (
    check_context,
    check_score,
    resolve_model,
    to_prompt,
    to_sampling,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
#: stop this much before the caller's deadline so the status we send is ours, not a race
DEADLINE_MARGIN_S = 0.05
#: a cancellation this close to the deadline is the deadline (the client's timer and ours race)
DEADLINE_SLACK_S = 0.5
FINISH = {
    "stop": policy_pb2.FINISH_REASON_STOP,
    "length": policy_pb2.FINISH_REASON_LENGTH,
    "abort": policy_pb2.FINISH_REASON_ABORT,
}


def logprobs_pb(tokens: list[TokenLogprob]) -> list[common_pb2.TokenLogprob]:
    return [
        common_pb2.TokenLogprob(
            token=t.token,
            token_id=t.token_id,
            logprob=t.logprob,
            top_logprobs=[common_pb2.TopLogprob(token=s, token_id=i, logprob=lp) for s, i, lp in t.top],
        )
        for t in tokens
    ]


def stats_pb(stats: EngineStats, engine: Engine) -> policy_pb2.EngineStats:
    return policy_pb2.EngineStats(
        engine=engine.kind,
        model=engine.model_id,
        kv_cache_utilization=stats.kv_cache_utilization,
        running_requests=stats.running_requests,
        waiting_requests=stats.waiting_requests,
        prefix_cache_queries=stats.prefix_cache_queries,
        prefix_cache_hits=stats.prefix_cache_hits,
        max_context=engine.max_context,
        peak_batch_requests=stats.peak_batch_requests,
    )


def _prompt_taken_in(spent: Spent, prompt_tokens: int) -> tuple[int, int]:
    """The prompt side of a stream whose engine has just decoded its first token: then it has
    evaluated the whole prompt, so ``spent`` says so from here on (an engine that learns no
    prompt count of its own, such as a remote server, would leave an aborted stream's prompt
    uncounted). Returns (prompt tokens, cached tokens) as the final usage reports them."""
    spent.prompt_tokens = max(spent.prompt_tokens, prompt_tokens)
    return prompt_tokens, min(spent.cached_tokens, prompt_tokens)


class PolicyServicer(policy_pb2_grpc.PolicyServicer):
    """Serves one loaded engine."""

    def __init__(self, engine: Engine, settings: PolicySettings, metrics: PolicyMetrics) -> None:
        self.engine = engine
        self.settings = settings
        self.metrics = metrics

    # ------------------------------------------------------------------ helpers

    def _deadline_budget(self, context: grpc.aio.ServicerContext) -> float | None:
        remaining = context.time_remaining()
        return None if remaining is None else remaining - DEADLINE_MARGIN_S

    async def _bounded(self, call: Awaitable[T], context: grpc.aio.ServicerContext, spent: Spent) -> T:
        """Await an engine call within the caller's deadline; abort it when time runs out. An
        aborted call's ``spent`` (final once the engine call has unwound) is counted."""
        budget = self._deadline_budget(context)
        try:
            if budget is None:
                return await call
            if budget <= 0:
                if asyncio.iscoroutine(call):
                    call.close()
                raise TimeoutError
            return await asyncio.wait_for(call, budget)
        except TimeoutError:
            self.metrics.count_abort("deadline", spent)
            raise DeadlineExceeded("the deadline passed before the engine finished; the request was aborted") from None
        except asyncio.CancelledError:
            self.metrics.count_abort(self._cancel_reason(context), spent)
            raise
        except Exception:
            self.metrics.count_unfinished(spent)
            raise

    @staticmethod
    def _cancel_reason(context: grpc.aio.ServicerContext) -> str:
        """gRPC cancels the handler itself when the deadline passes (the client's timer may fire
        before ours); that is a deadline abort, not a client cancellation."""
        remaining = context.time_remaining()
        return "deadline" if remaining is not None and remaining <= DEADLINE_SLACK_S else "cancelled"

    def _request_id(self, given: str) -> str:
        return given or request_id_var.get()

    # ------------------------------------------------------------------ RPCs

    async def Generate(
        self, request: policy_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> policy_pb2.GenerateResponse:
        model = resolve_model(request.model, [self.engine.model_id])
        prompt = to_prompt(request.input)
        sampling = to_sampling(request.sampling, self.settings.max_n, self.settings.max_tokens_limit)
        check_context(len(await self.engine.tokenize(prompt)), sampling.max_tokens, self.engine.max_context)
        spent = Spent()
        gen = await self._bounded(
            self.engine.generate(prompt, sampling, self._request_id(request.request_id), spent), context, spent
        )
        attach_tool_calls(gen, prompt)
        completion_tokens = sum(c.completion_tokens for c in gen.completions)
        self.metrics.base.count_tokens(
            model, prompt=gen.prompt_tokens, generated=completion_tokens, cached=gen.cached_tokens
        )
        self.metrics.count_candidates([c.finish_reason for c in gen.completions])
        return policy_pb2.GenerateResponse(
            model=model,
            candidates=[
                policy_pb2.Candidate(
                    index=c.index,
                    text=c.text,
                    finish_reason=FINISH[c.finish_reason],
                    completion_tokens=c.completion_tokens,
                    seed=c.seed,
                    logprobs=logprobs_pb(c.logprobs),
                    tool_calls=tool_calls_pb(c.tool_calls),
                )
                for c in gen.completions
            ],
            usage=common_pb2.Usage(
                prompt_tokens=gen.prompt_tokens, completion_tokens=completion_tokens, cached_tokens=gen.cached_tokens
            ),
        )

    async def GenerateStream(
        self, request: policy_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[policy_pb2.GenerateChunk]:
        model = resolve_model(request.model, [self.engine.model_id])
        prompt = to_prompt(request.input)
        sampling = to_sampling(request.sampling, self.settings.max_n, self.settings.max_tokens_limit)
        prompt_tokens = len(await self.engine.tokenize(prompt))
        check_context(prompt_tokens, sampling.max_tokens, self.engine.max_context)
        budget = self._deadline_budget(context)
        completion = [0] * sampling.n
        finishes: list[str] = []
        start = time.perf_counter()
        first = True
        reported = False  # the prompt's count went out (on the call's first chunk)
        tools = StreamToolCalls(prompt)
        # each candidate's logprobs not sent yet: those of deltas held back (tool-call syntax)
        # go with the candidate's next chunk that carries text or its finish
        held: dict[int, list[TokenLogprob]] = {}
        spent = Spent()
        window = ChunkWindow(request.chunk_interval_ms / 1000)  # 0: every chunk as it comes
        stream = cast(
            AsyncGenerator[StreamDelta, None],
            self.engine.generate_stream(prompt, sampling, self._request_id(request.request_id), spent),
        )
        # Ends the RPC without its usage chunk unless cleared: cancelled, timed out, failed,
        # or closed by gRPC at a yield (the client went away).
        aborted: str | None = "cancelled"
        try:
            async with contextlib.aclosing(stream), asyncio.timeout(budget):
                async for raw in stream:
                    completion[raw.index] = max(completion[raw.index], raw.completion_tokens)
                    if sampling.logprobs:
                        held.setdefault(raw.index, []).extend(raw.logprobs)
                    delta = tools(raw)
                    if not delta.text and delta.finish_reason is None and reported:
                        continue  # held back: tool-call syntax (the first chunk goes out anyway)
                    if first and delta.text:
                        self.metrics.time_to_first_token.labels(self.metrics.base.service, model).observe(
                            time.perf_counter() - start
                        )
                        first = False
                    if delta.finish_reason is not None:
                        finishes.append(delta.finish_reason)
                    chunk = policy_pb2.GenerateChunk(
                        index=delta.index,
                        text_delta=delta.text,
                        finish_reason=FINISH[delta.finish_reason]
                        if delta.finish_reason
                        else policy_pb2.FINISH_REASON_UNSPECIFIED,
                        tool_calls=tool_calls_pb(delta.tool_calls),
                        completion_tokens=completion[delta.index],
                        logprobs=logprobs_pb(held.pop(delta.index, []) if delta.text or delta.finish_reason else []),
                    )
                    if not reported:
                        chunk.prompt_tokens, chunk.cached_tokens = _prompt_taken_in(spent, prompt_tokens)
                        reported = True
                    for ready in window.add(chunk):
                        yield ready
                for ready in window.drain():
                    yield ready
            aborted = None
        except TimeoutError:
            aborted = "deadline"
            for ready in window.drain():  # the caller is still there: what it was sent is what it spent
                yield ready
            raise DeadlineExceeded("the deadline passed before the engine finished; the request was aborted") from None
        except asyncio.CancelledError:
            aborted = self._cancel_reason(context)
            raise
        except Exception:
            aborted = ""  # an engine failure: its tokens are counted, it is no abort
            raise
        finally:
            if aborted is not None:
                self._stream_aborted(aborted, spent, completion)
        # the engine's prefix-cache hits, as the unary reply reports them (the worker streams
        # every call, so this is most calls' only usage)
        cached = min(spent.cached_tokens, prompt_tokens)
        self.metrics.base.count_tokens(model, prompt=prompt_tokens, generated=sum(completion), cached=cached)
        self.metrics.count_candidates(finishes)
        yield policy_pb2.GenerateChunk(
            usage=common_pb2.Usage(prompt_tokens=prompt_tokens, completion_tokens=sum(completion), cached_tokens=cached)
        )

    def _stream_aborted(self, reason: str, spent: Spent, streamed: list[int]) -> None:
        """Count an unfinished stream: what the engine spent, and never less than the tokens
        its chunks already reported to the caller (an engine that counts no tokens itself)."""
        spent.completion_tokens = max(spent.completion_tokens, sum(streamed))
        if reason:
            self.metrics.count_abort(reason, spent)
        else:
            self.metrics.count_unfinished(spent)

    async def Score(
        self, request: policy_pb2.ScoreRequest, context: grpc.aio.ServicerContext
    ) -> policy_pb2.ScoreResponse:
        model = resolve_model(request.model, [self.engine.model_id])
        prompt = to_prompt(request.input)
        check_score(request.continuations, request.top_logprobs)
        spent = Spent()
        scoring = await self._bounded(
            self.engine.score(
                prompt, list(request.continuations), request.top_logprobs, self._request_id(request.request_id), spent
            ),
            context,
            spent,
        )
        evaluated = scoring.prompt_tokens + sum(len(s.tokens) for s in scoring.scores)
        self.metrics.base.count_tokens(model, prompt=evaluated)
        return policy_pb2.ScoreResponse(
            model=model,
            scores=[
                policy_pb2.ContinuationScore(tokens=logprobs_pb(s.tokens), total_logprob=s.total_logprob)
                for s in scoring.scores
            ],
            usage=common_pb2.Usage(prompt_tokens=evaluated),
        )

    async def Tokenize(
        self, request: policy_pb2.TokenizeRequest, context: grpc.aio.ServicerContext
    ) -> policy_pb2.TokenizeResponse:
        resolve_model(request.model, [self.engine.model_id])
        ids = await self.engine.tokenize(to_prompt(request.input))
        return policy_pb2.TokenizeResponse(token_ids=ids, count=len(ids), max_context=self.engine.max_context)

    async def GetStats(
        self, request: policy_pb2.StatsRequest, context: grpc.aio.ServicerContext
    ) -> policy_pb2.EngineStats:
        stats = await self.engine.stats()
        self.metrics.observe_stats(stats)
        return stats_pb(stats, self.engine)

    async def ListModels(
        self, request: policy_pb2.ListModelsRequest, context: grpc.aio.ServicerContext
    ) -> policy_pb2.ListModelsResponse:
        return policy_pb2.ListModelsResponse(
            models=[
                policy_pb2.ModelInfo(
                    id=self.engine.model_id, engine=self.engine.kind, max_context=self.engine.max_context
                )
            ]
        )

    async def refresh_stats(self, interval_s: float) -> None:
        """Keep the KV-cache and queue gauges fresh between GetStats calls (runs until cancelled)."""
        while True:
            try:
                self.metrics.observe_stats(await self.engine.stats())
            except Exception:  # a stats hiccup must not kill the loop
                log.exception("engine stats failed")
            await asyncio.sleep(interval_s)
