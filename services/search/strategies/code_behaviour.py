"""Behaviour of candidate functions on model-written inputs: the pure half of ``code_execution``.

Nothing here calls a service. It turns the model's test text into safe inputs
(:func:`parse_tests`: only literal call arguments survive, checked with ``ast.literal_eval``),
finds the function a candidate defines, and ranks candidates from their behaviour (what
``code_harness.py`` printed in the sandbox): by clusters of identical behaviour (AlphaCode, Li
et al. 2022) or by CodeT's dual agreement (Chen et al. 2022). Keeping it pure lets the
benchmark score both rankers on one sampled pool.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from services.common.answers import extract_code

# A behaviour is "crashed" on an input when its result starts with one of these.
CRASHES = ("raise:", "timeout", "error:", "missing")
MAX_ARGS_CHARS = 2000  # an input longer than this (as source) is dropped: the model rambling
_DEF = re.compile(r"^\s*def\s+([A-Za-z_]\w*)\s*\(", re.MULTILINE)


@dataclass(frozen=True)
class Case:
    """One call of the function: its literal arguments as source (``"[1, 2], k=3"``) and,
    when the model asserted one, the literal result it expects (source), else None."""

    args: str
    expected: str | None = None


@dataclass(frozen=True)
class Behaviour:
    """What one candidate did on every input: canonical results, and per input whether the
    generated assertion held (None where the input had no assertion)."""

    results: tuple[str, ...]
    passed: tuple[bool | None, ...]

    @property
    def crashed_everywhere(self) -> bool:
        return all(r.startswith(CRASHES) for r in self.results)

    @property
    def assertions_passed(self) -> int:
        return sum(1 for p in self.passed if p)

    @property
    def passed_set(self) -> frozenset[int]:
        return frozenset(i for i, p in enumerate(self.passed) if p)


@dataclass
class Entry:
    """One candidate in the ranking: its index in draw order, code length, behaviour and the
    scores that break ties (user tests first, the judge third)."""

    index: int
    length: int
    behaviour: Behaviour
    user_score: float = 0.0  # fraction of the user's tests passed (0 when none were sent)
    judge: float = 0.0


@dataclass
class Cluster:
    members: list[Entry] = field(default_factory=list)

    @property
    def best(self) -> Entry:
        """The member to answer with: best on the user's tests, then the shortest, then the first."""
        return min(self.members, key=lambda e: (-e.user_score, e.length, e.index))

    def key(self) -> tuple[float, int, int, float, int, int]:
        """Rank key, larger first: user tests, size, assertions passed, judge, shorter, earlier."""
        best = self.best
        return (
            max(e.user_score for e in self.members),
            len(self.members),
            best.behaviour.assertions_passed,
            max(e.judge for e in self.members),
            -best.length,
            -best.index,
        )


# -- inputs ---------------------------------------------------------------------------------
def problem_entry_point(text: str) -> str | None:
    """The function a problem asks for: the last ``def name(`` in its text (HumanEval's
    prompts define helpers first), else None."""
    names = _DEF.findall(text)
    return names[-1] if names else None


def _literal_source(node: ast.expr) -> str | None:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return ast.unparse(node)


def _call_args(call: ast.Call) -> str | None:
    """The call's arguments as source when every one is a literal, else None."""
    parts: list[str] = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            return None
        source = _literal_source(arg)
        if source is None:
            return None
        parts.append(source)
    for keyword in call.keywords:
        if keyword.arg is None:
            return None
        source = _literal_source(keyword.value)
        if source is None:
            return None
        parts.append(f"{keyword.arg}={source}")
    return ", ".join(parts)


def _is_call_to(node: ast.AST, entry: str | None) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and entry in (None, node.func.id)


def _from_statement(statement: ast.stmt, entry: str | None) -> Case | None:
    """An input (and its expected result) from ``assert f(x) == y``, ``assert y == f(x)``,
    ``assert f(x)`` / ``assert not f(x)``, or a bare ``f(x)``; any other statement that calls
    ``f`` with literals gives an input without an assertion."""
    expected: str | None = None
    call: ast.AST | None = None
    if isinstance(statement, ast.Assert):
        test = statement.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)):
            left, right = test.left, test.comparators[0]
            if _is_call_to(left, entry):
                call, expected = left, _literal_source(right)
            elif _is_call_to(right, entry):
                call, expected = right, _literal_source(left)
        elif _is_call_to(test, entry):
            call, expected = test, "True"
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _is_call_to(test.operand, entry):
            call, expected = test.operand, "False"
    if call is None:
        call = next((n for n in ast.walk(statement) if _is_call_to(n, entry)), None)
    if not isinstance(call, ast.Call):
        return None
    args = _call_args(call)
    if args is None or len(args) > MAX_ARGS_CHARS:
        return None
    return Case(args, expected)


