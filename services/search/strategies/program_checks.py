"""Whether a program computed its printed answer, or only printed a guess.

A small model asked for a program sometimes does the arithmetic in its head and writes the
result down: ``print(32)`` for "What is 6 times 7?", ``print("Answer: 10")``, ``x = 42;
print(x)``. Such a program runs fine and prints a number, so a vote over outputs counts the
guess as if it were computed - it is exactly the answer program-of-thought exists to avoid.
These checks let such a program abstain (and be resampled) instead of voting:

- from the AST: the last ``print`` prints only literals - constants, f-strings of constants,
  names only ever assigned literals, ``str``/``int``/``float`` of those;
- from the run: the printed number is a numeric literal of the source that the question does
  not contain, and the program performs no operation at all (no arithmetic, comparison, loop,
  subscript or call beyond a conversion), e.g. ``def solve(): return 32``;
- from the data: the program works on a list of numbers that only the question's form
  instructions contain (a model shown "Sort 35.0, -66.0, -23.0 ... instead of -69, -13, 1, 7
  use ['-69', ...]" sorts the example's numbers), or on a list unrelated to the numbers the
  question lists, none of which it writes; a lookup table (days per month) beside the
  question's own numbers is neither.

- from its answer's kind: it prints ``True`` or ``False`` to a question that is not yes or no
  ("Which is larger, 9.11 or 9.9?" answered by ``print(9.11 > 9.9)``);
- from what it reads: the program reads the clock (``datetime.now()``, ``date.today()``,
  ``time.time()``) though the question fixes its own day or time ("If today is Wednesday, what
  day is it in 12 days?"), or draws random numbers though the question asks for no sampling;
  its output then depends on when and how often it runs, not on the question.

A program that computes anything (``print(6 * 7)``, a loop, ``len(s)``, a table lookup) votes.
"""

from __future__ import annotations

import ast
import re

from services.common.answer_form import strip_form
from services.common.answers import clean_number, vote_key
from services.common.task_type import asks_yes_or_no

# Calls that only restate their argument: a literal passed through them is still a literal.
_PASS_THROUGH = frozenset({"str", "int", "float", "repr", "format", "Fraction", "Decimal", "print"})
# Nodes that are operations: a program containing one computes something.
_OPERATIONS = (
    ast.BinOp,
    ast.AugAssign,
    ast.Compare,
    ast.BoolOp,
    ast.For,
    ast.While,
    ast.comprehension,
    ast.Subscript,
    ast.IfExp,
    ast.Attribute,
)
_QUESTION_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_DATA_MIN = 3  # numbers that make a list of data, in a question or a program
_NUMBER_RUN = re.compile(r"\d+(?:\.\d+)?(?:\s*[,;]\s*(?:and\s+)?[-+]?\d+(?:\.\d+)?){2,}")


def _literal_names(tree: ast.Module) -> set[str]:
    """Names every binding of which is a literal (iterated: ``a = 3; b = a`` makes both)."""
    bound: dict[str, list[ast.expr | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name in _target_names(target):
                    bound.setdefault(name, []).append(node.value if isinstance(target, ast.Name) else None)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            bound.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.For, ast.comprehension, ast.NamedExpr, ast.With)):
            targets: list[ast.expr | None] = (
                [i.optional_vars for i in node.items] if isinstance(node, ast.With) else [node.target]
            )
            for rebound in targets:
                for name in _target_names(rebound):
                    bound.setdefault(name, []).append(None)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for arg in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]:
                bound.setdefault(arg.arg, []).append(None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.setdefault((alias.asname or alias.name).split(".")[0], []).append(None)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):  # numbers.sort() changes it
            for name in _target_names(node.func.value):
                bound.setdefault(name, []).append(None)
    literal: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, values in bound.items():
            if name not in literal and all(v is not None and _is_literal(v, literal) for v in values):
                literal.add(name)
                changed = True
    return literal


def _target_names(target: ast.expr | None) -> list[str]:
    if target is None:
        return []
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _is_literal(node: ast.expr, names: set[str]) -> bool:
    """Whether ``node`` is a value written down rather than computed."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.UnaryOp):
        return _is_literal(node.operand, names)
    if isinstance(node, ast.JoinedStr):
        return all(_is_literal(v, names) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        return _is_literal(node.value, names)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_is_literal(e, names) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _PASS_THROUGH:
        return all(_is_literal(a, names) for a in node.args) and not node.keywords
    return False


def _last_print(tree: ast.Module) -> ast.Call | None:
    prints = [
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"
    ]
    return max(prints, key=lambda n: (n.lineno, n.col_offset), default=None)


def prints_literal(program: str) -> bool:
    """The AST check: the program's last ``print`` prints only literals."""
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return False
    call = _last_print(tree)
    if call is None or not call.args:
        return False
    names = _literal_names(tree)
    return all(_is_literal(a, names) for a in call.args)


def _computes_anything(tree: ast.Module) -> bool:
    """Any operation; calling a function the program defines is none by itself (its body is walked)."""
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(tree):
        if isinstance(node, _OPERATIONS):
            return True
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and (node.func.id in _PASS_THROUGH or node.func.id in defined)
        ):
            return True
    return False


def _numbers_in(text: str) -> set[str]:
    found = set()
    for token in _QUESTION_NUMBER.findall(text):
        number = clean_number(token)
        if number is not None:
            found.add(str(number))
    return found


