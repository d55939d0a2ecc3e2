"""Provenance and raw-result files for benchmarks and load tests: one place that says what
produced a figure.

Every figure in README.md and docs/ cites a raw file under ``docs/data/<name>/``
(``tests/unit/test_docs_figures.py`` enforces it). A script that measures something calls
``write_raw(name, results, model=...)``: the file carries ``git describe --always --dirty``,
the load average before and when written, the host's CPU count, the UTC time, and the model's
sha256 where a model is used (the pinned hash from ``services.policy.models.REGISTRY`` for a
registry name, the file's own hash for a path to a GGUF), so a figure can be traced to the code,
model and machine state that made it, and recomputed from the raw results.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "data"


def git_describe(cwd: Path = ROOT) -> str:
    """``git describe --always --dirty`` of the tree, or ``unknown`` outside a checkout."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=cwd, capture_output=True, text=True, check=False
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages, rounded: the shared cores' state during a run."""
    return [round(x, 2) for x in os.getloadavg()]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def model_sha256(model: str | None) -> str | None:
    """The sha256 of a model: pinned for a registry name (no 500 MB read), hashed for a file.

    ``None`` when no model is used or the name is neither (e.g. a remote model id)."""
    if not model:
        return None
    from services.policy.models import REGISTRY

    spec = REGISTRY.get(model)
    if spec is not None:
        return spec.sha256
    path = Path(model)
    return file_sha256(path) if path.is_file() else None


def provenance(model: str | None = None, **extra: Any) -> dict[str, Any]:
    """What produced a result, taken when the run starts (``write_raw`` adds the end state)."""
    return {
        "git_describe": git_describe(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average_start": load_average(),
        "cpus": os.cpu_count(),
        "model": model,
        "model_sha256": model_sha256(model),
        **extra,
    }


def write_raw(
    name: str,
    results: Any,
    *,
    model: str | None = None,
    started: dict[str, Any] | None = None,
    out_dir: Path | None = None,
    argv: list[str] | None = None,
) -> Path:
    """Write ``results`` with provenance to ``docs/data/<name>/<name>-<UTC time>.json``.

    ``started`` is a ``provenance()`` taken at the start of the run (so its load average is the
    one before the measurement); without it one is taken now. Returns the path written."""
    meta = dict(started) if started is not None else provenance(model)
    meta["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    meta["load_average_end"] = load_average()
    if argv is not None:
        meta["argv"] = argv
    directory = out_dir if out_dir is not None else DATA / name
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    path.write_text(json.dumps({"provenance": meta, "results": results}, indent=2, default=str) + "\n")
    return path
