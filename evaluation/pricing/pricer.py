"""Price test-time configurations offline from a problem's candidate pool (pure).

A pool holds a greedy candidate and ``k`` sampled ones per kind (:mod:`evaluation.pools.store`). A parallel
configuration that draws ``n <= k`` samples is priced as its expected outcome over the pool's
``n``-subsets: the mean over all ``C(k, n)`` subsets of an indicator is the unbiased
(hypergeometric, U-statistic) estimate of that configuration's accuracy with ``n`` fresh
samples; pass@k is its closed form (:func:`evaluation.stats.ledger.pass_at_k`), majority@n has none with
tie-breaks, so subsets are enumerated when there are at most ``limit`` of them and drawn at
random (``limit`` of them, seeded) otherwise. Configurations whose outcome depends on draw
order (early stopping) replay random orderings of the sampled candidates the same way.

Configurations (``Config.family``), mirroring the strategies:

- ``cot_greedy``: one greedy chain of thought (effort ``none``);
- ``sc``: self-consistency, a majority of ``n`` sampled chains of thought (ties: higher mean
  logprob, then the earliest), optionally early-stopped in waves;
- ``pot``: program-of-thought, the greedy program then ``n - 1`` sampled ones, voting on
  executed outputs, falling back to the greedy chain of thought when no program answers;
  with ``cot > 0`` the hybrid (that many sampled chains of thought vote with ``cot_weight``);
  optionally early-stopped (waves ``first_wave``, doubling, as the strategy draws them);
- ``bon`` / ``wvote``: best-of-``n`` and the judge-weighted vote over sampled chains of
  thought, where every candidate carries the judge's score and what judging it cost. The judge
  is charged: each drawn candidate's ``judge_tokens[judge]`` is added to the outcome's prompt
  tokens (a judge prefills; records schema 2 counts judge prompts as prompt tokens) and its
  ``judge_s[judge]`` to the latency, summed over the drawn, since both strategies score all
  ``n`` in one verifier call after the one batched generation, and the verifier's judge calls
  on a llama.cpp policy run one after another. A candidate without the judge's score or cost
  leaves the configuration unpriced for that problem;
- ``code_greedy``, ``code_vote`` (vote on normalized source: a proxy that no strategy runs),
  ``code_pass`` (pass@n, the oracle: a right candidate exists among ``n``; an upper bound, not
  a strategy);
- ``code_exec``: ``code_execution``, the greedy completion then ``n - 1`` sampled ones, chosen
  by their behaviour on the model's own test inputs (:mod:`~.code_exec`); priced only where the
  pool recorded that behaviour (``python -m calibration behaviour``).
- ``adaptive``: the adaptive vote, replayed draw by draw on random orderings of the sampled
  candidates (:mod:`~.adaptive`); one whose order has an ``escalate`` step needs the larger
  model's pool of the same problem too, so it is priced by :meth:`Pricer.escalating` alone.

The early-stopping rule is passed in (``StopRule``): the orchestrator's own
``should_stop`` in production (:func:`stop_rule`), so the replay stops where the strategy would.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from evaluation.pools.store import Call, Draw, PoolCandidate, ProblemPool
from evaluation.pricing.adaptive import AdaptiveSpec, replay
from evaluation.pricing.code_exec import replay as code_replay
from evaluation.pricing.code_exec import source_lengths
from services.common.confidence import ConfidenceSignals
from services.search.strategies.adaptive_policy import Modality, parse_order
from services.search.strategies.stopping import should_stop

StopRule = Callable[[Mapping[str, float], float], bool]  # (votes per key, weight still to come) -> stop
Family = Literal[
    "cot_greedy", "sc", "pot", "bon", "wvote", "code_greedy", "code_vote", "code_pass", "code_exec", "adaptive"
]
DEFAULT_LIMIT = 128
ADAPTIVE_ORDERINGS = 4  # random orderings of the sampled candidates each adaptive configuration is replayed on


def stop_rule(confidence: float) -> StopRule:
    """The orchestrator's early-stopping rule at ``confidence``, as the pricer replays it."""

    def stop(votes: Mapping[str, float], remaining: float) -> bool:
        return should_stop(votes, remaining, confidence).stop

    return stop


