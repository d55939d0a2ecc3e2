"""Templates a question frames its answer in: "End with 'Answer: …'", "Format: ANSWER=<n>",
"Reply with the number followed by 'min'", "Put the final answer after '####'", "\\boxed{}".

A template is the whole reply with the value in its slot (:data:`SLOT`); :func:`find_template`
returns it with the span of the instruction that gave it, to be cut from the question.
"""

from __future__ import annotations

import re

from services.common.answer_examples import Span
from services.common.answer_instructions import SLOT

_F = re.IGNORECASE

# A placeholder for the value inside a template: "Answer: …", "<number>", "[answer]", "X".
_PLACEHOLDER = re.compile(
    r"…|\.{3}|<[^<>\n]{0,24}>|\[[^\[\]\n]{0,24}\]|\{[^{}\n]{0,24}\}|(?<![A-Za-z])[XN](?=\W*$)|\?+|_{2,}|#+"
)
_QUOTED = re.compile(r"\"([^\"\n]{1,60})\"|“([^”\n]{1,60})”|`([^`\n]{1,60})`|(?<![A-Za-z])'([^'\n]{1,60})'(?![A-Za-z])")
_TEMPLATE_TRIGGER = re.compile(
    r"\b(?:end|ends|ending|finish|conclude|close|format|formatted|form|write|put|give|state|present|reply|respond|"
    r"answer|use|print|output|return|start|begin|prefix|phrase|express|line|template|like|as)\b",
    _F,
)
# What comes right before a quoted template: "end with '…'", "write it as '…'", "format: '…'".
_CONNECTOR = re.compile(
    r"(?:\b(?:with|as|like|form|format|template|using|follows|reads|in|after|(?P<after>followed\s+by))|:)\s*$", _F
)
# "Format: Answer: <n>", "in the form ANSWER=<n>", "end with Answer: X" (no quotes).
_BARE_TEMPLATE = re.compile(
    r"\b(?:(?:format|form|template|write|give|reply|respond|answer)\b(?:\s+(?:your|the)\s+\w+\b)?\s*(?:is|as|like|of)?|"
    r"(?:end|finish|conclude)\s+(?:your\s+\w+\s+)?with)"
    r"\s*:?\s*(?P<t>(?!(?:is|as|like|of)\b)[A-Za-z]+(?: [A-Za-z]+)?\s*[:=]\s*(?:" + _PLACEHOLDER.pattern + r"))",
    _F,
)
_BOXED = re.compile(
    r"(?:\b(?:put|write|place|give|present|enclose|wrap|state|put|show|box|format)\b[^.?!\n]{0,40}?)?"
    r"(?:\\boxed\s*(?:\{[^{}]{0,20}\})?|\bin\s+a\s+box\b)|\bbox\s+(?:your|the)\s+(?:final\s+)?answer\b",
    _F,
)


def _quoted(text: str) -> tuple[str, Span] | None:
    """A quoted template with a placeholder ("End with 'Answer: …'"), a quoted label to follow
    ("start with 'Answer:'", "after '####'"), or a quoted text to follow the value ("the number
    followed by 'min'"), and the span of the instruction that gave it."""
    for match in _QUOTED.finditer(text):
        inner = next(g for g in match.groups() if g is not None)
        before = text[max(0, match.start() - 80) : match.start()]
        clause = re.split(r"[.?!;\n]", before)[-1]
        trigger = list(_TEMPLATE_TRIGGER.finditer(clause))
        connector = _CONNECTOR.search(clause)
        if not trigger or connector is None:
            continue
        start = match.start() - len(clause) + trigger[0].start()
        if connector.group("after"):
            return SLOT + " " + inner.strip(), (start, match.end())
        if re.fullmatch(r"\s*#{2,}\s*", inner):
            return inner.strip() + " " + SLOT, (start, match.end())
        slot = _PLACEHOLDER.search(inner)
        if slot is not None and re.search(r"[A-Za-z:=]", inner[: slot.start()] + inner[slot.end() :]):
            return inner[: slot.start()] + SLOT + inner[slot.end() :], (start, match.end())
        if inner.rstrip().endswith((":", "=")):
            return inner.rstrip() + " " + SLOT, (start, match.end())
    return None


def find_template(text: str) -> tuple[str, Span] | None:
    """The template ``text`` asks the answer in (see the module docstring) and the span of the
    instruction that gave it, ``None`` when it asks for none."""
    quoted = _quoted(text)
    if quoted is not None:
        return quoted
    labelled = _BARE_TEMPLATE.search(text)
    if labelled:
        inner = labelled.group("t")
        slot = _PLACEHOLDER.search(inner)
        if slot is not None:
            return inner[: slot.start()] + SLOT + inner[slot.end() :], (labelled.start(), labelled.end())
    boxed = _BOXED.search(text)
    if boxed is not None:
        return "\\boxed{" + SLOT + "}", (boxed.start(), boxed.end())
    return None
