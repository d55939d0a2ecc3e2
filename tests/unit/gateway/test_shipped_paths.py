"""The shipped defaults name files under the project; a gateway started from another working
directory (a container's, a test's temporary one) still reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.gateway.fleet import parse_pairs
from services.gateway.modality import load_modality_models
from services.gateway.model_tables import load_model_tables, shipped_path
from services.gateway.settings import GatewaySettings


def test_the_shipped_tables_and_classifiers_load_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    fields = GatewaySettings.model_fields
    tables = load_model_tables(str(fields["routing_table"].default), str(fields["routing_tables"].default))
    assert tables.has_own("qwen2.5-coder-0.5b") and tables.default.path == "services/gateway/routing/routing.v2.json"
    assert set(load_modality_models(str(fields["modality_models"].default))) == set(
        parse_pairs(str(fields["modality_models"].default), "modality_models")
    )


def test_a_path_that_exists_where_it_is_given_is_read_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "services/gateway/routing/routing.v2.json"
    mine.parent.mkdir(parents=True)
    mine.write_text("{}")
    assert shipped_path("services/gateway/routing/routing.v2.json") == Path("services/gateway/routing/routing.v2.json")
    assert shipped_path("nowhere/at/all.json") == Path("nowhere/at/all.json")  # the error then names it as given
