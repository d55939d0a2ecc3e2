"""Every strategy streams what it is doing: through the real stack (Redis, a Celery
worker, the policy service on SmolLM2, the gateway), with the official ``openai`` SDK, at the
default effort and at ``high``, a streaming chat request and a streaming Responses request on an
arithmetic prompt, a code prompt and an open prompt.

For each: the first reasoning delta arrives before the search ends (before the answer's first
content delta in chat; before the final lifecycle event in the Responses API) and a delta of
model tokens (label ``kind: "tokens"``) comes before the answer (a route to one ``single``
sample has no search to stream: its tokens are the answer, streamed token by token); every reasoning delta carries
its label (``delta.ttc`` / the event's ``ttc``), and the Responses stream is accepted by the
SDK's accumulator. The time to first token (the first model token: reasoning tokens or answer)
and the time to the last token per case go to ``docs/data/streaming/e2e-<date>.json``.

Cheap by construction: small answers (``max_tokens`` 48) and a cap on all generated tokens.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai import omit

from evaluation.pools.provenance import DATA, ROOT, load_average, provenance
from services.gateway.settings import GatewaySettings
from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import RedisServer

pytestmark = pytest.mark.e2e

PROMPTS = {
    "arithmetic": "What is 17 + 25? Answer with a number.",
    "code": "Write a Python function square(x) that returns x squared.",
    "open": "Name three colors of the rainbow.",
}
EFFORTS = ("default", "high")
MAX_TOKENS = 48  # each visible answer
TOTAL_TOKENS = 256  # everything a chat request generates: the search stays short
RESPONSE_TOKENS = 512  # max_output_tokens, which also caps the answer: room for it not to be cut
RECORDS: list[dict[str, Any]] = []
ROUTING_TABLE = GatewaySettings.model_fields["routing_table"].default


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer) -> Iterator[GatewayStack]:
    # The gateway's own default routing table (v2), so each prompt takes the route a user's would.
    s = GatewayStack(redis_server, gateway_env={"TTC_GATEWAY_ROUTING_TABLE": str(ROOT / ROUTING_TABLE)})
    started = provenance(MODEL)
    try:
        s.start_policy()
        s.start_worker()
        s.start_gateway()
        yield s
    finally:
        s.stop()
        if RECORDS:
            started["load_average_end"] = load_average()
            out = DATA / "streaming" / f"e2e-{time.strftime('%Y%m%d', time.gmtime())}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps({"provenance": started, "results": RECORDS}, indent=1) + "\n")


@pytest.fixture(scope="module")
def client(stack: GatewayStack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0, timeout=120)


def _effort(effort: str) -> Any:
    return omit if effort == "default" else effort


@pytest.mark.parametrize("effort", EFFORTS)
@pytest.mark.parametrize("prompt", list(PROMPTS))
def test_chat_streams_the_search_as_labelled_model_tokens_before_the_answer(
    client: openai.OpenAI, prompt: str, effort: str
) -> None:
    start = time.perf_counter()
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": PROMPTS[prompt]}],
        max_tokens=MAX_TOKENS,
        max_completion_tokens=TOTAL_TOKENS,
        stream=True,
        stream_options={"include_usage": True},
        reasoning_effort=_effort(effort),
    )
    seen: list[tuple[float, str, str]] = []  # (time, what, kind): reasoning or content
    report: dict[str, Any] = {}
    for chunk in stream:
        now = time.perf_counter() - start
        report = (chunk.model_extra or {}).get("ttc") or report
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        extra = delta.model_extra or {}
        if extra.get("reasoning_content"):
            label = extra.get("ttc")
            assert isinstance(label, dict) and label.get("source") and label.get("kind") in ("tokens", "event"), extra
            seen.append((now, "reasoning", label["kind"]))
        if delta.content:
            seen.append((now, "content", "tokens"))
    _check_and_record("chat", prompt, effort, seen, report.get("strategy"))


@pytest.mark.parametrize("effort", EFFORTS)
@pytest.mark.parametrize("prompt", list(PROMPTS))
def test_responses_stream_the_search_as_a_reasoning_item_before_the_message(
    client: openai.OpenAI, prompt: str, effort: str
) -> None:
    start = time.perf_counter()
    reasoning: Any = omit if effort == "default" else {"effort": effort}
    seen: list[tuple[float, str, str]] = []
    types: list[str] = []
    last: Any = None
    with client.responses.stream(
        model=MODEL,
        input=PROMPTS[prompt],
        max_output_tokens=RESPONSE_TOKENS,
        reasoning=reasoning,
    ) as stream:
        for event in stream:  # each event goes through the SDK's accumulator as it is read
            now = time.perf_counter() - start
            types.append(event.type)
            if event.type == "response.reasoning_text.delta":
                label = (event.model_extra or {}).get("ttc")
                assert isinstance(label, dict) and label.get("source") and label.get("kind") in ("tokens", "event")
                seen.append((now, "reasoning", label["kind"]))
            elif event.type == "response.output_text.delta":
                seen.append((now, "content", "tokens"))
            elif event.type in ("response.completed", "response.incomplete"):
                last, ended = event, now
        assert last is not None, f"no final lifecycle event: {types[-5:]}"
        # The accumulator's final object exists for a completed response only (the SDK's rule);
        # an answer cut at the cap ends with response.incomplete and its own final object.
        final: Any = stream.get_final_response() if last.type == "response.completed" else last.response
    assert final.output and final.output[0].type == "reasoning"
    if any(kind == "reasoning" for _, kind, _ in seen):
        assert final.output[0].content, "the final reasoning item holds the streamed reasoning text"
    assert final.output_text.strip()
    strategy = (final.model_extra or {}).get("ttc", {}).get("strategy")
    _check_and_record("responses", prompt, effort, seen, strategy, ended=ended, final=last.type)


def _check_and_record(
    endpoint: str,
    prompt: str,
    effort: str,
    seen: list[tuple[float, str, str]],
    strategy: str | None,
    ended: float | None = None,
    final: str | None = None,
) -> None:
    case = f"{endpoint}/{prompt}/{effort} ({strategy})"
    reasoning = [s for s in seen if s[1] == "reasoning"]
    content = [s for s in seen if s[1] == "content"]
    assert content, f"{case}: no answer"
    if strategy == "single" and not reasoning:
        # One sample that decodes the reply itself: its tokens are the answer, streamed as they
        # come (docs/streaming.md, "What does not stream as reasoning"), so they come as content.
        assert len(content) > 1, f"{case}: the single sample's answer came in one chunk"
    else:
        assert reasoning, f"{case}: no reasoning streamed while the search ran"
        first_tokens = next((s for s in reasoning if s[2] == "tokens"), None)
        assert first_tokens is not None, f"{case}: no model tokens in the reasoning"
        assert reasoning[0][0] <= content[0][0] and first_tokens[0] <= content[0][0]  # before the answer
        if ended is not None:
            assert first_tokens[0] < ended
    model_tokens = [s for s in seen if s[2] == "tokens"]
    RECORDS.append(
        {
            "endpoint": endpoint,
            "prompt": prompt,
            "effort": effort,
            "strategy": strategy,
            "time_to_first_token_s": round(model_tokens[0][0], 3),
            "time_to_last_token_s": round(model_tokens[-1][0], 3),
            "time_to_first_answer_token_s": round(content[0][0], 3),
            "reasoning_deltas": len(reasoning),
            "reasoning_token_deltas": sum(s[2] == "tokens" for s in reasoning),
            "content_deltas": len(content),
            **({"final_event": final} if final else {}),
        }
    )
