"""/healthz (the process answers), /readyz (Redis and the policy service reachable), /metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from services.gateway.protocol import Health
from services.gateway.routers.deps import gateway

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness: answers without touching Redis or the policy, so it stays fast under load."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
async def readyz(request: Request) -> JSONResponse:
    g = gateway(request)
    checks: dict[str, object] = {"policy": g.watch.up, "policy_error": g.watch.last_error or None}
    try:
        checks["redis"] = bool(await g.redis.ping())
    except Exception as exc:  # readiness reports, never raises
        checks["redis"] = False
        checks["redis_error"] = str(exc)
    ready = bool(checks["policy"]) and bool(checks["redis"])
    body = Health(status="ready" if ready else "not_ready", checks=checks)
    return JSONResponse(status_code=200 if ready else 503, content=body.model_dump())


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    return Response(generate_latest(gateway(request).metrics.base.registry), media_type=CONTENT_TYPE_LATEST)
