"""The load-test client reads usage as the gateway reports it."""

from __future__ import annotations

from types import SimpleNamespace

from loadtests.client import Reply, _usage


def test_client_reads_cached_tokens_from_usage() -> None:
    reply = Reply()
    usage = SimpleNamespace(
        prompt_tokens=30, completion_tokens=9,
        prompt_tokens_details=SimpleNamespace(cached_tokens=12),
        completion_tokens_details=SimpleNamespace(reasoning_tokens=4),
    )  # fmt: skip
    _usage(reply, usage)
    assert (reply.prompt_tokens, reply.cached_tokens, reply.completion_tokens, reply.reasoning_tokens) == (30, 12, 9, 4)
