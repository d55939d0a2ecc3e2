"""Checks shared by the tests of verbs that write JSON Lines and JSON files with their schemas."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema


def rows(path: Path) -> list[dict[str, Any]]:
    """The JSON Lines file's rows."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_valid_files(out: Path, files: Mapping[str, Mapping[str, Any]]) -> None:
    """Every file of ``files`` (name -> its JSON schema) is in ``out``, not empty, valid against its
    schema, and its schema is written beside it under ``schemas/``."""
    for name, schema in files.items():
        documents = [json.loads((out / name).read_text())] if name.endswith(".json") else rows(out / name)
        assert documents, name
        for document in documents:
            jsonschema.validate(document, schema)
        assert json.loads((out / "schemas" / f"{name.split('.')[0]}.schema.json").read_text()) == schema
