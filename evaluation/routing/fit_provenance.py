"""What a fitted table says about where it came from: the pools' folder and chunks, the code,
program versions, model and draw settings their headers name, and the ``source`` line every
route's expectation carries. Pure: chunk headers in, plain values out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from evaluation.pools.store import Chunk, ProblemPool


def pools_provenance(directory: str, chunks: Sequence[Chunk], pools: Sequence[ProblemPool]) -> dict[str, Any]:
    """Table-level provenance from the chunk headers the pools were read from: the folder, the
    code (``git describe``) and program versions, the model's sha256, the data seeds and settings."""
    used = {p.id for p in pools}
    mine = [c for c in chunks if any(p.id in used for p in c.pools)]
    headers = [c.header for c in mine]

    def distinct(key: str) -> list[Any]:
        return sorted({str(h.get(key)) for h in headers if h.get(key) is not None})

    return {
        "pools": directory,
        "chunks": [c.path.name for c in mine],
        "git_describe": distinct("git_describe"),
        "program_version": distinct("program_version"),
        "model": distinct("model"),
        "model_sha256": distinct("model_sha256"),
        "data": _distinct_dicts(h.get("data", {}) for h in headers),
        "settings": _distinct_dicts(h.get("settings", {}) for h in headers),
    }


def _distinct_dicts(values: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each distinct dict once, in order of first appearance."""
    return list({json.dumps(v, sort_keys=True): v for v in values}.values())


def source_line(directory: str, pools: Sequence[ProblemPool], program_versions: Sequence[str]) -> str:
    """What the figures were measured on, as the contract's ``source`` reads."""
    versions = ", ".join(program_versions) or "unknown"
    return f"pools: {directory} ({len(pools)} problems, program {versions})"
