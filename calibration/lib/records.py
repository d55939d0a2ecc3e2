"""The records of a live run through the gateway, in chunks written whole.

The simulator check (``validate``), the live tree strategies (``live``) and the routed development
ladder (``routed``) keep their records alike: ``<split>-NNNNN.jsonl`` files under the run's
folder, each a header (the code, model, settings that wrote it and its record count) and then
one line per request. A chunk is written to a temporary file and renamed, so a run stopped at
any point leaves every chunk whole or absent and resumes with what no record holds; a chunk
whose header's count is not met is refused.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluation.pools.store import write_jsonl_chunk

SCHEMA = 1
REPORT = "report.json"


class LiveRunError(RuntimeError):
    """A live run cannot go on as asked (pools or records of another model or table, a torn
    records chunk); nothing more is sent. The message says why."""


def chunk_paths(directory: Path) -> list[Path]:
    """The record chunks under ``directory``, in sequence order."""
    return sorted(directory.glob("*-[0-9][0-9][0-9][0-9][0-9].jsonl")) if directory.is_dir() else []


def read_chunk(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One chunk's header and records; a torn chunk (its header's count not met) is refused."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not lines or lines[0].get("type") != "header" or lines[0].get("records") != len(lines) - 1:
        raise LiveRunError(f"{path}: not a whole validation chunk (header, then its records)")
    return lines[0], lines[1:]


def read_records(directory: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """Every record and chunk header so far (chunks in sequence order), and the next chunk number."""
    records, headers, seq = [], [], 0
    for path in chunk_paths(directory):
        header, chunk = read_chunk(path)
        headers.append(header)
        records += chunk
        seq = max(seq, int(path.stem.rsplit("-", 1)[1]))
    return records, headers, seq + 1


def write_records(
    directory: Path, split: str, seq: int, header: dict[str, Any], records: Sequence[dict[str, Any]]
) -> Path:
    """One chunk, atomically (:func:`~evaluation.pools.store.write_jsonl_chunk`): a crash leaves it
    whole or absent."""
    return write_jsonl_chunk(
        directory, split, seq, {"type": "header", "schema": SCHEMA, **header, "records": len(records)}, records
    )