@dataclass(frozen=True)
class Config:
    """One priced configuration; ``name`` is its label in tables."""

    name: str
    family: Family
    n: int = 1
    cot: int = 0
    cot_weight: float = 0.5
    early_stop: bool = False
    first_wave: int = 3
    judge: str = ""
    # the adaptive vote's policy (family "adaptive"; ``n`` is its cap, ``cot_weight`` its thoughts' weight)
    start: str = "program"
    steps: str = ""
    confidence: float = 0.0

    @property
    def escalates(self) -> bool:
        """Whether an adaptive configuration's order draws on the larger deployment."""
        return self.family == "adaptive" and "escalate" in parse_order(self.steps)

    def draws_needed(self) -> tuple[str, ...]:
        if self.family.startswith("code"):
            return ("code",)
        if self.family in ("pot", "adaptive"):
            return ("program", "cot")
        return ("cot",)

    def applies(self, pool: ProblemPool) -> bool:
        if not all(d in pool.draws for d in self.draws_needed()):
            return False
        sampled = {d: len(pool.draws[d].sampled) for d in self.draws_needed()}
        if self.family == "pot":
            return self.n - 1 <= sampled["program"] and self.cot <= sampled["cot"]
        if self.family == "adaptive":  # a cap above the pool's size replays what the pool holds
            alone = not self.escalates  # an escalating order needs the larger model's pool: Pricer.escalating
            return alone and pool.draws["program"].greedy is not None and pool.draws["cot"].greedy is not None
        if self.family == "code_exec":  # the greedy completion, then n - 1 sampled, run on recorded tests
            code = pool.draws["code"]
            return code.tests is not None and code.greedy is not None and self.n - 1 <= sampled["code"]
        if self.family in ("bon", "wvote"):
            cands = pool.draws["cot"].sampled
            return self.n <= len(cands) and all(judged(c, self.judge) for c in cands)
        if self.family in ("cot_greedy", "code_greedy"):
            return True
        return self.n <= sampled[self.draws_needed()[0]]


def judged(c: PoolCandidate, judge: str) -> bool:
    """Whether ``c`` carries ``judge``'s score and its cost (an old chunk's candidates may have
    the score alone: ``python -m calibration judge --backfill`` apportions the cost)."""
    return judge in c.scores and judge in c.judge_tokens and judge in c.judge_s


def judge_cost(drawn: Sequence[PoolCandidate], judge: str) -> tuple[int, float]:
    """The judge's tokens and seconds for scoring ``drawn`` in one verifier call (see the
    module docstring: summed over the drawn)."""
    return sum(c.judge_tokens[judge] for c in drawn), sum(c.judge_s[judge] for c in drawn)


@dataclass(frozen=True)
class Outcome:
    """One replayed run: right or not, what it generated and prefilled, how long it took, the
    winner's share of the vote weight (1.0 for a single answer, 0.0 for none), and the signals
    the served strategy would compute its ``ttc.confidence`` from (:func:`pool_signals`; the
    cascade gates on that number, as served); ``None`` for the oracle ``code_pass``."""

    correct: bool
    generated: int
    prompt: int
    latency_s: float
    agreement: float
    signals: ConfidenceSignals | None = None
    candidates: int | None = None  # drawn, where a replay stops early on its own candidates (adaptive)


@dataclass(frozen=True)
class Estimate:
    """A configuration's expected outcome on one problem (means over the replayed runs)."""

    accuracy: float
    generated: float
    prompt: float
    latency_s: float
    escalated: float = 0.0
    candidates: float | None = None  # mean drawn, where the runs know it (else the route's cap says)


