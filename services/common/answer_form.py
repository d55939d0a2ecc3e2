"""The form a user asks the answer in, read out of the question and applied when it is rendered.

"What is 6 times 7? Reply with the number." asks two things: a value, and how to write it.
Only the first is a computation. A program that is shown "reply with the number" prints
``"42"`` at best and ``print("Answer: 10")`` at worst, a guessed literal that copies the
instruction. So the question is split: :func:`strip_form` is the question a program (or any
search) works on, and :func:`render` writes the decided value in the form :func:`parse_form`
found - bare (``42``), in a template (``Answer: 42``, ``\\boxed{42}``), with a unit, in a
letter case, rounded, as a fraction, a list with the separator shown - or, when no form was
asked for, as one short sentence. The value rendered is a candidate's own (what its program
printed, what its chain of thought stated): ``137/260`` stays a fraction, ``(-12+3j)`` a
complex number, ``14:05`` a time (:mod:`services.common.answer_numbers`,
:mod:`services.common.answer_lists`); vote keys only compare answers. What no form asks follows
the notation the question writes its own values in (:mod:`services.common.answer_notation`):
``0.5833333333333333`` for "1/3 + 1/4" is ``7/12``, ``(-3+4j)`` for "(1+2i)^2" is ``-3+4i``,
sympy's ``3*x**2 + 2`` for "x^3 + 2x" is ``3x^2 + 2``. A factorization takes the asked shape
(``3^3 * 5 * 7`` for "like 2^2 * 3": :mod:`services.common.answer_factors`), a percentage asked
for its ``%``, a measure of figures given in metres its unit (:mod:`services.common.answer_units`),
and LaTeX markup a chain of thought states goes (:mod:`services.common.answer_latex`).

Rounding instructions stay in the stripped question (they can be the task itself: "round
3.14159 to two decimals") and are applied again here; a unit stays too, as a plain request
for the value in that unit (it changes the number), and is written after the number here.
An instruction that shows an example answer ("Instead of reporting your answer as 1, 2, use
['1', '2']", "(Format your answer like: ...)") is cut whole, examples and all
(:mod:`services.common.answer_examples`), and the example is kept: the value is then written
bare, in the example's shape where it is a list of quoted strings.
Sentences that only talk about the reply's form ("Keep it to the number", "Just the day name, in
lowercase", "no other text") are cut whole (:mod:`services.common.answer_instructions`); what they
ask is rendered here: tags, a ``####`` line, quotes (:mod:`services.common.answer_templates`), a
JSON object, a number in words, a time or date in a shown pattern, yes/no in the asked words
(:mod:`services.common.answer_shapes`).
Pure and deterministic: the gateway, the orchestrator and the benchmarks read forms the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from services.common.answer_examples import Span, find_examples, requote
from services.common.answer_factors import asked_exponents
from services.common.answer_instructions import SLOT, names_a_number, read_instructions
from services.common.answer_latex import plain
from services.common.answer_lists import as_set, asked_separator, listed
from services.common.answer_notation import Notation, read_notation, written_in
from services.common.answer_numbers import number_text
from services.common.answer_shapes import as_json, as_written, in_choice, in_pattern, in_words
from services.common.answer_templates import find_template
from services.common.answer_units import asked_unit
from services.common.answers import requested_decimals

__all__ = ["SLOT", "AnswerForm", "parse_form", "render", "render_value", "strip_form"]

Case = Literal["lower", "upper"]

_F = re.IGNORECASE
_ONLY = r"(?:only|just|solely|simply|purely|exclusively|nothing\s+(?:but|other\s+than|except)|no\s+more\s+than)"
_VERB = (
    r"(?:reply|respond|answer|return|output|give|write|print|provide|state|say|tell|send|type|put|show|"
    r"present|report|share)"
)
_DET = r"(?:the|a|an|one|your|a\s+single|the\s+single|that)"
_ADJ = (
    r"(?:single|final|numeric(?:al)?|exact|plain|bare|raw|whole|integer|correct|resulting|computed|calculated|"
    r"simplified|reduced|simplest|irreducible)"
)
# Nouns that name a bare value even without "only": "reply with the number".
_VALUE_NOUN = r"(?:number|numeral|digits?|integer|figure|numeric\s+value|numerical\s+value|word|letter|yes\s+or\s+no)"
_ANY_NOUN = (
    rf"(?:{_VALUE_NOUN}|value|answer|result|total|amount|output|sum|product|count|solution|list|string|name|fraction|"
    r"weekday(?:\s+name)?|day|date|time|(?:binary|hex(?:adecimal)?|octal)(?:\s+(?:string|number|value))?)"
)

# Where an instruction ends: "reply with the number." but not "print the number of vowels".
_END = r"(?=\s*(?:[,.!;:?)\n]|$|please\b|and\b|with\s+no\b|without\b|no\b|nothing\b|thanks?\b|thank\b))"
_BARE_PATTERNS = (
    # "reply with the number", "just give me the final value", "answer with only a number"
    re.compile(
        rf"(?:\b{_ONLY}\s+)?\b{_VERB}\b(?:\s+(?:me|us|back|it))?(?:\s+(?:with|using|as))?(?:\s+{_ONLY})?"
        rf"(?:\s+{_DET})?(?:\s+{_ADJ})*\s+{_VALUE_NOUN}\b(?:\s+{_ONLY})?{_END}",
        _F,
    ),
    # "only reply with the final value", "give only the answer", "output the result only"
    re.compile(
        rf"\b{_ONLY}\s+{_VERB}\b(?:\s+(?:me|us|back))?(?:\s+(?:with|using))?(?:\s+{_DET})?(?:\s+{_ADJ})*"
        rf"\s+{_ANY_NOUN}\b{_END}",
        _F,
    ),
    re.compile(
        rf"\b{_VERB}\b(?:\s+(?:me|us|back))?(?:\s+(?:with|using))?\s+{_ONLY}(?:\s+{_DET})?(?:\s+{_ADJ})*"
        rf"\s+{_ANY_NOUN}\b{_END}",
        _F,
    ),
    re.compile(
        rf"\b{_VERB}\b(?:\s+(?:me|us))?(?:\s+with)?(?:\s+{_DET})?(?:\s+{_ADJ})*\s+{_ANY_NOUN}\s+{_ONLY}\b{_END}", _F
    ),
    # "just the number, please", "only the final answer", "number only", "the answer alone"
    re.compile(rf"(?<![\w'])\b{_ONLY}\s+(?:{_DET}\s+)?(?:{_ADJ}\s+)*{_ANY_NOUN}\b{_END}", _F),
    re.compile(rf"\b(?:{_ADJ}\s+)?{_ANY_NOUN}\s+(?:only|alone)\b{_END}", _F),
    # "no explanation", "without any working", "don't explain", "no need to show your work"
    re.compile(
        r"\b(?:no|without(?:\s+any)?)\s+(?:other\s+)?(?:explanations?|working|workings|work|steps|reasoning|"
        r"commentary|comments?|extra\s+(?:text|words)|additional\s+text|preamble|elaboration|justification|"
        r"details|words|code)\b(?:\s+(?:needed|necessary|required|please))?" + _END,
        _F,
    ),
    re.compile(
        r"\b(?:don'?t|do\s+not|no\s+need\s+to|never)\s+(?:explain|elaborate|justify|show\s+(?:(?:your|the|any)\s+)?"
        r"(?:work|working|steps|reasoning|code)|include\s+(?:an?\s+)?(?:explanation|working|reasoning))\b",
        _F,
    ),
    re.compile(r"\b(?:in\s+(?:one|a\s+single)\s+word|one[- ]word\s+answer|single[- ]word\s+answer)\b", _F),
    re.compile(r"\bnothing\s+(?:else|more)\b", _F),
)
_CASE_WORDS = r"lower[\s-]?case|upper[\s-]?case|capital\s+letters|caps|small\s+letters"
# "reply in lowercase", "answer in all caps", or a clause of its own: ", lowercase only."
_CASE = re.compile(
    rf"\b(?:reply|respond|answer|output|return|write\s+(?:it|the\s+answer|your\s+answer)|give\s+(?:it|the\s+answer))"
    rf"\s+(?:in\s+|using\s+)?(?:all\s+)?(?P<case>{_CASE_WORDS})(?:\s+(?:letters|only))?|"
    rf"(?:(?<=[,;.?!])|^)\s*(?:in\s+|use\s+|using\s+)?(?:all\s+)?(?P<case2>{_CASE_WORDS})(?:\s+(?:letters|only|please))?"
    rf"(?=\s*(?:[.!;]|$))",
    _F,
)
_INTEGER_FORM = re.compile(r"\bas\s+(?:an?\s+)?(?:integer|whole\s+number)\b", _F)
_FRACTION_FORM = re.compile(
    r"\bas\s+(?:an?\s+(?:(?:common|simplified|reduced|irreducible|improper)\s+)?fraction|"
    r"(?:a\s+)?(?:numerator\s*/\s*denominator|p\s*/\s*q))\b",
    _F,
)
# Places asked in words requested_decimals leaves: "accurate to 4 decimals", "with one decimal", "3 dp".
_DECIMALS = re.compile(
    r"\b(?:to|with)\s+(\d|one|two|three|four|five|six)\s+(?:decimals?|dp)\b(?!\s+(?:places?|digits?))", _F
)
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
# A fraction wanted, in words that are the task itself ("Simplify 548/1040 to lowest terms"): kept.
_FRACTION_WANTED = re.compile(
    r"\b(?:(?:simplified|reduced|irreducible|simplest)\s+fraction|(?:lowest|simplest)\s+terms)\b", _F
)
_SENTENCE = re.compile(r"[^.?!;\n]+(?:[.?!;]+|\n|$)")
_FILLER = re.compile(
    r"\b(?:please|kindly|thanks|thank\s+you|and|or|but|then|also|so|me|the|a|an|i|want|need|would|like|just|only|"
    r"ok|okay|pls|plz|with|your|you|must|should|can|could|give|answer|reply|respond|write|state|provide|result|"
    r"value|number|final|it|as|in|word|is|be|my|response|output|return|format)\b",
    _F,
)


@dataclass(frozen=True)
class AnswerForm:
    """What a question asks of the answer's form (everything optional; nothing asked is plain)."""

    bare: bool = False  # only the value: "reply with the number", "no explanation"
    template: str | None = None  # the value in a frame: "Answer: " + SLOT, "\\boxed{" + SLOT + "}"
    unit: str | None = None  # written after a number: "answer in cm" → "42 cm"
    case: Case | None = None
    decimals: int | None = None  # rounding asked for (services.common.answers.requested_decimals)
    fraction: bool = False  # "as a fraction", "in lowest terms", "the simplified fraction"
    separator: str | None = None  # a list's items joined so: " * " for "like 2 * 2 * 5", ", " for "comma-separated"
    example: str | None = None  # an example answer shown: "['-69', '-13']", "Emma is a angel/devil"
    unitless: bool = False  # the value named as a number ("just the number"): a stated unit goes
    choices: tuple[str, str] | None = None  # the words a yes/no value is written in: ("Y", "N")
    pattern: str | None = None  # a shown pattern: "HH:MM", "DD/MM/YYYY", "a + bi"
    words: bool = False  # a number written in words
    json_key: str | None = None  # the reply is a JSON object with the value under this key
    exponents: str | None = None  # a factorization's repeated factors: as powers with "^" or "**", "" one by one
    notation: Notation = field(default_factory=Notation)  # how the question writes values: followed, not asked
    spans: tuple[Span, ...] = field(default=(), compare=False)  # the instruction's text, to strip
    cuts: tuple[Span, ...] = field(default=(), compare=False)  # instructions with examples, cut whole

    @property
    def asked(self) -> bool:
        """Whether the question asks for any particular form."""
        return bool(
            self.bare
            or self.template
            or self.unit
            or self.case
            or self.fraction
            or self.example
            or self.choices
            or self.pattern
            or self.words
            or self.json_key
            or self.exponents is not None
            or self.decimals is not None
        )


