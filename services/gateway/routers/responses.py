"""OpenAI's Responses API: create, retrieve, cancel and delete ``/v1/responses``.

A response is its creator's: another key gets 404 (as for an unknown id); an admin key
(``TTC_GATEWAY_ADMIN_API_KEYS``) reads, cancels and deletes every response.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse

from services.gateway.responses.objects import DeletedResponse, ResponseObject
from services.gateway.responses.request import ResponseCreateRequest
from services.gateway.routers.deps import caller, gateway
from services.gateway.routers.openapi_errors import SSE, errors

router = APIRouter(tags=["responses"])


@router.post(
    "/v1/responses",
    response_model=ResponseObject,
    responses={
        200: {
            "content": SSE,
            "description": "The response (status queued when background is true), or its typed SSE events when "
            "stream is true.",
        },
        **errors(400, 401, 404, 409, 413, 429, 499, 500, 503, 504),
    },
)
async def create_response(
    body: ResponseCreateRequest, request: Request, who: str = Depends(caller)
) -> JSONResponse | StreamingResponse:
    return await gateway(request).responses.create(body, who, request)


@router.get("/v1/responses/{response_id}", response_model=ResponseObject, responses=errors(401, 404, 500))
async def get_response(response_id: str, request: Request, who: str = Depends(caller)) -> ResponseObject:
    g = gateway(request)
    return await g.responses.retrieve(response_id, g.auth.owner_filter(who))


@router.post("/v1/responses/{response_id}/cancel", response_model=ResponseObject, responses=errors(401, 404, 500))
async def cancel_response(response_id: str, request: Request, who: str = Depends(caller)) -> ResponseObject:
    g = gateway(request)
    return await g.responses.cancel(response_id, g.auth.owner_filter(who))


@router.delete("/v1/responses/{response_id}", response_model=DeletedResponse, responses=errors(401, 404, 500))
async def delete_response(response_id: str, request: Request, who: str = Depends(caller)) -> DeletedResponse:
    g = gateway(request)
    return await g.responses.delete(response_id, g.auth.owner_filter(who))
