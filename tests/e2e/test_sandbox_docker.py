"""The docker backend's start-up against a real podman API: it refuses to become ready on an
unreachable API or a missing image (never falling back to bubblewrap), and it removes the
orphaned containers a crashed service left behind."""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Iterator

import pytest

from services.sandbox.container_spec import EXPIRES_LABEL, INSTANCE_LABEL, LABEL
from tests.helpers import podman
from tests.helpers.processes import ServiceProcess, free_port, start_sandbox

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def runtime() -> Iterator[podman.PodmanService]:
    lazy = podman.LazyPodman()
    yield lazy.get()
    lazy.stop()


def refused_start(**env: str) -> str:
    """Start a docker-backend sandbox that must refuse: exit status 2; its log says why."""
    service = ServiceProcess(
        "sandbox", env={"TTC_SANDBOX_PORT": str(free_port()), "TTC_SANDBOX_BACKEND": "docker", **env}
    ).start()
    try:
        assert service.proc is not None
        assert service.proc.wait(90) == 2, service.log()
    finally:
        service.stop()
    return service.log()


def test_unreachable_docker_api_refuses_to_start(tmp_path: object) -> None:
    log = refused_start(TTC_SANDBOX_DOCKER_URL=f"unix://{tmp_path}/no-docker.sock", TTC_SANDBOX_UID_BASE="69400")
    assert "sandbox refuses to start: cannot reach the Docker API at unix://" in log
    assert "self-check passed" not in log  # nothing ran, bubblewrap included


def test_missing_image_refuses_to_start(runtime: podman.PodmanService) -> None:
    log = refused_start(
        TTC_SANDBOX_DOCKER_URL=runtime.url,
        TTC_SANDBOX_DOCKER_IMAGE="ttc-sandbox-missing:nope",
        TTC_SANDBOX_UID_BASE="69410",
    )
    assert "sandbox image 'ttc-sandbox-missing:nope' not found" in log
    assert "scripts/build_sandbox_image.sh" in log


def test_orphans_of_a_crashed_service_are_swept_at_start(runtime: podman.PodmanService) -> None:
    """A labelled container past its deadline (what a crash leaves) is removed when a sandbox starts."""
    docker = importlib.import_module("docker")
    api = docker.APIClient(base_url=runtime.url, version="auto", timeout=60)
    labels = {LABEL: "1", INSTANCE_LABEL: "crashed-" + str(free_port()), EXPIRES_LABEL: f"{time.time() - 5:.0f}"}
    orphan = api.create_container(
        podman.IMAGE,
        ["/usr/bin/python3", "-c", "import time; time.sleep(600)"],
        user="69420:69420",
        labels=labels,
        host_config=api.create_host_config(
            network_mode="none",
            ulimits=[
                docker.types.Ulimit(name="nofile", soft=64, hard=64),
                docker.types.Ulimit(name="nproc", soft=64, hard=64),
            ],
        ),
    )["Id"]
    api.start(orphan)
    assert runtime.containers(labels[INSTANCE_LABEL]) != []
    sandbox = start_sandbox(69430, 2, TTC_SANDBOX_BACKEND="docker", TTC_SANDBOX_DOCKER_URL=runtime.url)
    try:
        assert runtime.containers(labels[INSTANCE_LABEL]) == []
        assert re.search(r"removed [1-9][0-9]* orphaned sandbox containers", sandbox.process.log())
    finally:
        sandbox.process.stop()
