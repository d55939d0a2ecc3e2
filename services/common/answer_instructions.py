"""Sentences that talk about the answer's form, found whole, and what they ask.

Users phrase a form instruction in endless ways ("I only want the number", "Keep it to the
number", "Just the day name, in lowercase", "Comma separated please", "no other text"); a rule
per phrasing always misses the next one. An *instruction* here is a sentence, or a comma-separated
part of one, that is not a question and is made only of words about the reply's form (reply,
answer, only, just, number, lowercase, tags, separated, ...) - no data, no digits - and names at
least one cue of an instruction. It is cut whole from what a program is asked, and what it asks
is read out of it: only the value (an "only" word, or the value named as a number), a choice of
words for a yes/no value ("Y or N", "TRUE or FALSE", "a boolean"), a shown pattern ("HH:MM",
"a + bi"), the value in words, a JSON object and its key, tags, a ``####`` line or quotes around
the value. Rounding and units are not here: they change the number to compute and stay in the
question (:mod:`services.common.answer_form`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Span = tuple[int, int]
SLOT = "\x00"  # where the value goes in a template (a character no template contains)

_F = re.IGNORECASE
_FORM_TEXT = """
    answer answers reply replies respond response responses write give return output print provide state say tell
    put show present report share express format formatted formatting use using keep wrap wrapped enclose enclosed
    box boxed place type list separate separated separating delimit delimited end finish conclude start begin
    follow followed following send mark marked surround surrounded
    result results value values number numbers numeral numerals digit digits integer figure total text words word
    letter letters name day weekday date time duration fraction percentage percent set list items item elements
    element entries expression string boolean numerator denominator sentence explanation explanations explain working
    work steps reasoning commentary comment comments preamble prose units unit sign signs symbol symbols tag tags
    brace braces curly bracket brackets square parentheses quote quotes quotation marks json object key field line
    lines form notation exponents exponent factors factor pattern style
    only just simply solely purely alone nothing else other no not without any extra additional more plain bare single
    double final exact exactly numeric numerical simplified factored converted resulting whole one each per own
    comma commas semicolon semicolons space spaces dash dashes hyphen hyphens newline newlines pipe pipes slash
    slashes lowercase uppercase lower upper case capital capitals caps small all in on as with like after before
    between around inside within by of to the a an your my me it its them they their this that these those please kindly
    thanks thank you i want need would should must can could be is are do don't dont also and or but then so ok okay
    pls just here there
    yes y true false n hh mm ss h yyyy dd bi 24-hour 12-hour