def _in_question(text: str, at: int) -> bool:
    """Whether ``at`` is in a sentence that asks a question: a form named there is the task's."""
    end = re.search(r"[.?!](?=\s|$)|\n|$", text[at:])
    return end is not None and end.group(0) == "?"


def parse_form(question: str) -> AnswerForm:
    """The answer form ``question`` asks for (see the module docstring)."""
    spans: list[tuple[int, int]] = []
    bare = False
    for pattern in _BARE_PATTERNS:
        for match in pattern.finditer(question):
            bare = True
            spans.append((match.start(), match.end()))
    asked = read_instructions(question)
    spans += asked.spans
    template = asked.template
    found = find_template(question)
    if found is not None:
        template, span = found
        spans.append(span)
    unit = asked_unit(question)  # kept in the question: a unit or a percentage changes the number to compute
    case: Case | None = None
    cased = _CASE.search(question)
    if cased is not None:
        word = cased.group("case") or cased.group("case2")
        case = "lower" if word.lower().startswith(("lower", "small")) else "upper"
        spans.append((cased.start(), cased.end()))
    decimals = requested_decimals(question)
    places = _DECIMALS.search(question)
    if decimals is None and places is not None:
        word = places.group(1).lower()
        decimals = int(word) if word.isdigit() else _NUMBER_WORDS[word]
    integer = _INTEGER_FORM.search(question)
    if decimals is None and integer is not None:
        decimals = 0
        spans.append((integer.start(), integer.end()))
    fraction = _FRACTION_FORM.search(question)
    if fraction is not None and not _in_question(question, fraction.start()):  # "What is 0.375 as a fraction?"
        spans.append((fraction.start(), fraction.end()))
    shown = find_examples(question) if template is None else None  # a template is the shape already
    example = shown.example if shown else None
    notation = read_notation(question)
    return AnswerForm(
        bare=bare or asked.bare,
        template=template,
        unit=unit,
        case=case,
        decimals=decimals,
        fraction=fraction is not None or _FRACTION_WANTED.search(question) is not None,
        separator=asked_separator(question, example),
        example=example,
        spans=tuple(sorted(spans)),
        cuts=shown.cuts if shown else (),
        unitless=names_a_number(" ".join(question[start:end] for start, end in spans)),
        choices=asked.choices,
        pattern=asked.pattern,
        words=asked.words,
        json_key=asked.json_key,
        exponents=asked_exponents(question, example) if notation.factors else None,
        notation=notation,
    )


