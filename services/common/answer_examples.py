"""Answer-form instructions that carry an example answer, found so they can be cut whole.

"Instead of reporting your answer as -69, -13, 1, use ['-69', '-13', '1'] instead" and
"(Format your answer like: "Emma is a angel/devil")" show the answer's shape with made-up
content. A program-writing model shown them copies the example (it sorts -69, -13, 1 instead
of the question's numbers) or prints it literally, so the whole instruction goes - numbers
included, unlike the single form phrases :mod:`services.common.answer_form` strips - and the
example is kept to render the decided value in its shape (:func:`requote`).

Two shapes are found: an instruction *block* (a header such as "Please follow the instructions
below:" or "Answer format:" and the lines under it that talk about the answer's presentation),
and an example-carrying sentence about the answer ("Format your answer like: ...", "Your answer
should look like: ...", "Give your answer as a list, e.g. [...]", "Write it with exponents,
like 2^2 * 3"). Examples that define the task
("Spell this word backward (example: sun -> nus)") name no answer and stay.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

Span = tuple[int, int]

_F = re.IGNORECASE
_ANSWER = r"(?:final\s+)?(?:answers?|response|reply|output|result|solution)"
# A header whose lines may be the task itself: those lines must talk about the answer's form.
_GENERIC_HEADER = (
    r"(?:please\s+)?(?:follow|observe|obey|note|read|use)\s+(?:the\s+)?(?:following\s+)?"
    r"(?:instructions?|rules?|guidelines?|requirements?)(?:\s+below)?"
)
# A header about the answer itself: every line under it is about the answer's form.
_ANSWER_HEADER = (
    rf"(?:(?:the\s+)?(?:answer|output|response|reply)\s+(?:format(?:ting)?|rules?|requirements?|instructions?)|"
    rf"format(?:ting)?\s+(?:rules?|instructions?|requirements?|guidelines?)|"
    rf"(?:please\s+)?(?:format|write|present|give)\s+(?:your|the)\s+{_ANSWER}\s+as\s+follows|format(?:ting)?)"
)
_HEADER = re.compile(
    rf"(?:^|(?<=\n)|(?<=[.?!]\s))[ \t]*(?:(?P<generic>{_GENERIC_HEADER})|{_ANSWER_HEADER})[ \t]*:[ \t]*(?=\n)", _F
)
_ITEM = re.compile(r"^[ \t]*(?:#+[ \t]*)?(?:\d+[.)]|[-*•])[ \t]*")
_PRESENTATION = re.compile(
    r"\b(?:answers?|report(?:ing)?|format(?:ted|ting)?|lists?|strings?|examples?|instead|output|print|write|"
    r"respond|reply|response|quotes?|quoted|brackets?|separated|comma|delimit\w*|e\.g\.)",
    _F,
)
# "Format your answer like: ...", "Your answer should look like: ...", "in the format: ...".
# ``like`` always introduces an example; ``as`` and ``in the format`` only with a colon or quote.
_LEAD = re.compile(
    rf"\b(?:please\s+)?(?:(?:format|write|give|present|express|put|structure|provide|return|output|state)\s+"
    rf"(?:your|the)\s+{_ANSWER}\s+(?:(?P<like>like)|as|in\s+(?:the|this)\s+(?:form|format)(?:\s+of)?)|"
    rf"(?:your|the)\s+{_ANSWER}\s+should\s+(?:(?P<like2>look\s+like)|be\s+(?:formatted|written)\s+(?:like|as))|"
    rf"(?:(?:answer|reply|respond|write\s+(?:it|your\s+answer)|give\s+(?:it|your\s+answer))\s+)?"
    rf"in\s+the\s+(?:following\s+)?format)\b[ \t]*(?P<colon>:)?[ \t]*",
    _F,
)
_INSTEAD = re.compile(
    rf"\binstead\s+of\s+(?:reporting|writing|giving|printing|outputting|presenting|returning|stating)\s+"
    rf"(?:your|the)\s+{_ANSWER}\s+as\s+[^\n]+?,\s*(?:please\s+)?(?:use|write|give|report|return|output)\s+",
    _F,
)
# "Give your answer as a list, e.g. [...]", "write it with exponents, like 2^2 * 3": an example
# inside a sentence about the answer.
_EG = re.compile(
    rf"\b(?:please\s+)?(?:give|write|format|present|express|provide|return|report|output|put|list)\s+"
    rf"(?:(?:your|the|all\s+your)\s+{_ANSWER}|it|them)\b[^\n.]*?"
    rf"(?:(?:,\s*|\s+|\(\s*)(?:for\s+example|e\.g\.)|,\s*like\b)[,:]?\s*",
    _F,
)
_FOR_EXAMPLE = re.compile(r"\b(?:for\s+example|e\.g\.)[,:]?\s*", _F)
_EXAMPLE_STOP = re.compile(r"\n|[.!?](?=\s+[A-Z(])|$")  # an unquoted example: the line or the sentence
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|(?=\n)|$")
_CLOSE = {'"': '"', "'": "'", "“": "”", "`": "`", "[": "]", "(": ")", "{": "}"}


@dataclass(frozen=True)
class Examples:
    """The example answer shown (``None`` when none) and the instructions' text, to cut whole."""

    example: str | None
    cuts: tuple[Span, ...]


