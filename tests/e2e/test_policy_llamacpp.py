"""The policy service on the real llama.cpp engine and the real SmolLM2, as a separate process."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest

from services.common.errors import FIELD_METADATA_KEY
from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from tests.e2e import policy_tool_checks as tool_checks
from tests.helpers.processes import ServiceProcess, free_port, grpc_healthy, start_policy
from tests.helpers.prompts import COUNTING_PROMPT

pytestmark = pytest.mark.e2e

QUESTION = "Name three colours of the rainbow."


@pytest.fixture(scope="module")
def policy_process() -> Iterator[ServiceProcess]:
    """The policy service on SmolLM2, healthy (a test that freezes it needs the process)."""
    port = free_port()
    proc = start_policy("smollm2-135m", port, free_port(), TTC_POLICY_STATS_INTERVAL_S="0.2")
    try:
        proc.wait_until(lambda: grpc_healthy(f"127.0.0.1:{port}"), timeout=180)
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def policy(policy_process: ServiceProcess) -> Iterator[tuple[policy_pb2_grpc.PolicyStub, str]]:
    """A stub of ``policy_process`` and the URL of its metrics."""
    env = policy_process.env
    with grpc.insecure_channel(f"127.0.0.1:{env['TTC_POLICY_PORT']}") as channel:
        yield policy_pb2_grpc.PolicyStub(channel), f"http://127.0.0.1:{env['TTC_POLICY_METRICS_PORT']}/metrics"


def chat(text: str = QUESTION) -> policy_pb2.PromptInput:
    return policy_pb2.PromptInput(messages=[common_pb2.ChatMessage(role="user", content=text)])


def generate(stub: policy_pb2_grpc.PolicyStub, **sampling: Any) -> policy_pb2.GenerateResponse:
    inp = sampling.pop("input", None) or chat()
    reply: policy_pb2.GenerateResponse = stub.Generate(
        policy_pb2.GenerateRequest(input=inp, sampling=policy_pb2.SamplingParams(**sampling)),
        timeout=600,  # type: ignore[arg-type]
    )
    return reply


def count(stub: policy_pb2_grpc.PolicyStub, text: str) -> int:
    return int(stub.Tokenize(policy_pb2.TokenizeRequest(input=policy_pb2.PromptInput(prompt=text))).count)


def metric(url: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in httpx.get(url, timeout=5).text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_health_and_models(policy: tuple[policy_pb2_grpc.PolicyStub, str]) -> None:
    stub, _ = policy
    models = stub.ListModels(policy_pb2.ListModelsRequest()).models
    assert [m.id for m in models] == ["smollm2-135m"] and models[0].engine == "llamacpp"


def test_n4_candidates_with_consistent_token_counts(policy: tuple[policy_pb2_grpc.PolicyStub, str]) -> None:
    stub, _ = policy
    reply = generate(stub, n=4, max_tokens=32, temperature=0.9, base_seed=7)
    assert [c.index for c in reply.candidates] == [0, 1, 2, 3]
    assert reply.model == "smollm2-135m"
    assert reply.usage.completion_tokens == sum(c.completion_tokens for c in reply.candidates)
    prompt_count = stub.Tokenize(policy_pb2.TokenizeRequest(input=chat())).count
    assert reply.usage.prompt_tokens == prompt_count
    for c in reply.candidates:
        assert c.text
        assert 1 <= c.completion_tokens <= 32
        assert c.finish_reason in (policy_pb2.FINISH_REASON_STOP, policy_pb2.FINISH_REASON_LENGTH)
        # re-tokenizing the text gives (about) the tokens generated; a stop candidate also spent its EOS token
        spent_on_text = c.completion_tokens - (1 if c.finish_reason == policy_pb2.FINISH_REASON_STOP else 0)
        assert abs(count(stub, c.text) - spent_on_text) <= 3
    assert len({c.seed for c in reply.candidates}) == 4


def test_seeds_reproduce_and_differ(policy: tuple[policy_pb2_grpc.PolicyStub, str]) -> None:
    stub, _ = policy
    a = generate(stub, n=4, seeds=[11, 11, 12, 13], max_tokens=24, temperature=1.0)
    generate(stub, n=1, max_tokens=4, input=chat("Something else entirely."))  # evict the cached prompt
    b = generate(stub, n=4, seeds=[11, 11, 12, 13], max_tokens=24, temperature=1.0)
    texts = [c.text for c in a.candidates]
    assert texts[0] == texts[1]  # same seed inside one call
    assert [c.text for c in b.candidates] == texts  # the same request again, prompt cache cold or warm
    assert len(set(texts)) >= 2  # different seeds, (almost surely) different texts
    base1 = generate(stub, n=3, base_seed=99, max_tokens=16, temperature=1.0)
    base2 = generate(stub, n=3, base_seed=99, max_tokens=16, temperature=1.0)
    assert [c.text for c in base1.candidates] == [c.text for c in base2.candidates]
    assert [c.seed for c in base1.candidates] == [c.seed for c in base2.candidates]


def test_greedy_is_deterministic(policy: tuple[policy_pb2_grpc.PolicyStub, str]) -> None:
    stub, _ = policy
    a = generate(stub, n=2, max_tokens=24, temperature=0.0, seeds=[1, 2])
    b = generate(stub, n=1, max_tokens=24, temperature=0.0, seeds=[3])
    assert a.candidates[0].text == a.candidates[1].text == b.candidates[0].text


def test_stop_sequence_cuts_the_text(policy: tuple[policy_pb2_grpc.PolicyStub, str]) -> None:
    stub, _ = policy
    full = generate(stub, n=1, max_tokens=40, temperature=0.0).candidates[0].text
    words = re.findall(r"[A-Za-z]{4,}", full[6:])
    assert words, f"greedy text too short to pick a stop word from: {full!r}"
    stop = words[0]
    cut = generate(stub, n=1, max_tokens=40, temperature=0.0, stop=[stop]).candidates[0]
    assert cut.finish_reason == policy_pb2.FINISH_REASON_STOP
    assert cut.text == full[: full.index(stop)]
    assert stop not in cut.text


def test_logprobs(policy: tuple[policy_pb2_grpc.PolicyStub, str]) -> None:
    stub, _ = policy
    c = generate(stub, n=1, max_tokens=12, temperature=0.0, logprobs=True, top_logprobs=3).candidates[0]
    assert len(c.logprobs) == c.completion_tokens
    for t in c.logprobs:
        assert t.logprob <= 0.0
        assert len(t.top_logprobs) == 3
        tops = [a.logprob for a in t.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        assert t.top_logprobs[0].token_id == t.token_id  # greedy takes the most likely token
        assert abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5


def test_score(policy: tuple[policy_pb2_grpc.PolicyStub, str]) -> None:
    stub, _ = policy
    reply = stub.Score(
        policy_pb2.ScoreRequest(
            input=chat("What is the capital of France?"),
            continuations=["The capital of France is Paris.", "Purple elephants quantum sandwich the."],
        ),
        timeout=600,
    )
    assert len(reply.scores) == 2
    for s in reply.scores:
        assert s.tokens and all(t.logprob <= 0 for t in s.tokens)
        assert abs(s.total_logprob - sum(t.logprob for t in s.tokens)) < 1e-3
    assert reply.scores[0].total_logprob > reply.scores[1].total_logprob
    assert reply.usage.prompt_tokens > sum(len(s.tokens) for s in reply.scores)


def test_stream_matches_unary(policy: tuple[policy_pb2_grpc.PolicyStub, str]) -> None:
    stub, _ = policy
    unary = generate(stub, n=2, seeds=[5, 6], max_tokens=20, temperature=0.8)
    texts = ["", ""]
    finishes = [0, 0]
    usage = None
    request = policy_pb2.GenerateRequest(
        input=chat(), sampling=policy_pb2.SamplingParams(n=2, seeds=[5, 6], max_tokens=20, temperature=0.8)
    )
    for chunk in stub.GenerateStream(request, timeout=600):
        if chunk.HasField("usage"):
            usage = chunk.usage
            continue
        texts[chunk.index] += chunk.text_delta
        if chunk.finish_reason:
            finishes[chunk.index] = chunk.finish_reason
    assert texts == [c.text for c in unary.candidates]
    assert finishes == [c.finish_reason for c in unary.candidates]
    assert usage is not None and usage.completion_tokens == unary.usage.completion_tokens


def test_stream_logprobs_match_unary(policy: tuple[policy_pb2_grpc.PolicyStub, str]) -> None:
    """Greedy GenerateStream with logprobs gives the unary call's tokens and logprobs, each
    chunk carrying the tokens of its own text; a stop string that never matches makes the
    engine hold text back, and the held tokens' logprobs wait for it (none lost, none twice)."""
    stub, _ = policy
    sampling = {"n": 2, "seeds": [1, 2], "max_tokens": 16, "temperature": 0.0, "logprobs": True, "top_logprobs": 2}
    for stop in ([], ["zqxj"]):
        unary = generate(stub, stop=stop, **sampling)
        request = policy_pb2.GenerateRequest(input=chat(), sampling=policy_pb2.SamplingParams(stop=stop, **sampling))
        chunks = [c for c in stub.GenerateStream(request, timeout=600) if not c.HasField("usage")]
        for c in unary.candidates:
            mine = [chunk for chunk in chunks if chunk.index == c.index]
            streamed = [t for chunk in mine for t in chunk.logprobs]
            assert [t.token_id for t in streamed] == [t.token_id for t in c.logprobs]
            assert len(streamed) == c.completion_tokens
            for got, want in zip(streamed, c.logprobs, strict=True):
                assert abs(got.logprob - want.logprob) < 1e-4
                assert [a.token_id for a in got.top_logprobs] == [a.token_id for a in want.top_logprobs]
            assert "".join(chunk.text_delta for chunk in mine) == c.text == "".join(t.token for t in streamed)
            if not stop:  # nothing held back: each chunk carries exactly the tokens of its text
                assert all("".join(t.token for t in chunk.logprobs) == chunk.text_delta for chunk in mine)