def mean_estimate(outcomes: Sequence[Outcome]) -> Estimate:
    m = len(outcomes)
    drawn = [o.candidates for o in outcomes if o.candidates is not None]
    return Estimate(
        accuracy=sum(o.correct for o in outcomes) / m,
        generated=sum(o.generated for o in outcomes) / m,
        prompt=sum(o.prompt for o in outcomes) / m,
        latency_s=sum(o.latency_s for o in outcomes) / m,
        candidates=sum(drawn) / m if len(drawn) == m else None,
    )


# ---------------------------------------------------------------------------------- subsets
def subsets(k: int, n: int, rng: random.Random, limit: int, *, ordered: bool = False) -> Iterator[tuple[int, ...]]:
    """Index tuples of ``n`` of ``k`` candidates: every combination (in draw order) or, when
    ``ordered``, every arrangement, if there are at most ``limit``; else ``limit`` uniform draws."""
    total = math.perm(k, n) if ordered else math.comb(k, n)
    if total <= limit:
        yield from (itertools.permutations(range(k), n) if ordered else itertools.combinations(range(k), n))
        return
    for _ in range(limit):
        chosen = rng.sample(range(k), n)
        yield tuple(chosen) if ordered else tuple(sorted(chosen))


# ---------------------------------------------------------------------------------- voting
@dataclass(frozen=True)
class Ballot:
    key: str  # "" abstains
    weight: float
    correct: bool
    mean_logprob: float | None = None


def winner(ballots: Sequence[Ballot], *, logprob_ties: bool = False) -> Ballot | None:
    """The first ballot of the heaviest key; ties by the members' mean logprob (when asked and
    known for all), then by the earliest ballot. ``None`` when no ballot has a key."""
    weight: dict[str, float] = {}
    first: dict[str, int] = {}
    logprobs: dict[str, list[float | None]] = {}
    for i, b in enumerate(ballots):
        if b.key:
            weight[b.key] = weight.get(b.key, 0.0) + b.weight
            first.setdefault(b.key, i)
            logprobs.setdefault(b.key, []).append(b.mean_logprob)
    if not weight:
        return None
    use_lp = logprob_ties and all(lp is not None for lps in logprobs.values() for lp in lps)

    def rank(key: str) -> tuple[float, float, int]:
        lps = [lp for lp in logprobs[key] if lp is not None]
        return (round(weight[key], 12), sum(lps) / len(lps) if use_lp else 0.0, -first[key])

    return ballots[first[max(weight, key=rank)]]


def agreement(ballots: Sequence[Ballot], chosen: Ballot | None) -> float:
    total = sum(b.weight for b in ballots)
    if chosen is None or total <= 0:
        return 0.0
    return sum(b.weight for b in ballots if b.key == chosen.key) / total


def _ballot(c: PoolCandidate, weight: float = 1.0) -> Ballot:
    return Ballot(c.key, weight, bool(c.correct), c.mean_logprob)


def confidence_family(config: Config) -> str:
    """The configuration family the confidence model is fitted per (the served strategies' names)."""
    if config.family == "pot":
        return "hybrid" if config.cot > 0 else "pot"
    return config.family


def pool_signals(config: Config, ballots: Sequence[Ballot], chosen: Ballot | None, **extra: Any) -> ConfidenceSignals:
    """The confidence signals of one replayed run's vote, as the served strategy reports them."""
    total = sum(b.weight for b in ballots)
    share = 0.0 if chosen is None or total <= 0 else sum(b.weight for b in ballots if b.key == chosen.key) / total
    return ConfidenceSignals(
        config=confidence_family(config),
        vote_share=share,
        votes=len(ballots),
        distinct=len({b.key for b in ballots if b.key}),
        abstained=sum(1 for b in ballots if not b.key),
        **extra,
    )