def _example_end(text: str, at: int) -> int:
    """Where an example starting at ``at`` ends: its closing quote or bracket, else the line's
    (or the sentence's: a full stop before a capital) end."""
    opener = text[at : at + 1]
    if opener in _CLOSE:
        depth = 0
        for i in range(at, len(text)):
            if text[i] == "\n":
                break
            if text[i] == _CLOSE[opener] and (depth == 1 or opener == _CLOSE[opener]) and i > at:
                return i + 1
            depth += (text[i] == opener) - (text[i] == _CLOSE[opener])
    stop = _EXAMPLE_STOP.search(text, at)
    return stop.start() if stop else len(text)


def _unquote(example: str) -> str:
    example = example.strip().rstrip(".").strip()
    if len(example) > 1 and example[0] in "\"'“`" and example[-1] == _CLOSE[example[0]]:
        return example[1:-1]
    return example


def _closing_paren(text: str, at: int) -> int | None:
    """The index just past the ``)`` that closes the ``(`` at ``at``, ``None`` when unclosed."""
    depth = 0
    for i in range(at, len(text)):
        depth += (text[i] == "(") - (text[i] == ")")
        if depth == 0:
            return i + 1
    return None


def _sentence(text: str, lead: re.Match[str]) -> tuple[str, Span] | None:
    """The example a lead introduces, and the instruction's span: the parentheses around it or
    the lead to the end of the example's sentence ("... as [a, b] where a is the quotient.")."""
    start = lead.start()
    opened = re.search(r"\(\s*$", text[:start])
    if opened is not None:
        close = _closing_paren(text, opened.start())
        if close is not None:
            return _unquote(text[lead.end() : close - 1]), (opened.start(), close)
    end = _example_end(text, lead.end())
    if end <= lead.end():
        return None
    example = text[lead.end() : end]
    tail = re.match(r"\s+instead\b", text[end:], _F)
    end += tail.end() if tail else 0
    end += text.count("(", start, end) > text.count(")", start, end) and text[end : end + 1] == ")"
    rest = _SENTENCE_END.search(text, end)  # what the sentence says of the example goes too
    end = rest.end() if rest else end
    return _unquote(example), (start, end)


def _introduces(lead: re.Match[str], text: str) -> bool:
    """Whether a lead phrase introduces an example: "like", a colon, or a quote or bracket next."""
    return (
        bool(lead.group("like") or lead.group("like2") or lead.group("colon"))
        or text[lead.end() : lead.end() + 1] in _CLOSE
    )


def _block(text: str, header: re.Match[str]) -> Span | None:
    """The span of an instruction block: the header to its last line about the answer (an item
    under a header about the answer, or any line that talks about the answer's presentation)."""
    at = header.end() + 1
    end, gap = None, False
    for line in re.finditer(r"[^\n]*\n?", text[at:]):
        body = line.group(0).rstrip("\n")
        if not body.strip():
            gap = gap or end is not None
            continue
        is_item, about = bool(_ITEM.match(body)), bool(_PRESENTATION.search(body))
        if (gap and not is_item) or not (about or (is_item and not header.group("generic"))):
            break
        end, gap = at + line.start() + len(body), False
    return (header.start(), end) if end is not None else None


def _example_in(text: str) -> str | None:
    """The example answer a block or sentence shows: "use Y instead" first, then "for example Y"."""
    for pattern in (_INSTEAD, _FOR_EXAMPLE, _LEAD):
        for match in pattern.finditer(text):
            if pattern is _LEAD and not _introduces(match, text):
                continue
            found = _sentence(text, match)
            if found is not None and found[0]:
                return found[0]
    return None


def find_examples(question: str) -> Examples:
    """Instruction blocks and example-carrying sentences about the answer in ``question``."""
    cuts: list[Span] = []
    example: str | None = None
    for header in _HEADER.finditer(question):
        span = _block(question, header)
        if span is not None and not any(s <= span[0] < e for s, e in cuts):
            cuts.append(span)
            example = example or _example_in(question[span[0] : span[1]])
    for pattern in (_INSTEAD, _LEAD, _EG):
        for match in pattern.finditer(question):
            if any(s <= match.start() < e for s, e in cuts) or (pattern is _LEAD and not _introduces(match, question)):
                continue
            found = _sentence(question, match)
            if found is not None and found[0]:
                example = example or found[0]
                cuts.append(found[1])
    return Examples(example, tuple(sorted(cuts)))


def requote(value: str, example: str) -> str:
    """``value``, a bracketed list, with its items written as quoted strings when ``example`` is a
    list of quoted strings ("['-69', '-13']"), in the example's quotes; otherwise as it is."""
    shape = re.match(r"\s*\[\s*(['\"])", example)
    if shape is None:
        return value
    try:
        shown, items = ast.literal_eval(example.strip()), ast.literal_eval(value.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value
    if not isinstance(shown, list) or not all(isinstance(item, str) for item in shown):
        return value
    if not isinstance(items, (list, tuple)) or any(isinstance(item, (list, tuple, dict, set)) for item in items):
        return value
    quote = shape.group(1)
    texts = [str(item) for item in items]
    if any(quote in text or "\\" in text for text in texts):
        return value
    return "[" + ", ".join(f"{quote}{text}{quote}" for text in texts) + "]"
