"""A value a chain of thought stated in LaTeX, written as plain text.

A chain of thought boxes its answer in LaTeX: ``\\frac{375}{1000}``, ``2 \\text{ hours and } 30
\\text{ minutes}``, ``2^{3} \\cdot 3^{2} \\cdot 5``, ``\\{0, 1, 4\\}``, ``25\\%``. The reply is plain
text, so the markup goes and what it stands for stays: a fraction as ``375/1000`` (reduced only
where the question asks), a product's sign as the middle dot or the times sign, braces and percent signs as
themselves. Commands it does not know are left as they are.
"""

from __future__ import annotations

import re

_WRAPPERS = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mbox|operatorname)\s*\{([^{}]*)\}")
_FRACTION = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}|\\[dt]?frac\s*(\d)\s*(\d)")
_BRACED_POWER = re.compile(r"\^\s*\{([^{}]*)\}")
_SQRT = re.compile(r"\\sqrt\s*\{([^{}]*)\}")
_SYMBOLS = (
    ("\\%", "%"),
    ("^\\circ", "°"),
    ("^{\\circ}", "°"),
    ("\\{", "{"),
    ("\\}", "}"),
    ("\\cdot", "·"),
    ("\\times", "\u00d7"),
    ("\\pi", "π"),
    ("\\infty", "∞"),
    ("\\ ", " "),
)
_NOISE = re.compile(r"\\(?:left|right|displaystyle|quad|qquad)\b|\\[!,;:]|\\[()\[\]]")
_MATH = re.compile(r"\s*\$\$?([^$]+)\$\$?\s*")  # the whole value in "$42$", "$$x^2$$"; else "$" is a dollar
_OPERATOR = re.compile("(?<=.)[-+*/ \u00b7\u00d7]")


def _grouped(part: str) -> str:
    """A fraction's numerator or denominator, in parentheses where it is more than one term."""
    part = part.strip()
    return f"({part})" if _OPERATOR.search(part) else part


def plain(value: str) -> str:
    """``value`` without its LaTeX markup (see the module docstring); unchanged when it has none."""
    if "\\" not in value and "$" not in value:
        return value
    math = _MATH.fullmatch(value)
    text = math.group(1) if math else value
    previous = None
    while previous != text:  # nested wrappers and fractions, innermost first
        previous = text
        text = _WRAPPERS.sub(r"\1", text)
        text = _FRACTION.sub(
            lambda m: f"{_grouped(m.group(1) or m.group(3))}/{_grouped(m.group(2) or m.group(4))}", text
        )
        text = _SQRT.sub(r"sqrt(\1)", text)
    for latex, shown in _SYMBOLS:
        text = text.replace(latex, shown)
    text = _BRACED_POWER.sub(lambda m: "^" + _grouped(m.group(1)), text)
    text = _NOISE.sub("", text)
    return re.sub(r"\s+", " ", text).strip()
