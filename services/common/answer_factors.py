"""Factorizations as a candidate printed them, written as the question asks.

A program prints a factorization as a list (``[3, 3, 3, 5, 7]`` from a trial-division loop), as
sympy's ``factorint`` dict (``{3: 3, 5: 1, 7: 1}``) or as a product (``3**3 * 5 * 7``,
``3^3`` times ``5`` times ``7``); :func:`factor_pairs` reads each into (factor, exponent) pairs. The question
asks for exponents with an example ("like 2^2 * 3", "e.g. 2**3 * 5") or in words ("with
exponents", "in exponent form"), or for the factors one by one with an
example without them ("like 2 * 2 * 5") or a list's separator ("separated by commas")
(:func:`asked_exponents`).
:func:`factored` writes the pairs so; a dict, which no person writes, becomes a product with
exponents when nothing is asked.
"""

from __future__ import annotations

import ast
import re

_F = re.IGNORECASE
_TIMES = "\u00d7\u00b7*"  # the times sign, the middle dot, the star
# Questions about factors: "prime factors", "factorize", "factor 221 into primes", "decompose".
_ABOUT_FACTORS = re.compile(r"\bfactori[sz]|\bfactors?\b|\bdecompos|\bproduct\s+of\s+primes\b", _F)
_POWER_SHOWN = re.compile(r"\d\s*(\^|\*\*)\s*\d")
# "with exponents", "using powers", "in exponent form", "in index notation", "exponential form"
_POWER_WORDS = re.compile(
    r"\b(?:with|using|use|in)\s+(?:exponents?|powers?|exponential\s+(?:form|notation)|(?:exponent|index|power)\s+"
    r"(?:form|notation))\b|\bexponential\s+(?:form|notation)\b",
    _F,
)
# A product shown: "like 2^2 * 3", "e.g. 2**3 * 5", "in the form 2^a * 3^b", "like 2 x 2 x 5".
_POWERED = r"\w+(?:\s*(?:\^|\*\*)\s*\w+)?"
_PRODUCT = rf"{_POWERED}(?:\s*[{_TIMES}]\s*{_POWERED}|\s+x\s+{_POWERED})+"
_SHOWN_PRODUCT = re.compile(
    rf"(?:\b(?:form|like|such\s+as|example)|\be\.g\.)\s*:?\s*[\"'`“(]?\s*(?P<product>{_PRODUCT})", _F
)
_FACTOR = re.compile(r"\s*(\d+)\s*(?:(?:\^|\*\*)\s*(\d+))?\s*")
Pairs = list[tuple[int, int]]


def about_factors(question: str) -> bool:
    """Whether ``question`` asks about factors (a printed dict is then a factorization)."""
    return _ABOUT_FACTORS.search(question) is not None


def asked_exponents(question: str, example: str | None = None) -> str | None:
    """How ``question`` asks repeated factors to be written: with the power sign its example (a
    product) or a product it shows writes (``"^"``, ``"**"``), with ``"^"`` where it asks for
    exponents in words, one at a time (``""``) where what it shows has no power; ``None`` when it
    asks neither."""
    product = _SHOWN_PRODUCT.search(question)
    shown = product.group("product") if product is not None else None
    if example is not None and re.search(_PRODUCT, example):  # an example that is a product, not a list
        shown = example
    if shown is not None:
        power = _POWER_SHOWN.search(shown)
        return power.group(1) if power is not None else ""
    if _POWER_WORDS.search(question):
        return "**" if re.search(r"\w\s*\*\*\s*\w", question) else "^"
    return None


def _grouped(factors: list[int]) -> Pairs:
    pairs: dict[int, int] = {}
    for factor in factors:
        pairs[factor] = pairs.get(factor, 0) + 1
    return list(pairs.items())


def _printed(text: str) -> Pairs | None:
    """The pairs of a printed list or tuple of factors, or of a dict of factors and exponents."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    if isinstance(value, dict):
        items = list(value.items())
        if items and all(type(k) is int and type(e) is int and k >= 2 and e >= 1 for k, e in items):
            return sorted(items)
        return None
    if isinstance(value, (list, tuple)) and value and all(type(f) is int and f >= 2 for f in value):
        return _grouped(list(value))
    return None


def _product(text: str) -> Pairs | None:
    """The pairs of a written product: ``3^3 * 5 * 7``, ``3**3*5*7``, ``2 x 3``, with the times sign or a middle dot."""
    parts = re.split(rf"(?<!\*)[{_TIMES}](?!\*)|\s+x\s+", text.replace("**", "^"))
    pairs: dict[int, int] = {}
    for part in parts:
        factor = _FACTOR.fullmatch(part)
        if factor is None or int(factor.group(1)) < 2:
            return None
        base = int(factor.group(1))
        pairs[base] = pairs.get(base, 0) + int(factor.group(2) or 1)
    return list(pairs.items())


def factor_pairs(value: str) -> Pairs | None:
    """The (factor, exponent) pairs of a factorization spelled as the module docstring says,
    ``None`` for any other value (one factor with no exponent included: nothing to write)."""
    text = value.strip()
    pairs = _printed(text) if text[:1] in "[({" else _product(text)
    if not pairs or (len(pairs) == 1 and pairs[0][1] == 1):
        return None
    return pairs


def factored(value: str, exponents: str | None, separator: str | None) -> str | None:
    """``value``, a factorization, written as asked (``exponents``, from :func:`asked_exponents`):
    repeated factors as powers with the asked sign, or one at a time; where neither is asked, one
    at a time where a list's ``separator`` is asked (a comma, a line) or a product's of a value
    printed one at a time, else with the powers it was printed with (a dict's as ``^``). Factors
    are joined by ``separator`` (``" * "`` when none is asked). ``None`` when ``value`` is not a
    factorization or nothing asked changes how it is written (a list or a product as printed)."""
    pairs = factor_pairs(value)
    if pairs is None:
        return None
    text = value.strip()
    printed_powers = text.startswith("{") or bool(re.search(r"\^|\*\*", text))
    joiner = separator if separator is not None else " * "
    if exponents is None:
        times = separator is not None and separator.strip() in (*_TIMES, "x")
        if separator is not None and not (times and printed_powers):
            exponents = ""
        elif separator is None and not text.startswith("{"):
            return None
    if exponents == "":
        return joiner.join(str(base) for base, exponent in pairs for _ in range(exponent))
    sign = exponents or ("**" if "**" in text else "^")
    return joiner.join(str(base) if exponent == 1 else f"{base}{sign}{exponent}" for base, exponent in pairs)
