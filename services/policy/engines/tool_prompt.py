"""Tools and constraints for engines that generate text themselves (llama.cpp, vLLM).

Rendering: chat templates that know tools (Qwen2.5, Llama 3.x, Hermes ...) get the OpenAI
shapes Hugging Face templates read: ``tools`` as ``{"type": "function", "function": {...}}``,
assistant ``tool_calls`` with their arguments as objects, ``tool`` messages with their call
id and name. A template that does not mention tools (SmolLM2's) gets them the Hermes way the
Qwen2.5 template writes them: the tool list in the system message, earlier calls as
``<tool_call>`` blocks in the assistant text, tool results as ``<tool_response>`` blocks in a
user turn, so ``services.common.tool_calls`` parses the reply either way.

Grammars (llama.cpp GBNF; vLLM's xgrammar reads the same): a JSON constraint compiles its
schema; tool_choice "required" or a named tool forces one ``<tool_call>`` block per call whose
JSON names a tool and carries arguments matching its parameters; "auto" with a JSON constraint
allows either; "auto" alone constrains only what follows a ``<tool_call>`` the model starts
(a lazy grammar), so free text stays free and a started call is well formed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from services.common.errors import InvalidArgument
from services.common.json_constraint import JSON_OBJECT_SCHEMA, SchemaError, compile_rules, parse_json_object
from services.common.tool_calls import CLOSE, OPEN
from services.policy.engines.base import Constraint, Message, Prompt, ToolDef, ToolSpec

HERMES_SYSTEM = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)
#: the lazy grammar's trigger: it applies from the first ``<tool_call>`` in the text on
TRIGGER_PATTERN = r"^[\s\S]*?(<tool_call>)[\s\S]*"


def template_supports_tools(template: str) -> bool:
    return "tools" in template and "tool_calls" in template


def tool_schema(tool: ToolDef) -> dict[str, Any]:
    """The OpenAI ``tools`` entry chat templates render."""
    params = parse_json_object(tool.parameters_json) if tool.parameters_json.strip() else dict(JSON_OBJECT_SCHEMA)
    function: dict[str, Any] = {"name": tool.name, "description": tool.description, "parameters": params}
    return {"type": "function", "function": function}


def template_tools(spec: ToolSpec | None) -> list[dict[str, Any]] | None:
    """The tools to render (None when there are none or tool_choice is "none")."""
    if spec is None or not spec.active:
        return None
    return [tool_schema(t) for t in spec.tools]


def _arguments(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return text


def _call_json(name: str, arguments: str) -> str:
    return json.dumps({"name": name, "arguments": _arguments(arguments)}, ensure_ascii=False)


def _native(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _arguments(c.arguments)}}
            for c in m.tool_calls
        ]
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    if m.name:
        out["name"] = m.name
    return out


def _folded(messages: tuple[Message, ...], tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Messages for a template without tool support: Hermes syntax inside plain turns."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            block = f"<tool_response>\n{m.content}\n</tool_response>"
            if out and out[-1].get("_tool"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool": True})
        elif m.role == "assistant" and m.tool_calls:
            blocks = [f"{OPEN}\n{_call_json(c.name, c.arguments)}\n{CLOSE}" for c in m.tool_calls]
            out.append({"role": "assistant", "content": "\n".join(([m.content] if m.content else []) + blocks)})
        else:
            out.append({"role": m.role, "content": m.content})
    if tools:
        listing = HERMES_SYSTEM.format(tools="".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools))
        if out and out[0]["role"] == "system":
            out[0]["content"] = out[0]["content"] + "\n\n" + listing
        else:
            out.insert(0, {"role": "system", "content": listing})
    for m2 in out:
        m2.pop("_tool", None)
    return out


def template_inputs(prompt: Prompt, native: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """(messages, tools) for a chat template; ``native`` when the template renders tools."""
    tools = template_tools(prompt.tools)
    if native:
        return [_native(m) for m in prompt.messages], tools
    return _folded(prompt.messages, tools), None


@dataclass(frozen=True)
class GrammarPlan:
    """A GBNF grammar and, for a lazy one, the pattern that switches it on."""

    gbnf: str
    trigger: str = ""


def _call_schema(tool: ToolDef) -> dict[str, Any]:
    params = parse_json_object(tool.parameters_json) if tool.parameters_json.strip() else dict(JSON_OBJECT_SCHEMA)
    return {
        "type": "object",
        "properties": {"name": {"const": tool.name}, "arguments": params},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def _calls_rule(spec: ToolSpec, call_rule: str) -> str:
    block = f'"{OPEN}\\n" {call_rule} "\\n{CLOSE}"'
    return f'{block} ("\\n" {block})*' if spec.parallel else block


def _constraint_schema(constraint: Constraint) -> dict[str, Any]:
    return parse_json_object(constraint.schema) if constraint.kind == "json_schema" else dict(JSON_OBJECT_SCHEMA)


def grammar_plan(prompt: Prompt, constraint: Constraint | None) -> GrammarPlan | None:
    """The grammar one request's candidates decode under, or None for free text.

    Raises ``SchemaError`` when a schema is beyond the compiler (validation checks first)."""
    spec = prompt.tools if prompt.tools is not None and prompt.tools.active else None
    forced = spec.forced if spec is not None else ()
    schemas: dict[str, dict[str, Any]] = {}
    if spec is not None:
        tools = forced or spec.tools
        schemas["tool-call"] = {"anyOf": [_call_schema(t) for t in tools]} if len(tools) > 1 else _call_schema(tools[0])
    if constraint is not None and not forced:
        schemas["answer"] = _constraint_schema(constraint)
    if not schemas:
        return None
    rules, names = compile_rules(schemas)
    if spec is None:
        return GrammarPlan(f"root ::= {names['answer']}\n{rules}")
    calls = _calls_rule(spec, names["tool-call"])
    if forced:
        return GrammarPlan(f"root ::= {calls}\n{rules}")
    if "answer" in names:
        return GrammarPlan(f"root ::= ({calls}) | {names['answer']}\n{rules}")
    return GrammarPlan(f"root ::= {calls}\n{rules}", trigger=TRIGGER_PATTERN)


def request_grammar(prompt: Prompt, constraint: Constraint | None) -> GrammarPlan | None:
    """``grammar_plan`` with a schema the compiler refuses as ``InvalidArgument`` (validation
    names the exact field first; this is the engine's last word)."""
    try:
        return grammar_plan(prompt, constraint)
    except SchemaError as exc:
        field = "sampling.constraint" if constraint is not None else "input.tools"
        raise InvalidArgument(str(exc), field=field) from None
