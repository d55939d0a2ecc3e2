"""The ladder card of a model, computed from the routing table object the planner routes it with.

One function makes the card (``ladder_card``) and one renders it as Markdown (``render_card``);
the gateway serves the first (``GET /v1/models``, ``GET /v1/models/{model}/ladder``) and
``scripts/ladder_doc.py`` writes the second into ``docs/effort-ladder.md``, so the page and the
endpoint cannot drift apart (an e2e test compares them through a running stack).

Each rung is ``RoutingTable.effort_routes(effort, kind)`` itself - the planner's own lookup -
so the card names exactly the configuration a request of that kind, effort and difficulty bin
runs. A model without its own table is routed by the shipped default and the card says so
(``calibrated: false``, a note stating the default it gets instead of figures).
"""

from __future__ import annotations

import json
from typing import Any, cast

from services.common.task_type import TASK_TYPES, TaskType
from services.gateway.effort import EFFORTS
from services.gateway.model_tables import SETTING, ModelTables, TableFile
from services.gateway.protocol.ladder import (
    LadderBin,
    LadderCard,
    LadderConfiguration,
    LadderRung,
    LadderTable,
    RouteExpectation,
)
from services.gateway.routing import ANY_BIN, Route

DEFAULT_KIND = "default"
NOT_MEASURED = "not measured: this route carries no calibration figures"


def card_of(model: str, tables: ModelTables) -> LadderCard:
    """The card of a served model: its own table's, else the default table's."""
    return ladder_card(model, tables.of(model), tables.has_own(model))


def ladder_card(model: str, source: TableFile, own: bool) -> LadderCard:
    """The card for ``model`` routed by ``source`` (``own``: a table named for this model)."""
    table = source.table
    kinds: dict[str, dict[str, dict[str, LadderRung]]] = {}
    for kind in [DEFAULT_KIND, *table.task_routes]:
        task = None if kind == DEFAULT_KIND else cast(TaskType, kind)
        kinds[kind] = {
            effort: {name: _rung(route) for name, route in table.effort_routes(effort, task).items()}
            for effort in EFFORTS
        }
    measured = all(
        r.expected is not None for efforts in kinds.values() for bins in efforts.values() for r in bins.values()
    )
    return LadderCard.model_validate(
        {
            "model": model,
            "own_table": own,
            "calibrated": own and measured,
            "note": _note(model, source, own, measured),
            "table": LadderTable(
                path=source.path,
                sha256=source.sha256,
                version=table.version,
                description=table.description,
                estimator=table.estimator.kind,
                difficulty_bins=[LadderBin(name=b.name, max=b.max) for b in table.difficulty_bins],
                provenance=table.provenance,
            ),
            "default_serves": [t for t in TASK_TYPES if t not in table.task_routes],
            "kinds": kinds,
        }
    )


def _rung(route: Route) -> LadderRung:
    configuration = LadderConfiguration.model_validate(route.model_dump(exclude={"expected"}))
    return LadderRung(
        configuration=configuration, expected=route.expected, note=None if route.expected else NOT_MEASURED
    )


def _note(model: str, source: TableFile, own: bool, measured: bool) -> str | None:
    fitted_on = ", ".join(fitted_models(source.table.provenance))
    on = f", fitted on {fitted_on}" if fitted_on else ""
    if not own:
        return (
            f"Not calibrated for {model}: it has no table of its own in {SETTING}, so it is routed by the default "
            f"table {source.path} (version {source.table.version}{on}), unmeasured on this model: the card states "
            f"each configuration it runs and promises no accuracy. `make calibrate MODEL={model}` measures a table "
            f"of its own."
        )
    if not measured:
        return f"The table {source.path} names {model} but some routes carry no calibration figures ('expected')."
    return None


# ------------------------------------------------------------------------------------ Markdown


