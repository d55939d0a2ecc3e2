"""The locust file sends the runner's request mix and judges responses (run against a stub)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.processes import ROOT
from tests.unit.loadtests.test_cli_input import _Stub, stub  # noqa: F401 - fixture


def test_locust_runs_the_mix(tmp_path: Path, stub: str) -> None:  # noqa: F811
    _Stub.delay = 0.01
    env = {**os.environ, "LOADTEST_MODEL": "m", "LOADTEST_DATASETS": "chain_sum", "LOADTEST_PROBLEMS": "1",
           "LOADTEST_EFFORTS": "low,high", "LOADTEST_STRATEGIES": "auto,single:n=2"}  # fmt: skip
    cmd = [sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--headless", "-u", "2", "-r", "2",
           "-t", "15s", "--host", stub.removesuffix("/v1"), "--csv", str(tmp_path / "l"), "--only-summary"]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {r["Name"]: r for r in csv.DictReader((tmp_path / "l_stats.csv").open())}
    assert int(rows["Aggregated"]["Request Count"]) >= 1 and int(rows["Aggregated"]["Failure Count"]) == 0
    assert set(rows) - {"Aggregated"} <= {"low/auto", "high/auto", "low/single:n=2", "high/single:n=2"}
    assert _Stub.chats >= 1