def _statements(text: str) -> list[ast.stmt]:
    """Statements of the model's test text: each fenced block parsed whole, else line by line
    (one bad line must not lose the others)."""
    blocks = re.findall(r"```[^\n]*\n(.*?)```", text, re.DOTALL) or [extract_code(text) or text]
    statements: list[ast.stmt] = []
    for block in blocks:
        try:
            statements += ast.parse(block).body
            continue
        except SyntaxError:
            pass
        for line in block.splitlines():
            try:
                statements += ast.parse(line.strip()).body
            except SyntaxError:
                continue
    return statements


def parse_tests(text: str, entry: str | None, limit: int) -> list[Case]:
    """Up to ``limit`` distinct inputs for ``entry`` (any function name when None) from the
    model's test text. Only literal arguments are kept: no model-written expression is ever
    evaluated outside the sandbox, and only literals go into it."""
    found: dict[str, Case] = {}
    for statement in _statements(text):
        test = _from_statement(statement, entry)
        if test is None:
            continue
        known = found.get(test.args)
        if known is None or (known.expected is None and test.expected is not None):
            found[test.args] = test
        if len(found) >= limit:
            break
    return list(found.values())


def called_name(text: str) -> str | None:
    """The function name the model's tests call most (the entry point when the problem names none)."""
    counts: dict[str, int] = {}
    for statement in _statements(text):
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in _BUILTINS:
                counts[node.func.id] = counts.get(node.func.id, 0) + 1
    return max(counts, key=lambda k: counts[k]) if counts else None


_BUILTINS = frozenset({"abs", "all", "any", "len", "list", "set", "sorted", "round", "str", "int", "float", "print"})


# -- candidates -----------------------------------------------------------------------------
def candidate_source(text: str) -> str | None:
    """The candidate's code (last fenced block, else the whole text) when it parses, else None."""
    code = extract_code(text)
    code = (code if code is not None else text).strip()
    if not code:
        return None
    try:
        ast.parse(code)
    except SyntaxError:
        return None
    return code


def function_to_call(code: str, entry: str | None) -> str | None:
    """The function of ``code`` to run: ``entry`` when it defines it; otherwise (or when no
    entry is known) its first top-level function that no other top-level function calls."""
    tree = ast.parse(code)
    functions = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    names = [f.name for f in functions if isinstance(f, ast.FunctionDef)]
    if entry is not None and entry in names:
        return entry
    called = {
        n.func.id
        for f in functions
        for n in ast.walk(f)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id != f.name
    }
    roots = [n for n in names if n not in called]
    return roots[0] if roots else (names[0] if names else None)


def context_imports(problem_text: str) -> str:
    """The import lines of the problem's code (``from typing import List``), which a candidate
    may rely on without repeating, as HumanEval's scoring does (``checkers.program_for``)."""
    lines = [
        line.strip()
        for line in (extract_code(problem_text) or problem_text).splitlines()
        if re.match(r"^\s*(import [\w., ]+|from [\w.]+ import [\w., ()*]+)\s*$", line)
    ]
    return "\n".join(dict.fromkeys(lines))


# -- ranking --------------------------------------------------------------------------------
def clusters(entries: Sequence[Entry]) -> list[Cluster]:
    """Candidates grouped by identical behaviour, best first. A candidate that crashed on every
    input abstains, unless it passes some of the user's tests (those outrank any behaviour)."""
    groups: dict[tuple[str, ...], Cluster] = {}
    for entry in entries:
        if entry.behaviour.crashed_everywhere and entry.user_score <= 0.0:
            continue
        groups.setdefault(entry.behaviour.results, Cluster()).members.append(entry)
    return sorted(groups.values(), key=lambda c: c.key(), reverse=True)


def dual_agreement(entries: Sequence[Entry]) -> list[Cluster]:
    """CodeT's consensus sets: candidates grouped by the set of generated assertions they pass,
    scored by (candidates in the set) x (assertions it passes), best first; the user's tests
    still rank first. Sets that pass no assertion score 0 and keep the clusters' order."""
    behaviour_rank = {id(e): rank for rank, c in enumerate(clusters(entries)) for e in c.members}
    groups: dict[frozenset[int], Cluster] = {}
    for entry in entries:
        if id(entry) in behaviour_rank:
            groups.setdefault(entry.behaviour.passed_set, Cluster()).members.append(entry)

    def key(cluster: Cluster) -> tuple[float, int, int, int]:
        passed = len(cluster.members[0].behaviour.passed_set)
        return (
            max(e.user_score for e in cluster.members),
            len(cluster.members) * passed,
            len(cluster.members),
            -min(behaviour_rank[id(e)] for e in cluster.members),
        )

    return sorted(groups.values(), key=key, reverse=True)


def tied_with_first(ranked: Sequence[Cluster]) -> list[Cluster]:
    """The clusters the judge would separate: equal to the first on everything before the judge."""
    if not ranked:
        return []
    head = ranked[0].key()[:3]
    return [c for c in ranked if c.key()[:3] == head]
