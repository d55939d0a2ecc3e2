"""Which strategies serve tools, response formats, logprobs and n answers; where the others are
routed; and the structural validation of tools, schemas and tool-call history."""

from __future__ import annotations

import json

import pytest
from google.protobuf import struct_pb2

from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2
from services.jobs import compat, validation
from services.search.run import validate_job
from services.search.strategies import REGISTRY

FEATURES = {
    "tools": lambda job: job.tools.tools.add(name="get_time"),
    "response_format": lambda job: setattr(job.response_format, "json_object", True),
    "logprobs": lambda job: setattr(job, "logprobs", True),
    "answers": lambda job: setattr(job, "answers", 2),
}


def job(name: str, n: int = 0, verifier: str = "", params: dict | None = None) -> orchestrator_pb2.SearchJob:  # type: ignore[type-arg]
    struct = struct_pb2.Struct()
    struct.update(params or {})
    return orchestrator_pb2.SearchJob(
        job_id="j",
        messages=[common_pb2.ChatMessage(role="user", content="What time is it?")],
        strategy=orchestrator_pb2.StrategySpec(name=name, n=n, verifier=verifier, params=struct),
        budget=orchestrator_pb2.Budget(max_generated_tokens=4000),
        max_tokens=64,
        temperature=0.7,
    )


def test_the_table_names_every_registered_strategy() -> None:
    assert set(compat.CAPABILITIES) == set(REGISTRY)


@pytest.mark.parametrize("name", sorted(REGISTRY))
@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_a_strategy_serves_a_feature_or_refuses_naming_it(name: str, feature: str) -> None:
    j = job(name)
    FEATURES[feature](j)
    if compat.supports(name, feature):
        assert compat.incompatibilities(j) == [] and compat.reroute(j) is None
        validate_job(j)
        return
    with pytest.raises(InvalidArgument) as err:
        validate_job(j)
    assert err.value.field == feature and name in str(err.value)
    refused = compat.incompatibilities(j)
    assert [f for f, _ in refused] == [feature]
    # The reroute serves it, and is itself a valid job.
    routed = compat.reroute(j)
    assert routed is not None and name in routed.reason
    j.strategy.CopyFrom(routed.strategy)
    validate_job(j)


def test_reroute_rules() -> None:
    beam = job("beam_search", n=4, verifier="prm", params={"aggregation": "min", "beam_width": 2})
    beam.tools.tools.add(name="get_time")
    routed = compat.reroute(beam)
    assert routed is not None and routed.strategy.name == "self_consistency" and routed.strategy.n == 4
    assert not routed.strategy.verifier  # a verifier has no meaning for a tool call
    beam.ClearField("tools")
    beam.response_format.json_object = True
    routed = compat.reroute(beam)
    assert routed is not None and routed.strategy.name == "weighted_vote"
    assert routed.strategy.verifier == "prm" and dict(routed.strategy.params) == {"aggregation": "min"}
    forcing = job("budget_forcing", n=1)
    forcing.logprobs, forcing.answers = True, 5
    routed = compat.reroute(forcing)
    assert routed is not None and (routed.strategy.name, routed.strategy.n) == ("self_consistency", 5)
    assert "logprobs, answers" in routed.reason


def test_tool_choice_none_asks_for_no_tools() -> None:
    j = job("beam_search")
    j.tools.tools.add(name="get_time")
    j.tools.choice = "none"
    assert compat.wanted(j) == []


WEATHER = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}})


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda j: j.tools.tools.add(name="bad name"), "tools.tools[0].name"),
        (lambda j: [j.tools.tools.add(name="f"), j.tools.tools.add(name="f")], "tools.tools[1].name"),
        (lambda j: j.tools.tools.add(name="f", parameters_json="{not json"), "tools.tools[0].parameters_json"),
        (lambda j: j.tools.tools.add(name="f", parameters_json='{"type": 12}'), "tools.tools[0].parameters_json"),
        (lambda j: [j.tools.tools.add(name="f"), setattr(j.tools, "choice", "g")], "tools.choice"),
        (lambda j: setattr(j.response_format, "json_schema", "[1]"), "response_format.json_schema"),
        (lambda j: setattr(j.response_format, "json_schema", '{"type": "nope"}'), "response_format.json_schema"),
        (lambda j: setattr(j, "top_logprobs", 3), "top_logprobs"),
        (lambda j: [setattr(j, "logprobs", True), setattr(j, "top_logprobs", 21)], "top_logprobs"),
        (lambda j: setattr(j, "answers", 65), "answers"),
        (lambda j: j.messages.add(role="tool", content="12:00", tool_call_id="nope"), "messages[1].tool_call_id"),
        (lambda j: j.messages[0].tool_calls.add(id="c", name="f", arguments="{}"), "messages[0].tool_calls"),
    ],
)
def test_bad_tools_schemas_and_history_name_the_field(mutate, field: str) -> None:  # type: ignore[no-untyped-def]
    j = job("single")
    mutate(j)
    with pytest.raises(InvalidArgument) as err:
        validation.validate(j)
    assert err.value.field == field


def test_a_tool_turn_answers_an_earlier_call() -> None:
    j = job("self_consistency")
    j.tools.tools.add(name="get_weather", parameters_json=WEATHER)
    j.tools.choice = "get_weather"
    j.messages.add(role="assistant").tool_calls.add(id="c1", name="get_weather", arguments='{"city": "Oslo"}')
    j.messages.add(role="tool", content="sunny", tool_call_id="c1", name="get_weather")
    j.response_format.json_schema = WEATHER
    validation.validate(j)
    validate_job(j)


def test_tools_need_chat_messages() -> None:
    j = job("single")
    j.ClearField("messages")
    j.prompt = "raw"
    j.tools.tools.add(name="f")
    with pytest.raises(InvalidArgument) as err:
        validation.validate(j)
    assert err.value.field == "tools"


def test_the_docs_table_is_the_capability_table() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs/strategies.md").read_text()
    section = text[text.index("**Which strategies serve what**") :]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = tuple(c == "yes" for c in cells[1:5])
        elif rows and not line.startswith("|"):
            break
    expected = {n: (c.tools, c.response_format, c.logprobs, c.answers) for n, c in compat.CAPABILITIES.items()}
    assert rows == expected
