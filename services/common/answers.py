"""The one place answers are extracted, normalized and compared.

Votes, verifiers and benchmarks must agree on what "the answer" of a candidate is; if each
had its own regex, a majority vote would split across spellings of one answer (PRIMER §3).
Extraction order: the last balanced-brace ``\\boxed{...}``, then "answer is X", then
"#### X", then "Final Answer: X", then the last number. Comparison is a cheap exact /
numeric fast path, falling back to ``math-verify`` for symbolic forms (``1/2`` = ``0.5`` =
``\\frac12``).
"""

from __future__ import annotations

import re
import threading
from fractions import Fraction

_BOXED_COMMANDS = ("\\boxed", "\\fbox")
_NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+"
_NUMBER_RE = re.compile(_NUMBER)
_ANSWER_IS_RE = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=)\s*:?\s*(.+?)(?:\n|$)",
    re.IGNORECASE,
)
_HASHES_RE = re.compile(r"####\s*(.+?)\s*(?:\n|$)")
_FENCE_RE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)
_TEXT_WRAPPERS_RE = re.compile(r"\\(?:text|textbf|mathrm|mbox|textrm|mathbf)\s*\{([^{}]*)\}")
_LATEX_NOISE = ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "\\displaystyle", "\\$")
# Inline / display math delimiters around a stated answer: "answer: \(18\)".
_MATH_DELIMITERS = ("\\(", "\\)", "\\[", "\\]")
# A number and its unit; an "i" or "j" right after the number makes it imaginary (``3j``), not a unit.
_UNIT_SUFFIX_RE = re.compile(r"^(" + _NUMBER + r")\s*(?:%|(?![ij]$)[A-Za-z][A-Za-z .²³/]*)$")
_DFRAC_RE = re.compile(r"\\[dt]frac")
_SIMPLE_FRAC_RE = re.compile(r"^\\frac\{?([-+]?\d+)\}?\{?(\d+)\}?$")
_SLASH_FRAC_RE = re.compile(r"^([-+]?\d+)\s*/\s*(\d+)$")
# Inputs longer than this skip math-verify: sympy on pathological strings can hang.
_MAX_SYMBOLIC_CHARS = 400


def _balanced_argument(text: str, start: int) -> tuple[str, int] | None:
    """The brace-delimited argument opening at ``text[start] == '{'`` and the index after it."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    return None


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox``), with nested braces kept intact."""
    best: str | None = None
    best_pos = -1
    for command in _BOXED_COMMANDS:
        pos = 0
        while True:
            idx = text.find(command, pos)
            if idx < 0:
                break
            after = idx + len(command)
            rest = text[after:]
            stripped = rest.lstrip()
            if stripped.startswith("{"):
                parsed = _balanced_argument(text, after + (len(rest) - len(stripped)))
                if parsed is not None and idx > best_pos:
                    best, best_pos = parsed[0], idx
            elif rest[:1] == " " and stripped:
                # "\boxed 5" form: the argument is the next token.
                token = stripped.split()[0].rstrip(".,;$")
                if idx > best_pos:
                    best, best_pos = token, idx
            pos = after
    return best.strip() if best is not None else None


def extract_code(text: str, language: str | None = "python") -> str | None:
    """The last fenced code block, preferring blocks tagged ``language`` (untagged count too)."""
    blocks = _FENCE_RE.findall(text)
    if not blocks:
        return None
    if language:
        tagged = [code for tag, code in blocks if tag.lower() in (language.lower(), "", "py")]
        if tagged:
            return str(tagged[-1]).strip("\n")
    return str(blocks[-1][1]).strip("\n")


def _clean_clause(clause: str) -> str:
    clause = clause.strip()
    boxed = extract_boxed(clause)
    if boxed is not None:
        return boxed
    clause = clause.strip("*_ ").rstrip(".")
    for delimiter in _MATH_DELIMITERS:
        clause = clause.replace(delimiter, "")
    clause = clause.strip().rstrip(".").strip()
    if clause.startswith("$") and clause.endswith("$") and len(clause) > 1:
        clause = clause.strip("$").strip()
    return clause


def extract_answer(text: str) -> str | None:
    """The final answer a candidate states, or ``None`` when it states none; failing a stated
    one (:func:`stated_answer`), its last number."""
    stated = stated_answer(text)
    if stated is not None or not text:
        return stated
    numbers = _NUMBER_RE.findall(text)
    if numbers:
        return str(numbers[-1])
    return None


