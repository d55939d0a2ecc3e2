"""Replies in OpenAI's shapes: tool calls, n choices, logprobs, stream chunks, ``ttc.strategy_fallback``;
and the fleet of policy deployments (aliases, listing, 404 model_not_found)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from services.common.errors import Unavailable
from services.gateway.errors import HTTPError
from services.gateway.fleet import PolicyFleet, RoutedPolicy, fleet_targets, parse_pairs
from services.gateway.formatting import response_of
from services.gateway.streaming import Chunks
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2, policy_pb2
from services.jobs.record import JobRecord, StrategyFallback


def _logprobs(*tokens: str) -> list[common_pb2.TokenLogprob]:
    return [
        common_pb2.TokenLogprob(
            token=t, logprob=-0.5 * i, top_logprobs=[common_pb2.TopLogprob(token=t, logprob=-0.5 * i)]
        )
        for i, t in enumerate(tokens)
    ]


CALL = common_pb2.ToolCall(id="call_abc", name="get_weather", arguments='{"city":"Paris"}')


def _result(**extra: Any) -> orchestrator_pb2.SearchResult:
    return orchestrator_pb2.SearchResult(
        job_id="j1",
        strategy="self_consistency",
        termination=orchestrator_pb2.TERMINATION_COMPLETED,
        budget_used=orchestrator_pb2.BudgetUse(generated_tokens=30, prompt_tokens=40),
        answer_tokens=4,
        **extra,
    )


def _record(**extra: Any) -> JobRecord:
    return JobRecord(model="m", created_at=1.0, strategy="self_consistency", n=3, **extra)


def test_a_tool_call_answer_is_openai_s_tool_calls_message() -> None:
    body = response_of(_result(tool_calls=[CALL]), _record()).model_dump(exclude_none=True)
    reply = ChatCompletion.model_validate(body)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert call.id == "call_abc" and call.type == "function"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}


def test_n_choices_come_from_the_chosen_answer_and_the_alternatives_with_logprobs() -> None:
    result = _result(
        answer="42",
        finish_reason="stop",
        logprobs=_logprobs("4", "2"),
        alternatives=[orchestrator_pb2.Answer(text="41", finish_reason="length", logprobs=_logprobs("41"), votes=1)],
    )
    fallback = StrategyFallback(requested="beam_search", applied="self_consistency", reason="beam cannot")
    body = response_of(result, _record(logprobs=True, strategy_fallback=fallback)).model_dump(exclude_none=True)
    reply = ChatCompletion.model_validate(body)
    assert [(c.index, c.message.content, c.finish_reason) for c in reply.choices] == [
        (0, "42", "stop"),
        (1, "41", "length"),
    ]
    assert reply.choices[0].logprobs is not None and reply.choices[0].logprobs.content is not None
    tokens = reply.choices[0].logprobs.content
    assert [t.token for t in tokens] == ["4", "2"] and tokens[1].logprob == -0.5
    assert tokens[0].bytes == list(b"4") and tokens[1].top_logprobs[0].token == "2"
    assert body["ttc"]["strategy_fallback"] == fallback.model_dump()
    assert response_of(result, _record()).choices[0].logprobs is None  # not asked: not sent


def test_completions_logprobs_are_the_legacy_parallel_lists() -> None:
    result = _result(answer="Hi!", logprobs=_logprobs("Hi", "!"))
    body = response_of(result, _record(kind="text_completion", logprobs=True)).model_dump(exclude_none=True)
    reply = Completion.model_validate(body)
    lp = reply.choices[0].logprobs
    assert lp is not None
    assert lp.tokens == ["Hi", "!"] and lp.token_logprobs == [0.0, -0.5] and lp.text_offset == [0, 2]
    assert lp.top_logprobs == [{"Hi": 0.0}, {"!": -0.5}]


def _events(chunks: list[bytes]) -> list[dict[str, Any]]:
    out = []
    for raw in chunks:
        assert raw.startswith(b"data: ") and raw.endswith(b"\n\n")
        out.append(json.loads(raw[6:]))
    return out


def test_a_stream_ends_with_tool_call_deltas_other_choices_logprobs_finish_and_usage() -> None:
    chunks = Chunks("chat", "j1", "m", 1)
    streamed = [chunks.role(), chunks.content("Let me "), chunks.content("check.")]
    result = _result(
        answer="Let me check.",
        tool_calls=[CALL],
        logprobs=_logprobs("Let", " me"),
        alternatives=[orchestrator_pb2.Answer(text="Sunny.", finish_reason="stop")],
    )
    ending = chunks.ending(result, _record(logprobs=True, include_usage=True), "Let me check.")
    events = _events(streamed + ending)
    for event in events:
        ChatCompletionChunk.model_validate(event)
    content = "".join(
        e["choices"][0]["delta"].get("content", "") for e in events if e["choices"] and e["choices"][0]["index"] == 0
    )
    assert content == "Let me check."  # nothing streamed twice
    calls = [d for e in events if e["choices"] for d in e["choices"][0]["delta"].get("tool_calls", [])]
    assert calls == [
        {
            "index": 0,
            "id": "call_abc",
            "type": "function",
            "function": {"name": "get_weather", "arguments": CALL.arguments},
        }
    ]
    finishes = [
        (e["choices"][0]["index"], e["choices"][0]["finish_reason"])
        for e in events
        if e["choices"] and e["choices"][0].get("finish_reason")
    ]
    assert finishes == [(0, "tool_calls"), (1, "stop")]
    last = next(e for e in events if e["choices"] and e["choices"][0]["finish_reason"] == "tool_calls")
    assert [t["token"] for t in last["choices"][0]["logprobs"]["content"]] == ["Let", " me"]
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 30


def test_an_unstreamed_answer_is_sent_whole_at_the_end() -> None:
    chunks = Chunks("completions", "j1", "m", 1)
    events = _events(chunks.ending(_result(answer="Hello"), _record(kind="text_completion"), ""))
    Completion.model_validate(events[-1])  # earlier chunks carry finish_reason null, as OpenAI's do
    assert [e["choices"][0]["text"] for e in events] == ["Hello", ""]
    assert events[0]["choices"][0]["finish_reason"] is None
    assert events[-1]["choices"][0]["finish_reason"] == "stop"


# ---------------------------------------------------------------- fleet


class FakeWatch:
    def __init__(self, target: str, models: list[str], up: bool = True, kv: float = 0.0) -> None:
        self.target, self.up, self.kv_utilization = target, up, kv
        self.models = {m: policy_pb2.ModelInfo(id=m, engine="llamacpp", max_context=4096) for m in models}
        self.last_error = "" if up else "UNAVAILABLE: down"
        self.stub = self

    def require_up(self) -> None:
        if not self.up:
            raise Unavailable(f"the policy service at {self.target} is unavailable")

    def Generate(
        self, request: policy_pb2.GenerateRequest, timeout: float | None = None, wait_for_ready: bool = False
    ) -> Any:
        assert wait_for_ready  # a probe sent while the policy restarts waits for it
        return (self.target, request.model)


def _fleet(*watches: FakeWatch, aliases: str = "") -> PolicyFleet:
    return PolicyFleet(watches, parse_pairs(aliases, "aliases"))  # type: ignore[arg-type]


def test_the_fleet_lists_every_deployment_and_routes_by_model_and_alias() -> None:
    qwen, smol = FakeWatch("a:1", ["qwen"], kv=0.2), FakeWatch("b:2", ["smol"], kv=0.7)
    fleet = _fleet(qwen, smol, aliases="gpt-4o-mini=qwen")
    assert sorted(fleet.models) == ["qwen", "smol"]
    assert fleet.model("gpt-4o-mini").id == "qwen" and fleet.resolve("gpt-4o-mini") == "qwen"
    assert fleet.model("smol").id == "smol"
    assert fleet.kv_utilization == 0.7
    probe = RoutedPolicy(fleet)
    assert probe.Generate(policy_pb2.GenerateRequest(model="gpt-4o-mini")) == ("a:1", "qwen")
    assert probe.Generate(policy_pb2.GenerateRequest(model="smol")) == ("b:2", "smol")
    with pytest.raises(HTTPError) as err:
        fleet.model("gpt-5")
    assert (err.value.status, err.value.code, err.value.param) == (404, "model_not_found", "model")
    assert "qwen" in err.value.message and "gpt-4o-mini" in err.value.message


def test_a_down_deployment_is_503_for_its_models_only() -> None:
    fleet = _fleet(FakeWatch("a:1", ["qwen"]), FakeWatch("b:2", [], up=False))
    assert fleet.up and fleet.model("qwen").id == "qwen"
    with pytest.raises(Unavailable):
        fleet.model("smol")  # perhaps served by the deployment that is down
    with pytest.raises(Unavailable):
        _fleet(FakeWatch("a:1", [], up=False)).model("qwen")


def test_targets_and_aliases_parse_or_fail_naming_the_entry() -> None:
    assert fleet_targets("a:1", "qwen=b:2, smol=a:1") == ["a:1", "b:2"]
    assert parse_pairs("", "x") == {}
    with pytest.raises(ValueError, match="'oops'"):
        parse_pairs("oops", "TTC_GATEWAY_MODEL_ALIASES")
    with pytest.raises(ValueError, match="twice"):
        parse_pairs("a=b,a=c", "TTC_GATEWAY_MODEL_ALIASES")
