"""Background jobs: poll, fetch the result, cancel. Jobs are created with ``"background": true``.

A job is its creator's: another key gets 404 (as for an unknown id, so ids leak nothing); an
admin key (``TTC_GATEWAY_ADMIN_API_KEYS``) reads and cancels every job. A job that ended
without a reply (cancelled, failed) shows what it had spent (``JobView.usage``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from services.gateway.protocol import ChatCompletionResponse, Job
from services.gateway.protocol.jobs import JobView
from services.gateway.routers.deps import caller, gateway
from services.gateway.routers.openapi_errors import errors
from services.gateway.state import Gateway
from services.gateway.usage import usage_of

router = APIRouter(tags=["jobs"])


async def _view(g: Gateway, job: Job) -> JobView:
    """``job`` with its spend when it ended without a reply; only such a job costs the two reads."""
    view = JobView(**dict(job))
    if job.result is not None or job.error is None:
        return view
    sessions = g.serving.sessions
    result, record = await sessions.result(job.id), await sessions.record(job.id)
    if result is not None and record is not None and result.HasField("budget_used"):
        view.usage = usage_of(result, record)
    return view


@router.get("/v1/jobs/{job_id}", response_model=JobView, response_model_exclude_none=True, responses=errors(401, 404))
async def get_job(job_id: str, request: Request, who: str = Depends(caller)) -> JobView:
    g = gateway(request)
    return await _view(g, await g.serving.job(job_id, g.auth.owner_filter(who)))


@router.get(
    "/v1/jobs/{job_id}/result",
    response_model=ChatCompletionResponse,
    responses={
        200: {"description": "The chat completion (or text completion) the job produced."},
        **errors(400, 401, 404, 409, 500, 503, 504),
    },
)
async def get_job_result(job_id: str, request: Request, who: str = Depends(caller)) -> JSONResponse:
    g = gateway(request)
    return await g.serving.job_result(job_id, g.auth.owner_filter(who))


@router.post(
    "/v1/jobs/{job_id}/cancel", response_model=JobView, response_model_exclude_none=True, responses=errors(401, 404)
)
async def cancel_job(job_id: str, request: Request, who: str = Depends(caller)) -> JobView:
    g = gateway(request)
    return await _view(g, await g.serving.cancel(job_id, g.auth.owner_filter(who)))