BAD = [
    ({"sampling": {"n": 0, "max_tokens": 8}}, "sampling.n"),
    ({"sampling": {"n": 65, "max_tokens": 8}}, "sampling.n"),
    ({"sampling": {"n": 1, "max_tokens": 8, "temperature": -0.5}}, "sampling.temperature"),
    ({"sampling": {"n": 1, "max_tokens": 8, "top_p": 1.5}}, "sampling.top_p"),
    ({"sampling": {"n": 1, "max_tokens": 100000}}, "sampling.max_tokens"),
    ({"sampling": {"n": 1, "max_tokens": 0}}, "sampling.max_tokens"),
    ({"sampling": {"n": 2, "max_tokens": 8, "seeds": [1]}}, "sampling.seeds"),
    ({"sampling": {"n": 1, "max_tokens": 8, "top_logprobs": 21}}, "sampling.top_logprobs"),
    ({"model": "gpt-99", "sampling": {"n": 1, "max_tokens": 8}}, "model"),
    ({"input": {}, "sampling": {"n": 1, "max_tokens": 8}}, "input"),
    ({"input": {"messages": [{"role": "user", "content": ""}]}, "sampling": {"n": 1, "max_tokens": 8}}, "input"),
]


@pytest.mark.parametrize(("fields", "bad_field"), BAD, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD)])
def test_bad_input_is_invalid_argument_naming_the_field(
    policy: tuple[policy_pb2_grpc.PolicyStub, str], fields: dict[str, object], bad_field: str
) -> None:
    stub, _ = policy
    raw_input = fields.get("input")
    inp = chat() if raw_input is None else policy_pb2.PromptInput(**raw_input)  # type: ignore[arg-type]
    request = policy_pb2.GenerateRequest(
        model=str(fields.get("model", "")),
        input=inp,
        sampling=policy_pb2.SamplingParams(**fields["sampling"]),  # type: ignore[arg-type]
    )
    with pytest.raises(grpc.RpcError) as err:
        stub.Generate(request, timeout=120)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (FIELD_METADATA_KEY, bad_field) in (err.value.trailing_metadata() or ())
    assert bad_field in (err.value.details() or "")


