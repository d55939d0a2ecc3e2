"""One default everywhere: `make run`, compose's core profile and the chart's default values serve
the same model, routed by the same calibrated table.

The source of truth is the settings: the policy's default model (``TTC_POLICY_MODEL``) and the
gateway's default per-model routing tables (``TTC_GATEWAY_ROUTING_TABLES``). `make run` (``ttc
stack``) starts every service on those defaults; compose and the chart must name the same model
(they set ``TTC_POLICY_MODEL`` explicitly) and leave the gateway's routing tables to its defaults,
and the images must carry both the model and the table.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from services.common.settings import StackSettings
from services.gateway.fleet import parse_pairs
from services.gateway.model_tables import load_table_file
from services.gateway.settings import GatewaySettings
from services.policy.models import REGISTRY, model_id
from services.policy.settings import PolicySettings
from services.stack import large_model_wiring
from tests.deploy.conftest import CHART, ROOT, Renderer, Tools, component_of
from tests.deploy.test_dockerfile import DOCKERFILE, effective, parse

DEFAULT_MODEL = str(PolicySettings.model_fields["model"].default)
DEFAULT_TABLES = parse_pairs(str(GatewaySettings.model_fields["routing_tables"].default), "TTC_GATEWAY_ROUTING_TABLES")
ROUTING_SETTINGS = ("TTC_GATEWAY_ROUTING_TABLE", "TTC_GATEWAY_ROUTING_TABLES")


def compose_core(tools: Tools) -> dict[str, Any]:
    """Compose's core profile as the binary resolves it with no ``TTC_*`` variable set: its defaults."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTC_")}
    proc = subprocess.run(
        [str(tools.compose), "-f", str(ROOT / "docker-compose.yml"), "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout)["services"])


def chart_env(docs: list[dict[str, Any]], component: str) -> dict[str, str]:
    for d in docs:
        if d["kind"] in ("Deployment", "StatefulSet") and component_of(d) == component:
            container = d["spec"]["template"]["spec"]["containers"][0]
            return {e["name"]: e.get("value", "<from secret>") for e in container.get("env", [])}
    raise AssertionError(f"no workload for {component}")


def test_make_run_serves_the_settings_default_model_with_its_calibrated_table() -> None:
    assert DEFAULT_MODEL in REGISTRY, "the default is an embedded model, prepared by `make models`"
    table = DEFAULT_TABLES.get(model_id(DEFAULT_MODEL))
    assert table is not None, f"TTC_GATEWAY_ROUTING_TABLES' default has no table for {DEFAULT_MODEL}"
    assert table == f"services/gateway/routing/routing.{model_id(DEFAULT_MODEL)}.json"
    load_table_file(ROOT / table)  # raises on a missing or invalid table
    # `make run` is `ttc stack` with no TTC_* setting of its own, after `make models` prepared the model.
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^run:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe is not None and recipe.group(1).strip() == "$(VENV)/bin/ttc stack"
    models = re.search(r"^MODELS \?= (.+)$", makefile, re.M)
    assert models is not None and DEFAULT_MODEL in models.group(1).split()
    # Without a large model the stack passes the environment through: the gateway keeps its defaults.
    assert StackSettings.model_fields["large_model"].default == ""
    assert large_model_wiring(StackSettings(large_model=""), {}) == ({}, {})


def test_compose_core_profile_serves_the_same_model_and_table(tools: Tools) -> None:
    services = compose_core(tools)
    assert services["policy"]["environment"]["TTC_POLICY_MODEL"] == DEFAULT_MODEL
    assert services["policy"]["build"]["target"] == "policy-cpu"
    for name, service in services.items():
        assert not set(ROUTING_SETTINGS) & set(service.get("environment") or {}), name
    # The gateway image runs from /app, where services/ is copied: the tables' relative paths resolve.
    assert services["gateway"].get("working_dir") is None


def test_chart_default_values_serve_the_same_model_and_table(render: Renderer) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["policy"]["model"] == DEFAULT_MODEL
    assert values["policy"]["engine"] == PolicySettings.model_fields["engine"].default
    assert not set(ROUTING_SETTINGS) & set(values["gateway"]["env"])
    for name in ("default", "minimal"):
        docs = render(name)
        assert chart_env(docs, "policy")["TTC_POLICY_MODEL"] == DEFAULT_MODEL, name
        assert not set(ROUTING_SETTINGS) & set(chart_env(docs, "gateway")), name
        gateway = next(d for d in docs if d["kind"] == "Deployment" and component_of(d) == "gateway")
        assert "workingDir" not in gateway["spec"]["template"]["spec"]["containers"][0], name


def test_images_carry_the_default_model_and_its_table() -> None:
    text = DOCKERFILE.read_text()
    embedded = re.search(r'^ARG EMBEDDED_MODELS="([^"]*)"$', text, re.M)
    assert embedded is not None and DEFAULT_MODEL in embedded.group(1).split()
    _, stage_list = parse(text)
    stages = {s.name: s for s in stage_list}
    # The policy image names no model of its own: it serves the settings' default.
    policy_env = " ".join(rest for o, rest in stages["policy-cpu"].instructions if o == "ENV")
    assert "TTC_POLICY_MODEL=" not in policy_env
    # The gateway image holds services/ (the shipped tables) in its working directory.
    assert effective(stages, "gateway", "WORKDIR") == "/app"
    copies = [rest for o, rest in stages["runtime"].instructions if o == "COPY"]
    assert any(c.split()[-2:] == ["services", "./services"] for c in copies), copies
    assert Path(DEFAULT_TABLES[model_id(DEFAULT_MODEL)]).parts[0] == "services"
