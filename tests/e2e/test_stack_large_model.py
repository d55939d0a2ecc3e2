"""``ttc stack`` serves a second, larger model beside the default one when TTC_STACK_LARGE_MODEL
asks for it: its own policy deployment, listed by /v1/models, and requests
for it are generated there (its policy's token counter moves, the default one's does not).
CI's machine has the two packaged models, so the "large" one here is Qwen2.5-Coder-0.5B beside
SmolLM2; `make models-large` prepares the 1.5B for the real pairing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from loadtests.chaos_stack import LocalStack, free_port

pytestmark = pytest.mark.e2e

LARGE = "qwen2.5-coder-0.5b"


SMALL = LocalStack.model
ROOT = Path(__file__).resolve().parents[2]
# What every route at `high` runs in the small model's table: a cascade at a threshold no vote
# reaches, so the small model's chain of thought is skipped and the large one answers greedily.
ESCALATING_ROUTE = {
    "strategy": "cascade",
    "n": 1,
    "token_budget": 64,
    "params": {
        "inner": "self_consistency",
        "threshold": 1.0,
        "large_inner": "single",
        "large_params": {"greedy": True},
    },
}


def _escalating_table(directory: Path) -> Path:
    """The shipped default table with `high` routed to the cascade onto LARGE, for every task type."""
    table = json.loads((ROOT / "services/gateway/routing/routing.v2.json").read_text())
    for routes in [table["routes"], *table.get("task_routes", {}).values()]:
        routes["high"] = {"*": ESCALATING_ROUTE}
    table["escalation_model"] = LARGE
    path = directory / f"routing.{SMALL}+{LARGE}.json"
    path.write_text(json.dumps(table))
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalStack, int]]:
    metrics_port = free_port()
    table = _escalating_table(tmp_path_factory.mktemp("tables"))
    s = LocalStack(
        concurrency=2,
        extra_env={
            "TTC_STACK_LARGE_MODEL": LARGE,
            "TTC_STACK_LARGE_MODEL_PORT": str(free_port()),
            "TTC_STACK_LARGE_MODEL_METRICS_PORT": str(metrics_port),
            "TTC_GATEWAY_ROUTING_TABLES": f"{SMALL}={table}",
        },
    )
    try:
        s.start()
        yield s, metrics_port
    finally:
        s.stop()


def _generated_tokens(metrics_port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("ttc_tokens_total{") and 'kind="generated"' in line
    )


def test_both_models_are_served_and_the_large_one_generates_on_its_own_deployment(
    stack: tuple[LocalStack, int],
) -> None:
    s, large_metrics = stack
    client = OpenAI(base_url=f"{s.url}/v1", api_key="unused", max_retries=0)
    assert {m.id for m in client.models.list()} >= {s.model, LARGE}
    small_before = _generated_tokens(s.ports["policy_metrics"])
    large_before = _generated_tokens(large_metrics)
    reply = client.chat.completions.create(
        model=LARGE,
        messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=8,
        reasoning_effort="none",
    )
    assert reply.model == LARGE and reply.choices[0].message.content
    assert _generated_tokens(large_metrics) > large_before
    assert _generated_tokens(s.ports["policy_metrics"]) == small_before


def test_a_pinned_cascade_escalates_to_the_large_model_exactly_when_its_trace_says_so(
    stack: tuple[LocalStack, int],
) -> None:
    """The stack makes its large model the cascade's escalation target. Whether SmolLM2's vote
    settles, escalates, or is skipped because even a unanimous vote could not settle it (the
    prompt's prior) is up to the models; in every case the trace's decision and both policies'
    token counters agree, and an escalated answer's usage counts every model's candidates."""
    s, large_metrics = stack
    client = OpenAI(base_url=f"{s.url}/v1", api_key="unused", max_retries=0, timeout=600)
    large_before, small_before = _generated_tokens(large_metrics), _generated_tokens(s.ports["policy_metrics"])
    reply = client.chat.completions.create(
        model=s.model,
        messages=[{"role": "user", "content": "Name a colour of the rainbow. Answer with one word."}],
        max_tokens=24,
        temperature=1.0,
        extra_body={"ttc": {"strategy": "cascade", "n": 4, "params": {"inner": "self_consistency", "threshold": 0.9}}},
    )
    ttc = reply.model_extra["ttc"]  # type: ignore[index]
    assert ttc["strategy"] == "cascade" and reply.choices[0].message.content
    nodes = httpx.get(f"{s.url}/v1/traces/{ttc['trace_id']}", timeout=30).json()["nodes"]
    decisions = [n for n in nodes if n["action"] in ("escalate", "settled")]
    assert len(decisions) == 1
    escalated = decisions[0]["action"] == "escalate"
    skipped = "small model skipped" in decisions[0]["text"]
    assert (_generated_tokens(large_metrics) > large_before) is escalated
    assert (_generated_tokens(s.ports["policy_metrics"]) > small_before) is not skipped
    assert ttc["candidates_generated"] == (8 if escalated and not skipped else 4)


def test_a_cascade_can_answer_with_the_large_models_greedy_chain_of_thought(stack: tuple[LocalStack, int]) -> None:
    """``large_inner: single`` with ``large_params: {greedy: true}``, at a threshold no vote
    reaches (1.0): the small model's chain of thought is skipped (even unanimous it could not
    settle it) and one greedy chain of thought runs on the large deployment; a bad
    ``large_params`` key is a 400 naming it, and nothing runs."""
    import openai

    s, large_metrics = stack
    client = OpenAI(base_url=f"{s.url}/v1", api_key="unused", max_retries=0, timeout=600)
    params = {"inner": "self_consistency", "threshold": 1.0, "large_inner": "single", "large_params": {"greedy": True}}
    large_before, small_before = _generated_tokens(large_metrics), _generated_tokens(s.ports["policy_metrics"])
    reply = client.chat.completions.create(
        model=s.model,
        messages=[{"role": "user", "content": "Name a colour of the rainbow. Answer with one word."}],
        max_tokens=16,
        extra_body={"ttc": {"strategy": "cascade", "n": 1, "params": params}},
    )
    ttc = reply.model_extra["ttc"]  # type: ignore[index]
    nodes = httpx.get(f"{s.url}/v1/traces/{ttc['trace_id']}", timeout=30).json()["nodes"]
    decisions = [n for n in nodes if n["action"] in ("escalate", "settled")]
    assert [n["action"] for n in decisions] == ["escalate"] and "small model skipped" in decisions[0]["text"]
    assert ttc["candidates_generated"] == 1 and reply.choices[0].message.content
    assert _generated_tokens(large_metrics) > large_before
    assert _generated_tokens(s.ports["policy_metrics"]) == small_before

    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(
            model=s.model,
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=4,
            extra_body={"ttc": {"strategy": "cascade", "params": {**params, "large_params": {"bogus": 1}}}},
        )
    error = bad.value.body if isinstance(bad.value.body, dict) else {}
    error = error.get("error", error)  # the SDK hands over the error object, or its envelope
    assert "bogus" in str(error.get("message")) and str(error.get("param")).endswith("large_params.bogus"), error


def test_an_effort_whose_route_is_a_cascade_escalates_to_the_large_model_unpinned(
    stack: tuple[LocalStack, int],
) -> None:
    """A table fitted with cascades (`make routing-table`: routing.<small>+<large>.json) routes an
    effort to the escalation deployment with no pin in the request; the card says so; `low`
    keeps the small model's own route."""
    s, large_metrics = stack
    client = OpenAI(base_url=f"{s.url}/v1", api_key="unused", max_retries=0, timeout=600)
    large_before, small_before = _generated_tokens(large_metrics), _generated_tokens(s.ports["policy_metrics"])
    reply = client.chat.completions.create(
        model=SMALL,
        messages=[{"role": "user", "content": "Name a colour of the rainbow. Answer with one word."}],
        max_tokens=16,
        reasoning_effort="high",
    )
    ttc = reply.model_extra["ttc"]  # type: ignore[index]
    assert ttc["strategy"] == "cascade" and reply.choices[0].message.content
    nodes = httpx.get(f"{s.url}/v1/traces/{ttc['trace_id']}", timeout=30).json()["nodes"]
    assert [n["action"] for n in nodes if n["action"] in ("escalate", "settled")] == ["escalate"]
    assert _generated_tokens(large_metrics) > large_before
    assert _generated_tokens(s.ports["policy_metrics"]) == small_before
    card = httpx.get(f"{s.url}/v1/models/{SMALL}/ladder", timeout=30).json()
    assert "cascade" in json.dumps(card)  # only `high` routes to it
    low = client.chat.completions.create(
        model=SMALL, messages=[{"role": "user", "content": "Say hi."}], max_tokens=8, reasoning_effort="low"
    )
    assert low.model_extra["ttc"]["strategy"] != "cascade"  # type: ignore[index]
