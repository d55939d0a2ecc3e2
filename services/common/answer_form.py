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
:mod:`services.common.answer_lists`); vote keys only compare answers.

Rounding instructions stay in the stripped question (they can be the task itself: "round
3.14159 to two decimals") and are applied again here; a unit stays too, as a plain request
for the value in that unit (it changes the number), and is written after the number here.
An instruction that shows an example answer ("Instead of reporting your answer as 1, 2, use
['1', '2']", "(Format your answer like: ...)") is cut whole, examples and all
(:mod:`services.common.answer_examples`), and the example is kept: the value is then written
bare, in the example's shape where it is a list of quoted strings.
Pure and deterministic: the gateway, the orchestrator and the benchmarks read forms the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from services.common.answer_examples import Span, find_examples, requote
from services.common.answer_lists import asked_separator, listed
from services.common.answer_numbers import number_text
from services.common.answers import requested_decimals

Case = Literal["lower", "upper"]
SLOT = "\x00"  # where the value goes in a template (a character no template contains)

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
# A placeholder for the value inside a template: "Answer: …", "<number>", "[answer]", "X".
_PLACEHOLDER = re.compile(
    r"…|\.{3}|<[^<>\n]{0,24}>|\[[^\[\]\n]{0,24}\]|\{[^{}\n]{0,24}\}|(?<![A-Za-z])[XN](?=\W*$)|\?+|_{2,}|#+"
)
_QUOTED = re.compile(r"\"([^\"\n]{1,60})\"|“([^”\n]{1,60})”|`([^`\n]{1,60})`|(?<![A-Za-z])'([^'\n]{1,60})'(?![A-Za-z])")
_TEMPLATE_TRIGGER = re.compile(
    r"\b(?:end|ends|ending|finish|conclude|close|format|formatted|form|write|put|give|state|present|reply|respond|"
    r"answer|use|print|output|return|start|begin|prefix|phrase|express|line|template|like|as)\b",
    _F,
)
# What comes right before a quoted template: "end with '…'", "write it as '…'", "format: '…'".
_CONNECTOR = re.compile(r"(?:\b(?:with|as|like|form|format|template|using|follows|reads|in)|:)\s*$", _F)
# "Format: Answer: <n>", "in the form ANSWER=<n>", "end with Answer: X" (no quotes).
_BARE_TEMPLATE = re.compile(
    r"\b(?:(?:format|form|template|write|give|reply|respond|answer)\b(?:\s+(?:your|the)\s+\w+\b)?\s*(?:is|as|like|of)?|"
    r"(?:end|finish|conclude)\s+(?:your\s+\w+\s+)?with)"
    r"\s*:?\s*(?P<t>(?!(?:is|as|like|of)\b)[A-Za-z]+(?: [A-Za-z]+)?\s*[:=]\s*(?:" + _PLACEHOLDER.pattern + r"))",
    _F,
)
_BOXED = re.compile(
    r"(?:\b(?:put|write|place|give|present|enclose|wrap|state|put|show|box|format)\b[^.?!\n]{0,40}?)?"
    r"(?:\\boxed\s*(?:\{[^{}]{0,20}\})?|\bin\s+a\s+box\b)",
    _F,
)
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
    r"\s+in\s+(?P<unit>(?:square\s+|cubic\s+)?[A-Za-z°%$€£]+(?:\s+(?:per|an|a)\s+[A-Za-z]+)?)\b",
    _F,
)
_INCLUDE_UNIT = re.compile(r"\b(?:include|with|add|state|give)\s+(?:the\s+)?units?\b", _F)
_HOW_MANY_UNIT = re.compile(r"\bhow\s+many\s+(?P<unit>[A-Za-z]+)", _F)
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
_FRACTION_FORM = re.compile(r"\bas\s+an?\s+(?:(?:common|simplified|reduced|irreducible)\s+)?fraction\b", _F)
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
_UNIT_WORDS = {"percent": "%", "percentage": "%", "per cent": "%"}


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
            or self.decimals is not None
        )


def _template_of(text: str) -> tuple[str, tuple[int, int]] | None:
    """A quoted or labelled template with a placeholder ("End with 'Answer: …'"), or a quoted
    label to follow ("start with 'Answer:'"), and the span of the instruction that gave it."""
    for match in _QUOTED.finditer(text):
        inner = next(g for g in match.groups() if g is not None)
        before = text[max(0, match.start() - 80) : match.start()]
        clause = re.split(r"[.?!;\n]", before)[-1]
        trigger = list(_TEMPLATE_TRIGGER.finditer(clause))
        if not trigger or not _CONNECTOR.search(clause):
            continue
        start = match.start() - len(clause) + trigger[0].start()
        slot = _PLACEHOLDER.search(inner)
        if slot is not None and re.search(r"[A-Za-z:=]", inner[: slot.start()] + inner[slot.end() :]):
            return inner[: slot.start()] + SLOT + inner[slot.end() :], (start, match.end())
        if inner.rstrip().endswith((":", "=")):
            return inner.rstrip() + " " + SLOT, (start, match.end())
    labelled = _BARE_TEMPLATE.search(text)
    if labelled:
        inner = labelled.group("t")
        slot = _PLACEHOLDER.search(inner)
        if slot is not None:
            return inner[: slot.start()] + SLOT + inner[slot.end() :], (labelled.start(), labelled.end())
    return None


