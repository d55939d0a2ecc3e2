"""The ladder card over HTTP, against the real app and a real Redis, with an in-process policy
that answers only its model list and stats (no model runs): every ``/v1/models`` entry carries
its model's card, an alias its model's, ``/v1/models/{model}/ladder`` the card alone, and an
unknown model the usual 404 error object."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from fastapi.testclient import TestClient

from services.common.settings import CommonSettings
from services.gateway.app import build_app
from services.gateway.ladder_card import card_of
from services.gateway.model_tables import load_model_tables
from services.gateway.settings import GatewaySettings
from services.gen.ttc.v1 import policy_pb2, policy_pb2_grpc
from services.jobs.settings import JobsSettings
from tests.helpers.processes import RedisServer, free_port

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "services/gateway/routing/routing.v2.json"
MODELS = ("tuned", "plain")


class ListingPolicy(policy_pb2_grpc.PolicyServicer):
    """A policy deployment as the gateway's watcher sees it: stats and a model list."""

    def GetStats(self, request: policy_pb2.StatsRequest, context: Any) -> policy_pb2.EngineStats:
        return policy_pb2.EngineStats(engine="llamacpp", model=MODELS[0])

    def ListModels(self, request: policy_pb2.ListModelsRequest, context: Any) -> policy_pb2.ListModelsResponse:
        return policy_pb2.ListModelsResponse(
            models=[policy_pb2.ModelInfo(id=m, engine="llamacpp", max_context=2048) for m in MODELS]
        )


@pytest.fixture(scope="module")
def tuned_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    raw = json.loads(SHIPPED.read_text())
    for efforts in [raw["routes"], *raw["task_routes"].values()]:
        for bins in efforts.values():
            for route in bins.values():
                route["expected"] = {
                    "accuracy": 0.5,
                    "interval": [0.3, 0.7],
                    "problems": 24,
                    "generated_tokens": 120.0,
                    "prompt_tokens": 60.0,
                    "p50_latency_s": None,
                    "source": "pools: docs/data/calibration/pools/tuned (24 problems)",
                }
    path = tmp_path_factory.mktemp("tables") / "routing.tuned.json"
    path.write_text(json.dumps(raw))
    return path


@pytest.fixture(scope="module")
def client(redis_server: RedisServer, tuned_table: Path) -> Iterator[TestClient]:
    port = free_port()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    policy_pb2_grpc.add_PolicyServicer_to_server(ListingPolicy(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    settings = GatewaySettings(
        policy_target=f"127.0.0.1:{port}",
        stats_interval_s=0.2,
        routing_table=str(SHIPPED),
        routing_tables=f"tuned={tuned_table}",
        model_aliases="gpt-4o-mini=tuned",
    )
    app = build_app(settings, CommonSettings(redis_url=redis_server.url), jobs_settings=JobsSettings(queue="ladder"))
    try:
        with TestClient(app) as c:
            yield c
    finally:
        server.stop(None)


def _expected_card(model: str, tuned_table: Path) -> dict[str, Any]:
    return card_of(model, load_model_tables(str(SHIPPED), f"tuned={tuned_table}")).model_dump(mode="json")


def test_every_listed_model_carries_its_card_and_an_alias_its_models(client: TestClient, tuned_table: Path) -> None:
    response = client.get("/v1/models")
    assert response.status_code == 200, response.text
    entries = {m["id"]: m for m in response.json()["data"]}
    assert set(entries) == {"tuned", "plain", "gpt-4o-mini"}
    for entry in entries.values():
        assert {"id", "object", "created", "owned_by", "max_context", "ttc"} <= set(entry)
        assert entry["object"] == "model" and entry["max_context"] == 2048
    assert entries["tuned"]["ttc"] == _expected_card("tuned", tuned_table)
    assert entries["tuned"]["ttc"]["calibrated"] is True
    assert entries["gpt-4o-mini"]["ttc"] == entries["tuned"]["ttc"]
    assert entries["plain"]["ttc"] == _expected_card("plain", tuned_table)
    assert entries["plain"]["ttc"]["calibrated"] is False and "plain" in entries["plain"]["ttc"]["note"]


def test_the_ladder_endpoint_serves_the_card_alone(client: TestClient, tuned_table: Path) -> None:
    for model, served in (("tuned", "tuned"), ("plain", "plain"), ("gpt-4o-mini", "tuned")):
        response = client.get(f"/v1/models/{model}/ladder")
        assert response.status_code == 200, response.text
        assert response.json() == _expected_card(served, tuned_table)
        assert client.get(f"/v1/models/{model}").json()["ttc"] == response.json()


def test_an_unknown_model_is_the_usual_404(client: TestClient) -> None:
    for path in ("/v1/models/gpt-99/ladder", "/v1/models/gpt-99"):
        response = client.get(path)
        assert response.status_code == 404, response.text
        error = response.json()["error"]
        assert error["code"] == "model_not_found" and "gpt-99" in error["message"]


def test_the_answers_conform_to_the_published_schema(client: TestClient) -> None:
    """What schemathesis checks over ``/v1/models`` in the e2e suite, here for every card route."""
    import schemathesis

    schema = schemathesis.openapi.from_asgi("/openapi.json", client.app)
    for path in ("/v1/models", "/v1/models/{model}", "/v1/models/{model}/ladder"):
        operation = schema[path]["GET"]
        for model in ("tuned", "plain", "nope"):
            response = client.get(path.replace("{model}", model))
            assert operation.is_valid_response(response), (path, model, response.text[:300])
    # and the check can fail: a card is not a model list.
    assert not schema["/v1/models"]["GET"].is_valid_response(client.get("/v1/models/tuned/ladder"))
