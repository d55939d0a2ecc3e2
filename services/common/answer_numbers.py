"""How a decided number is written in the reply: as its candidate spelled it, converted only as
far as the question's form asks.

A program prints ``137/260`` (a ``Fraction``, a sympy ``Rational``), ``0.30000000000000004``
(float noise), ``24.0`` or ``-12.333333333333334``; a chain of thought states ``1,200``. Votes
compare such values under tolerant keys (:func:`services.common.answers.vote_key`: ``137/260``
and ``0.5269230769230769`` are one answer); the reply shows the value itself:

- an integral value as an integer (``24.0`` → ``24``, ``1,200`` → ``1200``);
- a ratio as the ratio it is (``137/260``, ``-37/3``), never as its decimal;
- a decimal without float noise (``0.30000000000000004`` → ``0.3``: a spelling that rounding
  to the vote's significant digits shortens), any other decimal as written
  (``-12.333333333333334`` stays: cutting it would change the value);
- rounded where decimal places are asked for, a reduced fraction where a fraction is;
- a decimal that is a simple fraction (``0.5833333333333333`` of ``1/3 + 1/4``) as that fraction
  (``7/12``) where the question writes its own numbers as fractions and no decimal
  (:func:`writes_fractions`): the question's notation, as a person answering it would keep it.

Of the spellings a vote group's candidates gave one answer, the reply shows one a candidate gave
(:func:`shown_spelling`): the one in the asked form, else the most common.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

from services.common.answers import VOTE_SIGNIFICANT_DIGITS, clean_number

_RATIO = re.compile(r"\s*([-+]?\d+)\s*/\s*(\d+)\s*")
_LARGEST_DENOMINATOR = 10**6  # a decimal asked as a fraction: the nearest with a denominator up to this
_SIMPLE_DENOMINATOR = 1000  # a decimal shown as a fraction unasked: only one this simple
_SIMPLE_TOLERANCE = Fraction(1, 10**12)  # relative: a float's rounding, far inside the vote's 12 digits
# "1/3 + 1/4", "2/5 of 3/4"; not a date (12/28/2023) nor a unit (km/h).
_WRITTEN_RATIO = re.compile(r"(?<![\d/])(?<!\d\.)\d+/\d+(?![\d/]|\.\d)")
_WRITTEN_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_DECIMAL_WANTED = re.compile(r"\bdecimals?\b|\bpercent|%|\bper\s+cent\b", re.IGNORECASE)
_WHAT_FRACTION = re.compile(r"\bwhat\s+fraction\b", re.IGNORECASE)


def writes_fractions(question: str) -> bool:
    """Whether ``question`` writes every number of it as a fraction ("What is 1/3 + 1/4?",
    "Multiply 2/3 by 9/10"; not "What is 1/4 of 10?") or asks what fraction one thing is of
    another, and asks for no decimal or percentage: a decimal answer that is a simple fraction is
    then shown as one."""
    if _DECIMAL_WANTED.search(question):
        return False
    if _WHAT_FRACTION.search(question):
        return True
    ratios = [match.span() for match in _WRITTEN_RATIO.finditer(question)]
    numbers = [match.start() for match in _WRITTEN_NUMBER.finditer(question)]
    return bool(ratios) and all(any(start <= at < end for start, end in ratios) for at in numbers)


def _simple_fraction(number: Fraction) -> Fraction | None:
    """The fraction with a small denominator that ``number`` (a printed float) is, ``None`` when
    it is none."""
    simple = number.limit_denominator(_SIMPLE_DENOMINATOR)
    close = abs(simple - number) <= _SIMPLE_TOLERANCE * max(Fraction(1), abs(number))
    return simple if close and simple.denominator > 1 else None


def ratio_spelling(value: str) -> str | None:
    """``value`` as ``a/b`` when it is spelled as a ratio of integers (``137/260``, ``-37/3``),
    else ``None``."""
    match = _RATIO.fullmatch(value)
    if match is None or int(match.group(2)) == 0:
        return None
    return f"{match.group(1)}/{match.group(2)}"


def _fraction_text(number: Fraction) -> str:
    return str(number.numerator) if number.denominator == 1 else f"{number.numerator}/{number.denominator}"


def _significant_digits(text: str) -> int:
    return len(re.sub(r"\D", "", text.lower().split("e")[0]).lstrip("0"))


def _decimal_text(number: Fraction, spelled: str) -> str:
    """A non-integral decimal: without float noise when rounding to the vote's significant digits
    shortens it, as spelled otherwise (thousands separators dropped)."""
    short = f"{float(number):.{VOTE_SIGNIFICANT_DIGITS}g}"
    if "e" not in short:
        short = short.rstrip("0").rstrip(".") if "." in short else short
    elif "e" not in spelled.lower():  # 0.00001 stays positional, as it was written
        short = format(Decimal(short), "f")
    if _significant_digits(short) < VOTE_SIGNIFICANT_DIGITS:
        return short
    return spelled.replace(",", "").strip()


def number_text(
    value: str, *, fraction: bool = False, decimals: int | None = None, fractions_written: bool = False
) -> str | None:
    """``value`` written as a number as the module docstring says, ``None`` when it is not a
    number. ``fraction``: a fraction was asked for; ``decimals``: that many places were;
    ``fractions_written``: the question writes its numbers as fractions."""
    number = clean_number(value)
    if number is None:
        return None
    if fraction:
        big = number.denominator > _LARGEST_DENOMINATOR
        return _fraction_text(number.limit_denominator(_LARGEST_DENOMINATOR) if big else number)
    if decimals is not None:
        rounded = round(float(number), decimals)
        return f"{rounded:.{decimals}f}" if decimals else str(int(rounded))
    if number.denominator == 1:
        return str(number.numerator)
    simple = _simple_fraction(number) if fractions_written else None
    return ratio_spelling(value) or (_fraction_text(simple) if simple else None) or _decimal_text(number, value)


def shown_spelling(spellings: Sequence[str], *, fraction: bool = False) -> int:
    """Which of the spellings of one answer that a vote group's candidates gave the reply shows
    (its index): where a ``fraction`` is asked for, the first spelled as one; else the most
    common, the earliest among equals. So ``137/260`` and ``0.5269230769230769`` vote together,
    and the one the question asks for is shown."""
    if fraction:
        ratio = next((i for i, spelling in enumerate(spellings) if ratio_spelling(spelling)), None)
        if ratio is not None:
            return ratio
    counts = Counter(spelling.strip() for spelling in spellings)
    most = max(counts.values(), default=0)
    return next((i for i, spelling in enumerate(spellings) if counts[spelling.strip()] == most), 0)
