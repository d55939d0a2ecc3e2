"""A failed job's error as a typed value: gRPC status code name, message, field, component.

The worker builds a :class:`JobError` from typed attributes (a ``ServiceError``'s code, a
component failure's ``component`` and ``code``), serializes it into ``SearchResult.error``
as JSON, and the gateway reads it back with :meth:`JobError.of_result` and maps ``code`` to
an HTTP status in its one error mapper. Nothing is ever parsed out of free text: a result
whose ``error`` is not a serialized ``JobError`` reads as ``INTERNAL`` with that text as the
message.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Protocol

# gRPC status code names (grpc.StatusCode.<name>.name); kept here so this module needs no grpc.
CODES = frozenset(
    {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    }
)


class _HasError(Protocol):
    error: str


@dataclass(frozen=True)
class JobError:
    """Why a job (or a component inside its search) failed."""

    code: str  # a gRPC status code name, e.g. "UNAVAILABLE"
    message: str
    field: str = ""  # the request field at fault (INVALID_ARGUMENT), e.g. "strategy.verifier"
    component: str = ""  # "policy", "verifier", "sandbox", or "" for the job itself

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"{self.code!r} is not a gRPC status code name")

    def to_json(self) -> str:
        """The ``SearchResult.error`` encoding."""
        return json.dumps(asdict(self), sort_keys=True)

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_json(cls, text: str) -> JobError:
        """Read back what :meth:`to_json` wrote; raises ``ValueError`` for anything else."""
        data: Any = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("code"), str):
            raise ValueError("not a serialized JobError")
        return cls(
            code=data["code"],
            message=str(data.get("message", "")),
            field=str(data.get("field", "")),
            component=str(data.get("component", "")),
        )

    @classmethod
    def of_result(cls, result: _HasError) -> JobError | None:
        """The typed error a ``SearchResult`` carries, ``None`` when it carries none."""
        if not result.error:
            return None
        try:
            return cls.from_json(result.error)
        except ValueError:
            return cls("INTERNAL", result.error)
