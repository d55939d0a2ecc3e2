"""The value a short chain of thought states without saying "the answer is".

A small model often answers in one line: a bare value (``78.85%``, ``\\frac{375}{1000}``,
``True.``), a worked equation whose last side is the value (``(a + b)^2 = a^2 + 2ab + b^2``), or
a sentence that names the value in quotes (``'Hello World' with every vowel removed is "Hll
Wrld".``); to a yes/no question, its first word often answers (``False. The interior angles
...``). The last number of such a text is a fragment of the value (``2`` of ``a^2 + 2ab + b^2``,
``1000`` of ``\\frac{375}{1000}``), so these readings come before it
(:func:`services.common.answers.extract_answer`).
"""

from __future__ import annotations

import re

_F = re.IGNORECASE
_LONGEST_LINE = 200
_LONGEST_SIDE = 80
_BARE_WORDS = 2  # a bare value: a word or two ("Hll Wrld"), not a sentence
_QUOTED = re.compile(r"\b(?:is|are|gives|becomes|equals|reads)\s*:?\s*[\"“'](?P<value>[^\"”'\n]+)[\"”']\s*\.?\s*$", _F)
_FIRST_WORD = re.compile(r"^\W*(?P<word>yes|no|true|false)\b(?=\s*(?:[.,!:;]|$))", _F)
_MATH_WORDS = frozenset({"sin", "cos", "tan", "exp", "log", "sqrt", "abs"})
_WORD = re.compile(r"[A-Za-z]{3,}")


def _is_math(side: str) -> bool:
    """Whether an equation's side is a value (``a^2 + 2ab + b^2``, ``10 - 6i``, ``\\frac{3}{8}``),
    not prose ("13 * 17, so 221 is not a prime number"): no word but a function's name."""
    return all(word in _MATH_WORDS for word in _WORD.findall(re.sub(r"\\[A-Za-z]+", " ", side)))


def _line_value(line: str) -> str | None:
    quoted = _QUOTED.search(line)
    if quoted is not None:
        return quoted.group("value").strip()
    sides = re.split(r"(?<![<>!=])=(?!=)", line)
    if len(sides) > 1:
        last = sides[-1].strip().rstrip(".").strip()
        return last if 0 < len(last) <= _LONGEST_SIDE and _is_math(last) else None
    bare = line.strip().rstrip(".").strip()
    return bare if bare and len(bare.split()) <= _BARE_WORDS else None


def stated_value(text: str, *, yes_no: bool = False) -> str | None:
    """The value ``text`` states in one of the ways of the module docstring (the first word only
    where the question is ``yes_no``), ``None`` when it states none of them."""
    body = text.strip()
    if yes_no:
        first = _FIRST_WORD.match(body)
        if first is not None:
            return first.group("word").capitalize()
    if not body or "\n" in body or len(body) > _LONGEST_LINE:
        return None
    return _line_value(body)
