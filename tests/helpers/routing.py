"""The routing settings a gateway ships with, for tests that route as a user's gateway does."""

from __future__ import annotations

from tests.helpers.processes import ROOT


def shipped_routing() -> dict[str, str]:
    """The default table and the per-model tables of the shipped settings, as the gateway's
    environment, paths made absolute: a gateway given these routes every model as a user's would."""
    from services.gateway.fleet import parse_pairs
    from services.gateway.settings import GatewaySettings

    fields = GatewaySettings.model_fields
    per_model = parse_pairs(str(fields["routing_tables"].default), "routing_tables")
    return {
        "TTC_GATEWAY_ROUTING_TABLE": str(ROOT / str(fields["routing_table"].default)),
        "TTC_GATEWAY_ROUTING_TABLES": ",".join(f"{m}={ROOT / path}" for m, path in per_model.items()),
    }
