"""Code chosen by running it, replayed on a pool (pure): ``code_execution``'s choice over drawn candidates.

The served strategy (``services/search/strategies/code_execution.py``) draws the greedy
completion alone, then ``n - 1`` sampled ones beside one greedy call that writes test inputs,
runs every candidate on those inputs in the sandbox, and answers from the largest cluster of
identical behaviour (ties: more of the model's assertions passed, then the shorter, then the
earlier candidate); with no cluster (nothing ran, or every candidate crashed on every input)
the first candidate with any text answers. A code draw whose candidates were run on the
model's inputs (``Draw.tests`` and each candidate's ``behaviour``) replays that rule exactly:
the ranking is the strategy's own (:func:`~services.search.strategies.code_behaviour.clusters`
over :class:`~services.search.strategies.code_behaviour.Entry` rows rebuilt from the stored
behaviour), and so are the confidence signals (:func:`~services.search.strategies.code_execution.cluster_signals`).

Costs are those of the calls the strategy makes: the greedy call, the sampled call and the
test-writing call (prompt and generated tokens of all three), and the latency model's seconds
for the greedy call alone, then the sampled and test-writing calls together, plus the slowest
behaviour run (the runs go to the sandbox at once). A candidate's hidden-test seconds are the
pool's scoring, not the strategy's, and are not charged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from evaluation.pools.store import CodeTests, Draw, PoolCandidate
from services.common.confidence import ConfidenceSignals
from services.search.strategies.code_behaviour import Behaviour, Cluster, Entry, candidate_source, clusters
from services.search.strategies.code_execution import cluster_signals

CallSeconds = Callable[[int, int, int], float]  # (sequences, uncached prompt tokens, longest) -> seconds


@dataclass(frozen=True)
class CodeRun:
    """One replayed ``code_execution`` run: right or not, its spend, the chosen cluster's share
    of the candidates (0.0 when no cluster answered) and the signals the strategy reports."""

    correct: bool
    generated: int
    prompt: int
    latency_s: float
    agreement: float
    signals: ConfidenceSignals | None


def source_lengths(draw: Draw) -> dict[int, int]:
    """Candidate index -> the length of the code it runs, for every candidate that ran on the
    inputs (the ranking's tie-break); computed once per draw, not once per subset."""
    lengths: dict[int, int] = {}
    for c in draw.candidates:
        source = candidate_source(c.text) if c.behaviour else None
        if source is not None:
            lengths[c.index] = len(source)
    return lengths


def ranking(order: Sequence[PoolCandidate], lengths: Mapping[int, int]) -> list[Cluster]:
    """The strategy's clusters of ``order`` (greedy first, then the sampled in draw order), best
    first; a candidate with nothing run on the inputs abstains, as served."""
    entries = [
        Entry(i, lengths[c.index], Behaviour(tuple(c.behaviour), tuple(c.asserted)))
        for i, c in enumerate(order)
        if c.behaviour and c.index in lengths
    ]
    return clusters(entries)


def replay(draw: Draw, order: Sequence[PoolCandidate], lengths: Mapping[int, int], call_s: CallSeconds) -> CodeRun:
    """One run of ``code_execution`` on ``order`` (its first member the greedy candidate) with
    the draw's recorded tests; ``call_s`` prices a policy call's seconds (the pool's latency model)."""
    if draw.tests is None:
        raise ValueError("code_execution is priced from a code draw's recorded tests; this draw has none")
    ranked = ranking(order, lengths)
    if ranked:
        answer: PoolCandidate | None = order[ranked[0].best.index]
        share, signals = len(ranked[0].members) / len(order), cluster_signals(len(order), ranked)
    else:  # no cluster: the first candidate with any text answers, unverified
        answer, share, signals = next((c for c in order if c.text.strip()), None), 0.0, None
    generated, prompt, latency = spend(draw, draw.tests, order, call_s)
    return CodeRun(bool(answer is not None and answer.correct), generated, prompt, latency, share, signals)


def spend(draw: Draw, tests: CodeTests, order: Sequence[PoolCandidate], call_s: CallSeconds) -> tuple[int, int, float]:
    """Generated tokens, prompt tokens and seconds of the strategy's calls and runs on ``order``."""
    first, rest = order[0], order[1:]
    greedy_call = draw.calls[first.call]
    latency = call_s(1, greedy_call.prompt_tokens, first.completion_tokens)
    prompt = greedy_call.prompt_tokens + tests.call.prompt_tokens
    uncached = _uncached(tests.call.prompt_tokens, tests.call.cached_tokens)
    longest = tests.call.completion_tokens
    if rest:
        sampled_call = draw.calls[rest[0].call]
        prompt += sampled_call.prompt_tokens
        uncached += _uncached(sampled_call.prompt_tokens, sampled_call.cached_tokens)
        longest = max(longest, *(c.completion_tokens for c in rest))
    latency += call_s(len(rest) + 1, uncached, longest)
    latency += max((c.behaviour_s for c in order), default=0.0)
    generated = sum(c.completion_tokens for c in order) + tests.call.completion_tokens
    return generated, prompt, latency


def _uncached(prompt_tokens: int, cached_tokens: int) -> int:
    return max(0, prompt_tokens - cached_tokens)
