"""GET /v1/traces/{trace_id} (the stored search trace as JSON) and the trace viewer page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse

from services.gateway.errors import HTTPError
from services.gateway.routers.deps import caller, gateway
from services.gateway.routers.openapi_errors import errors

router = APIRouter(tags=["traces"])
VIEWER = Path(__file__).resolve().parents[1] / "static" / "trace_viewer.html"


@router.get("/v1/traces/{trace_id}", responses=errors(401, 404))
async def get_trace(trace_id: str, request: Request, _who: str = Depends(caller)) -> dict[str, Any]:
    trace = await gateway(request).traces.load(trace_id)
    if trace is None:
        raise HTTPError(
            404, f"no trace with id {trace_id!r} (unknown or expired)", param="trace_id", code="trace_not_found"
        )
    return trace


@router.get("/ui/traces/{trace_id}", include_in_schema=False)
async def trace_viewer(trace_id: str) -> FileResponse:
    del trace_id  # the page reads the id from its URL and fetches /v1/traces/{id}
    if not VIEWER.exists():
        raise HTTPError(404, "the trace viewer page is not installed", code="not_found")
    return FileResponse(VIEWER, media_type="text/html")
