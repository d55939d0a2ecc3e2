"""A latency probe: policy calls made alone, so the pools' latency model has clean data.

The drawer overlaps a problem's calls (greedy and sampled, chains of thought and programs,
the problems of a chunk) to keep the engine's batch full: that draws the same candidates in
less wall time (about a tenth less on two cores, docs/effort-ladder.md), but an overlapped
call's wall seconds are not what that call takes alone, which is what
:class:`~evaluation.pricing.pricer.LatencyModel` predicts (a strategy draws its greedy sample
alone, then its sampled ones in one call). So each sitting of the
drawer first runs this probe, one call at a time, over the shapes the model has terms for:
batch sizes 1 to 16 on a short prompt (decode step and per-sequence cost) and one sequence on
a long prompt (prefill). The calls are stored with every pool the sitting draws
(``ProblemPool.latency_probe``) and the latency model is fitted on them and on the pools'
calls that did not overlap (:func:`~evaluation.pricing.table.fit_latency`).

Every probe prompt starts with its own nonce, so none is served from the prefix cache of
another; the cached tokens the engine reports are subtracted all the same.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from evaluation.pools.store import Call
from services.search.interfaces import GenerateCall, Message, Policy

PROBE_MAX_TOKENS = 32
# (sequences, prompt size in filler words of ~5 tokens): decode shapes, then a prefill shape of
# ~600 prompt tokens (inside a 2k context window). Four calls for the model's three terms: small,
# because a short ``make calibrate`` pays for it (about 40 s on two cores for seven calls of 64).
PROBE_SHAPES: tuple[tuple[int, int], ...] = ((1, 0), (4, 0), (16, 0), (1, 120))
_TASK = "Write out every whole number from 1 to 500 in words, separated by commas."  # runs to the cap


def probe_messages(index: int, filler_words: int) -> tuple[Message, ...]:
    """A prompt unique to ``index`` with ``filler_words`` words of context before the task."""
    filler = " ".join(f"w{(index * 7919 + i) % 10007}" for i in range(filler_words))
    text = f"Probe {index}. {filler}\n\n{_TASK}" if filler else f"Probe {index}. {_TASK}"
    return (Message("user", text),)


async def latency_probe(
    policy: Policy, seed: int = 0, shapes: Sequence[tuple[int, int]] = PROBE_SHAPES
) -> tuple[Call, ...]:
    """Run every shape alone, one after another, and return its calls (``longest``: the
    longest candidate's tokens, which is what a decode-bound call's time follows)."""
    calls: list[Call] = []
    for index, (n, filler) in enumerate(shapes):
        started = time.perf_counter()
        generation = await policy.generate(
            GenerateCall(probe_messages(seed * 1000 + index, filler), n=n,
                         seeds=tuple(seed * 1000 + index * 16 + i for i in range(n)),
                         max_tokens=PROBE_MAX_TOKENS, temperature=0.7)
        )  # fmt: skip
        wall = time.perf_counter() - started
        tokens = [c.completion_tokens for c in generation.candidates]
        calls.append(
            Call(
                n=n,
                temperature=0.7,
                max_tokens=PROBE_MAX_TOKENS,
                prompt_tokens=generation.prompt_tokens,
                cached_tokens=generation.cached_tokens,
                completion_tokens=sum(tokens),
                wall_s=round(wall, 4),
                longest=max(tokens, default=0),
            )
        )
    return tuple(calls)
