"""Rule verifiers: mathematical equivalence to a reference, and format checks.

Cheap and objective, but they cannot tell a lucky right answer from a sound one (PRIMER §6).
Extraction and equivalence come from ``services.common.answers`` so that a verdict here and
a vote in a strategy agree on what a candidate's answer is.
"""

from __future__ import annotations

import re

from services.common.answers import answers_equivalent, extract_answer, extract_boxed
from services.common.errors import InvalidArgument
from services.verifier.base import VerifierInfo, VerifierKind
from services.verifier.types import Outcome, Verdict, VerifyJob


def reference_answer(reference: str) -> str:
    """The reference as an answer: the content of a ``\\boxed{}`` when it carries one."""
    boxed = extract_boxed(reference)
    return boxed if boxed is not None else reference.strip()


def judge_equivalence(candidate: str, reference: str) -> Verdict:
    """Pass when the candidate's extracted answer equals the reference mathematically."""
    answer = extract_answer(candidate)
    if answer is None:
        return Verdict(score=0.0, passed=False, feedback="no final answer found in the candidate")
    ok = answers_equivalent(answer, reference)
    feedback = f"answer {answer!r} {'matches' if ok else 'does not match'} the reference"
    return Verdict(score=1.0 if ok else 0.0, passed=ok, extracted_answer=answer, feedback=feedback)


class MathEquivalence(VerifierKind):
    info = VerifierInfo(name="math_equivalence", needs_reference=True)

    def validate(self, job: VerifyJob) -> None:
        if not job.reference.strip():
            raise InvalidArgument("math_equivalence needs a reference answer to compare with", field="reference")

    async def verify(self, job: VerifyJob) -> Outcome:
        # Runs on the event loop's (main) thread on purpose: math-verify's timeout uses SIGALRM,
        # which only works there, and an unbounded sympy call would be worse than a short block.
        reference = reference_answer(job.reference)
        return Outcome([judge_equivalence(c, reference) for c in job.candidates])


def compile_pattern(pattern: str, max_chars: int) -> re.Pattern[str]:
    """The format regex, or ``InvalidArgument`` on ``format_pattern`` when it is unusable."""
    if len(pattern) > max_chars:
        raise InvalidArgument(f"format_pattern is longer than {max_chars} characters", field="format_pattern")
    try:
        return re.compile(pattern)
    except re.error as err:
        raise InvalidArgument(
            f"format_pattern is not a valid regular expression: {err}", field="format_pattern"
        ) from err


def judge_format(candidate: str, pattern: re.Pattern[str] | None) -> Verdict:
    """With a pattern: pass when it matches anywhere; without: pass when a ``\\boxed{}`` is present."""
    if pattern is None:
        boxed = extract_boxed(candidate)
        if boxed is None:
            return Verdict(score=0.0, passed=False, feedback="no \\boxed{...} answer found")
        return Verdict(score=1.0, passed=True, extracted_answer=boxed, feedback="boxed answer present")
    match = pattern.search(candidate)
    if match is None:
        return Verdict(score=0.0, passed=False, feedback=f"does not match format pattern {pattern.pattern!r}")
    found = match.group(1) if pattern.groups else match.group(0)
    return Verdict(score=1.0, passed=True, extracted_answer=found or "", feedback="matches the format pattern")


class FormatCheck(VerifierKind):
    info = VerifierInfo(name="format")

    def __init__(self, max_pattern_chars: int) -> None:
        self.max_pattern_chars = max_pattern_chars

    def validate(self, job: VerifyJob) -> None:
        if job.format_pattern:
            compile_pattern(job.format_pattern, self.max_pattern_chars)

    async def verify(self, job: VerifyJob) -> Outcome:
        pattern = compile_pattern(job.format_pattern, self.max_pattern_chars) if job.format_pattern else None
        return Outcome([judge_format(c, pattern) for c in job.candidates])