def fallback_signals(config: Config, abstained: int, fallback: Ballot) -> ConfidenceSignals:
    """No program answered and the greedy chain of thought answers alone: its share is of every
    ballot cast, the abstaining programs included (the served rule, ``signals.fallback_signals``)."""
    signals = pool_signals(config, [fallback], winner([fallback]))
    return replace(signals, votes=abstained + 1, abstained=signals.abstained + abstained,
                   vote_share=signals.vote_share / (abstained + 1))  # fmt: skip


def pot_signals(config: Config, programs: Sequence[Ballot], thoughts: Sequence[Ballot],
                chosen: Ballot | None) -> ConfidenceSignals:  # fmt: skip
    """A program vote's signals; with the hybrid's chains of thought, whether the programs'
    winner and the thoughts' winner agree."""
    agree: bool | None = None
    if thoughts:
        p_win, t_win = winner(programs), winner(thoughts)
        if p_win is not None and t_win is not None:
            agree = p_win.key == t_win.key
    return pool_signals(config, [*programs, *thoughts], chosen, programs_agree=agree)


# ---------------------------------------------------------------------------------- latency
@dataclass(frozen=True)
class LatencyModel:
    """Seconds of one policy call: ``prefill_s`` per uncached prompt token, plus per decode
    step ``step_s`` and ``step_s_per_seq`` for each sequence beyond the first, times the
    longest candidate's tokens. Fitted on the pool's own calls (:mod:`evaluation.pricing.table`)."""

    prefill_s: float = 0.0
    step_s: float = 0.0
    step_s_per_seq: float = 0.0

    def call(self, n: int, uncached_prompt: int, longest: int) -> float:
        if n <= 0:
            return 0.0
        return self.prefill_s * uncached_prompt + longest * (self.step_s + self.step_s_per_seq * (n - 1))


def _uncached(call: Call) -> int:
    return max(0, call.prompt_tokens - call.cached_tokens)


