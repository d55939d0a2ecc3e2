"""Which routing table routes which model: ``TTC_GATEWAY_ROUTING_TABLES`` read at start-up.

A table is fitted on one model's own measurements (``make calibrate`` writes
``routing.<model>.json``), so a gateway serving several models routes each with its own table;
a model without one gets the shipped default (``TTC_GATEWAY_ROUTING_TABLE``) and its ladder card
says it is not calibrated. Every file is read and validated here, once, so a wrong path or a
malformed table stops the gateway at start-up with the model and the path in the message, not
on a request. The planner routes with these objects and the ladder card is rendered from the
very same ones (one source of truth).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from services.gateway.difficulty import DifficultyEstimator
from services.gateway.fleet import parse_pairs
from services.gateway.routing import RoutingTable

ROOT = Path(__file__).resolve().parents[2]
SETTING = "TTC_GATEWAY_ROUTING_TABLES"


@dataclass(frozen=True)
class ModelRouting:
    """One model's routing table and the difficulty estimator that table names."""

    table: RoutingTable
    estimator: DifficultyEstimator | None


@dataclass(frozen=True)
class TableFile:
    """One loaded table and where it came from (``path`` relative to the project when inside it,
    so a card reads the same whichever directory the gateway was started from)."""

    path: str
    sha256: str  # of the file's bytes: the card and the doc name the same file version
    table: RoutingTable


@dataclass(frozen=True)
class ModelTables:
    default: TableFile
    by_model: Mapping[str, TableFile] = field(default_factory=dict)

    def of(self, model: str) -> TableFile:
        """The table that routes ``model`` (a served name): its own, else the default."""
        return self.by_model.get(model, self.default)

    def has_own(self, model: str) -> bool:
        return model in self.by_model


def shipped_path(path: str | Path) -> Path:
    """``path`` as given when it exists (absolute, or relative to the working directory), else
    relative to the project: the shipped defaults name files under ``services/gateway/routing/``,
    which a gateway started from another directory (a container's, a test's) still finds."""
    given = Path(path)
    if given.is_absolute() or given.exists() or not (ROOT / given).exists():
        return given
    return ROOT / given


def display_path(path: str | Path) -> str:
    resolved = Path(path).resolve()
    return resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else str(resolved)


def load_table_file(path: str | Path, what: str = "TTC_GATEWAY_ROUTING_TABLE") -> TableFile:
    """Read and validate one table; ``ValueError`` naming ``what`` (the setting or model) and the path."""
    path = shipped_path(path)
    try:
        raw = path.read_bytes()
        table = RoutingTable.model_validate(json.loads(raw))
    except OSError as err:
        raise ValueError(f"{what}: cannot read the routing table {str(path)!r}: {err.strerror or err}") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"{what}: the routing table {str(path)!r} is not JSON: {err}") from err
    except ValidationError as err:
        raise ValueError(f"{what}: the routing table {str(path)!r} is invalid: {err}") from err
    return TableFile(display_path(path), hashlib.sha256(raw).hexdigest(), table)


def load_model_tables(default_path: str, per_model: str, aliases: Mapping[str, str] | None = None) -> ModelTables:
    """The default table and one per ``model=path`` pair of ``per_model``.

    A name that is an alias is refused: a table is fitted on a served model, and an alias routes
    as the model it names (so its card is that model's)."""
    pairs = parse_pairs(per_model, SETTING)
    for model in pairs:
        if aliases and model in aliases:
            raise ValueError(f"{SETTING}: {model!r} is an alias of {aliases[model]!r}; name the served model")
    by_model = {model: load_table_file(path, f"{SETTING} (model {model!r})") for model, path in pairs.items()}
    return ModelTables(load_table_file(default_path), by_model)


def check_escalation(tables: ModelTables, deployments: Mapping[str, str]) -> None:
    """Refuse at start-up a table whose cascade routes escalate to a model with no deployment of
    its own (``deployments``: ``TTC_GATEWAY_POLICY_TARGETS``, model -> target): every request
    routed there would fail. The message names the model, the table and the setting to add."""
    named = [("TTC_GATEWAY_ROUTING_TABLE", tables.default)] + [(f"{SETTING} (model {m!r})", f)
                                                              for m, f in tables.by_model.items()]  # fmt: skip
    for what, file in named:
        model = file.table.escalation_model
        if model is not None and file.table.escalates() and model not in deployments:
            raise ValueError(
                f"{what}: the routing table {file.path!r} escalates to {model!r}, which TTC_GATEWAY_POLICY_TARGETS "
                f"does not serve; add {model}=<host:port> (ttc stack: TTC_STACK_LARGE_MODEL={model}) or serve a table "
                "without cascade routes"
            )
