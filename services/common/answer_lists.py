"""How a list answer is written: its items, joined by the separator the question asks for.

A program prints a list as Python writes it (``[3, 3, 29]``, ``('a', 'b')``, ``sorted(...)``);
the reply writes its items as a person lists them, with the separator the question shows in an
example ("Format your answer like: 2 * 2 * 5", with the times sign or a star) or in a form ("in
the form a * b * c", "e.g. 2 * 3 * 5"), or names ("comma-separated", "one per line", "separated
by" a times sign); ", " when it asks for none. A value already written with one separator
("3 * 3 * 29") takes the asked one.

An example that shows a bracketed list keeps the brackets: that shape is followed as it is
(:func:`services.common.answer_examples.requote`), so :func:`listed` is only applied where no
example shows a shape, or where the example shows a separator.
"""

from __future__ import annotations

import ast
import re

_F = re.IGNORECASE
_ITEM = r"[-+]?[\w.^]+"
_TIMES = "\u00d7\u00b7*"  # the times sign, the middle dot, the star
# A separator between items, as written (spaces included): a times sign, ", ", "*", " x " ("2x3" is one token).
_SEPARATOR = rf"\s*[{_TIMES},;|]\s*|\s+x\s+"
_CHAIN = re.compile(rf"\s*{_ITEM}(?P<sep>{_SEPARATOR}){_ITEM}(?:(?P=sep){_ITEM})*\s*")
# A product shown in the question's words: "in the form a * b * c", "like 2 * 2 * 5", "(e.g. 2 * 3)".
_SHOWN_PRODUCT = re.compile(
    rf"(?:\b(?:form|like|such\s+as|example)|\be\.g\.)\s*:?\s*[\"'`“(]?\s*"
    rf"{_ITEM}(?P<sep>\s*[{_TIMES}]\s*|\s+x\s+){_ITEM}(?:(?P=sep){_ITEM})*",
    _F,
)
# "separated by a times sign", "separated by *": the sign, spaced.
_SEPARATED_BY_SIGN = re.compile(rf"\bseparated\s+by\s+(?:(?:an?|the)\s+)?[\"'`]?(?P<sign>[{_TIMES}]|x(?!\w))", _F)
_NAMED = (
    (re.compile(r"\bcomma[\s-]*(?:separated|delimited)\b|\bseparated\s+by\s+(?:a\s+)?commas?\b", _F), ", "),
    (re.compile(r"\bsemicolon[\s-]*separated\b|\bseparated\s+by\s+(?:a\s+)?semicolons?\b", _F), "; "),
    (re.compile(r"\bspace[\s-]*separated\b|\bseparated\s+by\s+(?:a\s+)?(?:single\s+)?spaces?\b", _F), " "),
    (re.compile(r"\bone\s+per\s+line\b|\beach\s+on\s+(?:its\s+own|a\s+separate)\s+line\b", _F), "\n"),
)


def asked_separator(question: str, example: str | None = None) -> str | None:
    """The separator ``question`` asks a list's items to be joined by, as it shows it (spaces
    included), ``None`` when it asks for none. ``example`` is the example answer it shows: its
    shape is the one asked for, so its separator or none."""
    if example is not None:
        shown = _CHAIN.fullmatch(example)
        return shown.group("sep") if shown is not None else None
    for pattern, separator in _NAMED:
        if pattern.search(question):
            return separator
    sign = _SEPARATED_BY_SIGN.search(question)
    if sign is not None:
        return f" {sign.group('sign')} "
    product = _SHOWN_PRODUCT.search(question)
    return product.group("sep") if product is not None else None


def _printed_items(text: str) -> list[str] | None:
    """The items of a printed Python list or tuple of plain values, ``None`` for anything else."""
    if not text.startswith(("[", "(")):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, (list, tuple)) or not value:
        return None
    if not all(isinstance(item, (str, int, float)) and not isinstance(item, bool) for item in value):
        return None
    return [str(item) for item in value]


def _separated_items(text: str) -> list[str] | None:
    """The items of a value written with one separator throughout ("3 * 3 * 29")."""
    chain = _CHAIN.fullmatch(text)
    if chain is None:
        return None
    return [item.strip() for item in text.strip().split(chain.group("sep").strip() or chain.group("sep"))]


def listed(text: str, separator: str | None = None) -> str:
    """A printed Python list or tuple of plain values written as a person lists it, its items
    joined by ``separator`` (", " when none was asked: "apple, banana" for "['apple', 'banana']");
    with a separator asked, a value written with another one takes it. Anything else unchanged."""
    items = _printed_items(text)
    if items is None and separator is not None:
        items = _separated_items(text)
    return text if items is None else (separator or ", ").join(items)