def render_card(card: LadderCard) -> str:
    """The card as Markdown: one table per task kind, rows effort by difficulty bin.

    Only what the table decides is rendered, not the model's name for a model routed by the
    default table, so the page's section for the default table matches any such model's card."""
    table = card.table
    title = f"`{card.model}`" if card.own_table else "every model without its own table"
    lines = [f"### The ladder of {title}: `{table.path}`", ""]
    lines.append(
        f"Table version {table.version}, sha256 `{table.sha256[:12]}`, difficulty estimator `{table.estimator}` "
        f"(bins: {', '.join(f'`{b.name}` ≤ {b.max:.2f}' for b in table.difficulty_bins)}){_fitted(table)}. "
        + ("Calibrated: every route carries measured figures." if card.calibrated else _uncalibrated(card))
    )
    for kind, efforts in card.kinds.items():
        sources: list[str] = []  # cited under each kind's own table: a figure's section names its data
        listed = ", ".join(f"`{t}`" for t in card.default_serves)
        serves = f" (routes {listed})" if kind == DEFAULT_KIND and listed else ""
        lines += ["", f"#### `{kind}`{serves}", ""]
        lines += [
            "| effort | difficulty | configuration | accuracy (95% interval) | generated tokens | prompt tokens "
            "| p50 latency |",
            "|---|---|---|---|---|---|---|",
        ]
        for effort, bins in efforts.items():
            for name, rung in bins.items():
                where = "any" if name == ANY_BIN else f"`{name}`"
                lines.append(f"| `{effort}` | {where} | {_config(rung)} | {_figures(rung.expected, sources)} |")
        if sources:
            lines += ["", "Measured on:", ""] + [f"{i}. {s}" for i, s in enumerate(sources, 1)]
    return "\n".join(lines) + "\n"


def _fitted(table: LadderTable) -> str:
    models = fitted_models(table.provenance)
    return f", fitted on {', '.join(f'`{m}`' for m in models)}" if models else ""


def fitted_models(provenance: dict[str, Any]) -> list[str]:
    """The model(s) a table was fitted on: a hand-made table names one, a pools fit lists every
    model its chunks were drawn from."""
    model = provenance.get("model")
    return [str(m) for m in model] if isinstance(model, list) else [str(model)] if model else []


def _uncalibrated(card: LadderCard) -> str:
    if not card.own_table:
        return (
            f"Not calibrated: a model served without a table of its own in `{SETTING}` is routed by these "
            "configurations, unmeasured on it, with no accuracy promised; `make calibrate` measures a table of its own."
        )
    return "Some routes carry no calibration figures."


def _config(rung: LadderRung) -> str:
    c = rung.configuration
    parts = [f"`{c.strategy}`", f"n={c.n}", f"budget {c.token_budget}"]
    if c.verifier:
        parts.append(f"verifier `{c.verifier}`")
    if c.max_policy_calls:
        parts.append(f"≤ {c.max_policy_calls} policy calls")
    if c.max_verifier_calls:
        parts.append(f"≤ {c.max_verifier_calls} verifier calls")
    if c.params:
        parts.append(", ".join(f"{k}={_value(v)}" for k, v in sorted(c.params.items())))
    return ", ".join(parts)


def _value(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).replace("|", "\\|")


def _figures(expected: RouteExpectation | None, sources: list[str]) -> str:
    if expected is None:
        return "not measured | - | - | -"
    if expected.source not in sources:
        sources.append(expected.source)
    low, high = expected.interval
    latency = "-" if expected.p50_latency_s is None else f"{expected.p50_latency_s:.2f} s"
    return (
        f"{100 * expected.accuracy:.0f}% [{100 * low:.0f}, {100 * high:.0f}] of {expected.problems} "
        f"[{sources.index(expected.source) + 1}] | {expected.generated_tokens:.0f} | {expected.prompt_tokens:.0f} | "
        f"{latency}"
    )


def render_section(tables: ModelTables) -> str:
    """The generated section of ``docs/effort-ladder.md``: the card of every model without its own
    table (the default table's), then each named model's, in name order."""
    cards = [ladder_card("*", tables.default, own=False)]
    cards += [ladder_card(model, tables.by_model[model], own=True) for model in sorted(tables.by_model)]
    intro = (
        "## The ladder card (generated)\n\n"
        "What each effort runs and what calibration measured it to buy, per task kind and difficulty bin, for the "
        "routing tables a gateway with the default settings serves. The gateway serves the same card as JSON, "
        "computed by the same function (`services/gateway/ladder_card.py`) from the table objects it routes with: "
        "the `ttc` object of every `GET /v1/models` entry and `GET /v1/models/{model}/ladder` "
        "([gateway.md](gateway.md#the-ladder-card-v1modelsmodelladder)). Written by `python scripts/ladder_doc.py "
        "--write`; `--check` (a unit test) fails when this section is stale, and an e2e test compares it with "
        "what a running stack serves. A task kind not listed is routed as `default`; a difficulty of 'any' means the "
        "route does not depend on it, so no estimate is made.\n"
    )
    return "\n".join([intro, *(render_card(card) for card in cards)])