_BOOLEAN_WORDS = {"true": "Yes", "false": "No"}


def yes_or_no(value: str) -> str:
    """A program's printed ``True``/``False`` as the answer to a yes/no question says it
    ("Yes"/"No"); any other value unchanged. The reply renders it so, and the pools check it so."""
    return _BOOLEAN_WORDS.get(value.strip().lower(), value)


def stated_answer(text: str) -> str | None:
    """The answer a candidate states as its answer (boxed, "the answer is ...", "#### ..."),
    ``None`` when it states none. Unlike :func:`extract_answer`, never its last number: for a
    yes/no or a which-of question that number is a step of the reasoning ("221 = 13 x 17")."""
    if not text:
        return None
    boxed = extract_boxed(text)
    if boxed is not None:
        return boxed
    matches = _ANSWER_IS_RE.findall(text)
    if matches:
        clause = _clean_clause(matches[-1])
        if clause:
            return clause
    hashes = _HASHES_RE.findall(text)
    if hashes:
        clause = _clean_clause(hashes[-1])
        if clause:
            return clause
    return None


def _strip_latex(value: str) -> str:
    for noise in (*_MATH_DELIMITERS, *_LATEX_NOISE):
        value = value.replace(noise, "")
    value = _DFRAC_RE.sub(r"\\frac", value)
    previous = None
    while previous != value:
        previous = value
        value = _TEXT_WRAPPERS_RE.sub(r"\1", value)
    value = value.replace("^\\circ", "").replace("^{\\circ}", "").replace("\\%", "%")
    return value


_MAX_EXPONENT = 4000


