"""The generative process reward model: a P("Yes") per solution prefix, folded into one score.

Step boundaries must be explicit (PRIMER §6): "Step k:" markers when the candidate uses
them, else blank lines (never inside a fenced code block). A step's verdict is conditioned
on the earlier steps only, not on earlier verdicts. Two call shapes (``prm_mode``):

* ``prefix_prompts``: one Score call per prefix, the prefix inside the prompt and the
  one-token labels " Yes" / " No" as continuations; a candidate's prefixes go in order so
  each prompt extends the last one in the engine's prefix cache. Measured ~8x faster than
  the shared prompt on the llama.cpp engine, whose continuation tokens cost far more than
  prompt tokens (benchmarks/verifier_bench.py).
* ``shared_prompt``: every prefix of every candidate becomes a pair of continuations
  (prefix + question + " Yes" / " No") after one prompt holding the problem, so the whole
  batch is one Score call (split above a per-call limit); the shared text cancels in the
  Yes/No ratio. Fewest calls; suits engines that batch continuations.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from dataclasses import dataclass

from services.verifier.base import VerifierInfo, VerifierKind, answer_of, require_problem
from services.verifier.judge import prm_continuation, prm_header, problem_text, yes_probability
from services.verifier.settings import VerifierSettings
from services.verifier.tasks import run_bounded
from services.verifier.types import (
    Aggregation,
    JudgePrompt,
    Outcome,
    PolicyError,
    PolicyRefused,
    PolicyScorer,
    Spend,
    Verdict,
    VerifyJob,
)

_STEP_MARKER = re.compile(r"^[ \t>*#_-]*step[ \t]*\d+[ \t]*[:.)]", re.IGNORECASE | re.MULTILINE)
_BLANK_LINE = re.compile(r"\n(?:[ \t]*\n)+")


def _split_blank_lines(text: str) -> list[str]:
    """Paragraphs separated by blank lines, except blank lines inside a ``` fence (code keeps its indentation)."""
    pieces, begin = [], 0
    for match in _BLANK_LINE.finditer(text):
        if text.count("```", 0, match.start()) % 2 == 0:
            pieces.append(text[begin : match.start()])
            begin = match.end()
    pieces.append(text[begin:])
    return [p.strip("\n").rstrip() for p in pieces]


def split_steps(text: str, max_steps: int) -> list[str]:
    """The candidate's steps: at "Step k:" markers if any, else at blank lines; at most ``max_steps``.

    Text before the first marker belongs to the first step; steps beyond ``max_steps`` are
    merged into the last one so every token is still judged.
    """
    text = text.strip()
    if not text:
        return []
    starts = [m.start() for m in _STEP_MARKER.finditer(text)]
    if starts:
        bounds = [0, *starts[1:], len(text)] if starts[0] > 0 else [*starts, len(text)]
        steps = [text[a:b].strip() for a, b in itertools.pairwise(bounds)]
    else:
        steps = _split_blank_lines(text)
    steps = [s for s in steps if s.strip()]
    if len(steps) > max(1, max_steps):
        keep = max(1, max_steps)
        steps = [*steps[: keep - 1], "\n\n".join(steps[keep - 1 :])]
    return steps


def aggregate(step_scores: list[float], how: Aggregation) -> float:
    """One score from step scores. ``min`` and ``product`` punish the weak step; ``mean`` hides it."""
    if not step_scores:
        return 0.0
    clean = [0.0 if math.isnan(s) else min(1.0, max(0.0, s)) for s in step_scores]
    if how is Aggregation.MIN:
        return min(clean)
    if how is Aggregation.PRODUCT:
        return math.prod(clean)
    if how is Aggregation.MEAN:
        return sum(clean) / len(clean)
    return clean[-1]


@dataclass(frozen=True)
class _Pair:
    candidate: int
    step: int
    yes: str
    no: str


def plan_pairs(steps_per_candidate: list[list[str]], question: str, yes: str, no: str) -> list[_Pair]:
    """One Yes/No continuation pair per prefix of every candidate."""
    pairs = []
    for c, steps in enumerate(steps_per_candidate):
        for k in range(1, len(steps) + 1):
            pairs.append(
                _Pair(c, k - 1, prm_continuation(steps, k, question, yes), prm_continuation(steps, k, question, no))
            )
    return pairs


