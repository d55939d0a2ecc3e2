"""The Verifier gRPC servicer: validate everything, then judge all candidates in one go.

Validation happens before any compute (no policy or sandbox call for a request that is
missing what its verifier needs); scores leave the service cleaned (NaN → 0, clamped to
[0, 1]); generative spend is reported in ``usage`` and counted in metrics.
"""

from __future__ import annotations

import logging

import grpc

from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc
from services.verifier.metrics import VerifierMetrics
from services.verifier.registry import Registry
from services.verifier.settings import VerifierSettings
from services.verifier.types import (
    Aggregation,
    CodeSpec,
    Message,
    Outcome,
    VerifyJob,
    WeightedName,
    clean_score,
)

log = logging.getLogger(__name__)

_AGGREGATIONS = {
    verifier_pb2.STEP_AGGREGATION_UNSPECIFIED: Aggregation.MIN,
    verifier_pb2.STEP_AGGREGATION_MIN: Aggregation.MIN,
    verifier_pb2.STEP_AGGREGATION_PRODUCT: Aggregation.PRODUCT,
    verifier_pb2.STEP_AGGREGATION_MEAN: Aggregation.MEAN,
    verifier_pb2.STEP_AGGREGATION_LAST: Aggregation.LAST,
}


def job_from_request(request: verifier_pb2.VerifyRequest, settings: VerifierSettings) -> VerifyJob:
    """The request as plain data, with the checks every verifier shares."""
    if not request.candidates:
        raise InvalidArgument("at least one candidate is required", field="candidates")
    if len(request.candidates) > settings.max_candidates:
        raise InvalidArgument(
            f"{len(request.candidates)} candidates exceed the limit of {settings.max_candidates}", field="candidates"
        )
    for i, candidate in enumerate(request.candidates):
        if len(candidate) > settings.max_candidate_chars:
            raise InvalidArgument(
                f"candidate is longer than {settings.max_candidate_chars} characters", field=f"candidates[{i}]"
            )
    if request.aggregation not in _AGGREGATIONS:
        raise InvalidArgument(f"unknown step aggregation {request.aggregation}", field="aggregation")
    code = request.code
    return VerifyJob(
        verifier=request.verifier,
        candidates=tuple(request.candidates),
        problem=tuple(Message(m.role, m.content) for m in request.problem),
        reference=request.reference,
        code=CodeSpec(
            tests=tuple(code.tests),
            entry_point=code.entry_point,
            limits=code.limits if code.HasField("limits") else None,
        ),
        aggregation=_AGGREGATIONS[request.aggregation],
        ensemble=tuple(WeightedName(w.name, w.weight) for w in request.ensemble),
        format_pattern=request.format_pattern,
        model=request.model or settings.default_model,
        request_id=request.request_id,
    )


def response_from_outcome(outcome: Outcome) -> verifier_pb2.VerifyResponse:
    """The wire response; every score is cleaned here, whatever a verifier produced."""
    verdicts = [
        verifier_pb2.CandidateVerdict(
            score=clean_score(v.score),
            passed=v.passed and not v.error,
            step_scores=[clean_score(s) for s in v.step_scores],
            extracted_answer=v.extracted_answer,
            feedback=v.feedback,
            error=v.error,
        )
        for v in outcome.verdicts
    ]
    s = outcome.spend
    usage = common_pb2.Usage(
        prompt_tokens=s.prompt_tokens, completion_tokens=s.completion_tokens, cached_tokens=s.cached_tokens
    )
    return verifier_pb2.VerifyResponse(verdicts=verdicts, usage=usage)


class VerifierServicer(verifier_pb2_grpc.VerifierServicer):
    """Dispatches a Verify call to the named verifier kind."""

    def __init__(self, registry: Registry, settings: VerifierSettings, metrics: VerifierMetrics) -> None:
        self.registry = registry
        self.settings = settings
        self.metrics = metrics

    async def Verify(
        self, request: verifier_pb2.VerifyRequest, context: grpc.aio.ServicerContext
    ) -> verifier_pb2.VerifyResponse:
        kind = self.registry.get(request.verifier)
        job = job_from_request(request, self.settings)
        kind.validate(job)
        outcome = await kind.verify(job)
        if len(outcome.verdicts) != len(job.candidates):
            raise RuntimeError(f"{job.verifier} returned {len(outcome.verdicts)} verdicts for {len(job.candidates)}")
        response = response_from_outcome(outcome)
        s = outcome.spend
        self.metrics.observe(
            job.verifier,
            job.model,
            [(v.score, v.passed, bool(v.error)) for v in response.verdicts],
            s.prompt_tokens,
            s.completion_tokens,
            s.cached_tokens,
            s.policy_calls,
        )
        log.info(
            "verified",
            extra={
                "verifier": job.verifier,
                "candidates": len(job.candidates),
                "passed": sum(v.passed for v in response.verdicts),
                "errors": sum(bool(v.error) for v in response.verdicts),
                "policy_calls": s.policy_calls,
                "tokens": s.prompt_tokens + s.completion_tokens,
            },
        )
        return response

    async def ListVerifiers(
        self, request: verifier_pb2.ListVerifiersRequest, context: grpc.aio.ServicerContext
    ) -> verifier_pb2.ListVerifiersResponse:
        return verifier_pb2.ListVerifiersResponse(
            verifiers=[
                verifier_pb2.VerifierInfo(
                    name=k.info.name,
                    needs_reference=k.info.needs_reference,
                    needs_code=k.info.needs_code,
                    generative=k.info.generative,
                )
                for k in self.registry.all()
            ]
        )
