"""Why a search stopped, by name: ``ttc.v1.Termination``'s value names without their prefix,
lower case (``TERMINATION_SOLVED`` is ``"solved"``).

The search library names its outcome this way and the worker sends it as the enum
(:func:`termination_value`); the gateway reports the enum back by name in ``ttc.termination``
(:func:`termination_name`). Both read the proto enum, so a value added there needs no table.
"""

from __future__ import annotations

from typing import cast

from services.gen.ttc.v1 import orchestrator_pb2

PREFIX = "TERMINATION_"


def termination_value(name: str) -> orchestrator_pb2.Termination:
    """The enum value named ``name`` (``"solved"``); ``ValueError`` for a name it has not."""
    value = orchestrator_pb2.Termination.Value(PREFIX + name.upper())
    return cast(orchestrator_pb2.Termination, value)  # the stubs type Value() as a plain int


def termination_name(value: int) -> str:
    """The name of ``value`` (``"solved"``), ``"unspecified"`` for 0 or a value this build lacks."""
    if value not in orchestrator_pb2.Termination.values():
        value = orchestrator_pb2.TERMINATION_UNSPECIFIED
    return orchestrator_pb2.Termination.Name(value).removeprefix(PREFIX).lower()
