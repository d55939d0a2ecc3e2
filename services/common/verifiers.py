"""The verifier names and the ensemble rule: one source for the verifier service and the orchestrator.

The verifier service (``services/verifier/registry.py``) offers exactly ``VERIFIER_NAMES``; the
orchestrator validates a job's verifier against them before the first call, with the same
ensemble rule the verifier applies to a ``VerifyRequest``, so a job the verifier would refuse is
refused up front with the same message. The gateway's ``VerifierName`` literal cannot import this
module's values into a type; ``tests/unit/test_name_lists.py`` holds them equal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from services.common.errors import InvalidArgument

ENSEMBLE = "ensemble"
VERIFIER_NAMES: tuple[str, ...] = ("math_equivalence", "format", "code_tests", "orm", "prm", ENSEMBLE)
# Verifiers with a hard, objective verdict: their "passed" means solved.
HARD_VERIFIERS: tuple[str, ...] = ("math_equivalence", "code_tests", "format")


def is_verifier(name: str) -> bool:
    return name in VERIFIER_NAMES


def check_ensemble(
    members: Sequence[tuple[str, object]],
    *,
    known: Callable[[str], bool] = is_verifier,
    field: str = ENSEMBLE,
    keyed: bool = False,
) -> None:
    """The ensemble rule: at least one member; members known, not nested and not repeated;
    weights numbers, finite and >= 0; at least one weight positive.

    Raises ``InvalidArgument`` naming the member at fault: ``{field}[i].name`` /
    ``{field}[i].weight`` for a list of members (a ``VerifyRequest``), ``{field}.<name>`` for a
    mapping keyed by member name (a strategy's ``params.ensemble``); ``field`` itself when the
    ensemble as a whole is wrong."""

    def at(i: int, name: str, part: str) -> str:
        return f"{field}.{name}" if keyed else f"{field}[{i}].{part}"

    if not members:
        raise InvalidArgument("the ensemble verifier needs at least one weighted member", field=field)
    seen: set[str] = set()
    total = 0.0
    for i, (name, weight) in enumerate(members):
        if name == ENSEMBLE or not known(name):
            raise InvalidArgument(f"unknown ensemble member {name!r}", field=at(i, name, "name"))
        if name in seen:
            raise InvalidArgument(f"ensemble member {name!r} is listed twice", field=at(i, name, "name"))
        seen.add(name)
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise InvalidArgument(f"weight of {name!r} must be a number", field=at(i, name, "weight"))
        if not math.isfinite(weight) or weight < 0:
            raise InvalidArgument("ensemble weights must be finite and >= 0", field=at(i, name, "weight"))
        total += weight
    if total <= 0:
        raise InvalidArgument("at least one ensemble weight must be positive", field=field)
