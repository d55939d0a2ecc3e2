"""JSON-schema checks (JSON, metaschema, grammar compiler) and canonical JSON."""

from __future__ import annotations

import json

import pytest

from services.common.json_constraint import (
    JSON_OBJECT_SCHEMA,
    SchemaError,
    canonical_json,
    check_schema,
    compile_rules,
    converter_available,
    schema_grammar,
    validation_errors,
)

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def test_good_schema_passes_and_is_returned() -> None:
    assert check_schema(json.dumps(PERSON)) == PERSON


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"type": "strin"}', "not a valid JSON Schema"),
        ('{"type": "object", "properties": {"a": {"minimum": "x"}}}', "properties/a/minimum"),
    ],
)
def test_bad_schemas_say_why(text: str, says: str) -> None:
    with pytest.raises(SchemaError, match=says):
        check_schema(text)


@pytest.mark.skipif(not converter_available(), reason="llama-cpp-python not installed")
@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"$ref": "https://example.com/remote.json"}}},
        {"type": "string", "pattern": "^(?=a)b$"},
        {"not": {"type": "string"}},
    ],
)
def test_schema_the_grammar_compiler_cannot_handle(schema: dict[str, object]) -> None:
    with pytest.raises(SchemaError, match="grammar compiler"):
        check_schema(json.dumps(schema))


@pytest.mark.skipif(not converter_available(), reason="llama-cpp-python not installed")
def test_grammar_rules() -> None:
    grammar = schema_grammar(PERSON)
    assert grammar.startswith("root ::= answer\n")
    assert '"\\"age\\""' in grammar
    # strings exclude raw control characters (JSON forbids them)
    assert "\\x00-\\x1F" in schema_grammar(JSON_OBJECT_SCHEMA)
    rules, names = compile_rules({"a": PERSON, "b": JSON_OBJECT_SCHEMA})
    assert set(names) == {"a", "b"} and all(f"{n} ::=" in rules for n in names.values())


def test_canonical_json_and_validation_errors() -> None:
    assert canonical_json('{"b": [1, {"d": 2, "c": 3}], "a": "ü"}') == '{"a":"ü","b":[1,{"c":3,"d":2}]}'
    with pytest.raises(ValueError):
        canonical_json("{oops")
    assert validation_errors(PERSON, {"name": "x", "age": 3}) == []
    errors = validation_errors(PERSON, {"name": 1})
    assert any("age" in e for e in errors) and any(e.startswith("name:") for e in errors)
