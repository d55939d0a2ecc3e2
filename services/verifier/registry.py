"""The verifiers this service offers, by request name, built once with their dependencies."""

from __future__ import annotations

from services.common.errors import InvalidArgument
from services.verifier.base import VerifierKind
from services.verifier.code import CodeTests
from services.verifier.ensemble import Ensemble
from services.verifier.orm import OutcomeRewardModel
from services.verifier.prm import ProcessRewardModel
from services.verifier.rule import FormatCheck, MathEquivalence
from services.verifier.settings import VerifierSettings
from services.verifier.types import PolicyScorer, SandboxRunner


class Registry:
    """Name → verifier. Unknown names are the caller's error, reported on the ``verifier`` field."""

    def __init__(self, kinds: list[VerifierKind]) -> None:
        self._kinds = {k.info.name: k for k in kinds}

    def add(self, kind: VerifierKind) -> None:
        self._kinds[kind.info.name] = kind

    def find(self, name: str) -> VerifierKind | None:
        return self._kinds.get(name)

    def get(self, name: str) -> VerifierKind:
        kind = self._kinds.get(name)
        if kind is None:
            known = ", ".join(sorted(self._kinds))
            raise InvalidArgument(f"unknown verifier {name!r}; known: {known}", field="verifier")
        return kind

    def all(self) -> list[VerifierKind]:
        return list(self._kinds.values())


def build_registry(settings: VerifierSettings, policy: PolicyScorer, sandbox: SandboxRunner) -> Registry:
    """Every verifier kind wired to the given policy and sandbox ports."""
    kinds: list[VerifierKind] = [
        MathEquivalence(),
        FormatCheck(settings.max_pattern_chars),
        CodeTests(sandbox, settings.code_concurrency),
        OutcomeRewardModel(policy, settings),
        ProcessRewardModel(policy, settings),
    ]
    registry = Registry(kinds)
    registry.add(Ensemble(registry.find))
    return registry
