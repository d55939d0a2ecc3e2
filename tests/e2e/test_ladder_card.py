"""The ladder card served by a running stack: the real policy
service on SmolLM2 and two gateway processes in front of it, no worker (nothing is generated).

- The gateway with the shipped routing settings (the default table, and Qwen2.5-Coder-0.5B's own)
  serves SmolLM2, which has no table of its own, the card of the shipped default table: equal to
  what the card function makes of that file, and the page's section (``scripts/ladder_doc.py``)
  is what the generator renders from the tables that gateway loaded, this card included.
- The official ``openai`` SDK still parses ``models.retrieve`` and ``models.list``, the card
  riding along as the extra field ``ttc``.
- A gateway with ``TTC_GATEWAY_ROUTING_TABLES`` naming a measured table for SmolLM2 serves that
  table's card, calibrated, with its figures.

Run under the model lock: ``flock /tmp/ttc-model.lock nice .venv/bin/python -m pytest
tests/e2e/test_ladder_card.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.gateway.ladder_card import card_of, render_card, render_section
from services.gateway.model_tables import load_model_tables
from services.gateway.protocol.ladder import LadderCard
from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import ROOT, RedisServer
from tests.helpers.routing import shipped_routing

pytestmark = pytest.mark.e2e
SHIPPED = ROOT / "services/gateway/routing/routing.v2.json"
DOC = ROOT / "docs/effort-ladder.md"


def _measured_table(path: Path) -> Path:
    raw = json.loads(SHIPPED.read_text())
    for efforts in [raw["routes"], *raw["task_routes"].values()]:
        for bins in efforts.values():
            for route in bins.values():
                route["expected"] = {
                    "accuracy": 0.25,
                    "interval": [0.1, 0.45],
                    "problems": 20,
                    "generated_tokens": 90.0,
                    "prompt_tokens": 40.0,
                    "p50_latency_s": 0.8,
                    "source": "pools: docs/data/calibration/pools/smollm2-135m (20 problems)",
                }
    path.write_text(json.dumps(raw))
    return path


@pytest.fixture(scope="module")
def stacks(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GatewayStack, GatewayStack, Path]]:
    table = _measured_table(tmp_path_factory.mktemp("ladder") / f"routing.{MODEL}.json")
    shipped = GatewayStack(redis_server, gateway_env=shipped_routing())
    own = GatewayStack(
        redis_server,
        gateway_env={"TTC_GATEWAY_ROUTING_TABLE": str(SHIPPED), "TTC_GATEWAY_ROUTING_TABLES": f"{MODEL}={table}"},
    )
    try:
        shipped.start_policy()
        own.policy_port = shipped.policy_port  # the second gateway fronts the same policy service
        shipped.start_gateway()
        own.start_gateway()
        yield shipped, own, table
    finally:
        own.stop()
        shipped.stop()


def _doc_section() -> str:
    text = DOC.read_text()
    return text.split("<!-- ladder-card:begin -->\n", 1)[1].split("<!-- ladder-card:end -->", 1)[0]


def test_the_served_card_is_the_shipped_tables_and_the_pages(stacks: tuple[GatewayStack, GatewayStack, Path]) -> None:
    shipped, _, _ = stacks
    served = httpx.get(f"{shipped.url}/v1/models/{MODEL}/ladder", timeout=10).json()
    routing = shipped_routing()
    tables = load_model_tables(routing["TTC_GATEWAY_ROUTING_TABLE"], routing["TTC_GATEWAY_ROUTING_TABLES"])
    assert served == card_of(MODEL, tables).model_dump(mode="json")
    assert served["calibrated"] is False and served["own_table"] is False and MODEL in served["note"]
    # The page's section is what the generator renders for the same table, and holds this card.
    section = _doc_section()
    assert section == render_section(tables)
    assert render_card(LadderCard.model_validate(served)) in section
    unknown = httpx.get(f"{shipped.url}/v1/models/gpt-99/ladder", timeout=10)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"


def test_the_official_sdk_still_parses_models_with_their_card(stacks: tuple[GatewayStack, GatewayStack, Path]) -> None:
    from openai import OpenAI

    shipped, _, _ = stacks
    client = OpenAI(base_url=f"{shipped.url}/v1", api_key="unused", max_retries=0, timeout=30)
    model = client.models.retrieve(MODEL)
    assert model.id == MODEL and model.object == "model" and model.owned_by.startswith("ttc-serve/")
    extra: dict[str, Any] = model.model_extra or {}
    assert extra["ttc"] == httpx.get(f"{shipped.url}/v1/models/{MODEL}/ladder", timeout=10).json()
    listed = {m.id: m for m in client.models.list().data}
    assert (listed[MODEL].model_extra or {})["ttc"] == extra["ttc"]


def test_a_model_named_with_its_own_measured_table_is_served_calibrated(
    stacks: tuple[GatewayStack, GatewayStack, Path],
) -> None:
    _, own, table = stacks
    served = httpx.get(f"{own.url}/v1/models/{MODEL}/ladder", timeout=10).json()
    assert served == card_of(MODEL, load_model_tables(str(SHIPPED), f"{MODEL}={table}")).model_dump(mode="json")
    assert served["calibrated"] is True and served["note"] is None
    rung = served["kinds"]["code"]["high"]["*"]
    assert rung["configuration"]["strategy"] == "code_execution"
    assert rung["expected"]["accuracy"] == 0.25 and rung["expected"]["interval"] == [0.1, 0.45]
