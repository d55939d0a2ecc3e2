"""``ttc stack`` as a child process on the configured ports, for a load test or comparison that
finds no gateway running: started with ``TTC_POLICY_MODEL`` and the gateway's own routing tables
(the shipped table for a model that has one), stopped with SIGTERM (its own process group)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx


def healthy(base_url: str) -> bool:
    """Whether a gateway answers ``/healthz`` at ``base_url`` (its OpenAI base URL)."""
    try:
        return httpx.get(base_url.rstrip("/").removesuffix("/v1") + "/healthz", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


class Stack:
    """``ttc stack`` as a child process (its own process group, stopped with SIGTERM)."""

    def __init__(self, model: str, base_url: str, log: Path) -> None:
        self.model, self.base_url, self.log = model, base_url, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 900.0) -> None:
        env = {**os.environ, "TTC_POLICY_MODEL": self.model, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "services.cli", "stack"], env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not healthy(self.base_url):
            if self.proc.poll() is not None:
                raise RuntimeError(f"the stack exited ({self.proc.returncode}); see {self.log}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the stack was not ready after {timeout:.0f}s; see {self.log}")
            time.sleep(1.0)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
