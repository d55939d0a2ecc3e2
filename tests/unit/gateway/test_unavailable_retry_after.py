"""Every 503 says when to retry: the fast 503 of a policy that stopped answering
(``upstream.PolicyWatch.require_up`` raises ``Unavailable``) carries Retry-After like a job's
UNAVAILABLE does. Found by the chaos suite (docs/reliability.md): its policy restarts answered
503 without one."""

from __future__ import annotations

from services.common.errors import InvalidArgument, Unavailable
from services.gateway.errors import UNAVAILABLE_RETRY_AFTER_S, to_error


def test_policy_unavailable_503_has_retry_after() -> None:
    status, detail, headers = to_error(Unavailable("the policy service at 127.0.0.1:1 is unavailable"))
    assert status == 503 and detail.type == "server_error"
    assert headers == {"Retry-After": str(UNAVAILABLE_RETRY_AFTER_S)}


def test_other_service_errors_have_no_retry_after() -> None:
    status, _, headers = to_error(InvalidArgument("bad", field="messages"))
    assert status == 400 and headers == {}
