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
- rounded where decimal places are asked for, a reduced fraction where a fraction is.

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


def number_text(value: str, *, fraction: bool = False, decimals: int | None = None) -> str | None:
    """``value`` written as a number as the module docstring says, ``None`` when it is not a
    number. ``fraction``: a fraction was asked for; ``decimals``: that many places were."""
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
    return ratio_spelling(value) or _decimal_text(number, value)


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
