"""How a reply to the answer-form prompt set (tests/data/answer_forms/prompts.json) is judged.

Two questions per reply: is the value right (in any spelling), and is the content exactly the
expected content (the form). The form is exact string equality and nothing else. The value is
read from the reply (:func:`readings`) and compared by the kind of answer it is:

- an expression by sympy, both sides parsed in either notation (``3x^2 + 2``, ``3*x**2 + 2``) and
  equal only when their difference simplifies to zero: a bare number never equals a polynomial,
  and ``x**2 + 2*x - 15`` is not ``x**2 - 2*x - 15``;
- a factorization by its factors with their multiplicities (``[3, 3, 3, 5, 7]``, ``3^3 * 5 * 7``,
  ``{3: 3, 5: 1, 7: 1}`` are one answer): the number factorized is not its factorization;
- a complex number by its value, in Python's, sympy's or a person's spelling (``(-8-6j)``,
  ``-8 - 6*I``, ``-8-6i``): ``3+i`` is not ``3-i``;
- a transformed string exactly, in its letters' case too (the case is the value of "capitalize
  each word"), save where the question asks for a case;
- anything else by its normalized spelling, as a number, or, where neither side holds a letter,
  as the search's own answers compare (:func:`answers_equivalent`: its symbolic step would take
  the letters of a word for a product of variables, and "algorithm" for its reverse); equal once
  rounded to the decimals the question asks for; or the same numbers and words in the same
  order (a list's separators, a set's braces are form, not value).
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from tokenize import TokenError
from typing import Any

from services.common.answer_complex import complex_text
from services.common.answer_form import parse_form
from services.common.answer_latex import plain
from services.common.answers import (
    answers_equivalent,
    clean_number,
    normalize_answer,
    requested_decimals,
    stated_answer,
    yes_or_no,
)

# The wrappings a form puts around a value, taken off to read the value: tags, quotes, a label.
_TAGGED = re.compile(r"<(\w+)>(.*)</\1>", re.DOTALL)
_LABELLED = re.compile(r"[A-Za-z][\w ]{0,30}?\s*[:=]\s*(.+)", re.DOTALL)
# A value's atoms: signed numbers (a "-" joining two values is a separator, not a sign) and words.
_ATOM = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?|[^\W\d_]+")
_LETTERS = {"y": "Yes", "n": "No"}
# What an expression may hold: numbers, variables (a run of up to three one-letter variables side
# by side: "2ab"), a few functions, operators and brackets.
_EXPRESSION_TEXT = re.compile(r"[\w\s+\-*/^().]+")
_FUNCTIONS = frozenset({"sin", "cos", "tan", "exp", "log", "ln", "sqrt", "pi"})
_LONGEST_PRODUCT = 3
_FACTOR = re.compile(r"(\d+)(?:\^(\d+))?")


def _atoms(text: str) -> list[str]:
    """The numbers and words of a value in order, each normalized, separators and brackets
    dropped: ``[12, 24]``, ``12; 24`` and ``12\\n24`` are one list; Python's ``(-8-6j)`` is ``-8-6i``."""
    return [normalize_answer(atom) for atom in _ATOM.findall(re.sub(r"(\d)j\b", r"\1i", text))]


def _truth(value: str) -> str:
    """Yes/no as words: a printed ``True`` is "Yes", an asked ``Y`` is "Yes"."""
    return _LETTERS.get(value.strip().lower(), yes_or_no(value))


def expression(text: str) -> Any | None:
    """``text`` parsed by sympy as an expression in either notation (``^`` or ``**``, products
    side by side or with ``*``), ``None`` when it is not one: only numbers, one-letter variables,
    a few functions, operators and brackets are parsed."""
    text = plain(text).strip().rstrip(".")
    if not text or not _EXPRESSION_TEXT.fullmatch(text):
        return None
    names = re.findall(r"[A-Za-z_]\w*", text)
    if any(name not in _FUNCTIONS and not (name.isalpha() and len(name) <= _LONGEST_PRODUCT) for name in names):
        return None
    from sympy.parsing.sympy_parser import (  # imported here: sympy is slow to import
        convert_xor,
        implicit_multiplication_application,
        parse_expr,
        standard_transformations,
    )

    transformations = (*standard_transformations, implicit_multiplication_application, convert_xor)
    try:
        return parse_expr(text, transformations=transformations)
    except (SyntaxError, TypeError, ValueError, AttributeError, TokenError, ZeroDivisionError):
        return None


def _same_expression(reading: str, expected: str) -> bool:
    import sympy

    got, want = expression(reading), expression(expected)
    if got is None or want is None or got.free_symbols != want.free_symbols:
        return False
    return bool(sympy.simplify(got - want) == 0)


