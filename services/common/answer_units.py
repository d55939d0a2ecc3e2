"""The unit a question wants written after its answer's number.

A question asks for a unit in words ("Give the answer in meters", "state the units" of "how many
liters"), asks for a percentage ("What percentage of 80 is 20?", "By what percent did it
fall?", "the percentage increase", "as a percentage"), asks for a measure of figures it
gives in one length unit ("A rectangle is 4 m by 6.5 m. What is its area?": square meters,
``m²``), or asks how far at speeds and lengths of one unit ("A car goes 60 km/h for 2.5
hours. How far does it travel?": ``km``). A program prints the number alone (``26.0``,
``25.0``); the reply writes the unit after it. A pattern is not a unit ("Answer in HH:MM"), and
neither is a form ("answer in words"). These instructions stay in what a program is asked: they
change the number to compute.
"""

from __future__ import annotations

import re

_F = re.IGNORECASE
# Words after "answer in" that name a form, not a unit ("in lowercase", "in binary").
_FORM_WORDS = (
    "one a an the words word full lowercase uppercase lower upper capital capitals caps form format "
    "digits digit numbers numerals number english plain short brief sentence sentences decimal decimals "
    "fraction fractions scientific simplest simplified standard exact terms total general order detail "
    "short-form markdown json bold italics list lists points bullet bullets steps step parentheses "
    "brackets quotes quotation letters reply response this that it binary hex hexadecimal octal base "
    "roman reverse alphabetical ascending descending sorted lowest highest its their all"
)
_NOT_UNITS = frozenset(_FORM_WORDS.split())
_UNIT = re.compile(
    r"\b(?:answer|reply|respond|give|express|state|write|report|provide|return|output|convert|measure)\b"
    r"(?:\s+(?:it|this|that|the\s+(?:answer|result|value|number|total|amount|distance|time|speed)|your\s+answer))?"
    r"\s+in\s+(?P<unit>(?:square\s+|cubic\s+)?[A-Za-z°%$€£]+(?:/[A-Za-z]+|\s+(?:per|an|a)\s+[A-Za-z]+)?)\b"
    r"(?![:/.-]\w)",  # a pattern is no unit: "in HH:MM", "in DD/MM/YYYY"
    _F,
)
_INCLUDE_UNIT = re.compile(r"\b(?:include|with|add|state|give)\s+(?:the\s+)?units?\b", _F)
_HOW_MANY_UNIT = re.compile(r"\bhow\s+many\s+(?P<unit>[A-Za-z]+)", _F)
_UNIT_WORDS = {"percent": "%", "percentage": "%", "per cent": "%"}
# A percentage asked for: "what percent(age)", "by what percent", "how many percent", "as a
# percentage", "in percent", "the percentage increase", "just the percentage".
_PERCENT = re.compile(
    r"\b(?:what|which|how\s+many)(?:'s|\s+is|\s+was)?\s+(?:the\s+)?(?:percent(?:age)?|per\s+cent)\b|"
    r"\b(?:as|in|into|to)\s+(?:an?\s+)?(?:percent(?:age)?s?|per\s+cent)\b|"
    r"(?<![\d%])(?<!\d\s)\bpercent(?:age)?\s+(?:increase|decrease|change|growth|drop|decline|loss|gain|error|"
    r"difference|reduction|rise|discount|markup|return)\b|"
    r"\b(?:only|just)\s+(?:the\s+)?percent(?:age)?\b|"
    r"\b(?:reply|respond|answer|give|write|state|return|output)\s+(?:with\s+)?(?:only\s+|just\s+)?"
    r"the\s+percent(?:age)?\b",
    _F,
)
# A measure of the question's figures: "what is its area", "find the perimeter".
_MEASURE = re.compile(
    r"\b(?:what(?:'s|\s+is|\s+are)|find|compute|calculate|work\s+out|give)\s+(?:its|the|their)\s+(?:total\s+)?"
    r"(?P<measure>area|volume|perimeter|circumference|length|width|height|depth|diagonal|distance|radius|diameter)\b",
    _F,
)
_LENGTH_SYMBOLS = ("mm", "cm", "dm", "m", "km", "in", "ft", "yd", "mi")
_LENGTH_WORDS = {
    "millimeter millimeters millimetre millimetres": "millimeters",
    "centimeter centimeters centimetre centimetres": "centimeters",
    "meter meters metre metres": "meters",
    "kilometer kilometers kilometre kilometres": "kilometers",
    "inch inches": "inches",
    "foot feet": "feet",
    "yard yards": "yards",
    "mile miles": "miles",
}
_LENGTH_NAMES = {word: name for words, name in _LENGTH_WORDS.items() for word in words.split()}
# A distance asked for: "how far", "what distance", "the distance travelled".
_DISTANCE = re.compile(r"\bhow\s+far\b|\bwhat\s+distance\b|\bdistance\s+(?:travel+ed|covered|driven|walked)\b", _F)
_TIME_UNIT = r"(?:h|hrs?|hours?|s|secs?|seconds?|mins?|minutes?)\b"
# A speed's length unit: "60 km/h", "3 m/s", "55 miles per hour"; "mph" and "kph" name theirs.
_SPEED = re.compile(
    rf"(?<![\w.])\d+(?:\.\d+)?\s*(?P<unit>[A-Za-z]+)\s*(?:/\s*|\s+per\s+|\s+an\s+|\s+a\s+){_TIME_UNIT}|"
    r"\b(?P<mph>mph)\b|\b(?P<kph>kph|kmh)\b",
    _F,
)
_MEASURED = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:\s*(?P<unit>[A-Za-z]+)\b)?")


