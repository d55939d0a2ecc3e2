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
# The core profile (services without a profile: what a plain `up` starts) and the registry-only
# observability profile (docs/deployment.md).
CORE_SERVICES = {*TTC_SERVICES, "redis", "prometheus"}
OBSERVABILITY_SERVICES = {"grafana", "otel-collector", "jaeger"}
BUILD_CORE_IMAGES = ROOT / "scripts" / "build_core_images.sh"
BUILD_DEBIAN_IMAGES = ROOT / "scripts" / "build_debian_images.sh"


def compose_config(tools: Tools, *args: str, file: Path = COMPOSE_FILE) -> dict[str, Any]:
    proc = run([tools.compose, "-f", file, *args, "config", "--format", "json"])
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


@pytest.mark.parametrize("profile", [(), ("--profile", "gpu"), ("--profile", "observability")])
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
    services = compose_config(tools, "--profile", "gpu", "--profile", "observability")["services"]
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
    assert default["policy"]["environment"]["TTC_POLICY_MODEL"] == "qwen2.5-coder-0.5b"
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


def test_core_profile_is_exactly_the_services_and_redis_and_prometheus(tools: Tools) -> None:
    assert set(compose_config(tools)["services"]) == CORE_SERVICES
    full = compose_config(tools, "--profile", "observability")["services"]
    assert set(full) == CORE_SERVICES | OBSERVABILITY_SERVICES
    for name in OBSERVABILITY_SERVICES:
        assert full[name]["profiles"] == ["observability"], name


def test_observability_profile_holds_the_registry_only_images(tools: Tools) -> None:
    """Nothing in it is built or swappable: each is a pinned registry image."""
    full = compose_config(tools, "--profile", "observability")["services"]
    for name in OBSERVABILITY_SERVICES:
        assert "build" not in full[name], name
        image = full[name]["image"]
        assert "/" in image and ":" in image and not image.startswith(("ttc-serve/", "localhost/")), image


def test_every_core_image_has_a_debian_build_path(tools: Tools) -> None:
    """One setting swaps every core image for one built from Debian + PyPI packages.

    The ttc-serve roles build on docker/Dockerfile's PYTHON_IMAGE and their tag follows
    TTC_IMAGE_TAG; Redis and Prometheus are images named by a variable. The build script
    writes those variables for TTC_IMAGE_SOURCE=debian, builds every role the compose file
    runs, and imports Debian images for the rest.
    """
    env = {
        "TTC_IMAGE_TAG": "debian",
        "PYTHON_IMAGE": "localhost/ttc-serve/python-debian:bookworm",
        "TTC_REDIS_IMAGE": "localhost/ttc-serve/redis-debian:bookworm",
        "TTC_PROMETHEUS_IMAGE": "localhost/ttc-serve/prometheus-debian:bookworm",
    }
    env_file = ROOT / "build" / "test-compose-debian.env"
    env_file.parent.mkdir(exist_ok=True)
    env_file.write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    try:
        services = compose_config(tools, "--env-file", str(env_file))["services"]
    finally:
        env_file.unlink()
    build_script = BUILD_CORE_IMAGES.read_text()
    debian_script = BUILD_DEBIAN_IMAGES.read_text()
    for name in CORE_SERVICES:
        service = services[name]
        if "build" in service:
            assert service["build"]["args"]["PYTHON_IMAGE"] == env["PYTHON_IMAGE"], name
            assert service["image"] == f"ttc-serve/{service['build']['target']}:debian", name
            assert service["build"]["target"] in build_script, name
        else:
            assert service["image"] in env.values(), name
            assert f"build {service['image'].split('/')[-1].split(':')[0]} " in debian_script, name
    # Every variable the build script writes is one this file reads.
    for key in env:
        assert f"\n{key}=" in build_script, key
    assert "mmdebstrap" in debian_script and '"$cli" import' in debian_script


def test_the_debian_prometheus_and_redis_run_the_same_commands(tools: Tools) -> None:
    """The registry images' entrypoints are /bin/prometheus and redis-server on PATH; Debian's are there too."""
    services = compose_config(tools)["services"]
    assert services["prometheus"]["entrypoint"] == ["/bin/prometheus"]
    assert services["redis"]["command"][0] == "redis-server"
    assert 'ENTRYPOINT ["/bin/prometheus"]' in BUILD_DEBIAN_IMAGES.read_text()


def test_dockerfile_installs_from_a_wheelhouse_or_from_pypi() -> None:
    """With WHEELHOUSE, every pip install in the CPU stages is --no-index from it; the ISA check stays."""
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    cpu_part = dockerfile.split("FROM ${CUDA_IMAGE}")[0]
    installs = [line for line in cpu_part.splitlines() if "/opt/venv/bin/pip install" in line]
    assert len(installs) >= 4
    assert cpu_part.count('--no-index --find-links "$WHEELHOUSE"') >= 2
    assert cpu_part.count('set -- --no-index --find-links "$WHEELHOUSE"') == 2
    assert "scripts/check_engine_isa.py" in cpu_part.split("AS builder-llamacpp")[1].split("AS runtime")[0]
    assert "--no-binary llama-cpp-python" in cpu_part


def test_observability_stack_is_wired(tools: Tools) -> None:
    services = compose_config(tools, "--profile", "observability")["services"]
    assert {"prometheus", "grafana", "otel-collector", "jaeger", "redis"} <= set(services)
    mounts = {v["target"]: v["source"] for v in services["prometheus"]["volumes"]}
    assert Path(mounts["/etc/prometheus/alerts.yml"]) == ROOT / "helm" / "ttc" / "files" / "prometheus-alerts.yml"
    grafana = {v["target"]: v["source"] for v in services["grafana"]["volumes"]}
    assert Path(grafana["/var/lib/grafana/dashboards"]) == ROOT / "deploy" / "grafana" / "dashboards"
    for name in TTC_SERVICES:
        if name != "sandbox":
            assert services[name]["environment"]["TTC_OTEL_ENDPOINT"] == "http://otel-collector:4317", name


def test_prometheus_scrapes_every_service_on_its_metrics_port(tools: Tools) -> None:
    services = compose_config(tools, "--profile", "gpu", "--profile", "observability")["services"]
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


def test_the_smoke_scrapes_every_core_target_and_drops_only_absent_services(tools: Tools) -> None:
    """scripts/compose_smoke.py: the core profile's Prometheus keeps each core job, drops the rest."""
    import compose_smoke

    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    services = compose_smoke.core_services(compose)
    assert set(services) == set(compose_config(tools)["services"]) == CORE_SERVICES
    prometheus = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    kept, dropped = compose_smoke.scrape_config_for(prometheus, set(services))
    assert sorted(dropped) == ["otel-collector", "vllm"]
    hosts = {t.split(":")[0] for job in kept["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    assert hosts == (CORE_SERVICES - {"redis", "prometheus"}) | {"localhost"}
    assert kept["rule_files"] == prometheus["rule_files"]