def _strip_sentence(sentence: str, spans: list[tuple[int, int]]) -> str:
    """The sentence without its instruction spans; nothing when only filler would be left."""
    kept, at = [], 0
    for start, end in spans:
        if start >= at:
            kept.append(sentence[at:start])
            at = end
        else:
            at = max(at, end)
    kept.append(sentence[at:])
    rest = "".join(kept)
    content = _FILLER.sub(" ", re.sub(r"[^\w\s]", " ", rest))
    if not re.search(r"\w", content):
        return ""
    rest = re.sub(r"\s*[,;:\-\u2013\u2014]*\s*(?:and|or|then|but)?\s*(?=[.?!]*\s*$)", "", rest)  # dangling "…, and"
    rest = re.sub(r"^(\s*)[,;:\-\u2013\u2014]+\s*", r"\1", rest)  # a leading ", " left by "Without X, ..."
    rest = re.sub(r"\s{2,}", " ", rest)
    rest = re.sub(r"\s+([,.?!;:])", r"\1", rest)
    rest = re.sub(r"([,;:])\s*([.?!])", r"\2", rest)
    return rest


def _cut(question: str, cuts: tuple[Span, ...], spans: tuple[Span, ...]) -> tuple[str, list[Span]]:
    """``question`` without the ``cuts`` (the gap closed to a space or at most a blank line), and
    the ``spans`` outside them moved to where they are in what is left."""
    pieces, at = [], 0
    for start, end in sorted(cuts):
        pieces.append((at, max(at, start)))
        at = max(at, end)
    pieces.append((at, len(question)))
    text, moved = "", []
    for start, end in pieces:
        piece = question[start:end]
        left, right = text.rstrip(" \t"), piece.lstrip(" \t")
        breaks = len(left) - len(left.rstrip("\n")) + len(right) - len(right.lstrip("\n"))
        left, right = left.rstrip("\n"), right.lstrip("\n")
        gap = "" if not (left and right) else "\n" * min(breaks, 2) if breaks else " "
        text = left + gap + right
        shift = len(text) - len(right) - (start + len(piece) - len(right))
        moved += [(s + shift, e + shift) for s, e in spans if start + len(piece) - len(right) <= s and e <= end]
    return text, moved


