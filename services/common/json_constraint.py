"""JSON output constraints shared by the gateway, the orchestrator and the policy engines.

A structured-output request (``response_format`` ``json_object`` or ``json_schema``) is served
by constrained decoding, so every candidate is valid by construction. Before a schema reaches
an engine it must be usable everywhere: valid JSON, a valid JSON Schema (checked against its
metaschema), and accepted by llama.cpp's JSON-schema-to-GBNF converter (the strictest of the
engines' grammar compilers: it refuses remote ``$ref``, lookaround patterns, ``not``, ...).
``check_schema`` applies all three and raises ``SchemaError`` with a message a client can act
on; callers name the field.

The converter is llama.cpp's own Python port (``llama_cpp/llama_grammar.py``). It is loaded
from its file without importing the ``llama_cpp`` package, whose import loads the native
library: the gateway checks schemas without llama.cpp's runtime. Where llama-cpp-python is
not installed at all, the converter check is skipped (the metaschema check still runs).

Votes compare ``canonical_json``: sorted keys, compact separators, so two candidates that
differ only in key order or whitespace agree.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema

#: the schema of response_format json_object: any JSON object
JSON_OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}


#: the converter's string character admits raw control characters, which JSON forbids in
#: strings (a candidate with a raw newline in a string would not parse): exclude them
_LOOSE_CHAR = 'char ::= [^"\\\\] |'
_JSON_CHAR = 'char ::= [^"\\\\\\x7F\\x00-\\x1F] |'


class SchemaError(ValueError):
    """A JSON schema that is malformed, invalid, or beyond the grammar compiler."""


@functools.cache
def _converter() -> ModuleType | None:
    """llama.cpp's ``llama_grammar`` module, loaded from its file (None when not installed)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "llama_grammar.py"
    if not path.is_file():
        return None
    module_spec = importlib.util.spec_from_file_location("_ttc_llama_grammar", path)
    if module_spec is None or module_spec.loader is None:
        return None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def converter_available() -> bool:
    return _converter() is not None


def parse_json_object(text: str, what: str = "schema") -> dict[str, Any]:
    """``text`` parsed as a JSON object, or ``SchemaError``."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise SchemaError(f"the {what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise SchemaError(f"the {what} must be a JSON object, got {type(value).__name__}")
    return value


def check_metaschema(schema: dict[str, Any]) -> None:
    """``schema`` is a valid JSON Schema (its declared draft, else 2020-12)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise SchemaError(f"not a valid JSON Schema at {where}: {exc.message}") from None


def compile_rules(schemas: dict[str, dict[str, Any]]) -> tuple[str, dict[str, str]]:
    """llama.cpp GBNF rules for several schemas in one grammar (shared helper rules are
    written once); returns the rules and, per given name, the rule that matches its schema.
    The caller writes ``root``. ``SchemaError`` when the converter cannot handle a schema."""
    module = _converter()
    if module is None:
        raise SchemaError("the grammar compiler (llama-cpp-python) is not installed here")
    try:
        conv = module.SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
        names = {}
        for name, schema in schemas.items():
            names[name] = conv.visit(conv.resolve_refs(schema, f"input-{name}"), name)
        rules: str = conv.format_grammar().replace(_LOOSE_CHAR, _JSON_CHAR)
    except RecursionError:
        raise SchemaError("the schema is too deeply nested for the grammar compiler") from None
    except Exception as exc:  # the converter reports what it cannot handle by assert / KeyError
        raise SchemaError(f"the grammar compiler cannot handle this schema: {exc}") from None
    return rules, names


def schema_grammar(schema: dict[str, Any]) -> str:
    """llama.cpp GBNF whose ``root`` matches JSON that validates ``schema``."""
    rules, names = compile_rules({"answer": schema})
    return f"root ::= {names['answer']}\n{rules}"


def check_schema(text: str) -> dict[str, Any]:
    """Parse and check a JSON schema for constrained decoding; returns it as a dict.

    Raises ``SchemaError`` for invalid JSON, a non-object, a schema its metaschema rejects, or
    one the grammar compiler cannot handle (skipped where llama-cpp-python is absent).
    """
    schema = parse_json_object(text)
    check_metaschema(schema)
    if converter_available():
        schema_grammar(schema)
    return schema


def canonical_json(text: str) -> str:
    """The canonical form of JSON text: sorted keys, no whitespace, non-ASCII kept.
    ``ValueError`` when ``text`` is not JSON."""
    return canonical(json.loads(text))


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def validation_errors(schema: dict[str, Any], value: Any, limit: int = 3) -> list[str]:
    """Why ``value`` does not validate against ``schema`` (empty when it does)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    errors = []
    for err in cls(schema).iter_errors(value):
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        errors.append(f"{where}: {err.message}")
        if len(errors) >= limit:
            break
    return errors
