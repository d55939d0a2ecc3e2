"""A private podman API service for the docker sandbox backend's end-to-end tests.

The tests start ``podman system service`` on a unix socket they own (in a temporary
directory) and stop it afterwards; the image store is podman's default, so the sandbox image
is built once (``scripts/build_sandbox_image.sh``, mmdebstrap, no registry) and reused.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.processes import ROOT

IMAGE = os.environ.get("TTC_TEST_SANDBOX_IMAGE", "ttc-sandbox:latest")
BUILD_SCRIPT = ROOT / "scripts" / "build_sandbox_image.sh"
# A container's labels, as the sandbox service sets them (services/sandbox/container_spec.py).
INSTANCE_LABEL = "ttc.sandbox.instance"


def missing() -> str:
    """Why the docker backend cannot be tested here ('' when it can)."""
    for tool in ("podman", "mmdebstrap"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/install_system.sh installs podman, runc and mmdebstrap)"
    return ""


def global_flags() -> list[str]:
    """podman options for this host. crun (podman's default runtime) refuses hosts whose cgroup v2
    hierarchy has controllers while v1 is mounted too ("cgroups in hybrid mode not supported,
    drop all controllers from cgroupv2"); runc runs there, so it is used when installed."""
    flags = os.environ.get("TTC_TEST_PODMAN_FLAGS")
    if flags is not None:
        return flags.split()
    return ["--runtime", "runc"] if shutil.which("runc") else []


def ensure_image(tag: str = IMAGE) -> None:
    """Build the sandbox image unless podman already has it (minutes the first time)."""
    env = {**os.environ, "CONTAINER_CLI": "podman", "CONTAINER_CLI_FLAGS": " ".join(global_flags())}
    result = subprocess.run(
        [str(BUILD_SCRIPT), tag], env=env, capture_output=True, text=True, timeout=1200, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"building {tag} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


@dataclass
class PodmanService:
    """``podman system service`` on a private unix socket."""

    directory: Path
    proc: subprocess.Popen[bytes]

    @property
    def socket(self) -> Path:
        return self.directory / "podman.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def podman(self, *args: str) -> str:
        """Run a podman CLI command against the same store; its stdout."""
        result = subprocess.run(
            ["podman", *global_flags(), *args], capture_output=True, text=True, timeout=120, check=True
        )
        return result.stdout

    def containers(self, instance: str) -> list[str]:
        """Ids of this sandbox instance's containers, running or not."""
        out = self.podman("ps", "-a", "-q", "--filter", f"label={INSTANCE_LABEL}={instance}")
        return out.split()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.directory, ignore_errors=True)


def start_podman() -> PodmanService:
    """Start the API service and wait until it answers a ping."""
    docker = importlib.import_module("docker")  # by name: the repository's docker/ shadows it for mypy

    directory = Path(tempfile.mkdtemp(prefix="ttc-podman-"))
    log = open(directory / "service.log", "wb")  # noqa: SIM115 - kept open for the service's lifetime
    sock = directory / "podman.sock"
    # Run from the service's own folder: conmon 2.1 (Debian 12) writes a file named `oom` into its
    # working directory when the kernel OOM-kills a process in a container, and it inherits the
    # service's; from the repository root that left a stray `oom` behind after the memory tests.
    proc = subprocess.Popen(
        ["podman", *global_flags(), "system", "service", "--time", "0", f"unix://{sock}"],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=directory,
    )
    service = PodmanService(directory, proc)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = (directory / "service.log").read_text(errors="replace")
            service.stop()
            raise RuntimeError(f"podman system service exited with {proc.returncode}:\n{text[-3000:]}")
        if sock.exists():
            try:
                docker.APIClient(base_url=service.url, version="auto", timeout=10).ping()
                return service
            except Exception:
                pass
        time.sleep(0.2)
    service.stop()
    raise TimeoutError("podman system service did not answer within 60s")


class LazyPodman:
    """One podman service for a test module, started (and the image built) on first use only,
    so a module run for the bubblewrap backend alone never touches podman."""

    def __init__(self) -> None:
        self.service: PodmanService | None = None

    def get(self) -> PodmanService:
        if self.service is None:
            if reason := missing():
                import pytest

                pytest.skip(f"docker backend not testable here: {reason}")
            ensure_image()
            self.service = start_podman()
        return self.service

    def stop(self) -> None:
        if self.service is not None:
            self.service.stop()
            self.service = None
