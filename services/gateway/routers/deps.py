"""Dependencies the routers share: the wired ``Gateway`` and the authenticated caller."""

from __future__ import annotations

from fastapi import Header, Request

from services.gateway.state import Gateway


def gateway(request: Request) -> Gateway:
    return request.app.state.gateway  # type: ignore[no-any-return]


async def caller(request: Request, authorization: str | None = Header(None, include_in_schema=False)) -> str:
    """The authenticated caller's name (raises 401 when authentication is on and the key is bad).
    ``async`` though it awaits nothing: FastAPI runs a plain ``def`` dependency in its thread pool,
    a thread hand-off per request for a few microseconds of work."""
    return gateway(request).auth.caller(authorization)