def _unit_of(text: str) -> str | None:
    for match in _UNIT.finditer(text):
        unit = match.group("unit")
        if unit.split()[0].lower() in _NOT_UNITS:
            continue
        return _UNIT_WORDS.get(unit.lower(), unit)
    named = _HOW_MANY_UNIT.search(text)
    if _INCLUDE_UNIT.search(text) and named:
        return named.group("unit")
    return None


def parse_form(question: str) -> AnswerForm:
    """The answer form ``question`` asks for (see the module docstring)."""
    spans: list[tuple[int, int]] = []
    bare = False
    for pattern in _BARE_PATTERNS:
        for match in pattern.finditer(question):
            bare = True
            spans.append((match.start(), match.end()))
    template: str | None = None
    found = _template_of(question)
    if found is not None:
        template, span = found
        spans.append(span)
    else:
        boxed = _BOXED.search(question)
        if boxed is not None:
            template = "\\boxed{" + SLOT + "}"
            spans.append((boxed.start(), boxed.end()))
    unit: str | None = None
    found_unit = _unit_of(question)
    if found_unit is not None:  # kept in the question: the unit changes the number to compute
        unit = found_unit
    case: Case | None = None
    cased = _CASE.search(question)
    if cased is not None:
        word = cased.group("case") or cased.group("case2")
        case = "lower" if word.lower().startswith(("lower", "small")) else "upper"
        spans.append((cased.start(), cased.end()))
    decimals = requested_decimals(question)
    integer = _INTEGER_FORM.search(question)
    if decimals is None and integer is not None:
        decimals = 0
        spans.append((integer.start(), integer.end()))
    fraction = _FRACTION_FORM.search(question)
    if fraction is not None:
        spans.append((fraction.start(), fraction.end()))
    shown = find_examples(question) if template is None else None  # a template is the shape already
    example = shown.example if shown else None
    return AnswerForm(
        bare=bare,
        template=template,
        unit=unit,
        case=case,
        decimals=decimals,
        fraction=fraction is not None or _FRACTION_WANTED.search(question) is not None,
        separator=asked_separator(question, example),
        example=example,
        spans=tuple(sorted(spans)),
        cuts=shown.cuts if shown else (),
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
            if s < end and e > start and not re.search(r"\d", text[s:e])  # an instruction with data stays
        ]
        out.append(_strip_sentence(match.group(0), inside) if inside else match.group(0))
    stripped = "".join(out).strip()
    return stripped or question


# A number and the unit stated after it; an "i" or "j" right after it makes an imaginary number, not a unit.
_NUMBER_WITH_UNIT = re.compile(r"^\s*([-+]?\$?\s*[\d,]*\.?\d+(?:/\d+)?)\s*(%|(?![ij]$)[A-Za-z°][A-Za-z .²³/°]*)?\s*$")


def render_value(value: str, form: AnswerForm) -> str:
    """The value alone, as asked: numbers as spelled but cleaned, rounded or made fractions where
    asked (:func:`~services.common.answer_numbers.number_text`), a requested unit appended (a
    stated unit dropped when another or only the number was asked for), a list's items joined
    as asked, the case applied."""
    text = value.strip().rstrip(".").strip() if not re.fullmatch(r"\s*\.\d+\s*", value) else value.strip()
    stated = _NUMBER_WITH_UNIT.match(text)
    number = None
    if stated is not None:
        spelled = stated.group(1).replace("$", "").replace(" ", "")
        number = number_text(spelled, fraction=form.fraction, decimals=form.decimals)
    if number is not None and stated is not None:
        suffix = stated.group(2)
        if form.unit and not form.bare:  # "number only" wins: the unit was for computing
            text = f"{number}{form.unit}" if form.unit in ("%",) else f"{number} {form.unit}"
        elif suffix and not form.bare:
            text = f"{number}{suffix}" if suffix == "%" else f"{number} {suffix.strip()}"
        else:
            text = number
    if form.example:
        text = requote(text, form.example)
    if form.separator or not form.example:  # an example without a separator shows the shape to keep
        text = listed(text, form.separator)
    if form.case == "lower":
        text = text.lower()
    elif form.case == "upper":
        text = text.upper()
    return text


def render(value: str, form: AnswerForm) -> str:
    """The answer as the user asked for it: in their template, bare, or as one short sentence."""
    text = render_value(value, form)
    if form.template:
        return form.template.replace(SLOT, text)
    if form.bare or form.example:  # an example shows the shape wanted: no sentence around it
        return text
    return f"The answer is {text}."