def strip_form(question: str, form: AnswerForm | None = None) -> str:
    """``question`` without its form instructions (bare, template, case, integer/fraction form,
    unit, instructions with examples): what a program is asked to compute. Rounding stays; so
    does the text around a span."""
    form = form if form is not None else parse_form(question)
    if not form.spans and not form.cuts:
        return question
    text, spans = _cut(question, form.cuts, form.spans) if form.cuts else (question, list(form.spans))
    out: list[str] = []
    at = 0
    for match in _SENTENCE.finditer(text):
        start, end = match.span()
        out.append(text[at:start])  # the line breaks between sentences
        at = end
        inside = [
            (max(s, start) - start, min(e, end) - start)
            for s, e in spans
            if s < end and e > start and not re.search(r"\d", _CLOCK_FORMAT.sub("", text[s:e]))  # data stays
        ]
        out.append(_strip_sentence(match.group(0), inside) if inside else match.group(0))
    stripped = "".join(out).strip()
    return stripped or question


_CLOCK_FORMAT = re.compile(r"\b(?:12|24)-hour\b", _F)  # "in 24-hour HH:MM format" holds no data
# A number and the unit stated after it; an "i" or "j" right after it makes an imaginary number, not a unit.
_NUMBER_WITH_UNIT = re.compile(r"^\s*([-+]?\$?\s*[\d,]*\.?\d+(?:/\d+)?)\s*(%|(?![ij]$)[A-Za-z°][A-Za-z .²³/°]*)?\s*$")


