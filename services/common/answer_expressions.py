"""Algebraic expressions written in the notation the question writes its own in.

sympy prints ``3*x**2 + 2`` and ``(x - 3)*(x - 2)``; a chain of thought states ``3x^2+2``. A
question that writes algebra as people do ("Differentiate x^3 + 2x", "Expand (x + 3)(x - 5)":
powers with ``^``, products side by side) gets ``3x^2 + 2`` and ``(x - 3)(x - 2)``; one that
writes Python's notation ("the derivative of x*sin(x)", "x**2 - 1") gets ``*`` and ``**``
(:func:`algebra_notation` reads which). :func:`in_notation` rewrites a value only when every name
in it is one of the question's variables (or a function or constant such as ``sin`` or ``pi``),
so a word or a string (``abc-abc-abc``) is never taken for a product. Binary ``+`` and ``-`` are
spaced, as both sympy and people write them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FUNCTIONS = frozenset(
    {"sin", "cos", "tan", "sec", "csc", "cot", "asin", "acos", "atan", "arcsin", "arccos", "arctan"}
    | {"sinh", "cosh", "tanh", "exp", "log", "ln", "sqrt", "abs", "Abs"}
)
_CONSTANTS = frozenset({"pi", "E", "e", "oo", "π"})
# A variable as a question writes one: a lone lower-case letter next to an operator, a digit
# before it ("2x") or a bracket ("(a + b)"). The imaginary units are not variables.
_VARIABLE = re.compile(r"(?<![A-Za-z'])([a-hk-z])(?![A-Za-z'])")
_OPERAND_SIDE = re.compile(r"[-+*/^=(]\s*$|\d$")
_OPERATOR_AFTER = re.compile(r"^\s*(?:[-+*/^=)]|\*\*)")
_TIMES = "\u00d7\u00b7"  # the times sign and the middle dot: products
_TOKEN = re.compile(rf"\s*(\d+(?:\.\d+)?|[A-Za-zπ]+|\*\*|[-+*/^(){_TIMES}])")


@dataclass(frozen=True)
class Algebra:
    """How a question writes its algebra: the power sign, whether products are written side by
    side, and its variables."""

    power: str  # "^" or "**"
    implicit: bool  # "2x", "(x - 3)(x - 2)"; else "2*x"
    variables: frozenset[str]


def _variables(question: str) -> frozenset[str]:
    found = set()
    for match in _VARIABLE.finditer(question):
        before, after = question[: match.start()], question[match.end() :]
        if _OPERAND_SIDE.search(before) or _OPERATOR_AFTER.match(after):
            found.add(match.group(1))
    return frozenset(found)


def algebra_notation(question: str) -> Algebra | None:
    """The notation ``question`` writes algebra in, ``None`` when it writes none (no variable, or
    neither a power nor a product that shows the notation)."""
    variables = _variables(question)
    if not variables:
        return None
    letters = "".join(sorted(variables))
    explicit = re.search(r"[\w)]\s*(?<!\*)\*(?!\*)\s*[\w(]", question) is not None
    shown = re.search(rf"\d(?:[{letters}](?![A-Za-z])|\()|\)\s*[(\w]|(?<![A-Za-z])[{letters}]\(", question)
    side_by_side = shown is not None
    power = "**" if "**" in question else "^" if "^" in question else None
    if power is None and not (explicit or side_by_side):
        return None
    implicit = side_by_side and not explicit if (explicit or side_by_side) else power == "^"
    return Algebra(power or ("^" if implicit else "**"), implicit, variables)


def _tokens(value: str, variables: frozenset[str]) -> list[str] | None:
    """The value's tokens, every run of letters that is not a function or constant split into the
    question's variables; ``None`` when something else is in it (a word, another symbol)."""
    tokens: list[str] = []
    at = 0
    text = value.strip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            return None
        token, at = match.group(1), match.end()
        if token.isalpha() and token not in _FUNCTIONS and token not in _CONSTANTS:
            if not set(token) <= variables:
                return None
            tokens.extend(token)
        else:
            tokens.append(token)
    return tokens


def _operand_end(token: str) -> bool:
    return token == ")" or token[0].isalnum() or token == "π"


def _operand_start(token: str) -> bool:
    return token == "(" or token[0].isalnum() or token == "π"


def _explicit(tokens: list[str]) -> list[str]:
    """The tokens with every product written with ``*`` and every power with ``**``."""
    out: list[str] = []
    for token in tokens:
        token = "**" if token == "^" else "*" if token in _TIMES else token
        if out and _operand_end(out[-1]) and _operand_start(token) and not (out[-1] in _FUNCTIONS and token == "("):
            out.append("*")
        out.append(token)
    return out


def _exponent_end(tokens: list[str], power: int) -> int:
    """The index of the token that ends the exponent of the power at ``power``: an operand (after
    a sign), or the close of a bracket."""
    end = power + 1 + (tokens[power + 1] in ("+", "-"))
    if end < len(tokens) and tokens[end] == "(":
        depth = 0
        for index in range(end, len(tokens)):
            depth += (tokens[index] == "(") - (tokens[index] == ")")
            if depth == 0:
                return index
    return end


def _times(left: str, right: str, algebra: Algebra, *, after_exponent: bool) -> str:
    """The sign between two factors: none where the question writes products side by side, save
    between two numbers, after an exponent and before a function's name; else ``*``."""
    if not algebra.implicit:
        return "*"
    numbers = left[-1:].isdigit() and right[:1].isdigit()
    named = len(right) > 1 and right.isalpha() and not left[-1:].isdigit()
    return "*" if numbers or after_exponent or named else ""


def in_notation(value: str, algebra: Algebra) -> str | None:
    """``value`` written in the question's ``algebra`` notation (see the module docstring), ``None``
    when it is not an expression in the question's variables."""
    found = _tokens(value, algebra.variables)
    if not found or not any(token in algebra.variables for token in found):
        return None
    tokens = _explicit(found)
    exponents = {_exponent_end(tokens, at) for at, token in enumerate(tokens[:-1]) if token == "**"}
    out = []
    for at, token in enumerate(tokens):
        if token == "**":
            out.append(algebra.power)
        elif token == "*" and 0 < at < len(tokens) - 1:
            out.append(_times(tokens[at - 1], tokens[at + 1], algebra, after_exponent=at - 1 in exponents))
        elif token in ("+", "-") and at > 0 and tokens[at - 1] not in ("(", "**", "*", "/", "+", "-"):
            out.append(f" {token} ")
        else:
            out.append(token)
    return "".join(out)
