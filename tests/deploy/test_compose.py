"""docker-compose.yml, validated by the Compose v2 binary itself and checked for its promises."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import ROOT, Tools, run

COMPOSE_FILE = ROOT / "docker-compose.yml"
TTC_SERVICES = ("policy", "verifier", "sandbox", "orchestrator", "gateway")


def compose_config(tools: Tools, *args: str, file: Path = COMPOSE_FILE) -> dict[str, Any]:
    proc = run([tools.compose, "-f", file, *args, "config", "--format", "json"])
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


@pytest.mark.parametrize("profile", [(), ("--profile", "gpu")])
def test_compose_file_is_valid(tools: Tools, profile: tuple[str, ...]) -> None:
    proc = run([tools.compose, "-f", COMPOSE_FILE, *profile, "config", "-q"])
    assert proc.returncode == 0, proc.stderr


def test_compose_binary_rejects_an_invalid_file(tools: Tools, tmp_path: Path) -> None:
    broken = yaml.safe_load(COMPOSE_FILE.read_text())
    broken["services"]["gateway"]["healthcheck"]["intervall"] = "5s"
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    proc = run([tools.compose, "-f", path, "config", "-q"])
    assert proc.returncode != 0
    assert "intervall" in proc.stderr


def test_every_service_has_a_healthcheck(tools: Tools) -> None:
    services = compose_config(tools, "--profile", "gpu")["services"]
    for name, service in services.items():
        if name == "otel-collector":  # distroless image: nothing to run a check with
            continue
        assert service.get("healthcheck", {}).get("test"), name


def test_ttc_services_are_locked_down(tools: Tools) -> None:
    services = compose_config(tools, "--profile", "gpu")["services"]
    for name in (*TTC_SERVICES, "policy-gpu"):
        s = services[name]
        assert s["read_only"] is True, name
        assert s["cap_drop"] == ["ALL"], name
        assert not str(s["user"]).startswith("0"), name
        assert "no-new-privileges:true" in s["security_opt"], name
        assert s["build"]["dockerfile"] == "docker/Dockerfile", name


def test_default_is_the_embedded_cpu_model_and_gpu_is_a_profile(tools: Tools) -> None:
    default = compose_config(tools)["services"]
    assert "policy-gpu" not in default
    assert default["policy"]["build"]["target"] == "policy-cpu"
    assert default["policy"]["environment"]["TTC_POLICY_ENGINE"] == "llamacpp"
    assert default["policy"]["environment"]["TTC_POLICY_MODEL"] == "smollm2-135m"
    gpu = compose_config(tools, "--profile", "gpu")["services"]["policy-gpu"]
    assert gpu["profiles"] == ["gpu"]
    assert gpu["build"]["target"] == "policy-gpu"
    assert gpu["environment"]["TTC_POLICY_ENGINE"] == "vllm"
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]


def test_sandbox_has_no_route_out(tools: Tools) -> None:
    config = compose_config(tools)
    assert list(config["services"]["sandbox"]["networks"]) == ["sandbox"]
    assert config["networks"]["sandbox"]["internal"] is True
    assert config["services"]["sandbox"]["environment"]["TTC_OTEL_ENDPOINT"] == ""


def test_observability_stack_is_wired(tools: Tools) -> None:
    services = compose_config(tools)["services"]
    assert {"prometheus", "grafana", "otel-collector", "jaeger", "redis"} <= set(services)
    mounts = {v["target"]: v["source"] for v in services["prometheus"]["volumes"]}
    assert Path(mounts["/etc/prometheus/alerts.yml"]) == ROOT / "helm" / "ttc" / "files" / "prometheus-alerts.yml"
    grafana = {v["target"]: v["source"] for v in services["grafana"]["volumes"]}
    assert Path(grafana["/var/lib/grafana/dashboards"]) == ROOT / "deploy" / "grafana" / "dashboards"
    for name in TTC_SERVICES:
        if name != "sandbox":
            assert services[name]["environment"]["TTC_OTEL_ENDPOINT"] == "http://otel-collector:4317", name


def test_prometheus_scrapes_every_service_on_its_metrics_port(tools: Tools) -> None:
    services = compose_config(tools, "--profile", "gpu")["services"]
    prometheus = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    targets = {t for job in prometheus["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    expected = {"gateway:8000", "orchestrator:9104", "policy:9101", "verifier:9102", "sandbox:9103", "policy-gpu:9101"}
    assert expected <= targets
    for target in targets - {"localhost:9090"}:
        assert target.split(":")[0] in services, target
    # The sandbox is only on its internal network: Prometheus must be there too to reach it.
    assert "sandbox" in services["prometheus"]["networks"]


def test_services_reach_each_other_by_compose_name(tools: Tools) -> None:
    services = compose_config(tools)["services"]
    for name in TTC_SERVICES:
        for key, value in services[name]["environment"].items():
            if key.endswith("_TARGET"):
                assert value.split(":")[0] in services, f"{name}: {key}={value}"
    assert services["gateway"]["environment"]["TTC_JOBS_QUEUE"] == "ttc.search"
    assert services["orchestrator"]["environment"]["TTC_JOBS_QUEUE"] == "ttc.search"


def test_redis_keeps_queued_jobs_across_a_restart(tools: Tools) -> None:
    """AOF fsynced every second on a named volume (docs/reliability.md); RDB snapshots off."""
    config = compose_config(tools)
    redis = config["services"]["redis"]
    command = redis["command"]
    pairs = dict(zip(command[1::2], command[2::2], strict=True))
    assert pairs["--appendonly"] == "yes" and pairs["--appendfsync"] == "everysec"
    data = [v for v in redis["volumes"] if v["target"] == pairs["--dir"]]
    assert data and data[0]["type"] == "volume" and data[0]["source"] in config["volumes"]
