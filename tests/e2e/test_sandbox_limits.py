"""Limits enforced by real bwrap through the executor, where the service process is not needed."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from services.gen.ttc.v1 import sandbox_pb2
from services.sandbox.executor import Executor, Program
from services.sandbox.isolation import probe_interpreter
from services.sandbox.limits import resolve_limits
from services.sandbox.settings import SandboxSettings

pytestmark = pytest.mark.e2e
UID = 69500 + os.getpid() % 400
COUNT_FORKS = """
import os, time
n = 0
try:
    while n < 500:
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        n += 1
except OSError:
    pass
print(n)
"""


@pytest.fixture
def busy_uid() -> Iterator[int]:
    """The slot uid already owns 40 threads elsewhere on the host (like a non-root service's own)."""
    holder = subprocess.Popen(
        [
            "/usr/bin/setpriv",
            f"--reuid={UID}",
            f"--regid={UID}",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            "import threading, time\n"
            "[threading.Thread(target=time.sleep, args=(30,), daemon=True).start() for _ in range(40)]\n"
            "print('ready', flush=True)\ntime.sleep(30)\n",
        ],
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"ready\n"
    yield UID
    holder.kill()
    holder.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to a slot uid needs root")
async def test_process_limit_counts_only_the_executions_processes(busy_uid: int) -> None:
    settings = SandboxSettings()
    executor = Executor(settings, probe_interpreter(settings.python_path))
    limits = resolve_limits(sandbox_pb2.Limits(max_processes=10, wall_seconds=30), settings)
    outcome, message = await executor.run(Program(COUNT_FORKS.encode()), limits, busy_uid)
    assert outcome.status == sandbox_pb2.EXEC_STATUS_OK, (outcome, message)
    # 10 processes: the program and 9 children, however many processes the uid has elsewhere.
    assert outcome.stdout == b"9\n"


def test_interpreter_view_is_stdlib_and_shared_libraries_only() -> None:
    settings = SandboxSettings()
    view = probe_interpreter(settings.python_path)
    assert view.executable in view.ro_paths
    assert not any(p.endswith(("site-packages", "dist-packages")) for p in view.ro_paths)
    assert "/usr/lib" not in view.ro_paths and "/usr" not in view.ro_paths  # not all of it
    assert any(os.path.isfile(os.path.join(p, "os.py")) for p in view.ro_paths)  # the stdlib
    with_site = probe_interpreter(settings.python_path, site_packages=True)
    assert set(view.ro_paths) <= set(with_site.ro_paths)
