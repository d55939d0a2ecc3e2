"""A calibrated confidence for an answer: the probability that it is right (``ttc.confidence``).

Pure (no I/O beyond reading the model's JSON, no numpy), so the gateway and the worker can both
import it. A strategy already knows, when its search ends, how strongly its candidates agreed;
:class:`ConfidenceSignals` carries that, and :class:`Calibrator` maps it to a probability with a
model fitted offline on calibration pools (``evaluation/confidence/``), stored as a versioned
JSON file (``services/common/confidence.v1.json``).

The prompt's prior (``ConfidenceSignals.prior``): a linear model per kind of candidate
(programs, chains of thought; code completions when a model ships one) predicts, from the prompt's zero-token features
alone (``services/common/difficulty_features.py``: its MiniLM embedding, text counts, task
type), the share of that kind's candidates that are right on it. The vote cannot tell a
counting question the model always gets wrong from one it always gets right when both are
unanimous; the prompt's neighbours in calibration can. The models are fitted with the calibrator
(``evaluation/confidence/prior.py``) and shipped in the same JSON (``priors``); the feature
vector is computed by ``services/common/confidence_prompt.py``.

Models (``kind`` in the JSON; which one ships is chosen by grouped cross-validated log loss):

- ``logistic``: one logistic regression over a few features of the signals
  (:func:`features`) plus an intercept per configuration family;
- ``platt``: per family, a logistic regression on the logit of the vote share alone;
- ``isotonic``: per family, a monotone step function of the vote share (pool-adjacent-violators);
- ``shrunk``: no fit beyond the base rate: :func:`shrunk_share`.

Fallback, for a family the model was never fitted on (or no model at all): the raw vote share
shrunk toward the fitted base rate as if the base rate were ``prior_votes`` extra votes,
``(share * n + base_rate * prior_votes) / (n + prior_votes)``: one agreeing sample says little,
eight agreeing samples say more, and nothing answers with certainty. Probabilities are always
clipped to ``[CLIP, 1 - CLIP]``: a finite log loss, and no answer is ever reported certain.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

SCHEMA = "ttc-confidence/v1"
DEFAULT_PATH = Path(__file__).with_name("confidence.v1.json")
CLIP = 0.005
DEFAULT_BASE_RATE = 0.5
DEFAULT_PRIOR_VOTES = 2.0
ModelKind = Literal["logistic", "platt", "isotonic", "shrunk"]
# The strategy (or pinned configuration) -> the family its confidence is fitted per. A strategy
# not named here is looked up by its own name (and falls back when never fitted).
STRATEGY_FAMILY: dict[str, str] = {
    "single": "cot_greedy",
    "greedy": "cot_greedy",
    "self_consistency": "sc",
    "program_of_thought": "pot",
    "best_of_n": "bon",
    "weighted_vote": "wvote",
    "code_execution": "code_vote",
}
# The task types with a one-hot feature of their own; any other (``open``, or unknown) is the
# baseline. A single agreeing program is right far more often on a counting question than on a
# competition problem, and the vote alone cannot tell them apart (docs/confidence.md).
TASK_FEATURES: tuple[str, ...] = ("arithmetic", "math_word", "code", "computable")
FEATURES: tuple[str, ...] = (
    "logit_share",
    "log_votes",
    "distinct_frac",
    "abstain_frac",
    "agree",
    "judge",
    "prior",
    *(f"task:{t}" for t in TASK_FEATURES),
)


@dataclass(frozen=True)
class ConfidenceSignals:
    """What a search knows about its answer when it ends.

    ``vote_share``: the chosen answer's share of the vote weight (1.0 for a single answered
    candidate, 0.0 when nothing answered). ``votes``: ballots counted (candidates drawn,
    abstaining ones included). ``distinct``: distinct non-empty answers among them.
    ``abstained``: ballots with no answer. ``programs_agree``: whether the programs' vote and
    the chains of thought's vote chose the same answer (``None`` when the search had only one
    kind). ``judge_score`` (0..1) when the search had one. ``prior`` (0..1): the share of
    candidates of this configuration's kind predicted right on this prompt from its text alone
    (:meth:`Calibrator.prior`), ``None`` when no prior model or no features.
    ``task_type``: the prompt's task type by the gateway's rules
    (``services/common/task_type.py``), ``None`` when unknown. ``config``: the configuration
    family (:data:`STRATEGY_FAMILY` maps strategy names to it)."""

    config: str
    vote_share: float
    votes: int = 1
    distinct: int = 1
    abstained: int = 0
    programs_agree: bool | None = None
    judge_score: float | None = None
    prior: float | None = None
    task_type: str | None = None

    @property
    def family(self) -> str:
        return STRATEGY_FAMILY.get(self.config, self.config)


def logit(p: float) -> float:
    p = min(1.0 - 0.02, max(0.02, p))
    return math.log(p / (1.0 - p))


def sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def clip(p: float) -> float:
    return min(1.0 - CLIP, max(CLIP, p))


def features(s: ConfidenceSignals) -> list[float]:
    """The logistic model's features, in :data:`FEATURES` order: the vote share's logit, the log of
    the votes, the share of distinct answers and of abstentions, program/thought agreement
    (+1, -1, 0 unknown), the judge's score and the prompt's prior centred at 0.5 (0 when unknown),
    and the task type one-hot (:data:`TASK_FEATURES`; all 0 for ``open`` or unknown)."""
    n = max(1, s.votes)
    agree = 0.0 if s.programs_agree is None else (1.0 if s.programs_agree else -1.0)
    return [
        logit(s.vote_share),
        math.log(n),
        s.distinct / n,
        s.abstained / n,
        agree,
        0.0 if s.judge_score is None else s.judge_score - 0.5,
        0.0 if s.prior is None else s.prior - 0.5,
        *(1.0 if s.task_type == t else 0.0 for t in TASK_FEATURES),
    ]


def shrunk_share(s: ConfidenceSignals, base_rate: float, prior_votes: float) -> float:
    """The fallback: the vote share shrunk toward ``base_rate`` by ``prior_votes`` pseudo-votes."""
    n = max(1, s.votes)
    return clip((s.vote_share * n + base_rate * prior_votes) / (n + prior_votes))


def prior_kind(family: str) -> str:
    """The kind of candidate whose prior a configuration family reads: programs for program
    votes and the hybrid, code completions for code families, chains of thought otherwise."""
    if family in ("pot", "hybrid"):
        return "program"
    if family.startswith("code"):
        return "code"
    return "cot"


# ------------------------------------------------------------------------------------ models
@dataclass(frozen=True)
class LinearPrior:
    """The share of a kind's candidates predicted right on a prompt: ``clip(x . weights +
    intercept, 0, 1)`` over the prompt's feature vector (standardization folded in)."""

    weights: tuple[float, ...]
    intercept: float

    def __call__(self, x: Sequence[float]) -> float:
        if len(x) != len(self.weights):
            raise ValueError(f"prior: {len(x)} features for {len(self.weights)} weights")
        return min(1.0, max(0.0, self.intercept + sum(w * v for w, v in zip(self.weights, x, strict=True))))


