"""GET /v1/traces/{trace_id} (the stored search trace as JSON) and the trace viewer page.

A trace holds the prompt and every candidate, so it is its creator's: the trace store records
the owner (the job's API key name) and another key gets 404, as for an unknown id; an admin
key (``TTC_GATEWAY_ADMIN_API_KEYS``) reads every trace. The viewer page itself holds no data and
needs no key: it asks for one (kept in the tab's ``sessionStorage``, sent as a bearer header,
never put in a URL) and fetches the trace with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse

from services.gateway.errors import HTTPError
from services.gateway.routers.deps import caller, gateway
from services.gateway.routers.openapi_errors import errors
from services.jobs.trace_store import readable_by

router = APIRouter(tags=["traces"])
VIEWER = Path(__file__).resolve().parents[1] / "static" / "trace_viewer.html"


@router.get("/v1/traces/{trace_id}", responses=errors(401, 404))
async def get_trace(trace_id: str, request: Request, who: str = Depends(caller)) -> dict[str, Any]:
    g = gateway(request)
    trace, owner = await g.traces.load_with_owner(trace_id)
    if trace is None or not readable_by(owner, who, admin=g.auth.sees_all(who)):
        raise HTTPError(
            404, f"no trace with id {trace_id!r} (unknown or expired)", param="trace_id", code="trace_not_found"
        )
    return trace


@router.get("/ui/traces/{trace_id}", include_in_schema=False)
async def trace_viewer(trace_id: str) -> FileResponse:
    del trace_id  # the page reads the id from its URL and fetches /v1/traces/{id}
    if not VIEWER.exists():
        raise HTTPError(404, "the trace viewer page is not installed", code="not_found")
    return FileResponse(VIEWER, media_type="text/html", headers={"Cache-Control": "no-store"})
