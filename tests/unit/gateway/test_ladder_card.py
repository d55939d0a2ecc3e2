"""The ladder card and the per-model routing tables: the card names what the planner runs, per
task kind, effort and bin; a model with its own measured table is calibrated, any other says so;
a bad per-model table stops start-up naming the model and the path; the shipped page's
generated section is current (``scripts/ladder_doc.py --check``)."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

from services.common.metrics import ServiceMetrics
from services.common.task_type import TASK_TYPES, TaskType
from services.gateway.effort import EFFORTS
from services.gateway.ladder_card import DEFAULT_KIND, card_of, ladder_card, render_card, render_section
from services.gateway.metrics import GatewayMetrics
from services.gateway.model_tables import ModelRouting, ModelTables, load_model_tables, load_table_file
from services.gateway.planning import Planner
from services.gateway.protocol import ChatCompletionRequest
from services.gateway.protocol.ladder import LadderConfiguration, LadderRung, ModelCard
from services.gateway.routing import Route
from services.gateway.settings import GatewaySettings
from tests.helpers.routing import shipped_routing
from tests.unit.gateway.fake_watch import ModelWatch

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "services/gateway/routing/routing.v2.json"
V1 = ROOT / "services/gateway/routing/routing.v1.json"
SHIPPED_0_5B = "qwen2.5-coder-0.5b"


def _shipped_tables() -> ModelTables:
    """The tables a gateway with the shipped settings loads."""
    env = shipped_routing()
    return load_model_tables(env["TTC_GATEWAY_ROUTING_TABLE"], env["TTC_GATEWAY_ROUTING_TABLES"])


_METRICS = GatewayMetrics(ServiceMetrics("gateway-ladder-test"))


def _expected(accuracy: float, source: str = "pools: docs/data/calibration/pools/m (30 problems)") -> dict[str, Any]:
    return {
        "accuracy": accuracy,
        "interval": [max(0.0, accuracy - 0.2), min(1.0, accuracy + 0.15)],
        "problems": 30,
        "generated_tokens": 100.0 + 50 * accuracy,
        "prompt_tokens": 80.0,
        "p50_latency_s": 1.5,
        "source": source,
    }


def _measured(tmp_path: Path, skip: str | None = None) -> Path:
    """The shipped table with figures on every route (``skip``: a task type whose routes stay bare)."""
    raw = json.loads(SHIPPED.read_text())
    where = [("default", raw["routes"]), *raw["task_routes"].items()]
    for i, (kind, efforts) in enumerate(where):
        for bins in efforts.values():
            for route in bins.values():
                if kind != skip:
                    route["expected"] = _expected(round(0.1 + 0.1 * i, 2))
    path = tmp_path / "routing.m.json"
    path.write_text(json.dumps(raw))
    return path


def _ladder_doc() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ladder_doc", ROOT / "scripts/ladder_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------ the shipped page


def test_the_shipped_page_section_is_current() -> None:
    assert _ladder_doc().main(["--check"]) == 0


def test_check_fails_on_a_stale_page_and_write_repairs_it(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text("# Page\n\n<!-- ladder-card:begin -->\nold\n<!-- ladder-card:end -->\nafter\n")
    script = _ladder_doc()
    none = ["--routing-dir", str(tmp_path)]  # no table fitted with cascades: no second section needed
    assert script.main(["--check", "--doc", str(doc), *none]) == 1
    assert script.main(["--write", "--doc", str(doc), *none]) == 0
    assert script.main(["--check", "--doc", str(doc), *none]) == 0
    text = doc.read_text()
    assert text.startswith("# Page\n\n<!-- ladder-card:begin -->\n## The ladder card") and text.endswith(
        "end -->\nafter\n"
    )
    assert render_section(_shipped_tables()) in text
    doc.write_text("# no markers\n")
    assert script.main(["--check", "--doc", str(doc)]) == 1


def test_a_table_fitted_with_cascades_gets_its_own_generated_section(tmp_path: Path) -> None:
    routing = tmp_path / "routing"
    routing.mkdir()
    _escalating(tmp_path, "big").rename(routing / "routing.small+big.json")
    doc = tmp_path / "page.md"
    doc.write_text("<!-- ladder-card:begin -->\n<!-- ladder-card:end -->\n")
    script = _ladder_doc()
    args = ["--doc", str(doc), "--routing-dir", str(routing)]
    assert script.main(["--write", *args]) == 1  # the page has no place for it
    doc.write_text(doc.read_text() + "<!-- ladder-card-escalation:begin -->\n<!-- ladder-card-escalation:end -->\n")
    assert script.main(["--write", *args]) == 0 and script.main(["--check", *args]) == 0
    escalation = doc.read_text().split("<!-- ladder-card-escalation:begin -->", 1)[1]
    assert "Served for `small` by `ttc stack` with `TTC_STACK_LARGE_MODEL=big`" in escalation
    assert "### The ladder of `small`" in escalation and "`cascade`" in escalation


def test_the_shipped_settings_route_the_embedded_model_by_its_own_measured_table() -> None:
    """Qwen2.5-Coder-0.5B ships with the table fitted on its calibration pools: calibrated, every
    rung with its measured figures; any other model gets the default table, marked uncalibrated."""
    tables = _shipped_tables()
    assert list(tables.by_model) == [SHIPPED_0_5B]
    card = card_of(SHIPPED_0_5B, tables)
    assert card.own_table and card.calibrated and card.note is None
    assert card.table.provenance["problems"] >= 200 and card.table.provenance["served_model"] == SHIPPED_0_5B
    for efforts in card.kinds.values():
        for bins in efforts.values():
            for rung in bins.values():
                assert rung.expected is not None and 0.0 <= rung.expected.accuracy <= 1.0
                low, high = rung.expected.interval
                assert low <= rung.expected.accuracy <= high
    assert card.kinds[DEFAULT_KIND]["none"]["*"].configuration.strategy == "single"
    assert f"fitted on `{SHIPPED_0_5B}`. Calibrated" in render_card(card)  # the pools' model list, as a name
    other = card_of("smollm2-135m", tables)
    assert not other.own_table and not other.calibrated and other.note


def test_the_shipped_table_is_fitted_on_every_committed_calibration_pool_of_the_current_programs() -> None:
    """The shipped table is a copy of what ``make routing-table`` fits from the committed pools:
    a chunk added, or a program prompt changed (stale pools), without refitting fails here."""
    from calibration.lib.drawer import program_version

    provenance = _shipped_tables().by_model[SHIPPED_0_5B].table.provenance
    pools = ROOT / str(provenance["pools"])
    assert provenance["chunks"] == sorted(p.name for p in pools.glob("calibration-*.jsonl")), "make routing-table"
    assert provenance["program_version"] == [program_version()], "the pools are stale: redraw, then make routing-table"


# ------------------------------------------------------------------------------------ the card


def test_every_rung_is_the_planners_route_for_that_kind_effort_and_bin() -> None:
    tables = load_model_tables(str(SHIPPED), "")
    table = tables.default.table
    card = card_of("smollm2-135m", tables)
    assert list(card.kinds) == [DEFAULT_KIND, *table.task_routes]
    assert card.default_serves == [t for t in TASK_TYPES if t not in table.task_routes]
    for kind, efforts in card.kinds.items():
        task = None if kind == DEFAULT_KIND else cast(TaskType, kind)
        assert list(efforts) == list(EFFORTS)
        for effort, bins in efforts.items():
            for name, rung in bins.items():
                route = table.route(effort, None if name == "*" else name, task)
                assert rung.configuration.model_dump() == route.model_dump(exclude={"expected"})
    # The code rows of the shipped table: minimal falls back to the default routes, low runs code_execution.
    assert card.kinds["code"]["minimal"]["*"].configuration.strategy == "single"
    assert card.kinds["code"]["high"]["*"].configuration.n == 8


def test_the_configuration_has_every_field_of_a_route_but_its_figures() -> None:
    assert set(LadderConfiguration.model_fields) == set(Route.model_fields) - {"expected"}


def test_a_model_without_its_own_table_is_uncalibrated_and_told_what_it_gets() -> None:
    card = card_of("smollm2-135m", load_model_tables(str(SHIPPED), ""))
    assert not card.own_table and not card.calibrated
    assert card.note is not None
    assert "smollm2-135m" in card.note and "services/gateway/routing/routing.v2.json" in card.note
    assert "make calibrate MODEL=smollm2-135m" in card.note
    rung = card.kinds[DEFAULT_KIND]["none"]["*"]
    assert rung.expected is None and rung.note
    assert card.table.path == "services/gateway/routing/routing.v2.json"
    assert card.table.version == 2 and card.table.provenance["model"] == "qwen2.5-coder-0.5b"
    assert len(card.table.sha256) == 64
    # The rendered page names no model for the default table: any such model's card reads the same.
    assert render_card(card) == render_card(card_of("another-model", load_model_tables(str(SHIPPED), "")))
    assert "not measured" in render_card(card)


def test_a_model_with_its_own_measured_table_is_calibrated_with_its_figures(tmp_path: Path) -> None:
    tables = load_model_tables(str(SHIPPED), f"m={_measured(tmp_path)}")
    card = card_of("m", tables)
    assert card.own_table and card.calibrated and card.note is None
    assert card.table.path == str((tmp_path / "routing.m.json").resolve())
    code = card.kinds["code"]["high"]["*"]
    assert code.expected is not None and code.note is None
    assert code.expected == tables.by_model["m"].table.route("high", None, "code").expected
    assert code.expected.interval[0] <= code.expected.accuracy <= code.expected.interval[1]
    text = render_card(card)
    assert text.startswith("### The ladder of `m`:")
    assert "| `high` | any | `code_execution`, n=8, budget 4500 | 30% [10, 45] of 30 [1] | 115 | 80 | 1.50 s |" in text
    assert "1. pools: docs/data/calibration/pools/m (30 problems)" in text
    assert "Calibrated: every route carries measured figures." in text
    # Another model on the same gateway still gets the default table, uncalibrated.
    assert not card_of("other", tables).calibrated and card_of("other", tables).table.version == 2


def test_a_table_with_some_routes_unmeasured_is_not_calibrated_and_says_so(tmp_path: Path) -> None:
    card = card_of("m", load_model_tables(str(SHIPPED), f"m={_measured(tmp_path, skip='code')}"))
    assert card.own_table and not card.calibrated
    assert card.note is not None and "no calibration figures" in card.note
    assert card.kinds["code"]["high"]["*"].expected is None
    assert card.kinds["arithmetic"]["high"]["*"].expected is not None


def test_the_official_sdk_parses_a_model_with_its_card() -> None:
    from openai.types import Model as SDKModel

    card = card_of("m", load_model_tables(str(SHIPPED), ""))
    entry = ModelCard(id="m", created=1, owned_by="ttc-serve/llamacpp", ttc=card)
    parsed = SDKModel.model_validate(json.loads(entry.model_dump_json()))
    assert parsed.id == "m" and parsed.owned_by == "ttc-serve/llamacpp"
    assert parsed.model_extra is not None and parsed.model_extra["ttc"]["model"] == "m"
    assert parsed.model_extra["ttc"]["kinds"]["default"]["none"]["*"]["configuration"]["strategy"] == "single"


def test_the_rung_of_a_card_round_trips_through_json() -> None:
    card = card_of("m", load_model_tables(str(SHIPPED), ""))
    again = type(card).model_validate_json(card.model_dump_json())
    assert again == card
    assert isinstance(again.kinds["code"]["low"]["*"], LadderRung)


# ------------------------------------------------------------------------ per-model tables, start-up


def test_per_model_tables_load_and_route_each_model(tmp_path: Path) -> None:
    tables = load_model_tables(str(SHIPPED), f" m={_measured(tmp_path)} , old={V1}")
    assert tables.has_own("m") and tables.has_own("old") and not tables.has_own("x")
    assert tables.of("x") is tables.default
    assert tables.of("old").table.version == 1


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "m=/nowhere/routing.m.json",
            r"TTC_GATEWAY_ROUTING_TABLES \(model 'm'\): cannot read .*/nowhere/routing.m.json",
        ),
        ("m", "expected name=value"),
        ("m=a.json,m=b.json", "'m' is listed twice"),
        ("gpt-4o-mini=" + str(V1), "'gpt-4o-mini' is an alias of 'qwen'"),
    ],
)
def test_a_bad_setting_fails_at_start_up_naming_the_model_and_path(setting: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_model_tables(str(SHIPPED), setting, {"gpt-4o-mini": "qwen"})


def test_an_invalid_or_unreadable_table_names_the_model_and_the_path(tmp_path: Path) -> None:
    bad = json.loads(SHIPPED.read_text())
    bad["routes"]["none"]["*"]["expected"] = {**_expected(0.5), "accuracy": 1.5}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    (tmp_path / "notjson.json").write_text("{")
    with pytest.raises(ValueError, match=r"model 'm'\): the routing table '.*bad.json' is invalid"):
        load_model_tables(str(SHIPPED), f"m={tmp_path / 'bad.json'}")
    with pytest.raises(ValueError, match=r"model 'm'\): the routing table '.*notjson.json' is not JSON"):
        load_model_tables(str(SHIPPED), f"m={tmp_path / 'notjson.json'}")
    with pytest.raises(ValueError, match="TTC_GATEWAY_ROUTING_TABLE: cannot read"):
        load_table_file(tmp_path / "missing.json")


def test_the_app_refuses_to_build_with_a_bad_per_model_table(tmp_path: Path) -> None:
    from services.common.settings import CommonSettings
    from services.gateway.app import build_app

    settings = GatewaySettings(routing_tables=f"m={tmp_path / 'absent.json'}")
    with pytest.raises(ValueError, match="model 'm'"):
        build_app(settings, CommonSettings())


# ------------------------------------------------------------------------------ the planner's choice


async def test_the_planner_routes_each_model_by_its_own_table_else_the_default(tmp_path: Path) -> None:
    raw = json.loads(SHIPPED.read_text())
    own = copy.deepcopy(raw)
    own["task_routes"]["arithmetic"]["high"] = {"*": {"strategy": "self_consistency", "n": 5, "token_budget": 3000}}
    (tmp_path / "own.json").write_text(json.dumps(own))
    tables: ModelTables = load_model_tables(str(SHIPPED), f"m={tmp_path / 'own.json'}")
    planner = Planner(
        GatewaySettings(),
        tables.default.table,
        None,
        ModelWatch(),  # type: ignore[arg-type]
        _METRICS,
        {},
        per_model={"m": ModelRouting(tables.by_model["m"].table, None)},
    )

    async def strategy(model: str) -> tuple[str, int]:
        req = ChatCompletionRequest.model_validate(
            {"model": model, "reasoning_effort": "high", "messages": [{"role": "user", "content": "What is 17 + 25?"}]}
        )
        job = (await planner.plan(req, 0)).job
        return job.strategy.name, job.strategy.n

    assert await strategy("m") == ("self_consistency", 5)
    assert await strategy("other") == ("program_of_thought", 1)
    # The card of each says the same.
    assert card_of("m", tables).kinds["arithmetic"]["high"]["*"].configuration.n == 5
    assert card_of("other", tables).kinds["arithmetic"]["high"]["*"].configuration.strategy == "program_of_thought"


def test_the_doc_section_lists_the_default_then_each_named_model(tmp_path: Path) -> None:
    tables = load_model_tables(str(SHIPPED), f"zeta={V1},alpha={_measured(tmp_path)}")
    section = render_section(tables)
    default = section.index("### The ladder of every model without its own table")
    alpha, zeta = section.index("### The ladder of `alpha`"), section.index("### The ladder of `zeta`")
    assert default < alpha < zeta
    assert render_card(ladder_card("alpha", tables.by_model["alpha"], own=True)) in section


def _escalating(tmp_path: Path, escalation_model: str | None) -> Path:
    """The shipped table with ``high`` routed to a cascade (and ``escalation_model`` named)."""
    raw = json.loads(SHIPPED.read_text())
    raw["routes"]["high"] = {"*": {"strategy": "cascade", "n": 2, "token_budget": 2048, "params": {"threshold": 0.5}}}
    if escalation_model is not None:
        raw["escalation_model"] = escalation_model
    path = tmp_path / "escalating.json"
    path.write_text(json.dumps(raw))
    return path


def test_a_table_that_escalates_names_its_model_and_is_served_only_beside_it(tmp_path: Path) -> None:
    from services.gateway.model_tables import check_escalation

    with pytest.raises(ValueError, match="names no escalation_model"):
        load_table_file(_escalating(tmp_path, None))
    tables = load_model_tables(str(SHIPPED), f"small={_escalating(tmp_path, 'large')}")
    assert tables.of("small").table.escalates() and not tables.default.table.escalates()
    check_escalation(tables, {"large": "127.0.0.1:1"})  # the escalation deployment is served
    with pytest.raises(ValueError, match=r"\(model 'small'\).*escalates to 'large'.*TTC_STACK_LARGE_MODEL=large"):
        check_escalation(tables, {"other": "127.0.0.1:1"})
    check_escalation(load_model_tables(str(SHIPPED), ""), {})  # no cascade routes: nothing to serve beside


def test_the_gateway_refuses_to_start_with_a_table_whose_escalation_model_it_does_not_serve(tmp_path: Path) -> None:
    from services.common.settings import CommonSettings
    from services.gateway.app import build_app

    settings = GatewaySettings(routing_tables=f"small={_escalating(tmp_path, 'large')}")
    with pytest.raises(ValueError, match="escalates to 'large'"):
        build_app(settings, CommonSettings())
