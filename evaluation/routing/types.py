"""The shared types of calibration: per-problem priced statistics, the choice of one route, and
the two constants every stage prices cost with.

Pricing turns pools into per-problem estimates; the route fit, the development ladder, the learned
routers and the frontier all read them as :class:`ProblemStats` (one per problem, one
:class:`ConfigStats` per configuration) and name a route's pick as a :class:`Choice`. Costs are
generated-token equivalents: generated + :data:`PREFILL_WEIGHT` x prompt tokens, and an effort's
budget is :data:`BUDGET_MULTIPLES` times one greedy sample's mean cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Effort budgets, in multiples of one greedy sample's mean cost.
BUDGET_MULTIPLES = {"none": 1.0, "minimal": 1.0, "low": 2.0, "medium": 4.0, "high": 8.0, "xhigh": 16.0}
# What one prompt (prefill) token costs in generated (decode) tokens: the ratio of the default
# prices in EvaluationSettings (0.05 vs 0.20 USD per million). Configuration costs are priced
# in generated-token equivalents, so a verifier that prefills long judge prompts is not
# charged as if it had decoded them.
PREFILL_WEIGHT = 0.25
ANY_BIN = "*"  # services/gateway/routing.py's one-route-for-every-bin key


@dataclass
class ConfigStats:
    """One configuration's outcome on one problem: priced from its pool, measured live, or imputed
    (means over its runs)."""

    accuracy: float
    tokens: float  # cost per request in generated-token equivalents: generated + prefill_weight * prompt
    requests: int
    prompt_tokens: float = 0.0  # mean prefill tokens per request (policy, judges, probe)
    generated_tokens: float = 0.0  # mean decoded tokens per request
    candidates: float | None = None  # mean candidates drawn, where the pricing knows it (adaptive replays)


@dataclass
class ProblemStats:
    """One problem and every configuration's outcome on it."""

    problem_id: str
    question: str
    level: int
    configs: dict[str, ConfigStats] = field(default_factory=dict)
    pass1: float = 0.0  # mean correctness of all single candidates seen for this problem


@dataclass(frozen=True)
class Choice:
    """The configuration a route takes, with its mean accuracy and cost on the problems it was chosen on."""

    config: str
    accuracy: float
    tokens: float
    problems: int
