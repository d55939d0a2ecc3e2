"""What every verifier kind provides: a description, a cheap validation, and the scoring."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from services.common.answers import extract_answer
from services.common.errors import InvalidArgument
from services.verifier.types import Outcome, VerifyJob


@dataclass(frozen=True)
class VerifierInfo:
    name: str
    needs_reference: bool = False
    needs_code: bool = False
    generative: bool = False


class VerifierKind(ABC):
    """One verifier. ``validate`` runs before any compute and raises ``InvalidArgument``."""

    info: VerifierInfo

    @abstractmethod
    def validate(self, job: VerifyJob) -> None:
        """Reject a job this verifier cannot judge, naming the request field at fault."""

    @abstractmethod
    async def verify(self, job: VerifyJob) -> Outcome:
        """One verdict per candidate, in order."""


def require_problem(job: VerifyJob, verifier: str) -> None:
    """Generative judges judge an answer *to a problem*: without it their score means nothing."""
    if not any(m.content.strip() for m in job.problem):
        raise InvalidArgument(f"the {verifier} verifier needs the problem messages to judge against", field="problem")


def answer_of(candidate: str) -> str:
    """The candidate's extracted final answer, ``""`` when it states none (for weighted votes)."""
    return extract_answer(candidate) or ""
