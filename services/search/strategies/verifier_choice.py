"""Which verifier a strategy uses and what it needs, validated before any call.

Names and the ensemble rule are the verifier service's own (``services/common/verifiers.py``),
so a job the verifier would refuse is refused here first, naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.common.errors import InvalidArgument
from services.common.verifiers import HARD_VERIFIERS, VERIFIER_NAMES, check_ensemble
from services.search.interfaces import AGGREGATIONS, Aggregation
from services.search.params import Params
from services.search.strategies.config import StrategyInput


@dataclass(frozen=True)
class VerifierChoice:
    """A validated verifier and the extra inputs it needs."""

    name: str
    aggregation: Aggregation = "min"
    reference: str = ""
    code: Mapping[str, Any] | None = None
    format_pattern: str = ""
    ensemble: tuple[tuple[str, float], ...] = ()

    @property
    def hard(self) -> bool:
        return self.name in HARD_VERIFIERS


def read_verifier(
    spec: StrategyInput, params: Params, *, default: str, default_aggregation: Aggregation = "min"
) -> VerifierChoice:
    """Validate the verifier a strategy will use and everything it requires, naming fields."""
    name = spec.verifier or default
    if name not in VERIFIER_NAMES:
        raise InvalidArgument(
            f"unknown verifier {name!r}; known: {', '.join(VERIFIER_NAMES)}", field="strategy.verifier"
        )
    aggregation = params.string("aggregation", default_aggregation, choices=AGGREGATIONS)
    format_pattern = params.string("format_pattern", "")
    code = params.mapping("code")
    raw_ensemble = params.mapping("ensemble")
    if name == "math_equivalence" and not spec.reference.strip():
        raise InvalidArgument("verifier 'math_equivalence' needs a reference answer", field="reference")
    if name == "format" and not format_pattern:
        raise InvalidArgument("verifier 'format' needs strategy.params.format_pattern", field="strategy.verifier")
    if name == "code_tests" and not (code and code.get("tests")):
        raise InvalidArgument("verifier 'code_tests' needs strategy.params.code.tests", field="strategy.verifier")
    ensemble: tuple[tuple[str, float], ...] = ()
    if name == "ensemble":
        if not raw_ensemble:
            raise InvalidArgument(
                "verifier 'ensemble' needs strategy.params.ensemble {name: weight}", field="strategy.params.ensemble"
            )
        # The verifier's own rule (one place, services/common/verifiers.py): all-zero weights too.
        check_ensemble([(str(k), v) for k, v in raw_ensemble.items()], field="strategy.params.ensemble", keyed=True)
        ensemble = tuple((str(k), float(v)) for k, v in raw_ensemble.items())
    return VerifierChoice(
        name=name,
        aggregation=aggregation,  # type: ignore[arg-type]
        reference=spec.reference,
        code=code,
        format_pattern=format_pattern,
        ensemble=ensemble,
    )