def endless(n: int, max_tokens: int) -> policy_pb2.GenerateRequest:
    """A request that decodes for all of ``max_tokens``: a raw counting prompt, decoded greedily,
    continues the sequence instead of ending it (a sampled chat answer can end every candidate
    within a second on a fast host, before a deadline or a stats poll sees it running)."""
    return policy_pb2.GenerateRequest(
        input=policy_pb2.PromptInput(prompt=COUNTING_PROMPT),
        sampling=policy_pb2.SamplingParams(n=n, max_tokens=max_tokens, temperature=0.0),
    )


def wait_idle(stub: policy_pb2_grpc.PolicyStub, within_s: float = 15.0) -> policy_pb2.EngineStats:
    """Stats once the engine runs nothing (a 2000-token n=4 decode would take minutes)."""
    deadline = time.monotonic() + within_s
    while True:
        stats = stub.GetStats(policy_pb2.StatsRequest(), timeout=5)
        if stats.running_requests == 0 or time.monotonic() > deadline:
            return stats
        time.sleep(0.1)


def test_deadline_aborts_the_engine_request(
    policy: tuple[policy_pb2_grpc.PolicyStub, str], policy_process: ServiceProcess
) -> None:
    stub, url = policy
    before = metric(url, "ttc_policy_aborted_requests_total", reason="deadline")
    call = stub.Generate.future(endless(n=4, max_tokens=2000), timeout=1.5)
    while not call.done() and stub.GetStats(policy_pb2.StatsRequest(), timeout=5).running_requests < 1:
        time.sleep(0.02)
    # Frozen while the engine runs it, the request cannot finish before its deadline however fast
    # this host decodes; let go, the policy finds the deadline passed and aborts it.
    with policy_process.paused(), pytest.raises(grpc.RpcError) as err:
        call.result()
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    stats = wait_idle(stub)
    assert stats.running_requests == 0, "the engine kept decoding after the deadline"
    assert stats.kv_cache_utilization == 0.0  # the candidates' sequences were freed
    deadline = time.monotonic() + 5
    while metric(url, "ttc_policy_aborted_requests_total", reason="deadline") < before + 1:
        assert time.monotonic() < deadline, "the deadline abort was not counted"
        time.sleep(0.1)
    assert metric(url, "ttc_policy_aborted_requests_total", reason="deadline") == before + 1


