"""How a list answer is written: its items, joined by the separator the question asks for.

A program prints a list as Python writes it (``[3, 3, 29]``, ``('a', 'b')``, ``sorted(...)``);
the reply writes its items as a person lists them, with the separator the question shows in an
example ("Format your answer like: 2 * 2 * 5", with the times sign or a star) or in a form ("in
the form a * b * c", "e.g. 2 * 3 * 5"), or names ("comma-separated", "one number per line", "separate the
items with semicolons", "separated by" a times sign, "use" a times sign "between the factors"); ", " when it
asks for none. A value already written with one separator ("3 * 3 * 29") takes the asked one; a
printed set (``{3, 5, 7}``) keeps its braces unless a separator is asked. A question that asks for
a set ("the set of remainders", "answer with the set") or writes its own in braces gets one: items listed another way
("1, 4, 4, 1, 0") are written once each, numbers in order, in braces (:func:`as_set`).

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
    (re.compile(r"\bcomma[\s-]*(?:separated|delimited)\b", _F), ", "),
    (re.compile(r"\bsemicolon[\s-]*separated\b", _F), "; "),
    (re.compile(r"\bspace[\s-]*separated\b", _F), " "),
    (re.compile(r"\bone\s+(?:\w+\s+)?per\s+line\b|\beach\s+on\s+(?:its\s+own|a\s+separate)\s+line\b", _F), "\n"),
)
# "separated by commas", "separate the items with semicolons", "separate them with a single space".
_SEPARATED_BY = re.compile(
    r"\b(?:separat\w*|delimit\w*)\b(?:\s+(?!by\b|with\b|using\b)\w+){0,3}?\s+(?:by|with|using)\s+"
    r"(?:an?\s+|the\s+)?(?:single\s+)?(?P<name>commas?|semicolons?|spaces?|new\s*lines?|line\s+breaks?|pipes?|"
    r"slashes?|dashes?|hyphens?)\b",
    _F,
)
# A set as the noun the answer is: "the set of", "a set", "write the set", "in curly braces"; or
# a question that writes its own sets in braces ("Which elements are in A = {2, 4, 6} but not in B?").
_SET_ASKED = re.compile(
    r"\b(?:the|a|which|this|that)\s+set\b(?!\s+(?:to|up|aside)\b)|\b(?:curly\s+)?braces\b|"
    r"\{\s*[-+]?[\w.]+(?:\s*,\s*[-+]?[\w.]+)+\s*\}",
    _F,
)
_SEPARATOR_NAMES = {"comma": ", ", "semicolon": "; ", "space": " ", "pipe": " | ", "slash": "/", "dash": "-"}
_SEPARATOR_NAMES |= {"hyphen": "-", "newline": "\n", "new line": "\n", "line break": "\n"}
# "use" a times sign "between the factors", "put a * between them": the sign, spaced.
_SIGN_BETWEEN = re.compile(
    rf"\b(?:use|put|place|with|using)\s+(?:an?\s+)?[\"'`]?(?P<sign>[{_TIMES}]|x(?!\w))[\"'`]?\s+between\b", _F
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
    named = _SEPARATED_BY.search(question)
    if named is not None:
        name = re.sub(r"\s+", " ", named.group("name").lower())
        return _SEPARATOR_NAMES[name.removesuffix("es") if name.endswith("shes") else name.rstrip("s")]
    sign = _SEPARATED_BY_SIGN.search(question) or _SIGN_BETWEEN.search(question)
    if sign is not None:
        return f" {sign.group('sign')} "
    product = _SHOWN_PRODUCT.search(question)
    return product.group("sep") if product is not None else None


def _printed_items(text: str) -> list[str] | None:
    """The items of a printed Python list, tuple or set of plain values (a set's in the order
    printed), ``None`` for anything else."""
    if not text.startswith(("[", "(", "{")):
        return None
    try:
        node = ast.parse(text, mode="eval").body
        value = [ast.literal_eval(item) for item in node.elts] if isinstance(node, ast.Set) else ast.literal_eval(node)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
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
    joined by ``separator`` (", " when none was asked: "apple, banana" for "['apple', 'banana']"),
    a printed set so only when a separator is asked;
    with a separator asked, a value written with another one takes it. Anything else unchanged."""
    items = _printed_items(text) if separator is not None or not text.startswith("{") else None
    if items is None and separator is not None:
        items = _separated_items(text)
    return text if items is None else (separator or ", ").join(items)


def asks_set(question: str) -> bool:
    """Whether ``question`` asks for its answer as a set (see the module docstring)."""
    return _SET_ASKED.search(question) is not None


def _number_key(item: str) -> float | None:
    try:
        return float(item)
    except ValueError:
        return None


def as_set(text: str) -> str | None:
    """``text``'s items written as a set: each once, in braces, numbers in increasing order
    (other items in the order first written); ``None`` where ``text`` is not a list of items or
    is already a set written so. Braces do not make a set: ``{1, 4, 4, 0}`` (a chain of thought
    that wrote every remainder, a program that printed its list in braces) is written ``{0, 1, 4}``."""
    items = _printed_items(text) if text.startswith("{") else _printed_items(text) or _separated_items(text)
    if items is None:
        return None
    unique = list(dict.fromkeys(items))
    numbers = [_number_key(item) for item in unique]
    keys = [key for key in numbers if key is not None]
    if len(keys) == len(unique):
        unique = [item for _, item in sorted(zip(keys, unique, strict=True))]
    written = "{" + ", ".join(unique) + "}"
    return None if text.startswith("{") and items == unique else written
