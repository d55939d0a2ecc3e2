"""Shapes a question can ask a value to be written in, beyond numbers and lists: a number in
words, a time or date in a shown pattern (``HH:MM``, ``DD/MM/YYYY``), a complex number as
``a+bi``, a yes/no value in the asked words (``Y``/``N``, ``TRUE``/``FALSE``), and a reply that
is a JSON object. Where no pattern is asked, a time or date keeps the shape the question writes
its own in (:func:`as_written`): a printed ``datetime`` at midnight is a date where the question
names no clock time, and ``22:25:00`` is ``22:25`` where the question writes times without seconds.

Each function takes the value as its candidate gave it and returns it unchanged where it is not
of that shape (a word asked "in words" stays a word), so the renderer can apply them in turn.
"""

from __future__ import annotations

import json
import re
from datetime import date

from services.common.answer_complex import complex_text
from services.common.answers import clean_number

_NUMBER_NAMES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen _ _ twenty thirty forty fifty sixty seventy eighty ninety"
)
_ONES = _NUMBER_NAMES.split()[:20]
_TENS = _NUMBER_NAMES.split()[20:]
_GROUPS = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))


def _below_thousand(n: int) -> str:
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else "-" + _ONES[n % 10])
    return _ONES[n // 100] + " hundred" + ("" if n % 100 == 0 else " " + _below_thousand(n % 100))


def _integer_words(n: int) -> str:
    if n < 0:
        return "minus " + _integer_words(-n)
    for size, name in _GROUPS:
        if n >= size:
            rest = n % size
            return f"{_integer_words(n // size)} {name}" + ("" if rest == 0 else " " + _integer_words(rest))
    return _below_thousand(n)


def in_words(value: str) -> str:
    """An integer value in English words ("31" → "thirty-one"); anything else unchanged."""
    number = clean_number(value)
    if number is None or number.denominator != 1 or abs(number.numerator) >= 10**15:
        return value
    return _integer_words(number.numerator)


_CLOCK = re.compile(r"\s*(\d{1,3}):(\d{1,2})(?::(\d{1,2}))?\s*")
_ISO_DATE = re.compile(r"\s*(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\s*")
_DATE_TOKENS = re.compile(r"YYYY|YY|MM|DD|M|D")


def _clock(value: str, pattern: str) -> str:
    match = _CLOCK.fullmatch(value)
    if match is None:
        return value
    hours, minutes, seconds = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
    text = f"{hours:02d}" if pattern.upper().startswith("HH") else str(hours)
    text += f":{minutes:02d}"
    return text + f":{seconds:02d}" if pattern.upper().count(":") == 2 else text


def _calendar(value: str, pattern: str) -> str:
    match = _ISO_DATE.fullmatch(value)
    if match is None:
        return value
    try:
        day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return value
    fields = {"YYYY": f"{day.year:04d}", "YY": f"{day.year % 100:02d}", "MM": f"{day.month:02d}"}
    fields |= {"DD": f"{day.day:02d}", "M": str(day.month), "D": str(day.day)}
    return _DATE_TOKENS.sub(lambda token: fields[token.group(0)], pattern.upper())


def in_pattern(value: str, pattern: str) -> str:
    """``value`` written in a shown pattern: a clock time (``HH:MM``, ``H:MM:SS``), a date
    (``YYYY-MM-DD``, ``DD/MM/YYYY``) or a complex number (``a+bi``); unchanged when it is not
    of the pattern's kind."""
    if "bi" in pattern.replace(" ", ""):
        return complex_text(value) or value
    if ":" in pattern:
        return _clock(value, pattern)
    return _calendar(value, pattern)


_MIDNIGHT = re.compile(r"(\d{4}-\d{2}-\d{2})[ T]00:00(?::00(?:\.0+)?)?")
_ZERO_SECONDS = re.compile(r"(\d{1,2}:\d{2}):00")
_CLOCK_WRITTEN = re.compile(r"(?<![\d:])\d{1,2}:\d{2}(?P<seconds>:\d{2})?(?![\d:])")


def written_times(question: str) -> str | None:
    """How ``question`` writes its clock times: ``"seconds"`` when one has seconds (``10:05:30``),
    ``"minutes"`` when all stop at minutes (``19:50``), ``None`` when it writes none."""
    times = [match.group("seconds") for match in _CLOCK_WRITTEN.finditer(question)]
    return None if not times else "seconds" if any(times) else "minutes"


def as_written(value: str, times: str | None) -> str:
    """A printed date or time in the shape the question writes its own in (``times``, from
    :func:`written_times`; see the module docstring); any other value unchanged."""
    text = value.strip()
    midnight = _MIDNIGHT.fullmatch(text)
    if midnight is not None and times is None:
        return midnight.group(1)
    seconds = _ZERO_SECONDS.fullmatch(text)
    return seconds.group(1) if seconds is not None and times == "minutes" else value


_TRUTH = {"yes": True, "y": True, "true": True, "no": False, "n": False, "false": False}


def in_choice(value: str, choices: tuple[str, str]) -> str:
    """A yes/no or true/false value (a program's ``True``, a stated "yes") written as the first of
    the asked ``choices`` when it affirms, the second when it denies; anything else unchanged."""
    truth = _TRUTH.get(value.strip().rstrip(".").lower())
    return value if truth is None else choices[0] if truth else choices[1]


def as_json(text: str, key: str) -> str:
    """The reply as a JSON object holding the value under ``key``: a plain number as a JSON
    number, anything else as a string."""
    number = clean_number(text) if re.fullmatch(r"\s*[-+]?\d[\d,]*(?:\.\d+)?\s*", text) else None
    value: int | float | str = text
    if number is not None:
        value = number.numerator if number.denominator == 1 else float(number)
    return json.dumps({key: value}, ensure_ascii=False)