def chunk(pairs: list[_Pair], max_continuations: int) -> list[list[_Pair]]:
    """Split pairs into calls of at most ``max_continuations`` continuations (pairs never split)."""
    size = max(1, max_continuations // 2)
    return [pairs[i : i + size] for i in range(0, len(pairs), size)]


class _Scores:
    """What one PRM call accumulates: step scores (NaN until judged), per-candidate errors, spend."""

    def __init__(self, steps: list[list[str]]) -> None:
        self.steps = steps
        self.scores: list[list[float]] = [[math.nan] * len(st) for st in steps]
        self.errors: dict[int, str] = {}
        self.spend = Spend()


class ProcessRewardModel(VerifierKind):
    info = VerifierInfo(name="prm", generative=True)

    def __init__(self, policy: PolicyScorer, settings: VerifierSettings) -> None:
        self.policy = policy
        self.settings = settings

    def validate(self, job: VerifyJob) -> None:
        require_problem(job, self.info.name)

    async def verify(self, job: VerifyJob) -> Outcome:
        s = self.settings
        steps = [split_steps(c, s.prm_max_steps) for c in job.candidates]
        header = prm_header(problem_text(job.problem))
        state = _Scores(steps)
        if s.prm_mode == "shared_prompt":
            await self._shared_prompt(job, header, state)
        else:
            await self._prefix_prompts(job, header, state)
        return self._verdicts(job, state)

    async def _shared_prompt(self, job: VerifyJob, header: JudgePrompt, state: _Scores) -> None:
        """Every prefix of every candidate as continuation pairs of one shared prompt: fewest calls."""
        s = self.settings
        pairs = plan_pairs(state.steps, s.prm_question, s.prm_yes, s.prm_no)

        async def call(batch: list[_Pair]) -> None:
            continuations = [text for p in batch for text in (p.yes, p.no)]
            try:
                result = await self.policy.score(header, continuations, model=job.model)
            except PolicyError as err:
                owners = sorted({p.candidate for p in batch})
                if len(owners) > 1 and isinstance(err, PolicyRefused):
                    # one refused candidate (say, too long for the context) must not sink the others
                    for owner in owners:
                        await call([p for p in batch if p.candidate == owner])
                    return
                for owner in owners:
                    state.errors[owner] = f"policy error: {err}"
                return
            state.spend.add(result.spend)
            for i, p in enumerate(batch):
                state.scores[p.candidate][p.step] = yes_probability(result.totals[2 * i], result.totals[2 * i + 1])

        batches = chunk(pairs, s.prm_max_continuations_per_call)
        await run_bounded([functools.partial(call, b) for b in batches], await self.policy.parallelism())

    async def _prefix_prompts(self, job: VerifyJob, header: JudgePrompt, state: _Scores) -> None:
        """One call per prefix with the prefix in the prompt and one-token labels; a candidate's
        prefixes go in order, so each prompt extends the previous one in the engine's prefix cache."""
        s = self.settings

        async def judge(c: int) -> None:
            steps = state.steps[c]
            for k in range(1, len(steps) + 1):
                prompt = JudgePrompt(text=header.text + prm_continuation(steps, k, s.prm_question, ""))
                try:
                    result = await self.policy.score(prompt, [s.prm_yes, s.prm_no], model=job.model)
                except PolicyError as err:
                    state.errors[c] = f"policy error: {err}"
                    return
                state.spend.add(result.spend)
                state.scores[c][k - 1] = yes_probability(result.totals[0], result.totals[1])

        limit = await self.policy.parallelism()
        await run_bounded([functools.partial(judge, c) for c in range(len(state.steps))], limit)

    def _verdicts(self, job: VerifyJob, state: _Scores) -> Outcome:
        steps, scores, errors = state.steps, state.scores, state.errors
        verdicts = []
        for c, candidate in enumerate(job.candidates):
            answer = answer_of(candidate)
            if c in errors:
                verdicts.append(Verdict(extracted_answer=answer, error=errors[c]))
            elif not steps[c]:
                verdicts.append(Verdict(extracted_answer=answer, feedback="empty candidate: no steps to judge"))
            else:
                score = aggregate(scores[c], job.aggregation)
                shown = ", ".join(f"{x:.3f}" for x in scores[c])
                verdicts.append(
                    Verdict(
                        score=score,
                        passed=score >= 0.5,
                        step_scores=[0.0 if math.isnan(x) else x for x in scores[c]],
                        extracted_answer=answer,
                        feedback=f"{len(steps[c])} steps, {job.aggregation.value} of step scores [{shown}]",
                    )
                )
        return Outcome(verdicts, state.spend)
