"""A chain of thought as steps, and the prefixes whose continuations label them (pure).

A step is a run of lines: the text is cut only after a newline, never inside a fenced code block
(a program is one step), a display formula (``\\[ ... \\]``, ``$$ ... $$``) or an unclosed
``\\boxed{...}`` (an answer is one step). Blank lines, indented lines (a sub-item under a
numbered step) and display formulas stay with the step before them, and a step shorter than
``min_chars`` (a lone "So:" or a header) is merged into the next, so a step says something (a
short last step, often the answer alone, stays one). The steps put back together are the text
exactly, so the prefix of step ``i`` is the text up to and including it: it ends with a newline,
and the model asked to continue it (``assistant_prefix``) writes the next step.

The last step holds the answer; its prefix is the whole completion, which needs no rollout (its
outcome label says whether it is right), so it is never chosen. Of the others at most
``max_steps`` are chosen, spread evenly and always including the one just before the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: a step with fewer non-blank characters is merged into the next
MIN_STEP_CHARS = 24
FENCES = ("```", "~~~")
BOXED = "\\boxed{"
_LINE = re.compile(r"[^\n]*\n|[^\n]+")


@dataclass(frozen=True)
class StepPrefix:
    """Step ``index`` of a completion (0-based among all its steps), its own ``text``, and the
    completion up to its end (``prefix``; ``end`` characters)."""

    index: int
    text: str
    prefix: str

    @property
    def end(self) -> int:
        return len(self.prefix)


def _boxed_depth(line: str, depth: int) -> int:
    """The brace depth of an open ``\\boxed{`` after ``line`` (0: none is open)."""
    at = 0
    while at < len(line):
        if depth == 0:
            found = line.find(BOXED, at)
            if found < 0:
                return 0
            depth, at = 1, found + len(BOXED)
            continue
        depth += {"{": 1, "}": -1}.get(line[at], 0)
        at += 1
    return depth


def _math_open(line: str, opened: str) -> str:
    """The display-formula delimiter still open after ``line`` ("" when none is)."""
    if opened:
        return "" if ("\\]" if opened == "\\[" else "$$") in line else opened
    if line.count("$$") % 2:
        return "$$"
    at = line.rfind("\\[")
    return "\\[" if at >= 0 and "\\]" not in line[at:] else ""


def _units(text: str) -> list[str]:
    """The text cut after every newline outside a fence, a display formula and an open ``\\boxed{``."""
    units: list[str] = []
    current, fenced, math, depth = "", False, "", 0
    for line in _LINE.findall(text):
        current += line
        if line.lstrip().startswith(FENCES):
            fenced = not fenced
        elif not fenced:
            math = _math_open(line, math)
            depth = _boxed_depth(line, depth)
        if line.endswith("\n") and not fenced and not math and depth == 0:
            units.append(current)
            current = ""
    if current:
        units.append(current)
    return units


def _continues(unit: str) -> bool:
    """Whether a unit belongs to the step before it: blank, indented, or a display formula."""
    return not unit.strip() or unit[0] in " \t" or unit.startswith(("\\[", "$$"))


def split_steps(text: str, min_chars: int = MIN_STEP_CHARS) -> list[str]:
    """The steps of ``text`` (module docstring); ``"".join`` of them is ``text``."""
    steps: list[str] = []
    for unit in _units(text):
        if steps and _continues(unit):
            steps[-1] += unit
        else:
            steps.append(unit)
    merged: list[str] = []
    pending = ""
    for step in steps:
        pending += step
        if len(pending.strip()) >= min_chars:
            merged.append(pending)
            pending = ""
    if pending:
        merged.append(pending)  # a short last step (often the answer alone) stays a step
    return merged


def spread(count: int, most: int) -> list[int]:
    """At most ``most`` of the indices ``0..count-1``, evenly spread, the last always included."""
    if count <= most:
        return list(range(count))
    return [((k + 1) * count) // most - 1 for k in range(most)]


def step_prefixes(text: str, max_steps: int, min_chars: int = MIN_STEP_CHARS) -> list[StepPrefix]:
    """The chosen steps of ``text`` and their prefixes, in order (module docstring); empty when
    the text is one step."""
    steps = split_steps(text, min_chars)
    ends = [len("".join(steps[: i + 1])) for i in range(len(steps))]
    return [StepPrefix(i, steps[i], text[: ends[i]]) for i in spread(len(steps) - 1, max_steps)]
