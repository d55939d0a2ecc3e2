"""The grammars a forced tool call and a JSON schema decode under, run by llama.cpp's own
grammar engine over SmolLM2's vocabulary (loaded without weights).

The e2e checks (tests/e2e/policy_tool_checks.py) sample calls at temperature 1 and assert
they are valid. What makes every sample valid is the grammar, not the seed, so the grammar is
what is tested here: text is fed to it token by token as a sampler would, and it must accept
each call whose arguments validate against the tool's schema (serialized in the schema's key
order, as the rendered tools show the model) and reject every call that does not validate,
names another tool, or is not the call block at all.
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp
import pytest

from services.common.json_constraint import validation_errors
from services.common.tool_calls import CLOSE, OPEN
from services.policy.engines.base import Constraint, Message, Prompt, ToolDef, ToolSpec
from services.policy.engines.tool_prompt import grammar_plan
from services.policy.models import gguf_path
from tests.e2e import policy_tool_checks as checks

WEATHER = ToolDef(checks.WEATHER.name, checks.WEATHER.description, checks.WEATHER.parameters_json)
TIME = ToolDef(checks.TIME.name, checks.TIME.description, checks.TIME.parameters_json)
QUESTION = (Message("user", checks.QUESTION),)


@pytest.fixture(scope="module")
def vocab() -> Iterator[Any]:
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    path = gguf_path("smollm2-135m", Path("models"), prepare_missing=False)
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    assert model, f"llama.cpp could not load the vocabulary of {path}"
    try:
        yield llama_cpp.llama_model_get_vocab(model)
    finally:
        llama_cpp.llama_model_free(model)


def _tokens(vocab: Any, text: str) -> list[int]:
    data = text.encode()
    out = (llama_cpp.llama_token * (len(data) + 8))()
    n = llama_cpp.llama_tokenize(vocab, data, len(data), out, len(out), False, False)
    assert n >= 0, text
    return list(out[:n])


def _allowed(sampler: Any, token: int) -> bool:
    """Whether the grammar, in its present state, lets ``token`` be sampled next."""
    one = (llama_cpp.llama_token_data * 1)()
    one[0].id, one[0].logit, one[0].p = token, 0.0, 0.0  # type: ignore[assignment]
    array = llama_cpp.llama_token_data_array(one, 1, -1, False)
    llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
    return bool(one[0].logit != float("-inf"))


def accepts(vocab: Any, gbnf: str, text: str) -> bool:
    """``text`` is a complete sentence of the grammar: every token of it may be sampled in turn,
    and then end of generation may."""
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
    assert sampler, "llama.cpp refused the grammar"
    try:
        for token in _tokens(vocab, text):
            if not _allowed(sampler, token):
                return False
            llama_cpp.llama_sampler_accept(sampler, token)
        return _allowed(sampler, llama_cpp.llama_vocab_eos(vocab))
    finally:
        llama_cpp.llama_sampler_free(sampler)


def call_block(name: str, arguments: Any) -> str:
    """A call as the model writes it (the Hermes block the tool prompt shows)."""
    return f"{OPEN}\n{json.dumps({'name': name, 'arguments': arguments})}\n{CLOSE}"


def gbnf(prompt: Prompt, constraint: Constraint | None = None) -> str:
    plan = grammar_plan(prompt, constraint)
    assert plan is not None and not plan.trigger
    return plan.gbnf


TIME_ARGUMENTS: list[Any] = [
    {"timezone": "Europe/Paris"},
    {"timezone": ""},
    {"timezone": "x" * 24},
    {"timezone": "Zürich"},
    {"timezone": 'a"b\\c'},
    {"timezone": "x" * 25},  # over maxLength
    {"timezone": 5},
    {"timezone": None},
    {},  # the required key missing
    {"tz": "UTC"},
    {"timezone": "UTC", "city": "Paris"},  # additionalProperties: false
    [],
    "UTC",
]
WEATHER_ARGUMENTS: list[Any] = [
    {"city": "Paris", "unit": "c"},
    {"city": "Oslo", "unit": "f"},
    {"city": "Paris", "unit": "k"},  # not in the enum
    {"city": "Paris"},
    {"unit": "c"},
    {"city": "Paris", "unit": "c", "when": "now"},
]


@pytest.mark.parametrize("arguments", TIME_ARGUMENTS, ids=json.dumps)
def test_a_named_tool_accepts_exactly_the_arguments_that_validate(vocab: Any, arguments: Any) -> None:
    grammar = gbnf(Prompt(QUESTION, tools=ToolSpec((WEATHER, TIME), "get_time", False)))
    valid = validation_errors(json.loads(TIME.parameters_json), arguments) == []
    assert accepts(vocab, grammar, call_block("get_time", arguments)) is valid


def test_a_named_tool_rejects_the_other_tool_and_anything_but_one_call_block(vocab: Any) -> None:
    grammar = gbnf(Prompt(QUESTION, tools=ToolSpec((WEATHER, TIME), "get_time", False)))
    good = call_block("get_time", {"timezone": "UTC"})
    assert accepts(vocab, grammar, good)
    for text in (
        call_block("get_weather", {"city": "Paris", "unit": "c"}),  # valid, but not the tool forced
        good.removesuffix(CLOSE),  # cut short
        good + "\nThe time is noon.",  # text after the call
        "Sure! " + good,  # text before it
        good + "\n" + good,  # a second call without parallel calls
        json.dumps({"name": "get_time", "arguments": {"timezone": "UTC"}}),  # no block
        good.replace('"UTC"', '"U\nTC"'),  # a raw newline in a JSON string
        good.replace('{"timezone"', '{ "timezone"').replace('"UTC"}', '"UTC"  }'),  # two spaces
    ):
        assert not accepts(vocab, grammar, text), text


@pytest.mark.parametrize("arguments", WEATHER_ARGUMENTS + TIME_ARGUMENTS[:3], ids=json.dumps)
def test_required_accepts_either_tool_with_valid_arguments_only(vocab: Any, arguments: Any) -> None:
    grammar = gbnf(Prompt(QUESTION, tools=ToolSpec((WEATHER, TIME), "required", False)))
    for tool in (WEATHER, TIME):
        valid = validation_errors(json.loads(tool.parameters_json), arguments) == []
        assert accepts(vocab, grammar, call_block(tool.name, arguments)) is valid, tool.name


def test_parallel_calls_are_blocks_one_per_line(vocab: Any) -> None:
    grammar = gbnf(Prompt(QUESTION, tools=ToolSpec((WEATHER, TIME), "required", True)))
    one, two = call_block("get_time", {"timezone": "UTC"}), call_block("get_weather", {"city": "Rome", "unit": "c"})
    assert accepts(vocab, grammar, f"{one}\n{two}")
    assert not accepts(vocab, grammar, f"{one}\n{call_block('get_weather', {'city': 'Rome'})}")


PEOPLE: list[Any] = [
    {"name": "Ada", "age": 36, "hobbies": ["chess", "maths"]},
    {"name": "B", "age": -3, "hobbies": []},
    {"name": "", "age": 36, "hobbies": []},  # minLength 1
    {"name": "Ada", "age": 36.5, "hobbies": []},
    {"name": "Ada", "age": 36, "hobbies": ["a", "b", "c"]},  # maxItems 2
    {"name": "Ada", "age": 36, "hobbies": ["x" * 17]},  # maxLength 16
    {"name": "Ada", "age": 36},
    {"name": "Ada", "age": 36, "hobbies": [], "pet": "cat"},
]


@pytest.mark.parametrize("person", PEOPLE, ids=json.dumps)
def test_a_json_schema_accepts_exactly_the_values_that_validate(vocab: Any, person: Any) -> None:
    grammar = gbnf(Prompt(QUESTION), Constraint("json_schema", json.dumps(checks.PERSON)))
    valid = validation_errors(checks.PERSON, person) == []
    assert accepts(vocab, grammar, json.dumps(person)) is valid


def test_the_e2e_token_limits_hold_the_longest_output(vocab: Any) -> None:
    """The e2e checks count on every sample ending within ``max_tokens``: a token is at least
    one byte, so the byte length of the longest accepted output bounds its tokens. The longest
    here: every string at its maxLength in six-byte ``\\\\u`` escapes, integers of 17 characters,
    plus a space at each of the JSON's optional places."""
    escaped = "\\u00e9"
    time_call = call_block("get_time", {"timezone": "?"}).replace('"?"', f'"{escaped * 24}"')
    weather = call_block("get_weather", {"city": "?", "unit": "c"}).replace('"?"', f'"{escaped * 24}"')
    for grammar, text, limit in (
        (gbnf(Prompt(QUESTION, tools=ToolSpec((WEATHER, TIME), "required", False))), time_call, checks.CALL_TOKENS),
        (gbnf(Prompt(QUESTION, tools=ToolSpec((WEATHER, TIME), "required", False))), weather, checks.CALL_TOKENS),
    ):
        assert accepts(vocab, grammar, text), text
        assert len(text.encode()) + text.count('"') <= limit  # at most one optional space per quote
    person = json.dumps({"name": "?", "age": -1234567890123456, "hobbies": ["!", "!"]})
    person = person.replace('"?"', f'"{escaped * 24}"').replace('"!"', f'"{escaped * 16}"')
    assert accepts(vocab, gbnf(Prompt(QUESTION), Constraint("json_schema", json.dumps(checks.PERSON))), person)
    assert len(person.encode()) + person.count('"') + 4 <= checks.PERSON_TOKENS