def _as_fraction(value: str) -> Fraction | None:
    """An exact rational for plain numbers, ``a/b`` and ``\\frac{a}{b}``; else ``None``."""
    candidate = value.replace(",", "") if re.fullmatch(_NUMBER, value) else value
    try:
        if re.fullmatch(r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?", candidate):
            exponent = re.search(r"[eE]([-+]?\d+)$", candidate)
            if exponent and abs(int(exponent.group(1))) > _MAX_EXPONENT:
                return None  # Fraction would build a number of that many digits
            return Fraction(candidate)
    except (ValueError, ZeroDivisionError):
        return None
    for pattern in (_SIMPLE_FRAC_RE, _SLASH_FRAC_RE):
        match = pattern.match(candidate)
        if match and int(match.group(2)) != 0:
            return Fraction(int(match.group(1)), int(match.group(2)))
    return None


def clean_number(value: str) -> Fraction | None:
    """An exact rational for a stated number (``42``, ``24.0``, ``1,200``, ``$5``, ``3/4``,
    ``\\frac{3}{4}``), ``None`` for anything else: what rendering an answer's number starts from."""
    return _as_fraction(_strip_latex(value.strip()).replace("$", "").strip())


def normalize_answer(answer: str) -> str:
    """A canonical spelling of an extracted answer: numbers as reduced rationals, LaTeX noise,
    ``$``, thousands separators, trailing units and whitespace removed, lower-cased."""
    value = _strip_latex(answer.strip())
    value = value.replace("$", "").strip()
    value = value.rstrip(".").strip()
    unit = _UNIT_SUFFIX_RE.match(value)
    if unit:
        value = unit.group(1)
    number = _as_fraction(value)
    if number is not None:
        if number.denominator == 1:
            return str(number.numerator)
        return f"{number.numerator}/{number.denominator}"
    return re.sub(r"\s+", "", value).lower()


# Vote keys round non-integers to this many significant digits: programs print float noise
# (-1.5860000000000012) that must vote with the clean value (-1.586), well inside the 1e-9
# relative tolerance that :func:`answers_equivalent` allows.
VOTE_SIGNIFICANT_DIGITS = 12
_WORD_DIGITS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_DECIMALS_RE = re.compile(
    r"(?:round|rounded|correct|accurate|give|answer|express|to)\b[^.?!\n]{0,40}?\b(\d|one|two|three|four|five|six)"
    r"\s+decimal\s+(?:places?|digits?)",
    re.IGNORECASE,
)
_NEAREST_RE = re.compile(
    r"(?:nearest|closest)\s+(whole\s+number|integer|whole|tenth|hundredth|thousandth)", re.IGNORECASE
)
_NEAREST_DECIMALS = {"tenth": 1, "hundredth": 2, "thousandth": 3}


def requested_decimals(question: str) -> int | None:
    """Decimal places a question asks the answer to be rounded to ("round to 2 decimal places",
    "nearest hundredth", "nearest whole number" → 0), ``None`` when it asks for none."""
    match = _DECIMALS_RE.search(question)
    if match:
        word = match.group(1).lower()
        return int(word) if word.isdigit() else _WORD_DIGITS[word]
    match = _NEAREST_RE.search(question)
    if match:
        return _NEAREST_DECIMALS.get(match.group(1).lower().split()[0], 0)
    return None


def _decimal_key(value: float, decimals: int | None) -> str:
    if decimals is not None:
        value = round(value, decimals)
    text = f"{value:.{VOTE_SIGNIFICANT_DIGITS}g}"
    if "e" not in text and "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def vote_key(answer: str, *, decimals: int | None = None) -> str:
    """The key an extracted answer votes under: :func:`normalize_answer`, with numbers made
    tolerant - non-integers rounded to ``VOTE_SIGNIFICANT_DIGITS`` significant digits (or to
    the ``decimals`` the question asks for), so ``0.1 + 0.2`` printed by a program, ``0.3``
    and ``3/10`` vote together."""
    key = normalize_answer(answer)
    number = _as_fraction(key)
    if number is None:
        return key
    if number.denominator == 1 and decimals is None:
        return str(number.numerator)
    return _decimal_key(float(number), decimals)


def normalize_for_vote(text: str, *, decimals: int | None = None) -> str:
    """The vote key of a whole candidate: its extracted answer's :func:`vote_key`, ``""`` if none."""
    answer = extract_answer(text)
    return vote_key(answer, decimals=decimals) if answer is not None else ""


_ASSIGNMENT_RE = re.compile(r"^[A-Za-z_][\w ]{0,40}[:=]\s*(.+)$")


def program_answer(stdout: str) -> str | None:
    """The answer a program printed: its last non-empty output line, with a leading label
    ("Answer: 42", "total = 42") or a stated answer ("The answer is 42.") reduced to the value.
    ``None`` when it printed nothing."""
    lines = [line.strip() for line in stdout.strip().splitlines() if line.strip()]
    if not lines:
        return None
    last = lines[-1]
    if _as_fraction(last.replace(",", "")) is not None or _as_fraction(last) is not None:
        return last
    stated = _ANSWER_IS_RE.search(last)
    if stated:
        clause = _clean_clause(stated.group(1))
        if clause:
            return clause
    labelled = _ASSIGNMENT_RE.match(last)
    if labelled and _NUMBER_RE.fullmatch(labelled.group(1).strip().rstrip(".")):
        return labelled.group(1).strip().rstrip(".")
    return last


def _math_verify_timeout() -> int | None:
    # math-verify's timeout uses SIGALRM, which only works on the main thread.
    return 5 if threading.current_thread() is threading.main_thread() else None


def _symbolic_equal(a: str, b: str) -> bool:
    if len(a) > _MAX_SYMBOLIC_CHARS or len(b) > _MAX_SYMBOLIC_CHARS:
        return False
    from math_verify import parse, verify  # imported lazily: sympy is slow to import

    timeout = _math_verify_timeout()
    try:
        gold = parse(f"${b}$", parsing_timeout=timeout)
        target = parse(f"${a}$", parsing_timeout=timeout)
        if not gold or not target:
            return False
        return bool(verify(gold, target, timeout_seconds=timeout))
    except Exception:  # math-verify raises on malformed LaTeX; that is "not equal"
        return False


_RELATIVE_TOLERANCE = Fraction(1, 10**9)


def answers_equivalent(answer: str, reference: str) -> bool:
    """Whether two extracted answers mean the same: exact, then numeric, then symbolic."""
    a, b = normalize_answer(answer), normalize_answer(reference)
    if not a or not b:
        return False
    if a == b:
        return True
    fa, fb = _as_fraction(a), _as_fraction(b)
    if fa is not None and fb is not None:
        # in exact fractions: a float of a huge value overflows (a model printed one)
        return abs(fa - fb) <= _RELATIVE_TOLERANCE * max(Fraction(1), abs(fb))
    return _symbolic_equal(_strip_latex(answer.strip()), _strip_latex(reference.strip()))


def is_correct(candidate_text: str, reference: str) -> bool:
    """Whether a whole candidate's extracted answer is equivalent to ``reference``."""
    answer = extract_answer(candidate_text)
    return answer is not None and answers_equivalent(answer, reference)
