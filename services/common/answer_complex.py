"""Complex numbers as a candidate printed them, written the way the question writes them.

Python prints ``(-3+4j)``, ``3j``, ``(3-1j)``, ``(-0-6j)``; sympy prints ``-3 + 4*I``, ``I``,
``2 - 7*I``; a chain of thought states ``-3 + 4i``. A question that writes its complex numbers
with ``i`` ("Compute (1+2i)^2", "What is i^3 + 2i?", "in the form a + bi") gets every one of
them back as a person writes it: ``-3+4i``, ``3-i``, ``i``, ``-6i`` (:func:`complex_text`). One
that writes ``j`` ("What is (2+3j) times 3j?") is answered as Python printed it, and so is one
that writes none (:func:`imaginary_unit` says which the question writes).
"""

from __future__ import annotations

import re

from services.common.answer_numbers import number_text

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?"
# After spaces, parentheses and "*" are gone and every unit is "j": "-3+4j", "4j", "-j", "3-j".
_FORM = re.compile(
    rf"(?P<real>[-+]?{_NUMBER})(?P<sign>[-+])(?P<imag>{_NUMBER})?j|(?P<lone>[-+]?)(?P<alone>{_NUMBER})?j"
)
# How a question writes an imaginary number: "2i", "(1 - i)", "i^3", "a + bi"; or "3j", "(2+3j)".
_WRITES_I = re.compile(r"(?<![\w.])\d*\.?\d+i\b|[-+(]\s*i\b(?!')|(?<![\w'])i\s*\^|\ba\s*\+\s*bi\b")
_WRITES_J = re.compile(r"(?<![\w.])\d*\.?\d+j\b|[-+(]\s*j\s*\)")


def imaginary_unit(question: str) -> str | None:
    """The letter ``question`` writes imaginary numbers with, ``"i"`` or ``"j"``; ``None`` when it
    writes none."""
    if _WRITES_J.search(question):
        return "j"
    return "i" if _WRITES_I.search(question) else None


def _part(text: str) -> str:
    return number_text(text) or text


def complex_text(value: str, unit: str = "i") -> str | None:
    """``value`` written as ``a+bi`` (with ``unit`` for the imaginary unit): the real part first
    and left out when zero, a coefficient of one left out, integral parts as integers; ``None``
    when ``value`` is not a complex number in one of the spellings of the module docstring."""
    text = re.sub(r"\s+", "", value.strip())
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    text = re.sub(r"\*?(?:I|i|j|J)(?![A-Za-z])", "j", text)
    match = _FORM.fullmatch(text)
    if match is None:
        return None
    if match.group("real") is None:
        real, sign, coefficient = "0", match.group("lone") or "+", match.group("alone") or ""
    else:
        real, sign, coefficient = match.group("real"), match.group("sign"), match.group("imag") or ""
    imaginary = _part(coefficient) if coefficient else "1"
    if imaginary == "0":
        return _part(real)
    written = ("" if imaginary == "1" else imaginary) + unit
    if _part(real) in ("0", "-0"):
        return ("-" if sign == "-" else "") + written
    return f"{_part(real)}{sign}{written}"
