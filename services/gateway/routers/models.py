"""GET /v1/models and GET /v1/models/{model}: every model of every policy deployment, and the aliases."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from services.gateway.protocol import Model, ModelList
from services.gateway.routers.deps import caller, gateway
from services.gateway.routers.openapi_errors import errors
from services.gen.ttc.v1 import policy_pb2

router = APIRouter(tags=["models"])


def _model(name: str, info: policy_pb2.ModelInfo, created: int) -> Model:
    return Model(id=name, created=created, owned_by=f"ttc-serve/{info.engine}", max_context=info.max_context or None)


@router.get("/v1/models", response_model=ModelList, responses=errors(401, 503))
async def list_models(request: Request, _who: str = Depends(caller)) -> ModelList:
    g = gateway(request)
    g.watch.require_up()
    served = g.watch.models
    data = [_model(name, info, g.started) for name, info in served.items()]
    data += [_model(alias, served[target], g.started) for alias, target in g.watch.aliases.items() if target in served]
    return ModelList(data=data)


@router.get("/v1/models/{model}", response_model=Model, responses=errors(401, 404, 503))
async def get_model(model: str, request: Request, _who: str = Depends(caller)) -> Model:
    g = gateway(request)
    return _model(model, g.watch.model(model), g.started)
