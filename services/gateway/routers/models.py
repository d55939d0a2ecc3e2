"""GET /v1/models, GET /v1/models/{model} and GET /v1/models/{model}/ladder: every model of every
policy deployment and the aliases, each with its ladder card (``ttc``: what each effort buys).

An alias carries the card of the model it names: it is routed as that model."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from services.gateway.ladder_card import card_of
from services.gateway.protocol.ladder import LadderCard, ModelCard, ModelCardList
from services.gateway.routers.deps import caller, gateway
from services.gateway.routers.openapi_errors import errors
from services.gateway.state import Gateway
from services.gen.ttc.v1 import policy_pb2

router = APIRouter(tags=["models"])


def _model(g: Gateway, name: str, info: policy_pb2.ModelInfo) -> ModelCard:
    return ModelCard(
        id=name,
        created=g.started,
        owned_by=f"ttc-serve/{info.engine}",
        max_context=info.max_context or None,
        ttc=card_of(g.watch.resolve(name), g.tables),
    )


@router.get("/v1/models", response_model=ModelCardList, responses=errors(401, 503))
async def list_models(request: Request, _who: str = Depends(caller)) -> ModelCardList:
    g = gateway(request)
    g.watch.require_up()
    served = g.watch.models
    data = [_model(g, name, info) for name, info in served.items()]
    data += [_model(g, alias, served[target]) for alias, target in g.watch.aliases.items() if target in served]
    return ModelCardList(data=data)


@router.get("/v1/models/{model}", response_model=ModelCard, responses=errors(401, 404, 503))
async def get_model(model: str, request: Request, _who: str = Depends(caller)) -> ModelCard:
    g = gateway(request)
    return _model(g, model, g.watch.model(model))


@router.get("/v1/models/{model}/ladder", response_model=LadderCard, responses=errors(401, 404, 503))
async def get_ladder(model: str, request: Request, _who: str = Depends(caller)) -> LadderCard:
    """The model's ladder card alone (the ``ttc`` object of its ``Model``)."""
    g = gateway(request)
    g.watch.model(model)  # 404 model_not_found (or 503) as for /v1/models/{model}
    return card_of(g.watch.resolve(model), g.tables)
