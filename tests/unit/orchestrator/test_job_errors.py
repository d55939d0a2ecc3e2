"""Typed job errors, built the way the code really builds them.

A component outage travels as typed attributes (``ComponentError.code`` → ``ComponentFailed``
→ ``Execution`` → the serialized ``JobError`` in ``SearchResult.error``) and the gateway's
one mapper turns the code into the HTTP status: no string is parsed on the way.
"""

from __future__ import annotations

import pytest

from services.common.grpc_client import insecure_channel
from services.gateway.errors import JobFailed, to_error
from services.gateway.formatting import raise_for_failure, report_of
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.errors import JobError
from services.jobs.record import JobRecord
from services.orchestrator.clients import GrpcPolicy, GrpcVerifier
from services.search.interfaces import ComponentError
from services.search.run import run_search
from tests.helpers.processes import free_port
from tests.helpers.search_fakes import ScriptedPolicy, ScriptedVerifier, contains, stepwise
from tests.helpers.search_jobs import make_job


class DownAfter(ScriptedPolicy):
    """The policy answers ``ok_calls`` calls, then is unreachable (what ``GrpcPolicy`` raises)."""

    ok_calls: int = 0

    async def generate(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if len(self.calls) >= self.ok_calls:
            self.calls.append(None)  # type: ignore[arg-type]
            raise ComponentError("policy", "connection refused", "UNAVAILABLE")
        return await super().generate(*args, **kwargs)


async def test_policy_unreachable_before_any_candidate_is_503_with_retry_after() -> None:
    port = free_port()  # nothing listens: the real gRPC adapter raises a real UNAVAILABLE
    async with insecure_channel(f"127.0.0.1:{port}") as channel:
        job = make_job("single")
        result, _ = await run_search(job, GrpcPolicy(channel, timeout=10), GrpcVerifier(channel, timeout=10))
    assert result.termination == orchestrator_pb2.TERMINATION_ERROR and not result.answer
    error = JobError.of_result(result)
    assert error is not None
    assert (error.code, error.component) == ("UNAVAILABLE", "policy")
    with pytest.raises(JobFailed) as failed:
        raise_for_failure(result)
    status, detail, headers = to_error(failed.value)
    assert status == 503
    assert detail.type == "server_error" and detail.code == "service_unavailable"
    assert "policy service is unavailable" in detail.message
    assert int(headers["Retry-After"]) > 0


async def test_policy_outage_after_candidates_returns_best_so_far_with_typed_error() -> None:
    policy = DownAfter(stepwise(["42", "41"]))
    policy.ok_calls = 1
    job = make_job("revision", n=1, params={"rounds": 2})
    result, _ = await run_search(job, policy, ScriptedVerifier(contains("99")))
    assert result.termination == orchestrator_pb2.TERMINATION_ERROR
    assert result.answer.strip()
    raise_for_failure(result)  # the documented rule: 200 with the best answer so far
    report = report_of(result, JobRecord(effort_requested="high", effort_applied="high"))
    assert report.termination == "error"
    assert report.error is not None
    assert (report.error.code, report.error.component) == ("UNAVAILABLE", "policy")


async def test_verifier_outage_is_typed_too() -> None:
    class DownVerifier(ScriptedVerifier):
        async def verify(self, call):  # type: ignore[no-untyped-def]
            raise ComponentError("verifier", "connection refused", "UNAVAILABLE")

    result, _ = await run_search(
        make_job("best_of_n", n=2, verifier="orm"), ScriptedPolicy(stepwise(["42"])), DownVerifier(contains("42"))
    )
    error = JobError.of_result(result)
    assert error is not None and (error.code, error.component) == ("UNAVAILABLE", "verifier")
    assert result.answer.strip()  # candidates existed before the verifier failed


async def test_a_plain_crash_is_internal_and_a_500() -> None:
    policy = ScriptedPolicy(stepwise(["42"]), fail_on_call=1)  # raises a plain RuntimeError
    result, _ = await run_search(make_job("single"), policy, ScriptedVerifier(contains("42")))
    error = JobError.of_result(result)
    assert error is not None and (error.code, error.component) == ("INTERNAL", "policy")
    with pytest.raises(JobFailed) as failed:
        raise_for_failure(result)
    status, detail, _ = to_error(failed.value)
    assert (status, detail.code) == (500, "search_failed")


def test_invalid_argument_names_the_field_and_text_is_never_parsed() -> None:
    invalid = orchestrator_pb2.SearchResult(
        termination=orchestrator_pb2.TERMINATION_ERROR,
        error=JobError("INVALID_ARGUMENT", "too long", "max_tokens").to_json(),
    )
    with pytest.raises(JobFailed) as failed:
        raise_for_failure(invalid)
    status, detail, _ = to_error(failed.value)
    assert (status, detail.param) == (400, "max_tokens")
    # Free text that merely looks like a code stays INTERNAL: nothing is read out of strings.
    text = orchestrator_pb2.SearchResult(error="policy: UNAVAILABLE: connection refused")
    assert JobError.of_result(text) == JobError("INTERNAL", "policy: UNAVAILABLE: connection refused")
    with pytest.raises(ValueError):
        JobError("NOT_A_CODE", "x")
