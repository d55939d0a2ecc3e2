"""How a question writes the kinds of value it asks about: the notation its answer keeps.

A question that asks for no form still shows one: "What is 1/3 + 1/4?" writes fractions,
"Compute (1+2i)^2" writes complex numbers with ``i``, "Differentiate x^3 + 2x" writes powers with
``^`` and products side by side, "A movie starts at 19:50" writes times without seconds. A
program's printed value (``0.5833333333333333``, ``(-3+4j)``, ``3*x**2 + 2``, ``22:25:00``) is
written back in that notation (:mod:`services.common.answer_form`); none of this counts as a form
asked for, and none of it is cut from what a program is asked.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.common.answer_complex import complex_text, imaginary_unit
from services.common.answer_expressions import Algebra, algebra_notation, in_notation
from services.common.answer_factors import about_factors, factored
from services.common.answer_lists import asks_set
from services.common.answer_numbers import writes_fractions
from services.common.answer_shapes import written_times


@dataclass(frozen=True)
class Notation:
    """The notation a question writes its values in (everything optional: nothing to follow)."""

    fractions: bool = False  # numbers as fractions and no decimal: a simple fraction stays one
    imaginary: str | None = None  # the imaginary unit it writes, "i" or "j"
    algebra: Algebra | None = None  # how it writes expressions in its variables
    factors: bool = False  # it asks about factors: a printed dict is a factorization
    times: str | None = None  # its clock times: "minutes", "seconds", or None (written_times)
    sets: bool = False  # it asks for a set: listed items are written as one (answer_lists.as_set)


def read_notation(question: str) -> Notation:
    """The notation ``question`` writes its values in (see the module docstring)."""
    imaginary = imaginary_unit(question)
    return Notation(
        fractions=writes_fractions(question),
        imaginary=imaginary,
        algebra=algebra_notation(question) if imaginary is None else None,
        factors=about_factors(question),
        times=written_times(question),
        sets=asks_set(question),
    )


def written_in(
    value: str, notation: Notation, *, exponents: str | None = None, separator: str | None = None, asked: bool = False
) -> str | None:
    """``value`` written in ``notation`` where it is a complex number (or ``asked`` is: a shown
    ``a + bi``), a factorization (with the asked ``exponents`` and ``separator``) or an expression
    in the question's variables; ``None`` for any other value."""
    if notation.imaginary == "i" or asked:
        written = complex_text(value)
        if written is not None:
            return written
    if notation.factors:
        written = factored(value, exponents, separator)
        if written is not None:
            return written
    return in_notation(value, notation.algebra) if notation.algebra else None
