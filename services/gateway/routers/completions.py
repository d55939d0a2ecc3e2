"""POST /v1/completions (legacy text completions)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse

from services.gateway.protocol import CompletionRequest, CompletionResponse, Job
from services.gateway.routers.deps import caller, gateway
from services.gateway.routers.openapi_errors import SSE, errors

router = APIRouter(tags=["completions"])


@router.post(
    "/v1/completions",
    response_model=CompletionResponse,
    responses={
        200: {"content": SSE, "description": "The completion, or an SSE stream of chunks when stream is true."},
        202: {"model": Job, "description": "A background job was created."},
        **errors(400, 401, 404, 409, 413, 429, 499, 500, 503, 504),
    },
)
async def create_completion(
    body: CompletionRequest, request: Request, who: str = Depends(caller)
) -> JSONResponse | StreamingResponse:
    return await gateway(request).serving.complete(body, who, request)