def factors(text: str) -> Counter[int] | None:
    """The factors of a factorization with their multiplicities, in any spelling: a list, a dict
    of factors and exponents, a product with or without powers; ``None`` when it is none."""
    body = plain(text).strip().rstrip(".").replace("**", "^")
    if body.startswith("{") and ":" in body:
        try:
            pairs = ast.literal_eval(body)
        except (ValueError, SyntaxError):
            return None
        if not isinstance(pairs, dict) or not all(isinstance(k, int) and isinstance(v, int) for k, v in pairs.items()):
            return None
        return Counter({k: v for k, v in pairs.items()})
    items = [item for item in re.split(r"\s*(?:[,;\u00d7\u00b7*]|\bx\b)\s*|\s+", body.strip("[](){}")) if item]
    found: Counter[int] = Counter()
    for item in items:
        match = _FACTOR.fullmatch(item)
        if match is None:
            return None
        found[int(match.group(1))] += int(match.group(2) or 1)
    return found or None


def complex_value(text: str) -> complex | None:
    """``text`` as a complex number (a real number included), ``None`` when it is none."""
    written = complex_text(plain(text).strip().rstrip("."))
    if written is None:
        number = clean_number(normalize_answer(text))
        return None if number is None else complex(float(number))
    try:
        return complex(re.sub(r"(?<![\d.])i", "1j", written).replace("i", "j"))
    except ValueError:
        return None


def _equivalent(reading: str, expected: str) -> bool:
    """Equal as normalized spellings or numbers; symbolically only where neither holds a letter."""
    if normalize_answer(reading) == normalize_answer(expected):
        return True
    if re.search(r"[^\W\d_]", reading + expected):
        got, want = clean_number(normalize_answer(reading)), clean_number(normalize_answer(expected))
        return got is not None and got == want
    return answers_equivalent(reading, expected)


def same_value(reading: str, expected: str, decimals: int | None, kind: str = "", *, case_asked: bool = False) -> bool:
    """Whether ``reading`` is the expected value in any spelling, compared as its ``kind`` of
    answer is (see the module docstring); ``case_asked``: the question asks for a letter case."""
    if kind == "string":
        return reading == expected or (case_asked and reading.lower() == expected.lower())
    if kind == "expression":
        return _same_expression(reading, expected)
    if kind == "factorization":
        multiset = factors(reading)
        return multiset is not None and multiset == factors(expected)
    if kind == "complex":
        value, target = complex_value(reading), complex_value(expected)
        return value is not None and target is not None and abs(value - target) <= 1e-9 * max(1.0, abs(target))
    reading, expected = _truth(reading), _truth(expected)
    if _equivalent(reading, expected):
        return True
    if decimals is not None:
        got, want = clean_number(normalize_answer(reading)), clean_number(normalize_answer(expected))
        if got is not None and want is not None and round(float(got), decimals) == round(float(want), decimals):
            return True
    atoms = _atoms(reading)
    return bool(atoms) and atoms == _atoms(expected)


def readings(content: str, reasoning: str) -> list[str]:
    """The values a reply may state: the chosen candidate's own, and its content with the form undone.

    The chosen candidate's value is read from ``reasoning_content``: a program-of-thought reply's
    evidence ends "The answer is <what the chosen program printed>." (the value the content was
    rendered from), a chain of thought states its answer. It is read before any rendering, so a
    value that rendering wrote in the wrong form, or garbled, still counts as right and its reply
    as a form failure: reading the value only from the content would drop exactly the replies
    whose form failed. The content's own readings (the whole of it, its stated answer, its tags,
    quotes, JSON or label taken off) cover replies whose reasoning states no answer.
    """
    found = [content, stated_answer(content) or "", stated_answer(reasoning) or ""]
    tagged = _TAGGED.fullmatch(content)
    if tagged:
        found.append(tagged.group(2))
    if len(content) > 1 and content[0] == content[-1] and content[0] in "\"'`":
        found.append(content[1:-1])
    labelled = _LABELLED.fullmatch(content)
    if labelled:
        found.append(labelled.group(1))
    try:
        parsed = json.loads(content)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and len(parsed) == 1:
        found.append(str(next(iter(parsed.values()))))
    return [reading.strip() for reading in found if reading.strip()]


def judge(entry: dict[str, Any], content: str, reasoning: str) -> tuple[bool, bool]:
    """(value right, form exact) for one reply to a prompt-set ``entry``. The form is exact only
    when the content is exactly the expected content, and the value is then right too."""
    if content == entry["expected_content"]:
        return True, True
    decimals = requested_decimals(entry["prompt"])
    kind, case_asked = entry.get("kind", ""), parse_form(entry["prompt"]).case is not None
    right = any(
        same_value(reading, entry["expected"], decimals, kind, case_asked=case_asked)
        for reading in readings(content, reasoning)
    )
    return right, False
