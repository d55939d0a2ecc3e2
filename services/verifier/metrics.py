"""Verifier metrics, on the process's ``ServiceMetrics`` registry (names ``ttc_verifier_*``)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from services.common.metrics import ServiceMetrics

SCORE_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)


class VerifierMetrics:
    """Candidates judged, their outcomes and scores, and the policy calls judges made."""

    def __init__(self, base: ServiceMetrics) -> None:
        self.base = base
        r = base.registry
        self.candidates = Counter(
            "ttc_verifier_candidates_total",
            "Candidates judged, by verifier and outcome (passed, failed, error).",
            ["verifier", "outcome"],
            registry=r,
        )
        self.scores = Histogram(
            "ttc_verifier_score",
            "Scores returned, by verifier.",
            ["verifier"],
            buckets=SCORE_BUCKETS,
            registry=r,
        )
        self.policy_calls = Counter(
            "ttc_verifier_policy_calls_total", "Policy Score calls made by generative verifiers.",
            ["verifier"], registry=r,
        )  # fmt: skip

    def observe(
        self, verifier: str, model: str, outcomes: list[tuple[float, bool, bool]], prompt: int, completion: int,
        cached: int, policy_calls: int,
    ) -> None:  # fmt: skip
        """Record one call: ``outcomes`` holds (score, passed, errored) per candidate."""
        for score, passed, errored in outcomes:
            label = "error" if errored else ("passed" if passed else "failed")
            self.candidates.labels(verifier, label).inc()
            if not errored:
                self.scores.labels(verifier).observe(score)
        if policy_calls:
            self.policy_calls.labels(verifier).inc(policy_calls)
        self.base.count_tokens(model or "default", prompt=prompt, generated=completion, cached=cached)
