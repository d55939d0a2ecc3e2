"""Difficulty estimators: how hard a prompt looks before compute is allocated to it.

Two estimators, chosen (with their parameters) by the routing table file:
- ``probe`` (Snell et al. estimate difficulty from the model's own samples): draw a few short
  samples from the policy and measure how much their normalized answers agree. Unanimity
  suggests an easy prompt; scattered answers a hard one. It is not free - its tokens are
  returned so the response's usage counts them as reasoning.
- ``embedding``: a ridge regression, fitted by calibration on measured 1 - pass@1, over the
  prompt's MiniLM embedding and a few text counts (``services/common/difficulty_features.py``).
  It generates nothing: the numpy encoder runs in the gateway process
  (``services/common/embedding.py``, no torch).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from services.common.answers import normalize_for_vote
from services.common.difficulty_features import difficulty_features, estimation_text
from services.common.embedding import Encoder
from services.gateway.routing import EstimatorSpec, RidgeParams
from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc


@dataclass(frozen=True)
class Estimate:
    difficulty: float  # 0 = easy .. 1 = hard
    prompt_tokens: int = 0
    generated_tokens: int = 0
    cached_tokens: int = 0


class DifficultyEstimator(Protocol):
    async def estimate(self, model: str, messages: Sequence[tuple[str, str]], prompt: str) -> Estimate: ...


def agreement_difficulty(answers: Sequence[str]) -> float:
    """1 - (share of samples in the largest agreeing cluster); samples without an answer never agree."""
    if not answers:
        return 1.0
    keyed = [a for a in answers if a]
    if not keyed:
        return 1.0
    largest = Counter(keyed).most_common(1)[0][1]
    if largest == 1 and len(answers) > 1:
        return 1.0
    return 1.0 - largest / len(answers)


class ProbeEstimator:
    """A few short policy samples (one batched call) and the agreement of their answers."""

    def __init__(self, policy: policy_pb2_grpc.PolicyStub, spec: EstimatorSpec, timeout_s: float = 30.0) -> None:
        self.policy = policy
        self.spec = spec
        self.timeout_s = timeout_s

    async def estimate(self, model: str, messages: Sequence[tuple[str, str]], prompt: str) -> Estimate:
        request = policy_pb2.GenerateRequest(
            model=model,
            input=policy_pb2.PromptInput(
                messages=[common_pb2.ChatMessage(role=r, content=c) for r, c in messages], prompt=prompt
            ),
            sampling=policy_pb2.SamplingParams(
                n=self.spec.samples,
                base_seed=0x5EED,
                max_tokens=self.spec.max_tokens,
                temperature=self.spec.temperature,
            ),
        )
        reply = await self.policy.Generate(request, timeout=self.timeout_s)
        answers = [normalize_for_vote(c.text) for c in reply.candidates]
        return Estimate(
            difficulty=agreement_difficulty(answers),
            prompt_tokens=reply.usage.prompt_tokens,
            generated_tokens=reply.usage.completion_tokens,
            cached_tokens=reply.usage.cached_tokens,
        )


class EmbeddingEstimator:
    """The calibrated ridge over the prompt's embedding and text features: zero tokens."""

    def __init__(self, encoder: Encoder, ridge: RidgeParams) -> None:
        self.encoder = encoder
        self.weights = np.asarray(ridge.weights) / np.asarray(ridge.scale)  # fold the standardization in
        self.intercept = ridge.bias - float(np.asarray(ridge.mean) @ self.weights)

    def difficulty(self, text: str) -> float:
        """clip(((x - mean) / scale) · w + b, 0, 1), the fitted RidgeEstimator's prediction."""
        x = difficulty_features(self.encoder.embed_one(text), text)
        return float(np.clip(x @ self.weights + self.intercept, 0.0, 1.0))

    async def estimate(self, model: str, messages: Sequence[tuple[str, str]], prompt: str) -> Estimate:
        # Milliseconds of numpy (which releases the GIL): off the event loop, so other requests keep moving.
        return Estimate(difficulty=await asyncio.to_thread(self.difficulty, estimation_text(messages, prompt)))


def load_encoder(spec: EstimatorSpec) -> Encoder | None:
    """The MiniLM encoder when the table's estimator needs one (built once per app, at start-up)."""
    return Encoder.packaged() if spec.kind == "embedding" else None


def make_estimator(
    spec: EstimatorSpec, policy: policy_pb2_grpc.PolicyStub, timeout_s: float, encoder: Encoder | None = None
) -> DifficultyEstimator | None:
    """The estimator the routing table names (``None`` when it disables estimation)."""
    if spec.kind == "probe":
        return ProbeEstimator(policy, spec, timeout_s)
    if spec.kind == "embedding":
        if encoder is None or spec.ridge is None:
            raise ValueError("the embedding estimator needs an encoder (load_encoder) and fitted ridge parameters")
        return EmbeddingEstimator(encoder, spec.ridge)
    return None