def guessed_output(program: str, printed: str, question: str) -> bool:
    """The run check: the printed number is one of the source's literals, not the question's,
    and nothing in the program computes."""
    number = clean_number(printed)
    if number is None:
        return False
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return False
    if _computes_anything(tree):
        return False
    literals = {
        str(clean_number(str(n.value)))
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)
    }
    return str(number) in literals and str(number) not in _numbers_in(question)


def _magnitudes(values: list[float | int]) -> set[str]:
    return {str(clean_number(str(abs(v)))) for v in values}


def _number_lists(tree: ast.Module) -> list[list[float | int]]:
    """Every list, tuple or set literal of at least three numbers (negative ones, and numbers
    written as strings, included)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and len(node.elts) >= _DATA_MIN:
            values = [_number_value(e) for e in node.elts]
            if all(v is not None for v in values):
                found.append([v for v in values if v is not None])
    return found


def _number_value(node: ast.expr) -> float | int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number_value(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and _NUMBER.fullmatch(node.value.strip()):
        return float(node.value)  # '-69': a number written as a string
    return None


def _listed_numbers(question: str) -> set[str]:
    """The numbers of the longest list the question writes out ("35.0, -66.0, -23.0")."""
    runs = [_numbers_in(m.group(0)) for m in _NUMBER_RUN.finditer(question)]
    return max(runs, key=len, default=set())


def foreign_data(program: str, question: str, shown: str | None = None) -> bool:
    """The data check. ``question`` is the user's, ``shown`` what the program was asked (the
    question without its form instructions; the question itself when not given). A list of
    numbers in the program is foreign when most of its numbers, three at least, occur only in
    the form instructions (an example the model copied), or when the question lists at least three
    numbers, the program's list is mostly not among them and the program writes none of them."""
    shown = question if shown is None else shown
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return False
    lists = [_magnitudes(values) for values in _number_lists(tree)]
    if not lists:
        return False
    instructions_only = _numbers_in(question) - _numbers_in(shown)
    if any(
        len(common := numbers & instructions_only) >= _DATA_MIN and len(common) * 2 > len(numbers) for numbers in lists
    ):
        return True
    given = _listed_numbers(shown)
    if len(given) < _DATA_MIN or not any(len(numbers & given) * 2 < len(numbers) for numbers in lists):
        return False
    constants = [n for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    written = _magnitudes([v for n in constants if (v := _number_value(n)) is not None])
    written |= {s for n in constants if isinstance(n.value, str) for s in _numbers_in(n.value)}
    return not written & given


# Calls whose value is the moment the program runs: ``datetime.now()``, ``date.today()``, ``time.time()``.
_CLOCK_METHODS = frozenset({"now", "today", "utcnow"})
_TIME_FUNCTIONS = frozenset({"time", "localtime", "gmtime", "ctime", "strftime", "time_ns"})
_WEEKDAY = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december)"
# A question that states its own day, date or time of day: its "today" is not the clock's.
_STATED_MOMENT = re.compile(
    rf"\b{_WEEKDAY}\b|\b{_MONTH}\s+\d{{1,2}}(st|nd|rd|th)?,?\s+\d{{4}}\b|\b\d{{1,2}}\s+{_MONTH}\s+\d{{4}}\b|"
    r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b\d{1,2}:\d{2}\b|\b(today|now) is\b|\bit is now\b",
    re.IGNORECASE,
)
_ASKS_SAMPLING = re.compile(r"\b(random(ly)?|simulat\w*|sample|shuffle\w*|monte carlo|estimate)\b", re.IGNORECASE)


def _reads_clock(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if node.func.attr in _CLOCK_METHODS:
                return True
            if node.func.attr in _TIME_FUNCTIONS and isinstance(owner, ast.Name) and owner.id == "time":
                return True
    return False


def _draws_random(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "random" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "random":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "random" and isinstance(node.value, ast.Name):
            return True  # np.random, numpy.random
    return False


def reads_the_moment(program: str, question: str) -> str | None:
    """Why the program's output depends on when or how often it runs rather than on the question
    (the clock where the question states its own day or time; random draws where it asks for no
    sampling), or ``None``."""
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return None
    if _reads_clock(tree) and _STATED_MOMENT.search(question):
        return "reads the clock, not the day or time the question states"
    if _draws_random(tree) and not _ASKS_SAMPLING.search(question):
        return "draws random numbers the question does not ask for"
    return None


def computes_nothing(program: str, printed: str, question: str, shown: str | None = None) -> str | None:
    """Why the program's printed answer is a guess (it then abstains), or ``None`` if it computed.
    ``shown`` is what the program was asked (see :func:`foreign_data`)."""
    if prints_literal(program):
        return "prints a literal"
    if guessed_output(program, printed, question):
        return "prints a number written in the program, computing nothing"
    if foreign_data(program, question, shown):
        return "computes on numbers the question does not give"
    if printed.strip() in ("True", "False") and not asks_yes_or_no(question):
        return "prints True or False to a question that is not yes or no"
    return reads_the_moment(program, question)


def program_vote(program: str, answer: str | None, question: str, decimals: int | None) -> tuple[str, str | None]:
    """A run program's vote key ("" abstains) and why it abstains (``None`` when it votes), as
    program-of-thought decides it: the one rule the strategy and the calibration pools share.
    ``question`` is the user's; the checks read it as the program saw it, its form stripped."""
    if not answer:
        return "", None
    guess = computes_nothing(program, answer, question, strip_form(question))
    return ("" if guess is not None else vote_key(answer, decimals=decimals)), guess