def test_stats_report_live_kv_utilization(policy: tuple[policy_pb2_grpc.PolicyStub, str]) -> None:
    stub, url = policy
    idle = stub.GetStats(policy_pb2.StatsRequest(), timeout=5)
    assert idle.engine == "llamacpp" and idle.model == "smollm2-135m" and idle.max_context > 0
    assert 0.0 <= idle.kv_cache_utilization <= 1.0
    cancelled_before = metric(url, "ttc_policy_aborted_requests_total", reason="cancelled")
    request = endless(n=8, max_tokens=1500)
    call = stub.Generate.future(request, timeout=300)
    peak = 0.0
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and peak == 0.0:
            stats = stub.GetStats(policy_pb2.StatsRequest(), timeout=5)
            assert 0.0 <= stats.kv_cache_utilization <= 1.0
            peak = max(peak, stats.kv_cache_utilization)
            time.sleep(0.1)
    finally:
        call.cancel()
    assert peak > 0.0
    assert metric(url, "ttc_kv_cache_utilization", engine="llamacpp") >= 0.0
    stats = wait_idle(stub)
    assert stats.running_requests == 0 and stats.kv_cache_utilization == 0.0
    deadline = time.monotonic() + 5
    while metric(url, "ttc_policy_aborted_requests_total", reason="cancelled") < cancelled_before + 1:
        assert time.monotonic() < deadline, "client cancellation was not counted as an abort"
        time.sleep(0.1)


# -- tools and structured outputs on Qwen2.5-Coder-0.5B, whose template renders tools ----------


@pytest.fixture(scope="module")
def qwen() -> Iterator[policy_pb2_grpc.PolicyStub]:
    port = free_port()
    proc = start_policy("qwen2.5-coder-0.5b", port)
    try:
        proc.wait_until(lambda: grpc_healthy(f"127.0.0.1:{port}"), timeout=300)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield policy_pb2_grpc.PolicyStub(channel)
    finally:
        proc.stop()


def test_json_schema_constrains_every_candidate(qwen: policy_pb2_grpc.PolicyStub) -> None:
    tool_checks.check_json_schema(qwen)
    tool_checks.check_json_object(qwen)


def test_required_and_named_tool_choice_yield_valid_calls(qwen: policy_pb2_grpc.PolicyStub) -> None:
    tool_checks.check_required_tool(qwen)
    tool_checks.check_named_tool(qwen)


def test_tool_round_trip_renders_and_generates(qwen: policy_pb2_grpc.PolicyStub) -> None:
    tool_checks.check_round_trip(qwen)


def test_stream_holds_back_tool_call_syntax(qwen: policy_pb2_grpc.PolicyStub) -> None:
    tool_checks.check_stream_holds_back_calls(qwen)


def test_tools_on_a_template_without_tools(policy: tuple[policy_pb2_grpc.PolicyStub, str]) -> None:
    """SmolLM2's template has no tools: they go in the Hermes system prompt, the grammar still
    forces a well-formed call."""
    stub, _ = policy
    tool_checks.check_required_tool(stub)


def test_bad_schemas_and_tools_are_invalid_argument(policy: tuple[policy_pb2_grpc.PolicyStub, str]) -> None:
    stub, _ = policy
    tool_checks.check_bad_input(stub)
