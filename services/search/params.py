"""Typed reading of a strategy's free-form parameters, with errors that name the field.

``StrategySpec.params`` is a ``google.protobuf.Struct``: every number arrives as a float and
any key can appear. Each strategy reads what it needs through :class:`Params` and finally
calls :meth:`Params.finish`, so an unknown or mistyped key is rejected before any compute.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from services.common.errors import InvalidArgument


class Params:
    def __init__(self, values: Mapping[str, Any], prefix: str = "strategy.params") -> None:
        self._values = dict(values)
        self._prefix = prefix
        self._read: set[str] = set()

    def _field(self, key: str) -> str:
        return f"{self._prefix}.{key}"

    def _get(self, key: str) -> Any:
        self._read.add(key)
        return self._values.get(key)

    def integer(self, key: str, default: int, *, minimum: int = 0, maximum: int = 1 << 30) -> int:
        raw = self._get(key)
        if raw is None:
            return default
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) or raw != int(raw):
            raise InvalidArgument(f"must be an integer, got {raw!r}", field=self._field(key))
        value = int(raw)
        if not minimum <= value <= maximum:
            raise InvalidArgument(f"must be between {minimum} and {maximum}, got {value}", field=self._field(key))
        return value

    def number(self, key: str, default: float, *, minimum: float = -math.inf, maximum: float = math.inf) -> float:
        raw = self._get(key)
        if raw is None:
            return default
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
            raise InvalidArgument(f"must be a finite number, got {raw!r}", field=self._field(key))
        value = float(raw)
        if not minimum <= value <= maximum:
            raise InvalidArgument(f"must be between {minimum:g} and {maximum:g}, got {value:g}", field=self._field(key))
        return value

    def string(self, key: str, default: str, *, choices: Sequence[str] | None = None, non_empty: bool = False) -> str:
        raw = self._get(key)
        if raw is None:
            return default
        if not isinstance(raw, str):
            raise InvalidArgument(f"must be a string, got {raw!r}", field=self._field(key))
        if choices is not None and raw not in choices:
            raise InvalidArgument(f"must be one of {', '.join(choices)}; got {raw!r}", field=self._field(key))
        if non_empty and not raw:
            raise InvalidArgument("must not be empty", field=self._field(key))
        return raw

    def boolean(self, key: str, default: bool) -> bool:
        raw = self._get(key)
        if raw is None:
            return default
        if not isinstance(raw, bool):
            raise InvalidArgument(f"must be true or false, got {raw!r}", field=self._field(key))
        return raw

    def mapping(self, key: str) -> Mapping[str, Any] | None:
        raw = self._get(key)
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            raise InvalidArgument("must be an object", field=self._field(key))
        return raw

    def finish(self) -> None:
        """Reject keys no reader asked for (typos must not silently fall back to defaults)."""
        unknown = sorted(set(self._values) - self._read)
        if unknown:
            raise InvalidArgument(f"unknown parameter {unknown[0]!r}", field=self._field(unknown[0]))
