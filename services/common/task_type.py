"""Which kind of task a prompt is, decided from its text alone (no model, no tokens).

The task type is a feature and a default, not a gate: the routing table names a default
route per task type (program-of-thought wherever a program could compute the answer), the
difficulty estimator reads it as a one-hot feature, and calibration may route any strategy
to any type. The only hard limits on a strategy are the ones a request's features impose
(tools, a response format, logprobs: ``services/jobs/compat.py``). The rules are deliberately
plain regular expressions, checked in order, so a misrouted prompt can be explained by
reading them:

1. ``code``: a fenced code block, a line of code (``def``, ``class``, ``import``, ...), or a
   request to write/complete/fix a function, program, script or query.
2. ``open``: a request for a proof or an explanation (execution cannot decide it).
3. ``arithmetic``: an expression (numbers joined by operators) or a named calculation on
   numbers (GCD, square root, "15% of 80", "7 times 8", ...), unless the text is a story
   problem (a quantity question after several sentences) or a stated math problem in which
   the expression is part of the setting ("the number of ways to tile a 2 x 21 rectangle").
4. ``math_word``: a question or instruction asking for a quantity (how many, how much, what
   is the total, find the ..., the smallest value ...) with the numbers to work from.
5. ``computable``: a task a short program answers exactly though it is not arithmetic on
   stated numbers - counting letters or words, a conversion (units, bases, Roman numerals),
   dates and times, sorting, string manipulation, a logic puzzle with few possible answers,
   a quantity question with one number ("How many seconds are in 3 hours?"), or any other
   question on stated numbers ("Is 221 prime?") that asks for no prose.
6. ``open``: everything else.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

TaskType = Literal["arithmetic", "math_word", "code", "open", "computable"]
TASK_TYPES: tuple[TaskType, ...] = get_args(TaskType)
# Task types whose answer is a value (a number, a word, a date): the reply renders it in the
# asked form and returns the evidence as reasoning (services/search/presentation.py).
VALUE_TASKS: frozenset[TaskType] = frozenset({"arithmetic", "math_word", "computable"})
# The task types the difficulty estimator's one-hot was fitted on (difficulty_features.py):
# ``computable`` prompts were ``open`` then, and are read as such, so a fitted ridge still fits.
FEATURE_TASK_TYPES: tuple[TaskType, ...] = ("arithmetic", "math_word", "code", "open")

_F = re.IGNORECASE
_CODE_BLOCK = re.compile(r"```")
_CODE_LINE = re.compile(
    r"^\s*(def \w+\s*\(|class \w+[(:]|import \w+|from [\w.]+ import |#include\b|public (static )?\S+ \w+\s*\(|"
    r"function \w+\s*\(|fn \w+\s*\(|(const|let|var) \w+\s*=|SELECT .+ FROM )",
    re.MULTILINE,
)
_LANGUAGE = r"(python|javascript|typescript|java|c\+\+|c#|golang|rust|ruby|php|kotlin|swift|bash|shell|sql)"
_CODE_NOUN = r"(function|program|script|class|method|snippet|algorithm|query|regex|unit tests?|code)"
# "write ... in Python", "implement a function that ...", "fix this code" (not "write about a python").
_CODE_REQUEST = re.compile(
    rf"\b(write|implement|complete|create|fix|debug|refactor|optimi[sz]e|generate|translate|port)\b"
    rf"[^.?!\n]{{0,60}}?((?<!\ba )(?<!\bthe )\b{_LANGUAGE}\b|"
    rf"\b{_CODE_NOUN}\s+(that|which|to|in|for|named|called|using)\b|\bcode\b)",
    _F,
)
_LANGUAGE_NOUN = re.compile(rf"\b{_LANGUAGE}\s+{_CODE_NOUN}\b", _F)  # "this Python function", anywhere
_PROOF = re.compile(r"\b(prove|proof|show that|explain why|explain how|justify|derive)\b", _F)

_NUMBER = r"\(*-?\d[\d,]*(?:\.\d+)?\)*"
_OPERATOR = r"(?:\*\*|[-+*/\u00d7\u00f7^]|\bx\b|\bmod\b)"  # \u00d7 \u00f7: times and divide signs
_EXPRESSION = re.compile(rf"{_NUMBER}[a-z]?\s*{_OPERATOR}\s*{_NUMBER}")  # "2x + 3" counts too
_DATE = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b")  # not expressions
_NAMED_CALCULATION = re.compile(
    r"\b(gcd|lcm|greatest common (divisor|factor)|least common multiple|square root|cube root|sqrt|factorial|"
    r"prime factori[sz]ation|logarithm|log of|remainder when|modulo|solve for [a-z]|solve the equation)\b|"
    r"\d\s*%\s*of\s*\d|\d\s*(times|plus|minus|multiplied by|divided by|to the power of|squared|cubed)\b|"
    r"\d\s*(percent|per cent)\s+of\s+\$?\d|\b(half|a third|one third|a quarter|one quarter|a fifth|a tenth|"
    r"two thirds|three quarters|square|cube|sum|product|average|mean|quotient|factorial|square root|cube root)"
    r" of\s+\$?-?\d|"
    r"\b(double|triple|twice|halve|difference between)\s+\$?-?\d|"
    r"\b(add|subtract|multiply|divide)\s+-?\d[\d,.]*\s+(and|by|from|to|into)\s+-?\d|\b\d+\s*!(?!\w)",
    _F,
)
# A question whose answer is a quantity: "how many ...", "what is the total ...".
_QUANTITY_QUESTION = re.compile(
    r"\bhow (many|much|long|far|old|fast|often|tall|heavy|big|large|wide|deep|high)\b|"
    r"\bwhat (is|was|are|were|will be|would be) (the|its|his|her|their|your|my|our)( \w+)? "
    r"(total|number|sum|average|mean|cost|price|value|area|"
    r"perimeter|volume|probability|percentage|ratio|difference|remainder|speed|distance|amount|length|"
    r"weight|age|profit|result|duration)\b|\bwhat percent(age)?\b|\bin total\b",
    _F,
)
# An instruction to work a quantity out; weaker: "find the GCD of 24 and 36" is a bare calculation.
_WORK_OUT = re.compile(r"\b(find|calculate|compute|determine|work out) (the|how|what)\b", _F)
# Phrasing of a stated math problem (competition style), where an expression is part of the
# setting rather than the thing to evaluate: "the number of ways to tile a 2 x 21 rectangle".
_MATH_PROBLEM = re.compile(
    r"\b(such that|(number of|how many) (ways|solutions|subsets|integers|pairs|triples|strings|sequences)|let [a-z]\b|"
    r"for (all|every|each|real|integer|positive)\b|(smallest|largest|minimum|maximum|least|greatest) "
    r"(possible )?(positive )?(value|number|integer|sum|product)|expected value|probability)",
    _F,
)
_NUMBER_WORD = re.compile(
    r"\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|"
    r"hundred|thousand|million|half|twice|double|triple|dozen)\b",
    _F,
)
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
_UNIT_NAME = (
    r"(mm|cm|m|km|meters?|metres?|kilometers?|kilometres?|miles?|feet|foot|ft|inch(es)?|yards?|kg|g|grams?|"
    r"kilograms?|pounds?|lbs?|ounces?|oz|liters?|litres?|ml|gallons?|cups?|celsius|fahrenheit|kelvin|seconds?|"
    r"minutes?|hours?|days?|weeks?|months?|years?|bytes?|bits?|kb|mb|gb|tb|mph|km/h|degrees?|radians?)"
)
_COMPUTABLE = (
    # counting in a text: "how many r's are in strawberry", "count the vowels in ..."
    re.compile(
        r"\bhow many (times|letters?|vowels?|consonants?|words?|characters?|chars?|digits?|syllables?|"
        r"occurrences?|capital letters?|uppercase|lowercase|ones|zeros|zeroes|1s|0s|bits?|set bits|"
        r"[a-z]'?s|'[a-z]'s?|\"[a-z]\"s?)\b|\bcount (the|how|all|every)\b|\bnumber of (letters?|vowels?|"
        r"consonants?|words?|characters?|digits?|occurrences?|bits?|ones|zeros)\b",
        _F,
    ),
    # conversions: units, bases, Roman numerals
    re.compile(
        rf"\bconvert\b|\b(in|to|into) (binary|hexadecimal|hex|octal|decimal|base[- ]?\d+|roman numerals?)\b|"
        rf"\b(binary|hexadecimal|hex|octal|roman numerals?) (number|representation|form|value|for)\b|"
        rf"\d\s*{_UNIT_NAME}\s+(to|in|into|is how many|equals? how many)\s+{_UNIT_NAME}\b|"
        rf"\bhow many {_UNIT_NAME}\s+(are\s+)?(in|is|make|per)\b",
        _F,
    ),
    # dates and times
    re.compile(
        r"\bwhat day of the week\b|\bwhich day of the week\b|\bday of the week\b|\bwhat (time|date|day) "
        r"(will|would|was|is) it\b|\b(days|weeks|hours|minutes) (between|until|since|from|after|before)\b|"
        r"\bleap year\b|\b(hours?|minutes?|days?) (later|earlier|ago|from now)\b|\b\d{1,2}:\d{2}\s*(am|pm)?\b",
        _F,
    ),
    # sorting and ordering
    re.compile(
        r"\b(sort|sorted|order|arrange|rank|list)\b[^.?!\n]{0,40}\b(alphabetical(ly)?|ascending|descending|"
        r"increasing|decreasing|smallest to largest|largest to smallest|lowest to highest|highest to lowest)\b|"
        r"\bsort (these|the following|this list)\b|\b(largest|smallest|biggest|maximum|minimum|median) "
        r"(of|among|in) (these|the following|the numbers|the list)\b",
        _F,
    ),
    # string manipulation
    re.compile(
        r"\breverse (the |this )?(string|word|letters|text|order of|sentence)|"
        r"\bspell(ed)? [^.?!\n]{0,30}\bbackwards?\b|"
        r"\b(is|are) [^.?!\n]{0,30}\b(a )?palindromes?\b|\banagrams?\b|\b(first|last|\d+(st|nd|rd|th)) "
        r"(letter|character|word)\b|\b(to|in) (upper|lower)[ -]?case\b|\bconcatenat|\bcaesar\b|\bshift each\b|"
        r"\bremove (all |every )?(the )?(vowels|spaces|duplicates|letters)\b",
        _F,
    ),
    # logic puzzles with few possible answers
    re.compile(
        r"\b(knights? and knaves?|truth[- ]tellers?|liars?|always (lies|tells the truth))\b|\bwho is (the )?"
        r"(tallest|shortest|oldest|youngest|fastest|slowest|heaviest|lightest)\b|\bwhich (one|of them|person|box|"
        r"door) (is|has|must|should|can)\b|\blogic puzzle\b",
        _F,
    ),
)
# A question on stated numbers that no rule above names ("Is 221 prime?", "Which is larger, 9.11
# or 9.9?", "What is the 10th Fibonacci number?", "Round 3.14159 to two decimal places."). A
# program often computes it; one that cannot prints a literal and abstains, and the chain of
# thought answers (services/search/strategies/program_checks.py), so a wrong guess here costs a
# short program, not the answer.
_NUMERIC_QUESTION = re.compile(
    r"^\s*(what|what's|which|is|are|does|do|how|find|round|compute|calculate|evaluate|simplify|compare|check)\b",
    _F | re.MULTILINE,
)
# ... about the numbers themselves (not "Is Python 3 faster than Python 2?", where they are names)
_NUMBER_TERM = re.compile(
    r"\b(primes?|composite|divisible|divisors?|factors?|multiples?|even|odd|larger|smaller|greater|less|bigger|"
    r"fibonacci|digits?|sequence|series|round(ed)?|decimals?|significant|integers?|fractions?|percent(age)?|"
    r"ratio|power|exponent|squared?|cubed?|roots?|sum|product|difference|average|mean|median|total|remainder|"
    r"sqrt|log(arithm)?|factorial|perfect|rational|irrational|number)\b",
    _F,
)
# ... unless it asks for prose or a list of things, which no program computes.
_PROSE_REQUEST = re.compile(
    r"\b(tips|ideas|ways to|reasons|examples|suggestions|names|steps to|facts|jokes|poems?|stor(y|ies)|essays?|"
    r"happen(ed|s)?|news|discuss|opinion|meaning|mean)\b",
    _F,
)
_YEAR = re.compile(r"\b(in|since|by|from|until|of)\s+(1\d{3}|20\d{2})\b", _F)
_SENTENCE_END = re.compile(r"[.?!](\s|$)")


def _sentences(text: str) -> int:
    return max(1, len(_SENTENCE_END.findall(text.strip())))


def _numbers(text: str) -> int:
    """Numbers in digits or words, not counting years ("in 1969" is a date, not a quantity)."""
    text = _YEAR.sub(" ", text)
    return len(_DIGITS.findall(text)) + len(_NUMBER_WORD.findall(text))


def is_code(text: str) -> bool:
    patterns = (_CODE_BLOCK, _CODE_LINE, _CODE_REQUEST, _LANGUAGE_NOUN)
    return any(p.search(text) for p in patterns)


def _asks_quantity(text: str) -> bool:
    """A quantity question or instruction with the numbers to work from: at least two, or one
    in a stated problem or a second sentence (so "How many moons does Jupiter have?" is not one)."""
    numbers = _numbers(text)
    return numbers >= 2 or (numbers >= 1 and (_sentences(text) >= 2 or bool(_MATH_PROBLEM.search(text))))


def is_story_problem(text: str) -> bool:
    """A quantity question after a story of several sentences: what GSM8K-style problems look like."""
    return bool(_QUANTITY_QUESTION.search(text)) and _sentences(text) >= 2 and _asks_quantity(text)


def is_calculation(text: str) -> bool:
    """An expression or a named calculation on numbers (dates like 2024-01-15 are neither)."""
    text = _DATE.sub(" ", text)
    return bool(_EXPRESSION.search(text) or _NAMED_CALCULATION.search(text))


def is_computable(text: str) -> bool:
    """A task a short program answers exactly: counting, conversion, dates and times, sorting,
    string manipulation, a small logic puzzle, a quantity question with one number, or another
    question on stated numbers that asks for no prose."""
    if any(p.search(text) for p in _COMPUTABLE):
        return True
    if bool(_QUANTITY_QUESTION.search(text) or _WORK_OUT.search(text)) and _numbers(text) >= 1:
        return True
    undated = _DATE.sub(" ", text)
    return (
        bool(_NUMERIC_QUESTION.search(undated) and _NUMBER_TERM.search(undated))
        and _numbers(undated) >= 1
        and not _PROSE_REQUEST.search(undated)
    )


_YES_NO = re.compile(
    r"^\s*(is|are|was|were|does|do|did|can|could|will|would|should|has|have)\b|\bwhether\b|"
    r"\byes\s*(?:or|/)\s*no\b|\btrue\s*(?:or|/)\s*false\b",
    _F,
)
# What a question asks for when the answer is not a number: one of its options, a day, a time,
# a word or a letter, an ordering.
_NOT_A_NUMBER = re.compile(
    r"\b(which|who|whom|whose|day of the week|weekday|what day|what time|letters?|words?|strings?|names?|"
    r"spell\w*|revers\w*|sort\w*|arrange\w*|order)\b",
    _F,
)


def asks_yes_or_no(question: str) -> bool:
    """A question answered by yes or no ("Is 221 prime?", "Tell me whether 2020 is a leap year")."""
    return bool(_YES_NO.search(question))


def asks_quantity(question: str) -> bool:
    """A question whose answer is a number, so the last number of a chain of thought that
    states no answer is its answer ("how many ...", "What is 255 in binary?"). Not a yes/no
    question, nor one asking for one of its options, a day, a time, a word or an ordering:
    there that number is a step of the reasoning ("221 = 13 x 17")."""
    if asks_yes_or_no(question):
        return False
    return bool(_QUANTITY_QUESTION.search(question)) or not _NOT_A_NUMBER.search(question)


def feature_task(task: TaskType) -> TaskType:
    """The task type as the difficulty estimator's one-hot reads it (``FEATURE_TASK_TYPES``)."""
    return task if task in FEATURE_TASK_TYPES else "open"


def classify_task(text: str) -> TaskType:
    """The task type of a prompt (see the module docstring for the rules, in order)."""
    if is_code(text):
        return "code"
    if _PROOF.search(text):
        return "open"
    if is_calculation(text) and not is_story_problem(text) and not _MATH_PROBLEM.search(text):
        return "arithmetic"
    if any(p.search(text) for p in (_QUANTITY_QUESTION, _WORK_OUT, _MATH_PROBLEM)) and _asks_quantity(text):
        return "math_word"
    if is_computable(text):
        return "computable"
    return "open"