"""
_FORM_WORDS = frozenset(_FORM_TEXT.split())
# Words that make a run of form words an instruction (not, say, a list of words to sort).
_CUES = re.compile(
    r"\b(?:answer|reply|respond|response|write|give|return|output|print|provide|state|put|express|format|keep|wrap|"
    r"enclose|box|only|just|nothing|text|separated|separate|lowercase|uppercase|capital|caps|tags?|json|per|"
    r"explanation|explain|boolean)\b",
    _F,
)
# "only the value": an "only" word, or the value named as a number ("keep it to the number").
_ONLY = re.compile(
    r"\b(?:only|just|alone|solely|simply|purely|exactly)\b|\bnothing\s+(?:else|more)\b|"
    r"\bno\s+(?:other|extra|additional)\b|\bwithout\s+(?:any\s+)?(?:other|extra|additional|units?)\b|"
    r"\bthe\s+(?:\w+\s+)?(?:number|numeral|digits|integer|figure|numeric\s+value|numerical\s+value)\b",
    _F,
)
_UNITLESS = re.compile(
    r"\b(?:number|numeral|digits|integer|figure|numeric|numerical)\b|\bwithout\s+(?:any\s+)?units?\b", _F
)
_CHOICES = (
    (re.compile(r"\b(yes)\s*(?:or|/)\s*(no)\b", _F), ("Yes", "No")),
    (re.compile(r"\b(y)\s*(?:or|/)\s*(n)\b", _F), ("Y", "N")),
    (re.compile(r"\b(true)\s*(?:or|/)\s*(false)\b|\bboolean\b", _F), ("True", "False")),
)
_PATTERN = re.compile(
    r"(?<![\w:])(?:h{1,2}:mm(?::ss)?|y{4}[-/.]mm[-/.]dd|dd[-/.]mm[-/.]y{4}|mm[-/.]dd[-/.]y{4}|a\s*\+\s*bi)(?![\w:])",
    _F,
)
_WORDS = re.compile(r"\bin\s+(?:english\s+)?words\b|\bspell(?:ed)?\s+(?:it\s+)?out\b", _F)
_JSON = re.compile(r"\bjson\b", _F)
_JSON_KEY = re.compile(r"\{\s*[\"'](\w+)[\"']\s*:|\bkey\s+[\"'](\w+)[\"']", _F)
_TAGS = re.compile(r"<(\w+)>\s*(?:</\1>)?", _F)
_HASHES = re.compile(r"#{3,}")
_QUOTES = re.compile(r"\b(?:(?P<double>double)|(?P<single>single))?\s*(?:quotes|quotation\s+marks)\b", _F)
_BACKTICKS = re.compile(r"\bbackticks?\b", _F)
_PART = re.compile(r"[^,;\n]+")
# A sentence: up to a full stop, question or exclamation mark before a space or the end (not
# the point in "2.25"), a semicolon or a line break.
_SENTENCE = re.compile(r"(?:[^.?!;\n]|[.?!](?=\S))+(?:[.?!]+|;|\n|$)")
_CLOCK_FORMAT = re.compile(r"\b(?:12|24)-hour\b", _F)


@dataclass(frozen=True)
class Instructions:
    """What the instruction sentences of a question ask, and their spans (to cut whole)."""

    spans: tuple[Span, ...] = ()
    bare: bool = False  # only the value
    unitless: bool = False  # the value named as a number: a stated unit goes
    choices: tuple[str, str] | None = None  # the words for a yes/no value: ("Y", "N")
    pattern: str | None = None  # a shown pattern: "HH:MM", "DD/MM/YYYY", "a + bi"
    words: bool = False  # a number in words
    json_key: str | None = None  # the reply is a JSON object with the value under this key
    template: str | None = None  # tags, a "####" line or quotes around the value


def names_a_number(text: str) -> bool:
    """Whether an instruction names the value as a number ("just the number", "without units"):
    a unit the candidate stated is then left out."""
    return _UNITLESS.search(text) is not None


def is_instruction(text: str) -> bool:
    """Whether ``text`` (a sentence or a part of one) talks only about the reply's form."""
    body = text.strip()
    if not body or body.endswith("?") or re.search(r"\d", _CLOCK_FORMAT.sub("", body)):
        return False
    words = re.findall(r"[\w']+(?:-hour)?", body.lower())
    return bool(words) and all(w in _FORM_WORDS for w in words) and _CUES.search(body) is not None


def instruction_spans(question: str) -> list[Span]:
    """The spans of the question's instructions: whole sentences, else parts of sentences."""
    spans: list[Span] = []
    for sentence in _SENTENCE.finditer(question):
        if is_instruction(_TAGS.sub(" tags ", sentence.group(0))):
            spans.append(sentence.span())
            continue
        for part in _PART.finditer(sentence.group(0)):
            text = re.sub(r"[.?!]+\s*$", "", part.group(0))
            if len(text.split()) > 1 and is_instruction(text):  # one word is likely a list's item
                spans.append((sentence.start() + part.start(), sentence.start() + part.end()))
    return spans


def _template(text: str) -> str | None:
    tag = _TAGS.search(text)
    if tag is not None:
        return f"<{tag.group(1)}>{SLOT}</{tag.group(1)}>"
    if _HASHES.search(text):
        return f"#### {SLOT}"
    quotes = _QUOTES.search(text)
    if quotes is not None:
        mark = "'" if quotes.group("single") else '"'
        return f"{mark}{SLOT}{mark}"
    return f"`{SLOT}`" if _BACKTICKS.search(text) else None


def read_instructions(question: str) -> Instructions:
    """The instruction sentences of ``question`` and what they ask (see the module docstring)."""
    spans = instruction_spans(question)
    text = " ".join(question[start:end] for start, end in spans)
    if not spans:
        return Instructions()
    choices = next((words for pattern, words in _CHOICES if pattern.search(text)), None)
    shown = next((p.search(text) for p, _ in _CHOICES if p.search(text)), None)
    words = [word for word in shown.groups() if word] if shown is not None else []
    if choices is not None and words and all(word.isupper() for word in words) and len(words[0]) > 1:
        choices = (choices[0].upper(), choices[1].upper())  # "Answer TRUE or FALSE", "YES/NO"
    pattern = _PATTERN.search(text)
    json_key = _JSON_KEY.search(text)
    return Instructions(
        spans=tuple(spans),
        bare=bool(_ONLY.search(text) or choices or pattern),
        unitless=bool(_UNITLESS.search(text)),
        choices=choices,
        pattern=pattern.group(0) if pattern else None,
        words=bool(_WORDS.search(text)),
        json_key=(next(k for k in json_key.groups() if k) if json_key else "answer") if _JSON.search(text) else None,
        template=_template(text),
    )
