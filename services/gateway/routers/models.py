"""GET /v1/models and GET /v1/models/{model}."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from services.gateway.protocol import Model, ModelList
from services.gateway.routers.deps import caller, gateway
from services.gateway.routers.openapi_errors import errors

router = APIRouter(tags=["models"])


def _model(info_id: str, engine: str, max_context: int, created: int) -> Model:
    return Model(id=info_id, created=created, owned_by=f"ttc-serve/{engine}", max_context=max_context or None)


@router.get("/v1/models", response_model=ModelList, responses=errors(401, 503))
async def list_models(request: Request, _who: str = Depends(caller)) -> ModelList:
    g = gateway(request)
    g.watch.require_up()
    return ModelList(data=[_model(m.id, m.engine, m.max_context, g.started) for m in g.watch.models.values()])


@router.get("/v1/models/{model}", response_model=Model, responses=errors(401, 404, 503))
async def get_model(model: str, request: Request, _who: str = Depends(caller)) -> Model:
    g = gateway(request)
    info = g.watch.model(model)
    return _model(info.id, info.engine, info.max_context, g.started)
