"""OpenAPI ``responses=`` declarations, so the schema documents every status a route returns."""

from __future__ import annotations

from typing import Any

from services.gateway.protocol import ErrorResponse

_ERR: dict[str, Any] = {"model": ErrorResponse}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: _ERR for code in codes}


SSE: dict[str, Any] = {"text/event-stream": {"schema": {"type": "string"}}}