# ---------------------------------------------------------------------------------- replays
@dataclass(frozen=True)
class Pricer:
    latency: LatencyModel
    stop: StopRule | None = None
    limit: int = DEFAULT_LIMIT
    seed: int = 0

    def estimate(self, pool: ProblemPool, config: Config) -> Estimate | None:
        """The configuration's expected outcome on ``pool``; ``None`` when it does not apply."""
        if not config.applies(pool) or (config.early_stop and self.stop is None):
            return None
        rng = random.Random(f"{self.seed}:{pool.id}:{config.name}")
        return mean_estimate(list(self.outcomes(pool, config, rng)))

    def outcomes(self, pool: ProblemPool, config: Config, rng: random.Random) -> Iterator[Outcome]:
        f = config.family
        if f in ("cot_greedy", "code_greedy"):
            draw = pool.draws["code" if f == "code_greedy" else "cot"]
            yield self._single(draw, draw.greedy, first_call=True, config=config)
        elif f in ("sc", "code_vote", "code_pass", "bon", "wvote"):
            draw = pool.draws["code" if f.startswith("code") else "cot"]
            sampled = draw.sampled
            for idx in subsets(len(sampled), config.n, rng, self.limit, ordered=config.early_stop):
                yield self.sampled_vote(draw, [sampled[i] for i in idx], config)
        elif f == "code_exec":
            yield from self._code_exec(pool.draws["code"], config, rng)
        elif f == "adaptive":
            yield from self._adaptive(pool, config, rng)
        else:
            yield from self._pot(pool, config, rng)

    def _single(self, draw: Draw, c: PoolCandidate | None, *, first_call: bool,
                config: Config | None = None) -> Outcome:  # fmt: skip
        if c is None:
            return Outcome(False, 0, 0, 0.0, 0.0, pool_signals(config, [], None) if config is not None else None)
        call = draw.calls[c.call]
        uncached = call.prompt_tokens if first_call else _uncached(call)
        latency = self.latency.call(1, uncached, c.completion_tokens) + c.sandbox_s
        ballots = [_ballot(c)]
        signals = pool_signals(config, ballots, winner(ballots)) if config is not None else None
        return Outcome(bool(c.correct), c.completion_tokens, call.prompt_tokens, latency, 1.0 if c.key else 0.0,
                       signals)  # fmt: skip

    def sampled_vote(self, draw: Draw, chosen: list[PoolCandidate], config: Config) -> Outcome:
        """One run of a vote (self-consistency, best-of-n, weighted, code) over ``chosen``, in draw
        order: early-stopped in waves when the configuration stops early, with the signals the
        served strategy hands its calibrated confidence."""
        drawn = chosen
        if config.early_stop and self.stop is not None:
            drawn = _early_stopped(chosen, [1.0] * len(chosen), config.first_wave, self.stop)
        prompt = draw.calls[drawn[0].call].prompt_tokens
        waves = _waves(len(chosen), config.first_wave if config.early_stop else len(chosen))
        latency, at = 0.0, 0
        for i, size in enumerate(waves):
            if at >= len(drawn):
                break
            part = drawn[at : at + size]
            uncached = prompt if i == 0 else _uncached(draw.calls[part[0].call])
            latency += self.latency.call(len(part), uncached, max(c.completion_tokens for c in part))
            latency += max((c.sandbox_s for c in part), default=0.0)
            at += size
        generated = sum(c.completion_tokens for c in drawn)
        calls = sum(1 for _ in _waves(len(drawn), config.first_wave if config.early_stop else len(drawn)))
        if config.family == "code_pass":
            return Outcome(any(c.correct for c in drawn), generated, prompt, latency, 1.0)
        judge_tokens, judge_s = judge_cost(drawn, config.judge) if config.family in ("bon", "wvote") else (0, 0.0)
        prompt, latency = prompt * calls + judge_tokens, latency + judge_s
        if config.family == "bon":
            best = max(drawn, key=lambda c: (c.scores[config.judge], -drawn.index(c)))
            plain = [_ballot(c) for c in drawn]
            picked = next(b for b in plain if b.key == best.key) if best.key else None
            signals = pool_signals(config, plain, picked, judge_score=best.scores[config.judge])
            return Outcome(bool(best.correct), generated, prompt, latency, best.scores[config.judge], signals)
        weights = [c.scores[config.judge] if config.family == "wvote" else 1.0 for c in drawn]
        ballots = [Ballot(c.key, w, bool(c.correct), c.mean_logprob) for c, w in zip(drawn, weights, strict=True)]
        chosen_ballot = winner(ballots, logprob_ties=config.family == "sc")
        correct = chosen_ballot is not None and chosen_ballot.correct
        judge = None
        if config.family == "wvote" and chosen_ballot is not None:
            judged = [c.scores[config.judge] for c in drawn if c.key == chosen_ballot.key]
            judge = sum(judged) / len(judged)
        signals = pool_signals(config, ballots, chosen_ballot, judge_score=judge)
        return Outcome(correct, generated, prompt, latency, agreement(ballots, chosen_ballot), signals)

    def _pot(self, pool: ProblemPool, config: Config, rng: random.Random) -> Iterator[Outcome]:
        programs, cots = pool.draws["program"], pool.draws["cot"]
        greedy = programs.greedy
        sampled, cot_sampled = programs.sampled, cots.sampled
        program_sets = list(subsets(len(sampled), config.n - 1, rng, self.limit, ordered=config.early_stop))
        cot_sets = list(subsets(len(cot_sampled), config.cot, rng, self.limit))
        pairs: Sequence[tuple[tuple[int, ...], tuple[int, ...]]]
        if len(program_sets) * len(cot_sets) <= self.limit:
            pairs = [(p, c) for p in program_sets for c in cot_sets]
        else:
            pairs = [(rng.choice(program_sets), rng.choice(cot_sets)) for _ in range(self.limit)]
        for p_idx, c_idx in pairs:
            order = ([greedy] if greedy is not None else []) + [sampled[i] for i in p_idx]
            yield self.pot_run(programs, cots, order, [cot_sampled[i] for i in c_idx], config)

    def _code_exec(self, draw: Draw, config: Config, rng: random.Random) -> Iterator[Outcome]:
        """``code_execution`` replayed over the greedy completion and every ``n - 1`` subset of
        the sampled ones, as the strategy draws them (:func:`~.code_exec.replay`)."""
        lengths = source_lengths(draw)
        head = [draw.greedy] if draw.greedy is not None else []  # applies() holds it there
        for idx in subsets(len(draw.sampled), config.n - 1, rng, self.limit):
            run = code_replay(draw, [*head, *(draw.sampled[i] for i in idx)], lengths, self.latency.call)
            yield Outcome(run.correct, run.generated, run.prompt, run.latency_s, run.agreement, run.signals)

    def escalating(self, pool: ProblemPool, config: Config, large_pool: ProblemPool, large: Pricer) -> Estimate | None:
        """An adaptive configuration whose order escalates, priced on this model's ``pool`` and the
        larger model's ``large_pool`` of the same problem (``large``: that model's pricer, for its
        latency); ``None`` where either pool lacks a modality the replay draws."""
        modalities = ("program", "cot")
        if not config.escalates or any(pool.draws.get(d) is None or pool.draws[d].greedy is None for d in modalities):
            return None
        if any(d not in large_pool.draws for d in modalities):
            return None
        rng = random.Random(f"{self.seed}:{pool.id}:{config.name}")
        return mean_estimate(list(self._adaptive(pool, config, rng, (large_pool, large.latency))))

    def _adaptive(self, pool: ProblemPool, config: Config, rng: random.Random,
                  large: tuple[ProblemPool, LatencyModel] | None = None) -> Iterator[Outcome]:  # fmt: skip
        """The adaptive vote replayed on ``ADAPTIVE_ORDERINGS`` random orderings of the sampled
        candidates (the greedy ones first, as drawn), each step one engine call
        (:func:`~.adaptive.replay`); ``large``: the larger model's pool of the problem and its
        latency model, for an order that escalates (its first call there prefills the whole prompt)."""
        programs, cots = pool.draws["program"], pool.draws["cot"]
        spec = AdaptiveSpec(config.n, "thought" if config.start == "thought" else "program", config.first_wave,
                            parse_order(config.steps), config.confidence, config.cot_weight)  # fmt: skip
        calls = {"program": programs.calls, "thought": cots.calls}
        large_draws: dict[Modality, Draw] = (
            {"program": large[0].draws["program"], "thought": large[0].draws["cot"]} if large else {}
        )
        for _ in range(ADAPTIVE_ORDERINGS):
            escalation: dict[Modality, Sequence[PoolCandidate]] | None = (
                {m: rng.sample(d.sampled, len(d.sampled)) for m, d in large_draws.items()} if large else None
            )
            run = replay(spec, (programs.greedy, rng.sample(programs.sampled, len(programs.sampled))),
                         (cots.greedy, rng.sample(cots.sampled, len(cots.sampled))), escalation)  # fmt: skip
            prompt, latency, seen_large = 0, 0.0, False
            for i, step in enumerate(run.steps):
                if step.escalated and large is not None:
                    call = large_draws[step.modality].calls[-1]
                    uncached = _uncached(call) if seen_large else call.prompt_tokens
                    model, seen_large = large[1], True
                else:
                    call = calls[step.modality][0 if i == 0 else -1]
                    uncached = call.prompt_tokens if i == 0 else _uncached(call)
                    model = self.latency
                latency += model.call(len(step.drawn), uncached, max(c.completion_tokens for c in step.drawn))
                latency += max((c.sandbox_s for c in step.drawn), default=0.0)
                prompt += call.prompt_tokens
            ballots = [_ballot(c, 1.0 if s.modality == "program" else config.cot_weight)
                       for s in run.steps for c in s.drawn]  # fmt: skip
            yield Outcome(run.correct, run.generated, prompt, latency, agreement(ballots, winner(ballots)),
                          candidates=run.candidates)  # fmt: skip

    def pot_run(self, programs: Draw, cots: Draw, order: list[PoolCandidate], thoughts: list[PoolCandidate],
                 config: Config) -> Outcome:  # fmt: skip
        """One program-of-thought run, as ``ProgramOfThought.run`` draws it: waves (greedy alone,
        then the wave's sampled programs with the hybrid's chains of thought), early stop after
        each wave, the greedy chain of thought when no program answered and there is no hybrid."""
        waves = _waves(config.n, config.first_wave if config.early_stop else config.n)
        ballots: list[Ballot] = []  # in draw order: the winner's ties go to the earliest
        program_ballots: list[Ballot] = []
        thought_ballots: list[Ballot] = []
        generated, prompt, latency, at = 0, 0, 0.0, 0
        p_call, c_call = programs.calls[0], cots.calls[-1]
        for i, size in enumerate(waves):
            wave = order[at : at + size]
            at += size
            cot = thoughts if i == 0 else []
            rest = wave[1:] if i == 0 else wave
            if i == 0 and wave:
                latency += self.latency.call(1, p_call.prompt_tokens, wave[0].completion_tokens)
                prompt += p_call.prompt_tokens
            if rest or cot:
                longest = max(c.completion_tokens for c in [*rest, *cot])
                latency += self.latency.call(len(rest) + len(cot), _uncached(programs.calls[-1]), longest)
                prompt += programs.calls[-1].prompt_tokens * bool(rest) + c_call.prompt_tokens * bool(cot)
            latency += max((c.sandbox_s for c in wave), default=0.0)
            generated += sum(c.completion_tokens for c in [*wave, *cot])
            cast, thought = [_ballot(c) for c in wave], [_ballot(c, config.cot_weight) for c in cot]
            ballots += cast + thought
            program_ballots += cast
            thought_ballots += thought
            remaining = config.n - at
            stop = self.stop if config.early_stop and remaining > 0 else None
            if stop is not None and stop(_tally(ballots), float(remaining)):
                break
        if not any(b.key for b in ballots) and config.cot == 0 and cots.greedy is not None:
            fallback = self._single(cots, cots.greedy, first_call=True)
            fallback_ballot = _ballot(cots.greedy, config.cot_weight)
            ballots.append(fallback_ballot)
            generated, prompt, latency = (
                generated + fallback.generated,
                prompt + fallback.prompt,
                latency + fallback.latency_s,
            )
            chosen = winner(ballots)
            signals = fallback_signals(config, len(program_ballots), fallback_ballot)
        else:
            chosen = winner(ballots)
            signals = pot_signals(config, program_ballots, thought_ballots, chosen)
        correct = chosen is not None and chosen.correct
        return Outcome(correct, generated, prompt, latency, agreement(ballots, chosen), signals)


def _tally(ballots: Sequence[Ballot]) -> dict[str, float]:
    votes: dict[str, float] = {}
    for b in ballots:
        if b.key:
            votes[b.key] = votes.get(b.key, 0.0) + b.weight
    return votes


def _waves(total: int, first: int) -> list[int]:
    """Wave sizes summing to ``total``: ``first``, then doubling (the strategies' ``wave_sizes``)."""
    sizes: list[int] = []
    size = max(1, first)
    while sum(sizes) < total:
        sizes.append(min(size, total - sum(sizes)))
        size *= 2
    return sizes


def _early_stopped(order: list[PoolCandidate], weights: list[float], first: int, stop: StopRule) -> list[PoolCandidate]:
    """The prefix of ``order`` an early-stopped vote draws before it stops."""
    drawn: list[PoolCandidate] = []
    for size in _waves(len(order), first):
        drawn = order[: len(drawn) + size]
        remaining = len(order) - len(drawn)
        if remaining <= 0:
            break
        ballots = [Ballot(c.key, w, bool(c.correct)) for c, w in zip(drawn, weights, strict=False)]
        if stop(_tally(ballots), float(remaining)):
            break
    return drawn