def _length_name(unit: str) -> str | None:
    """``unit`` as a length unit is written back: a symbol as it is ("km"), a word by its plural
    name ("mile" -> "miles"); ``None`` for anything that is not a length unit."""
    return unit if unit in _LENGTH_SYMBOLS else _LENGTH_NAMES.get(unit.lower())


def _length_unit(question: str) -> str | None:
    """The one length unit every number of ``question`` is given in, ``None`` when there is none
    (a number without a unit, or two units)."""
    units = set()
    for match in _MEASURED.finditer(question):
        name = _length_name(match.group("unit") or "")
        if name is None:
            return None
        units.add(name)
    return units.pop() if len(units) == 1 else None


def _measure_unit(question: str) -> str | None:
    """``m²`` for "A rectangle is 4 m by 6.5 m. What is its area?": the unit of a measure asked of
    figures given in one length unit (squared for an area, cubed for a volume)."""
    asked = _MEASURE.search(question)
    unit = _length_unit(question) if asked is not None else None
    if asked is None or unit is None:
        return None
    power = {"area": 2, "volume": 3}.get(asked.group("measure").lower(), 1)
    if power == 1:
        return unit
    if unit in _LENGTH_SYMBOLS:
        return unit + ("²" if power == 2 else "³")
    return ("square " if power == 2 else "cubic ") + unit


def _distance_unit(question: str) -> str | None:
    """``km`` for "A car goes 60 km/h for 2.5 hours. How far does it travel?": the one length unit
    of the speeds and lengths a question asking for a distance gives (``None`` for none or two)."""
    if _DISTANCE.search(question) is None:
        return None
    units = set()
    for speed in _SPEED.finditer(question):
        name = _length_name("miles" if speed.group("mph") else "km" if speed.group("kph") else speed.group("unit"))
        if name is None:
            return None
        units.add(name)
    lengths = (_length_name(length.group("unit") or "") for length in _MEASURED.finditer(_SPEED.sub(" ", question)))
    units.update(name for name in lengths if name is not None)
    return units.pop() if len(units) == 1 else None


def asks_percentage(question: str) -> bool:
    """Whether ``question`` asks for its answer as a percentage."""
    return _PERCENT.search(question) is not None


def asked_unit(question: str) -> str | None:
    """The unit ``question`` wants after its answer's number (see the module docstring), ``None``
    when it wants none."""
    for match in _UNIT.finditer(question):
        unit = match.group("unit")
        if unit.split()[0].lower() in _NOT_UNITS:
            continue
        return _UNIT_WORDS.get(unit.lower(), unit)
    named = _HOW_MANY_UNIT.search(question)
    if _INCLUDE_UNIT.search(question) and named:
        return named.group("unit")
    if asks_percentage(question):
        return "%"
    return _measure_unit(question) or _distance_unit(question)
