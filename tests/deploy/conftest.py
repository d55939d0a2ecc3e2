"""Fixtures for the deployment tests: the offline tools and a chart renderer.

Every tool comes from an installed package (scripts/deploy_tools.py); none is downloaded.
A missing tool is a failure, not a skip: `make test` must prove the deployment files valid.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "ttc"
VALUES_FILES = {
    "default": None,
    "gpu": CHART / "values-gpu.yaml",
    "minimal": CHART / "values-minimal.yaml",
}

sys.path.insert(0, str(ROOT / "scripts"))
import deploy_tools  # noqa: E402


@dataclass(frozen=True)
class Tools:
    helm: Path
    compose: Path
    kubernetes_validate: Path
    promtool: Path


@pytest.fixture(scope="session")
def tools() -> Tools:
    return Tools(
        helm=deploy_tools.helm_path(),
        compose=deploy_tools.compose_path(),
        kubernetes_validate=deploy_tools.kubernetes_validate_path(),
        promtool=deploy_tools.promtool_path(),
    )


def run(cmd: Sequence[str | Path], stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a tool and capture its output (never raises on a non-zero exit)."""
    return subprocess.run(
        [str(c) for c in cmd], input=stdin, capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT
    )


def helm_args(values: Path | None, sets: Sequence[str] = ()) -> list[str]:
    args = [] if values is None else ["-f", str(values)]
    for s in sets:
        args += ["--set", s]
    return args


Renderer = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def render(tools: Tools) -> Renderer:
    """``render("gpu", "keda.enabled=true")`` → the chart's manifests as dicts (fails on a helm error)."""
    cache: dict[tuple[str, tuple[str, ...]], list[dict[str, Any]]] = {}

    def _render(name: str = "default", *sets: str) -> list[dict[str, Any]]:
        key = (name, sets)
        if key not in cache:
            proc = run(
                [tools.helm, "template", "rel", CHART, "--namespace", "ttc", *helm_args(VALUES_FILES[name], sets)]
            )
            assert proc.returncode == 0, proc.stderr
            cache[key] = [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
        return cache[key]

    return _render


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def component_of(doc: dict[str, Any]) -> str:
    return str(doc["metadata"]["labels"]["app.kubernetes.io/component"])
