"""The sandbox service's contract through a real process: bad input, capacity, tests, metrics."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import grpc
import httpx
import pytest

from services.common.errors import error_field
from services.common.sandbox_client import SandboxClient, stdout_test
from services.gen.ttc.v1 import sandbox_pb2
from tests.helpers.processes import ServiceProcess, free_port, grpc_healthy

pytestmark = pytest.mark.e2e
S = sandbox_pb2


@dataclass
class Running:
    target: str
    metrics_url: str
    service: ServiceProcess


def start(**env: str) -> Running:
    port, metrics_port = free_port(), free_port()
    service = ServiceProcess(
        "sandbox",
        env={"TTC_SANDBOX_PORT": str(port), "TTC_SANDBOX_METRICS_PORT": str(metrics_port), **env},
    ).start()
    service.wait_until(lambda: grpc_healthy(f"127.0.0.1:{port}"), 60)
    return Running(f"127.0.0.1:{port}", f"http://127.0.0.1:{metrics_port}/metrics", service)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Running]:
    running = start(
        TTC_SANDBOX_MAX_CONCURRENCY="1",
        TTC_SANDBOX_MAX_QUEUE="1",
        TTC_SANDBOX_MAX_CODE_BYTES="10000",
        TTC_SANDBOX_MAX_PAYLOAD_BYTES="100000",
        TTC_SANDBOX_UID_BASE="69000",
    )
    yield running
    running.service.stop()


@pytest.fixture
async def client(sandbox: Running) -> AsyncIterator[SandboxClient]:
    async with SandboxClient(sandbox.target) as c:
        yield c


def metric(url: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    total = 0.0
    for line in httpx.get(url, timeout=5).text.splitlines():
        match = re.match(rf"^{name}(?:\{{(.*)\}})? (\S+)$", line)
        if not match:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(match.group(2))
    return total


BAD = [
    (S.ExecuteRequest(language="python", code=""), "code"),
    (S.ExecuteRequest(language="python", code="   \n"), "code"),
    (S.ExecuteRequest(language="brainfuck", code="+++"), "language"),
    (S.ExecuteRequest(code="print(1)", limits=S.Limits(cpu_seconds=10_000)), "limits.cpu_seconds"),
    (S.ExecuteRequest(code="print(1)", limits=S.Limits(wall_seconds=-1)), "limits.wall_seconds"),
    (S.ExecuteRequest(code="print(1)", limits=S.Limits(memory_bytes=1)), "limits.memory_bytes"),
    (S.ExecuteRequest(code="print(1)", limits=S.Limits(max_processes=1_000_000)), "limits.max_processes"),
    (S.ExecuteRequest(code="print(1)", limits=S.Limits(max_output_bytes=1 << 40)), "limits.max_output_bytes"),
    (S.ExecuteRequest(code="x = 1\n" * 5000), "code"),
    (S.ExecuteRequest(code="print(1)", stdin=b"x" * 200_000), "stdin"),
    (S.ExecuteRequest(code="print(1)", files=[S.ExecFile(path="big", content=b"x" * 200_000)]), "files"),
    (S.ExecuteRequest(code="print(1)", files=[S.ExecFile(path="../../etc/x", content=b"x")]), "files[0].path"),
    (S.ExecuteRequest(code="print(1)", tests=[S.TestCase(name="empty")]), "tests[0]"),
]


@pytest.mark.parametrize(("request_", "field"), BAD, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD)])
async def test_bad_input_is_refused_naming_the_field(sandbox: Running, request_: S.ExecuteRequest, field: str) -> None:
    before = metric(sandbox.metrics_url, "ttc_sandbox_executions_total")
    async with SandboxClient(sandbox.target) as c:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await c._stub.Execute(request_)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_field(info.value) == field
    assert field.split(".")[0].split("[")[0] in (info.value.details() or "")
    assert metric(sandbox.metrics_url, "ttc_sandbox_executions_total") == before  # nothing ran


async def test_program_of_thought(client: SandboxClient) -> None:
    code = "from fractions import Fraction\nprint(sum(Fraction(1, k * (k + 1)) for k in range(1, 100)))\n"
    reply = await client.execute(code)
    assert reply.outcome.status == S.EXEC_STATUS_OK
    assert reply.outcome.stdout == b"99/100\n"
    assert reply.outcome.exit_code == 0 and reply.outcome.signal == 0
    assert reply.outcome.cpu_seconds > 0 and reply.outcome.wall_seconds > 0 and reply.outcome.peak_memory_bytes > 0


async def test_runtime_error_is_the_programs_not_the_services(client: SandboxClient) -> None:
    reply = await client.execute("import sys\nprint('partial')\nsys.exit(3)\n")
    assert reply.outcome.status == S.EXEC_STATUS_RUNTIME_ERROR
    assert reply.outcome.exit_code == 3 and reply.outcome.stdout == b"partial\n"
    reply = await client.execute("raise ValueError('boom')\n")
    assert reply.outcome.status == S.EXEC_STATUS_RUNTIME_ERROR and b"ValueError: boom" in reply.outcome.stderr


async def test_stdin_files_and_stdout_tests(client: SandboxClient) -> None:
    code = "import sys, json\nscale = json.load(open('conf/scale.json'))['k']\nprint(scale * int(sys.stdin.read()))\n"
    reply = await client.execute(
        code,
        stdin=b"2",
        files={"conf/scale.json": b'{"k": 10}'},
        tests=[stdout_test("three", b"3", b"30\n"), stdout_test("wrong", b"4", b"41"), stdout_test("bad", b"x", b"")],
    )
    assert reply.outcome.stdout == b"20\n"
    verdicts = {t.name: t for t in reply.tests}
    assert verdicts["three"].passed and verdicts["three"].outcome.stdout == b"30\n"
    assert not verdicts["wrong"].passed and verdicts["wrong"].outcome.status == S.EXEC_STATUS_OK
    assert not verdicts["bad"].passed and verdicts["bad"].outcome.status == S.EXEC_STATUS_RUNTIME_ERROR
    assert reply.outcome.status == S.EXEC_STATUS_RUNTIME_ERROR  # the first non-OK test status
    assert "bad" in reply.message


async def test_check_code_tests(client: SandboxClient) -> None:
    code = "def add(a, b):\n    return a + b\n"
    good = S.TestCase(name="good", check_code="assert add(2, 3) == 5")
    bad = S.TestCase(name="bad", check_code="assert add(2, 2) == 5")
    reply = await client.execute(code, tests=[good, bad])
    assert [(t.name, t.passed) for t in reply.tests] == [("good", True), ("bad", False)]
    assert b"AssertionError" in reply.tests[1].outcome.stderr


async def test_full_queue_is_resource_exhausted(sandbox: Running) -> None:
    rejected_before = metric(sandbox.metrics_url, "ttc_sandbox_rejected_total")

    async def one() -> str:
        async with SandboxClient(sandbox.target) as c:
            try:
                reply = await c.execute("import time\ntime.sleep(1.5)\nprint('done')\n")
            except grpc.aio.AioRpcError as err:
                return err.code().name
            return sandbox_pb2.ExecStatus.Name(reply.outcome.status)

    results = await asyncio.gather(*(one() for _ in range(3)))  # 1 runs, 1 queues, 1 refused
    assert sorted(results) == ["EXEC_STATUS_OK", "EXEC_STATUS_OK", "RESOURCE_EXHAUSTED"]
    assert metric(sandbox.metrics_url, "ttc_sandbox_rejected_total") == rejected_before + 1


async def test_metrics_count_statuses_kills_and_queue(sandbox: Running, client: SandboxClient) -> None:
    url = sandbox.metrics_url
    ok_before = metric(url, "ttc_sandbox_executions_total", status="ok")
    timeouts_before = metric(url, "ttc_sandbox_executions_total", status="timeout")
    kills_before = metric(url, "ttc_sandbox_kills_total", reason="timeout")
    await client.execute("print(1)")
    await client.execute("import time\ntime.sleep(30)\n", limits=S.Limits(wall_seconds=0.5))
    assert metric(url, "ttc_sandbox_executions_total", status="ok") == ok_before + 1
    assert metric(url, "ttc_sandbox_executions_total", status="timeout") == timeouts_before + 1
    assert metric(url, "ttc_sandbox_kills_total", reason="timeout") == kills_before + 1
    assert metric(url, "ttc_sandbox_execution_duration_seconds_count", status="timeout") >= 1
    assert metric(url, "ttc_sandbox_queue_depth") == 0
    assert metric(url, "ttc_sandbox_running") == 0
    assert metric(url, "ttc_sandbox_queue_wait_seconds_count") >= 2


def refused_start(**env: str) -> str:
    """Start a sandbox that must refuse: its exit status is 2 and its log says why."""
    service = ServiceProcess("sandbox", env={"TTC_SANDBOX_PORT": str(free_port()), **env}).start()
    try:
        assert service.proc is not None
        assert service.proc.wait(60) == 2, service.log()
    finally:
        service.stop()
    return service.log()


def test_missing_bwrap_refuses_to_start_never_falls_back() -> None:
    log = refused_start(TTC_SANDBOX_BWRAP_PATH="/nonexistent/bwrap", TTC_SANDBOX_UID_BASE="69100")
    assert "sandbox refuses to start" in log and "/nonexistent/bwrap" in log


def test_unusable_memory_cgroup_refuses_to_start_with_the_remedy() -> None:
    """``auto`` never degrades silently: a cgroup it may not use stops the service, naming the fix."""
    log = refused_start(TTC_SANDBOX_MEMORY_CGROUP="/proc/ttc-no-cgroup-here", TTC_SANDBOX_UID_BASE="69110")
    assert "cannot create memory cgroups under /proc/ttc-no-cgroup-here" in log
    assert "TTC_SANDBOX_MEMORY_CGROUP=off" in log