def _number(text: str, form: AnswerForm) -> str | None:
    """A number, and the unit it was stated with, as asked: cleaned, rounded or made a fraction
    where asked (:func:`~services.common.answer_numbers.number_text`), in words, with a requested
    unit appended (a stated unit dropped when another or only the number was asked for)."""
    stated = _NUMBER_WITH_UNIT.match(text)
    if stated is None:
        return None
    spelled = stated.group(1).replace("$", "").replace(" ", "")
    fractions = form.notation.fractions
    number = number_text(spelled, fraction=form.fraction, decimals=form.decimals, fractions_written=fractions)
    if number is None:
        return None
    suffix = stated.group(2)
    number = in_words(number) if form.words else number
    if form.unit and not form.unitless:  # "number only" wins: the unit was for computing
        return f"{number}{form.unit}" if form.unit == "%" else f"{number} {form.unit}"
    if suffix and not form.unitless:
        return f"{number}{suffix}" if suffix == "%" else f"{number} {suffix.strip()}"
    return number


# A value wrapped whole in one pair of quotes ('"Python"'): the quotes are the model's, not the value's.
_QUOTED = re.compile(r"([\"'`\u201c\u2018])(?P<inner>[^\"'`\u201c\u201d\u2018\u2019\n]+)([\"'`\u201d\u2019])")
_QUOTE_PAIRS = {('"', '"'), ("'", "'"), ("`", "`"), ("\u201c", "\u201d"), ("\u2018", "\u2019")}


def _unquoted(value: str) -> str:
    """``value`` without one pair of quotes around it whole (an asked quoting is the template's)."""
    quoted = _QUOTED.fullmatch(value)
    if quoted is None or (quoted.group(1), quoted.group(3)) not in _QUOTE_PAIRS:
        return value
    return quoted.group("inner").strip()


def render_value(value: str, form: AnswerForm) -> str:
    """The value alone, as asked: LaTeX markup and quotes around it whole gone
    (:func:`~services.common.answer_latex.plain`);
    a complex number, a factorization or an expression in the asked notation or the question's
    (:func:`~services.common.answer_notation.written_in`); a number as :func:`_number` writes it;
    a date or time as the question writes its own, or in a shown pattern; a yes/no value in the
    asked words; a list's items joined as asked, or as a set where a set is asked; the case applied."""
    value = _unquoted(plain(value).strip())
    text = value.strip().rstrip(".").strip() if not re.fullmatch(r"\s*\.\d+\s*", value) else value.strip()
    text = as_written(text, form.notation.times)
    complex_asked = bool(form.pattern and "bi" in form.pattern.replace(" ", ""))
    written = written_in(text, form.notation, exponents=form.exponents, separator=form.separator, asked=complex_asked)
    text = written if written is not None else _number(text, form) or text
    text = in_pattern(text, form.pattern) if form.pattern else text
    text = in_choice(text, form.choices) if form.choices else text
    if form.example:
        text = requote(text, form.example)
    if written is None and form.notation.sets and not form.separator and not form.example:
        text = as_set(text) or text
    if written is None and (form.separator or not form.example):  # an example without a separator shows the shape
        text = listed(text, form.separator)
    if form.case == "lower":
        text = text.lower()
    elif form.case == "upper":
        text = text.upper()
    return text


def render(value: str, form: AnswerForm) -> str:
    """The answer as the user asked for it: in their template, bare, or as one short sentence."""
    text = render_value(value, form)
    if form.json_key:
        return as_json(text, form.json_key)
    if form.template:
        return form.template.replace(SLOT, text)
    if form.bare or form.example:  # an example shows the shape wanted: no sentence around it
        return text
    return f"The answer is {text}."
