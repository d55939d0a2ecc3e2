"""The two child processes of a side-by-side run: the pinned upstream and the OptiLLM proxy.

OptiLLM is installed in a venv of its own (it pulls torch and transformers, which the
project's lock must not): ``python3 -m venv /work/optillm-venv && /work/optillm-venv/bin/pip
install optillm``. The proxy is started from that venv's Python as ``python -m optillm.server
--base-url <upstream> --port P`` with ``OPENAI_API_KEY`` set (it needs one to build its
OpenAI client; the gateway's key, or ``none`` when the gateway has no authentication).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from services.common.ports import free_port

DEFAULT_OPTILLM_PYTHON = Path("/work/optillm-venv/bin/python")


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code < 500
    except httpx.HTTPError:
        return False


@dataclass
class Child:
    """One child in its own process group, its output in ``log``, ready when ``ready_url`` answers."""

    name: str
    argv: list[str]
    ready_url: str
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 180.0) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv, env={**os.environ, **self.env}, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while not answers(self.ready_url):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}); see {self.log}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"{self.name} was not ready after {timeout_s:.0f}s; see {self.log}")
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def upstream_child(gateway: str, api_key: str, max_tokens: int, log: Path) -> tuple[Child, str]:
    """The pinned pass-through (``loadtests/optillm/upstream.py``) and its base URL."""
    port = free_port()
    argv = [sys.executable, "-m", "loadtests.optillm.upstream", "--port", str(port), "--gateway", gateway,
            "--api-key", api_key, "--max-tokens", str(max_tokens)]  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    return Child("pinned upstream", argv, f"{base}/ledger", log), base


def optillm_child(python: Path, upstream: str, api_key: str, log: Path) -> tuple[Child, str]:
    """The OptiLLM proxy from its own venv, pointed at ``upstream`` (a ``/v1`` base URL)."""
    if not python.exists():
        raise FileNotFoundError(
            f"no OptiLLM Python at {python}: python3 -m venv /work/optillm-venv && "
            "/work/optillm-venv/bin/pip install optillm (or pass --optillm-python / --optillm-url)"
        )
    port = free_port()
    argv = [str(python), "-m", "optillm.server", "--base-url", upstream, "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    env = {"OPENAI_API_KEY": api_key, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return Child("optillm", argv, f"{base}/health", log, env), f"{base}/v1"