@dataclass(frozen=True)
class Isotonic:
    """A monotone step function: ``values[i]`` for ``x`` in ``[edges[i], edges[i + 1])``."""

    edges: tuple[float, ...]
    values: tuple[float, ...]

    def __call__(self, x: float) -> float:
        out = self.values[0]
        for edge, value in zip(self.edges, self.values, strict=True):
            if x >= edge:
                out = value
        return out


@dataclass(frozen=True)
class Calibrator:
    """A fitted map from :class:`ConfidenceSignals` to the probability that the answer is right.

    ``coefficients``: for ``logistic``, ``{"features": [...], "intercept": [b],
    "family:<name>": [offset]}``;
    for ``platt``, ``{"<family>": [a, b]}`` (p = sigmoid(a * logit(share) + b)). ``isotonic``:
    per family its step function. ``families``: the families fitted; any other falls back."""

    kind: ModelKind = "shrunk"
    base_rate: float = DEFAULT_BASE_RATE
    prior_votes: float = DEFAULT_PRIOR_VOTES
    families: tuple[str, ...] = ()
    coefficients: Mapping[str, Sequence[float]] = field(default_factory=dict)
    isotonic: Mapping[str, Isotonic] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)
    priors: Mapping[str, LinearPrior] = field(default_factory=dict)  # by prior_kind
    prior_features: str = ""  # the feature layout the priors were fitted on (difficulty_features.FEATURE_SET)

    def prior(self, family: str, x: Sequence[float] | None) -> float | None:
        """The prompt's prior for a configuration family (``None`` without features or a model
        for its kind)."""
        model = self.priors.get(prior_kind(family))
        return None if model is None or x is None else model(x)

    def fitted(self, signals: ConfidenceSignals) -> bool:
        return self.kind != "shrunk" and signals.family in self.families

    def probability(self, signals: ConfidenceSignals) -> float:
        """The probability the answer is right. Nothing answered: the clip floor. A family never
        fitted: :func:`shrunk_share` toward the base rate."""
        if signals.vote_share <= 0.0:
            return CLIP
        if not self.fitted(signals):
            return shrunk_share(signals, self.base_rate, self.prior_votes)
        family = signals.family
        if self.kind == "logistic":
            weights = self.coefficients["features"]
            z = self.coefficients["intercept"][0] + self.coefficients[f"family:{family}"][0]
            z += sum(w * x for w, x in zip(weights, features(signals), strict=True))
            return clip(sigmoid(z))
        if self.kind == "platt":
            a, b = self.coefficients[family]
            return clip(sigmoid(a * logit(signals.vote_share) + b))
        return clip(self.isotonic[family](signals.vote_share))

    # -------------------------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "kind": self.kind,
            "base_rate": self.base_rate,
            "prior_votes": self.prior_votes,
            "clip": CLIP,
            "features": list(FEATURES),
            "families": list(self.families),
            "coefficients": {k: list(v) for k, v in sorted(self.coefficients.items())},
            "isotonic": {k: asdict(v) for k, v in sorted(self.isotonic.items())},
            "priors": {
                "features": self.prior_features,
                "models": {
                    k: {"intercept": v.intercept, "weights": list(v.weights)} for k, v in sorted(self.priors.items())
                },
            },
            "provenance": dict(self.provenance),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibrator:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"confidence model: schema {data.get('schema')!r}, expected {SCHEMA!r}")
        if data.get("kind") == "logistic" and list(data.get("features", [])) != list(FEATURES):
            raise ValueError(f"confidence model: features {data.get('features')} are not this code's {list(FEATURES)}")
        kind = data["kind"]
        priors = data.get("priors") or {}
        if priors.get("models") and not priors.get("features"):
            raise ValueError("confidence model: priors without the name of their feature layout")
        if kind not in ("logistic", "platt", "isotonic", "shrunk"):
            raise ValueError(f"confidence model: unknown kind {kind!r}")
        return cls(
            kind=kind,
            base_rate=float(data["base_rate"]),
            prior_votes=float(data["prior_votes"]),
            families=tuple(data.get("families", ())),
            coefficients={k: tuple(float(x) for x in v) for k, v in data.get("coefficients", {}).items()},
            isotonic={
                k: Isotonic(tuple(float(x) for x in v["edges"]), tuple(float(x) for x in v["values"]))
                for k, v in data.get("isotonic", {}).items()
            },
            provenance=dict(data.get("provenance", {})),
            priors={
                k: LinearPrior(tuple(float(x) for x in v["weights"]), float(v["intercept"]))
                for k, v in priors.get("models", {}).items()
            },
            prior_features=str(priors.get("features", "")),
        )

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: Path = DEFAULT_PATH) -> Calibrator:
        """The model at ``path``; the unfitted fallback (:func:`shrunk_share` toward 0.5) when
        the file does not exist, so a checkout without a fitted model still answers."""
        if not path.exists():
            return cls()
        return cls.from_dict(json.loads(path.read_text()))


@functools.cache
def shipped() -> Calibrator:
    """The model shipped beside this module, read once per process (what a worker or the
    gateway calls per answer)."""
    return Calibrator.load(DEFAULT_PATH)


def confidence(signals: ConfidenceSignals) -> float:
    """``ttc.confidence`` for an answer with these signals, by the shipped model."""
    return shipped().probability(signals)
